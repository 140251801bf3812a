//! Runs a lab: builds generator -> DUT -> receiver namespaces, then for every run of every
//! set configures the DUT, starts the receiver and the generator, and keeps the receiver's
//! per-second rates.
//!
//! Topology (all names start with `lr`; every namespace is deleted on drop, also on failure):
//!
//! ```text
//!  lrlab-g: lrg0 198.18.0.2 ==veth== lrd0 198.18.0.1  lrlab-d  lrd1 198.19.0.1 ==veth== lrr0 198.19.0.2 :lrlab-r
//! ```
//!
//! Pinning on the 2-CPU machine: the DUT owns CPU 1, the generator and the receiver share
//! CPU 0. Every receive is threaded NAPI pinned to its party's CPU (lrd0: the DUT's, for the
//! kernel DUT by the lab and for linerate by linerate; lrr0: the receiver's), so whatever the
//! kernel does for a DUT runs on the DUT's CPU, for both DUTs alike; in softirq, veth would
//! run the DUT's receive on the generator's CPU. The receiver counts in the kernel (`rcv
//! --backend xdp-sink`: an XDP program counts and drops) and only reads the counters.
//! linerate's AF_XDP sets use native XDP where the driver has it (`backend = "auto"`): with
//! the DUT's input in a NAPI thread on the DUT's CPU, veth runs the program there, not in
//! the sender's softirq. With `--workers N` each party takes N CPUs ([`Cpus`]).

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::configs::{
    DUT0_MAC, DUT1_MAC, GEN_MAC, NFT_MASQUERADE, PF_NAT, RCV_MAC, linerate_config, linerate_rules,
    nft_ruleset, nft_set_ruleset, ranges_part,
};
pub use crate::error::LabError;
use crate::labfile::{Dut, Set};
use crate::one_lab::{LOCK_FILE, LabLock};
use crate::process::{terminate, wait_ready};
use crate::topology::{End, Namespace, veth_offloads_off};

/// Where the lab's three parties run. On the 2-CPU machine the generator and the receiver
/// share CPU 0 and the DUT owns CPU 1; with more CPUs each gets its own.
///
/// With several workers every veth has that many queues, and each party takes as many
/// consecutive CPUs from its first: generator `i` on CPU `generator + i` (veth puts the
/// frames an XDP sender hands it on receive queue `cpu % queues`, so consecutive CPUs fill
/// every queue), the DUT's worker or NAPI thread for queue `i` on `dut + i`, the receiver's
/// NAPI thread for queue `i` on `receiver + i`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cpus {
    pub generator: usize,
    pub dut: usize,
    pub receiver: usize,
    pub workers: usize,
}

impl Default for Cpus {
    fn default() -> Self {
        Cpus { generator: 0, dut: 1, receiver: 0, workers: 1 }
    }
}

impl Cpus {
    /// Queues per veth, generators, DUT workers: `workers`, at least one.
    pub fn queues(&self) -> usize {
        self.workers.max(1)
    }

    /// Every CPU the lab uses, for checking that they exist.
    pub fn all(&self) -> Vec<usize> {
        let w = self.queues();
        [self.generator, self.dut, self.receiver]
            .into_iter()
            .flat_map(|first| first..first + w)
            .collect()
    }
}

/// linerate's standard output (its report when it stops), in the lab's scratch folder.
const DUT_REPORT: &str = "dut-report.txt";

/// Where a lab is, for a progress bar.
pub struct Progress<'a> {
    pub done: usize,
    pub total: usize,
    pub set: &'a str,
    pub what: String,
}

/// What one run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct RunResult {
    /// The run's value: median of the receiver's per-second rates, first and last active
    /// seconds left out.
    pub pps: f64,
    pub rx_per_second: Vec<f64>,
    /// Frames the generator sent, and its median per-second rate.
    pub sent: u64,
    pub gen_pps: f64,
    /// What the generator offered (sent, and what its port or the DUT's input refused):
    /// frames, and per second.
    pub offered: u64,
    pub offered_pps: f64,
    pub received: u64,
    /// Where the frames offered and not received were lost, if the counters say.
    pub losses: Option<crate::counters::Losses>,
}

/// The lab's namespaces and the paths it needs.
pub struct LabEnv {
    generator: Namespace,
    dut: Namespace,
    rcv: Namespace,
    bin: PathBuf,
    dir: PathBuf,
    cpus: Cpus,
    /// `counters.txt`: each run's counters that grew and the DUT's report ([`Self::journal`]).
    journal: Option<PathBuf>,
    /// Held until the namespaces above are gone (fields drop in order).
    _one_lab: LabLock,
}

impl Drop for LabEnv {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A sysfs CPU mask (comma-separated 32-bit hex words, lowest last) with only `cpu` set.
pub fn cpu_mask(cpu: usize) -> String {
    let words = cpu / 32 + 1;
    (0..words)
        .rev()
        .map(|w| format!("{:x}", if w == cpu / 32 { 1u32 << (cpu % 32) } else { 0 }))
        .collect::<Vec<_>>()
        .join(",")
}

fn sh(ns: &Namespace, script: &str) -> Result<(), LabError> {
    ns.exec("sh", &["-c", script]).map(|_| ()).map_err(LabError::from)
}

/// Turns threaded NAPI on for `ifname` (a veth with GRO on) and receive packet steering off
/// on every receive queue.
fn threaded_napi(ns: &Namespace, ifname: &str) -> Result<(), LabError> {
    sh(
        ns,
        &format!(
            "echo 1 > /sys/class/net/{ifname}/threaded && for q in /sys/class/net/{ifname}/queues/rx-*; do echo 0 > $q/rps_cpus; done"
        ),
    )
}

/// Real-time priority (SCHED_FIFO, `chrt`) of the receiver's NAPI thread, so that it runs as
/// soon as the DUT sends, as softirq receive would: at the generator's priority it gets half
/// of their CPU, and even at nice -20 the scheduler lets the generator finish its slice
/// first; the DUT's output ring (256 frames) then overflows and runs measure the receiver
/// (docs/performance.md, "The lab's generator and the kernel DUT").
const RECEIVER_NAPI_FIFO: &str = "50";

/// Pins the NAPI thread of each receive queue `i` of `ifname` in `ns` to CPU `first + i` at
/// the default priority; returns the threads.
fn place_napi(ns: &Namespace, ifname: &str, first: usize) -> Result<Vec<u32>, LabError> {
    let out = ns.exec("cat", &[&format!("/sys/class/net/{ifname}/ifindex")])?;
    let ifindex: u32 =
        String::from_utf8_lossy(&out.stdout).trim().parse().map_err(|_| LabError::Process {
            what: format!("ifindex of {ifname}"),
            detail: String::from_utf8_lossy(&out.stdout).into_owned(),
        })?;
    let what = |e: std::io::Error| LabError::Process {
        what: format!("placing the NAPI thread of {ifname} in {}", ns.name()),
        detail: e.to_string(),
    };
    let napis = io::napi::napis_in_netns(&Path::new("/run/netns").join(ns.name()), ifindex)
        .map_err(what)?;
    let placed: Vec<(u32, usize)> = napis
        .iter()
        .filter_map(|n| Some((n.tid?, first + n.rx_queues.first().copied().unwrap_or(0) as usize)))
        .collect();
    if placed.is_empty() {
        return Err(LabError::Process {
            what: format!("{ifname} in {} has no NAPI thread", ns.name()),
            detail: format!("{napis:?}"),
        });
    }
    for &(tid, cpu) in &placed {
        io::affinity::pin_thread(tid, cpu).map_err(what)?;
        io::affinity::set_thread_nice(tid, 0).map_err(what)?;
    }
    Ok(placed.into_iter().map(|(tid, _)| tid).collect())
}

impl LabEnv {
    /// Builds the topology; `bin` is the linerate binary that runs gen, rcv and the DUT.
    pub fn build(bin: &Path, cpus: Cpus) -> Result<LabEnv, LabError> {
        let one_lab = LabLock::take(Path::new(LOCK_FILE))?;
        let (generator, dut, rcv) = (
            Namespace::create("lrlab-g")?,
            Namespace::create("lrlab-d")?,
            Namespace::create("lrlab-r")?,
        );
        let queues = cpus.queues();
        veth_offloads_off(
            End { ns: &generator, name: "lrg0", mac: GEN_MAC },
            End { ns: &dut, name: "lrd0", mac: DUT0_MAC },
            queues,
        )?;
        veth_offloads_off(
            End { ns: &dut, name: "lrd1", mac: DUT1_MAC },
            End { ns: &rcv, name: "lrr0", mac: RCV_MAC },
            queues,
        )?;
        for (ns, ifname, v4, v6) in [
            (&generator, "lrg0", "198.18.0.2/24", "2001:2:0:1::2/64"),
            (&dut, "lrd0", "198.18.0.1/24", "2001:2:0:1::1/64"),
            (&dut, "lrd1", "198.19.0.1/24", "2001:2:0:2::1/64"),
            (&rcv, "lrr0", "198.19.0.2/24", "2001:2:0:2::2/64"),
        ] {
            ns.addr(ifname, v4)?;
            ns.addr(ifname, v6)?;
        }
        // The kernel DUT's routes and permanent neighbours (linerate gets the same in its
        // config), so no ARP/NDP traffic disturbs a run.
        for r in [
            "route add 198.19.0.0/16 via 198.19.0.2",
            "route add 198.18.0.0/16 via 198.18.0.2",
            "-6 route add 2001:2:0:20::/64 via 2001:2:0:2::2",
            "-6 route add 2001:2:0:10::/64 via 2001:2:0:1::2",
        ] {
            dut.ip(&r.split(' ').collect::<Vec<_>>())?;
        }
        for (addr, mac, dev) in [
            ("198.19.0.2", RCV_MAC, "lrd1"),
            ("198.18.0.2", GEN_MAC, "lrd0"),
            ("2001:2:0:2::2", RCV_MAC, "lrd1"),
            ("2001:2:0:1::2", GEN_MAC, "lrd0"),
        ] {
            dut.ip(&["neigh", "replace", addr, "lladdr", mac, "nud", "permanent", "dev", dev])?;
        }
        // Routes through the DUT for the lab's pings (the generator's frames need none).
        generator.ip(&["route", "add", "198.19.0.0/16", "via", "198.18.0.1"])?;
        rcv.ip(&["route", "add", "198.18.0.0/16", "via", "198.19.0.1"])?;
        for s in [
            "net.ipv4.conf.all.rp_filter=0",
            "net.ipv4.conf.default.rp_filter=0",
            "net.ipv4.conf.lrd0.rp_filter=0",
        ] {
            dut.sysctl(s)?;
        }
        // The DUT's input receives in NAPI (GRO on: the in-kernel generator's frames need it),
        // in a kernel thread on the DUT's CPU: all of the kernel DUT's work (the skbs made
        // from the generator's frames, GRO, forwarding, the send to lrd1) is on that CPU, as
        // linerate's is (it places the same thread itself, below its worker: io::napi). Left
        // in softirq, veth would run it on the generator's CPU, which would then do part of
        // the kernel's work and none of linerate's.
        dut.exec("ethtool", &["-K", "lrd0", "gro", "on"])?;
        threaded_napi(&dut, "lrd0")?;
        // The receiver's input: the same, on the receiver's CPU, ahead of the generator that
        // shares it (RECEIVER_NAPI_FIFO). Without NAPI, veth hands each frame sent by the DUT
        // to RPS, which raises an inter-processor interrupt per frame when the DUT sends frame
        // by frame (linerate over AF_XDP does), on the DUT's CPU.
        rcv.exec("ethtool", &["-K", "lrr0", "gro", "on"])?;
        threaded_napi(&rcv, "lrr0")?;
        let env = LabEnv {
            generator,
            dut,
            rcv,
            bin: bin.to_owned(),
            dir: std::env::temp_dir().join(format!("lrlab-{}", std::process::id())),
            cpus,
            journal: None,
            _one_lab: one_lab,
        };
        std::fs::create_dir_all(&env.dir)?;
        for tid in place_napi(&env.rcv, "lrr0", cpus.receiver)? {
            crate::topology::run(std::process::Command::new("chrt").args([
                "-f",
                "-p",
                RECEIVER_NAPI_FIFO,
                &tid.to_string(),
            ]))?;
        }
        Ok(env)
    }

    /// Appends to `path`, for every run, where its frames went ([`crate::counters`]).
    pub fn keep_counters(mut self, path: PathBuf) -> Self {
        self.journal = Some(path);
        self
    }

    /// Runs one run of `set` for `seconds`, offering `rate` pps (None: as fast as possible).
    pub fn run(
        &self,
        set: &Set,
        seconds: u32,
        rate: Option<f64>,
        stop: &AtomicBool,
    ) -> Result<RunResult, LabError> {
        let mut dut = self.start_dut(set, stop)?;
        let rcv = self.spawn_rcv(seconds + 2)?;
        let mut rcv = ChildGuard(Some(rcv));
        sleep(Duration::from_millis(500), stop)?;
        let before = self.counters();
        let gen_json = self.run_gen(set, seconds, rate, stop)?;
        let rcv_out = rcv.wait_output(stop)?;
        let grown = self.counters().grown_since(&before);
        let report = dut.stop();
        let rcv_json = last_json(&rcv_out)
            .ok_or_else(|| LabError::Process { what: "rcv".into(), detail: rcv_out.clone() })?;
        let per_second: Vec<f64> = rcv_json["per_second"]
            .as_array()
            .map(|a| a.iter().filter_map(|v| v.as_f64()).collect())
            .unwrap_or_default();
        let pps = active_median(&per_second).unwrap_or(0.0);
        let result = RunResult {
            pps,
            rx_per_second: per_second,
            sent: gen_json["sent"].as_u64().unwrap_or(0),
            gen_pps: gen_json["median_pps"].as_f64().unwrap_or(0.0),
            offered: gen_json["sent"].as_u64().unwrap_or(0)
                + gen_json["dropped"].as_u64().unwrap_or(0),
            offered_pps: offered_pps(&gen_json),
            received: rcv_json["received"].as_u64().unwrap_or(0),
            losses: crate::counters::Losses::of(&grown),
        };
        self.journal(set, rate, &result, &grown, &report)?;
        Ok(result)
    }

    /// Every counter of the four veths, each read in its namespace.
    fn counters(&self) -> crate::counters::Snapshot {
        let mut all = crate::counters::read(&self.generator, &["lrg0"]);
        all.extend(crate::counters::read(&self.dut, &["lrd0", "lrd1"]));
        all.extend(crate::counters::read(&self.rcv, &["lrr0"]));
        all
    }

    /// One run's block of `counters.txt`: what was offered, refused and received, the
    /// counters that grew, and linerate's report of its ports and drops.
    fn journal(
        &self,
        set: &Set,
        rate: Option<f64>,
        r: &RunResult,
        grown: &crate::counters::Snapshot,
        report: &str,
    ) -> Result<(), LabError> {
        let Some(path) = &self.journal else {
            return Ok(());
        };
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
        let paced =
            rate.map(|r| format!("paced at {r:.0} pps")).unwrap_or_else(|| "full speed".into());
        writeln!(
            f,
            "== {} ({paced}): offered {}, refused by the DUT's input {}, received {}, {:.0} pps",
            set.name,
            r.offered,
            r.offered - r.sent,
            r.received,
            r.pps
        )?;
        writeln!(f, "grew: {}", grown.listed().join(" "))?;
        for line in report.lines() {
            writeln!(f, "dut: {line}")?;
        }
        Ok(())
    }

    /// Pings the receiver from the generator across `set`'s DUT, once a second, `count`
    /// times; returns the median round-trip time in microseconds (the first reply, which
    /// may wait for address resolution, left out).
    pub fn ping(&self, set: &Set, count: u32, stop: &AtomicBool) -> Result<f64, LabError> {
        let _dut = self.start_dut(set, stop)?;
        let mut cmd = self.generator.command("ping");
        cmd.args(["-n", "-c", &(count + 1).to_string(), "-i", "1", "-W", "1", "198.19.0.2"]);
        let child =
            cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).stdin(Stdio::null()).spawn()?;
        let out = ChildGuard(Some(child)).wait_output(stop)?;
        let rtts: Vec<f64> = out.lines().filter_map(ping_time_us).skip(1).collect();
        if rtts.is_empty() {
            return Err(LabError::Process {
                what: "ping across the DUT got no reply".into(),
                detail: out,
            });
        }
        Ok(crate::stat::median(&rtts))
    }

    /// The generator's capacity for `set`'s traffic: its rate while the DUT drops every
    /// frame as early as it can (kernel with forwarding off), so nothing downstream holds
    /// the generator back. A set whose DUT reaches this rate measured the generator.
    pub fn calibrate(&self, set: &Set, seconds: u32, stop: &AtomicBool) -> Result<f64, LabError> {
        self.dut.sysctl("net.ipv4.ip_forward=0")?;
        self.dut.sysctl("net.ipv6.conf.all.forwarding=0")?;
        let _ = self.dut.exec("nft", &["flush", "ruleset"]);
        let json = self.run_gen(set, seconds, None, stop)?;
        let per_second: Vec<f64> = json["per_second"]
            .as_array()
            .map(|a| a.iter().filter_map(|v| v.as_f64()).collect())
            .unwrap_or_default();
        // What it offers: what the DUT's input took and what it refused (ring full).
        Ok(active_median(&per_second).unwrap_or(0.0).max(offered_pps(&json)))
    }

    fn spawn_rcv(&self, seconds: u32) -> Result<Child, LabError> {
        let mut cmd = self.rcv.command(self.bin.to_str().unwrap_or("linerate"));
        // Counted in the kernel (XDP), so that the receiver leaves CPU 0 to the generator.
        cmd.args([
            "rcv",
            "-i",
            "lrr0",
            "--backend",
            "xdp-sink",
            "--json",
            "--cpu",
            &self.cpus.receiver.to_string(),
            "-t",
            &seconds.to_string(),
        ]);
        Ok(cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).stdin(Stdio::null()).spawn()?)
    }

    /// Runs the generators, one per worker on its own CPU with its share of the destinations
    /// and of the rate, and returns their summaries combined.
    fn run_gen(
        &self,
        set: &Set,
        seconds: u32,
        rate: Option<f64>,
        stop: &AtomicBool,
    ) -> Result<serde_json::Value, LabError> {
        let parts = self.cpus.queues();
        let rate =
            rate.or((set.traffic.rate > 0.0).then_some(set.traffic.rate)).map(|r| r / parts as f64);
        let mut children = Vec::new();
        for part in 0..parts {
            let child = self
                .gen_command(set, seconds, rate, part)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .stdin(Stdio::null())
                .spawn()?;
            children.push(ChildGuard(Some(child)));
        }
        let mut summaries = Vec::new();
        for child in &mut children {
            let out = child.wait_output(stop)?;
            summaries.push(
                last_json(&out)
                    .ok_or_else(|| LabError::Process { what: "gen".into(), detail: out.clone() })?,
            );
        }
        Ok(combine_gen(&summaries))
    }

    /// `linerate gen` for generator `part` of the lab's workers.
    fn gen_command(
        &self,
        set: &Set,
        seconds: u32,
        rate: Option<f64>,
        part: usize,
    ) -> std::process::Command {
        let t = &set.traffic;
        let (src, dst) = ranges_part(t.flows, t.ipv6, part as u32, self.cpus.queues() as u32);
        let mut cmd = self.generator.command(self.bin.to_str().unwrap_or("linerate"));
        let cpu = (self.cpus.generator + part).to_string();
        cmd.args([
            "gen",
            "-i",
            "lrg0",
            "-D",
            DUT0_MAC,
            "-s",
            &src,
            "-d",
            &dst,
            "--json",
            "--cpu",
            &cpu,
            "-t",
            &seconds.to_string(),
        ]);
        cmd.args(["--backend", &t.generator]);
        if t.imix {
            cmd.arg("--imix");
        } else {
            cmd.args(["-l", &t.frame_size.to_string()]);
        }
        if let Some(r) = rate {
            cmd.args(["-R", &format!("{r:.0}")]);
            if t.generator == "xdp-live" {
                cmd.args(["--paced-step", &t.paced_step.to_string()]);
            }
        }
        cmd
    }

    /// TCP through the DUT configured for `set`: one iperf3 test of `seconds` from the
    /// generator's namespace to the receiver's (client and server on their CPUs), every veth
    /// offload on for it (checksums, TSO, GSO; GRO on the generator's end too, which takes
    /// the ACKs). Returns the Gbit/s the server received.
    pub fn tcp(&self, set: &Set, seconds: u32, stop: &AtomicBool) -> Result<f64, LabError> {
        let _offloads = OffloadsOn::new(self)?;
        let _dut = self.start_dut(set, stop)?;
        let taskset = |ns: &Namespace, cpu: usize| {
            let mut cmd = ns.command("taskset");
            cmd.args(["-c", &cpu.to_string(), "iperf3"]);
            cmd
        };
        let mut server = taskset(&self.rcv, self.cpus.receiver);
        server.args(["-s", "-1", "-B", "198.19.0.2"]).stdout(Stdio::null()).stderr(Stdio::null());
        let _server = ChildGuard(Some(server.spawn()?));
        sleep(Duration::from_millis(500), stop)?;
        let mut client = taskset(&self.generator, self.cpus.generator);
        client.args(["-c", "198.19.0.2", "-J", "--connect-timeout", "5000"]);
        client.args(["-t", &seconds.to_string()]);
        client.stdout(Stdio::piped()).stderr(Stdio::piped()).stdin(Stdio::null());
        let out = ChildGuard(Some(client.spawn()?)).wait_output(stop)?;
        let json: serde_json::Value = serde_json::from_str(&out).map_err(|e| {
            LabError::Process { what: format!("iperf3's report ({e})"), detail: out.clone() }
        })?;
        json["end"]["sum_received"]["bits_per_second"].as_f64().map(|b| b / 1e9).ok_or_else(|| {
            LabError::Process {
                what: "iperf3".into(),
                detail: json["error"].as_str().unwrap_or("no result").to_owned(),
            }
        })
    }

    /// Configures the DUT namespace for `set`; the returned guard undoes it.
    fn start_dut(&self, set: &Set, stop: &AtomicBool) -> Result<DutGuard<'_>, LabError> {
        let forwarding = set.dut != Dut::Linerate;
        let f = if forwarding { "1" } else { "0" };
        self.dut.sysctl(&format!("net.ipv4.ip_forward={f}"))?;
        self.dut.sysctl(&format!("net.ipv6.conf.all.forwarding={f}"))?;
        let _ = self.dut.exec("nft", &["flush", "ruleset"]);
        let mut guard = DutGuard { env: self, child: None };
        if forwarding {
            // linerate places it itself; a linerate run before may have moved it.
            place_napi(&self.dut, "lrd0", self.cpus.dut)?;
        }
        match set.dut {
            Dut::Kernel => {}
            Dut::KernelNft => {
                let path = self.dir.join("ruleset.nft");
                let mut ruleset = if set.nft_set {
                    nft_set_ruleset(set.rules, set.conntrack)
                } else {
                    nft_ruleset(set.rules, set.conntrack)
                };
                if set.nat {
                    ruleset.push_str(NFT_MASQUERADE);
                }
                std::fs::write(&path, ruleset)?;
                self.dut.exec("nft", &["-f", path.to_str().unwrap_or("")])?;
            }
            Dut::Linerate => {
                let path = self.dir.join("router.toml");
                // rules = N: the same N non-matching rules as the nftables set, in pf syntax.
                let rules = (set.rules > 0 || set.nat).then(|| self.dir.join("rules.conf"));
                if let Some(r) = &rules {
                    let mut text = if set.nat { String::from(PF_NAT) } else { String::new() };
                    text.push_str(&linerate_rules(set.rules, set.conntrack || set.nat));
                    std::fs::write(r, text)?;
                }
                let mut text = linerate_config(&set.backend, set.fast_path);
                if let Some(r) = &rules {
                    text.push_str(&format!("\n[firewall]\nrules = \"{}\"\n", r.display()));
                }
                std::fs::write(&path, text)?;
                let mut cmd = self.dut.command(self.bin.to_str().unwrap_or("linerate"));
                cmd.args([
                    "run",
                    "-c",
                    path.to_str().unwrap_or(""),
                    "--cpu",
                    &self.cpus.dut.to_string(),
                    "--workers",
                    &self.cpus.queues().to_string(),
                ]);
                cmd.stdout(std::fs::File::create(self.dir.join(DUT_REPORT))?);
                guard.child =
                    Some(wait_ready(cmd, "forwarding with", Duration::from_secs(15), stop)?);
            }
        }
        Ok(guard)
    }
}

/// The veths' offloads on for a TCP run, off again (as the lab keeps them) when dropped.
struct OffloadsOn<'a> {
    env: &'a LabEnv,
}

impl<'a> OffloadsOn<'a> {
    fn new(env: &'a LabEnv) -> Result<OffloadsOn<'a>, LabError> {
        let on = OffloadsOn { env };
        on.set("on")?;
        on.env.generator.exec("ethtool", &["-K", "lrg0", "gro", "on"])?;
        Ok(on)
    }

    fn ends(&self) -> [(&Namespace, &'static str); 4] {
        let e = self.env;
        [(&e.generator, "lrg0"), (&e.dut, "lrd0"), (&e.dut, "lrd1"), (&e.rcv, "lrr0")]
    }

    fn set(&self, on: &str) -> Result<(), LabError> {
        for (ns, dev) in self.ends() {
            ns.exec("ethtool", &["-K", dev, "rx", on, "tx", on, "tso", on, "gso", on])?;
        }
        Ok(())
    }
}

impl Drop for OffloadsOn<'_> {
    fn drop(&mut self) {
        let _ = self.set("off");
        let _ = self.env.generator.exec("ethtool", &["-K", "lrg0", "gro", "off"]);
    }
}

/// Undoes a DUT's configuration: stops linerate, removes nftables rules.
struct DutGuard<'a> {
    env: &'a LabEnv,
    child: Option<Child>,
}

impl DutGuard<'_> {
    /// Stops the DUT and returns linerate's report of its ports and drops (the lines before
    /// its slow path's; empty for the kernel).
    fn stop(&mut self) -> String {
        let Some(mut child) = self.child.take() else {
            return String::new();
        };
        terminate(&mut child);
        let text = std::fs::read_to_string(self.env.dir.join(DUT_REPORT)).unwrap_or_default();
        text.lines().take_while(|l| !l.starts_with("slow path")).map(|l| format!("{l}\n")).collect()
    }
}

impl Drop for DutGuard<'_> {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            terminate(&mut child);
        }
        let _ = self.env.dut.exec("nft", &["flush", "ruleset"]);
    }
}

/// A child process killed on drop (a lab interrupted or failing leaves none behind).
struct ChildGuard(Option<Child>);

impl ChildGuard {
    /// Waits for the child to exit (stopping it if `stop` is set) and returns its stdout.
    fn wait_output(&mut self, stop: &AtomicBool) -> Result<String, LabError> {
        let mut child = self.0.take().expect("child present");
        loop {
            if stop.load(Ordering::Relaxed) {
                terminate(&mut child);
                return Err(LabError::Interrupted);
            }
            if child.try_wait()?.is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let out = child.wait_with_output()?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        if !out.status.success() {
            return Err(LabError::Process {
                what: format!("exit status {}", out.status),
                detail: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            });
        }
        Ok(stdout)
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            terminate(&mut c);
        }
    }
}

fn sleep(d: Duration, stop: &AtomicBool) -> Result<(), LabError> {
    let end = Instant::now() + d;
    while Instant::now() < end {
        if stop.load(Ordering::Relaxed) {
            return Err(LabError::Interrupted);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// The round-trip time of one `ping` reply line (`... time=0.123 ms`), in microseconds.
fn ping_time_us(line: &str) -> Option<f64> {
    let t = line.split("time=").nth(1)?;
    let ms: f64 = t.split_whitespace().next()?.parse().ok()?;
    Some(ms * 1000.0)
}

/// The generator's offered rate from its summary: frames sent plus frames its port or the
/// DUT's input refused, per second of the run.
fn offered_pps(summary: &serde_json::Value) -> f64 {
    let n = summary["sent"].as_u64().unwrap_or(0) + summary["dropped"].as_u64().unwrap_or(0);
    n as f64 / summary["seconds"].as_f64().filter(|s| *s > 0.0).unwrap_or(1.0)
}

/// Several generators' summaries as one: frames and rates summed, per-second rates summed
/// second by second (the generators start within milliseconds of each other).
fn combine_gen(summaries: &[serde_json::Value]) -> serde_json::Value {
    if let [one] = summaries {
        return one.clone();
    }
    let sum = |key: &str| summaries.iter().map(|s| s[key].as_u64().unwrap_or(0)).sum::<u64>();
    let mut per_second: Vec<f64> = Vec::new();
    for s in summaries {
        for (i, v) in
            s["per_second"].as_array().into_iter().flatten().filter_map(|v| v.as_f64()).enumerate()
        {
            if per_second.len() <= i {
                per_second.resize(i + 1, 0.0);
            }
            per_second[i] += v;
        }
    }
    let median_pps: f64 = summaries.iter().filter_map(|s| s["median_pps"].as_f64()).sum();
    let seconds = summaries.iter().filter_map(|s| s["seconds"].as_f64()).fold(0.0, f64::max);
    serde_json::json!({ "sent": sum("sent"), "dropped": sum("dropped"), "median_pps": median_pps, "seconds": seconds, "per_second": per_second })
}

fn last_json(out: &str) -> Option<serde_json::Value> {
    out.lines().rev().find_map(|l| {
        serde_json::from_str::<serde_json::Value>(l).ok().filter(|v| v.get("per_second").is_some())
    })
}

/// The run's value from the receiver's per-second rates: the median of the seconds in which
/// traffic flowed, leaving out the first and last of them (partial seconds).
pub fn active_median(per_second: &[f64]) -> Option<f64> {
    let peak = per_second.iter().cloned().fold(0.0, f64::max);
    let active = |v: &f64| *v > peak * 0.01 && *v > 0.0;
    let first = per_second.iter().position(active)?;
    let last = per_second.iter().rposition(active)?;
    crate::traffic::run_value(&per_second[first..=last])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ping_lines_give_microseconds() {
        assert_eq!(
            ping_time_us("64 bytes from 198.19.0.2: icmp_seq=2 ttl=63 time=0.052 ms"),
            Some(52.0)
        );
        assert_eq!(ping_time_us("PING 198.19.0.2 (198.19.0.2) 56(84) bytes of data."), None);
    }

    #[test]
    fn cpu_masks_are_sysfs_words() {
        assert_eq!(cpu_mask(1), "2");
        assert_eq!(cpu_mask(4), "10");
        assert_eq!(cpu_mask(33), "2,0");
    }

    #[test]
    fn active_median_ignores_idle_and_partial_seconds() {
        assert_eq!(
            active_median(&[3.0, 50_000.0, 100_000.0, 101_000.0, 99_000.0, 40_000.0, 0.0]),
            Some(100_000.0)
        );
        assert_eq!(active_median(&[0.0, 0.0]), None);
    }
}
