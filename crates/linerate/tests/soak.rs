//! The soak (issue 46): for `LINERATE_SOAK_SECS` seconds (default 150, the CI version;
//! `scripts/soak.sh 3600` for the hour), everything at once through one linerate, A - D - B:
//!
//! - `linerate gen` from A: 2,000 UDP flows through `nat` and a stateful rule set at
//!   `LINERATE_SOAK_PPS` (default 20,000) frames a second, counted by `linerate rcv` on B;
//! - TCP connections opened, used (1 KiB each way) and closed, 20 a second, A to B through
//!   the same `nat`, each failure with its time;
//! - every 30 s a reload; every 10 s 2,000 kernel routes added or removed in D
//!   (`[router.kernel_routes]`, the churn a routing daemon makes); a BIRD in B announcing
//!   2,000 prefixes by eBGP to a BIRD in D on linerate's host-stack TAP, which puts them in
//!   D's kernel table, whence linerate mirrors them; every 20 s B withdraws them all or
//!   announces them again; every 5 s a table entry
//!   added or deleted; every 20 s `kill states` of the UDP flows; every 15 s a capture of
//!   100 frames; every second a metrics scrape;
//! - every 60 s B's link down for a second (D's `lrd1` loses its carrier); every 90 s
//!   (between them) the veth pair D - B deleted and created again, as a container runtime
//!   recreates one: linerate rebuilds its port in place (`crate::rebuild`).
//!
//! The ports are AF_XDP (what `auto` opens on veth), with the fast path on and GRO on A's
//! and B's veths, so that the flows it decides are offloaded and follow the rebuilt port.
//! At the end it prints the report: RSS, states and NAT translations at the first tenth of
//! the run, the middle and the end; every drop reason that moved; TCP connections that
//! failed, and how many of them outside the link flaps; restarts and panics. It fails on a
//! panic, a restart, a failed connection outside a flap, or RSS growing by more than 2%
//! between the first tenth and the end of a run of 10 minutes or more (5% between the middle
//! and the end of a shorter one, whose tables still fill), or forwarding not back within 1 s
//! of a link coming up (a ping from A to B, every 50 ms), or no BGP prefix mirrored into the
//! FIB at the end. Needs root.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use lab::topology::is_root;

mod common;

use common::{D0_MAC, Guard, Lab, build, start_until, stats, text, write_config};

/// D's BIRD: eBGP with B over linerate's TAP, the best routes into D's kernel table.
/// A session that fails (its link flapped) is tried again within seconds, not after BIRD's
/// default error wait of a minute or more.
const D_BIRD: &str = "router id 198.19.0.1;\nprotocol device { scan time 1; }\nprotocol kernel { ipv4 { import none; export all; }; }\nprotocol bgp b { local 198.19.0.1 as 65001; neighbor 198.19.0.2 as 65002; connect retry time 1; error wait time 1, 4; ipv4 { import all; export none; }; }\n";
/// Prefixes B announces (of `common::bgp::PREFIXES` in its config, the rest cut).
const BGP_PREFIXES: u32 = 2000;

const RULES: &str = "table <soak> persist { 203.0.113.1 }\nnat on lrd1 from 198.18.0.0/16 to any -> (lrd1)\nblock in quick from <soak>\nblock all\npass out keep state\npass in on lrd0 keep state\n";

/// B's TCP server: echoes what each connection sends, then closes.
const SERVER: &str = "import socket,threading\ns=socket.socket(); s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\ns.bind(('',5001)); s.listen(256)\nprint('ready',flush=True)\ndef serve(c):\n  try:\n    d=b''\n    while len(d)<1024:\n      m=c.recv(4096)\n      if not m: break\n      d+=m\n    c.sendall(d)\n  except OSError: pass\n  c.close()\nwhile True:\n  c,_=s.accept(); threading.Thread(target=serve,args=(c,),daemon=True).start()\n";
/// A's TCP client: a connection every 50 ms for `argv[1]` seconds; prints each failure's
/// time since start, then `done N` (connections tried). A connection fails when it is reset,
/// refused, or not done within 10 s (a lost segment is retransmitted within that: TCP's
/// business, not a failure).
const CLIENT: &str = "import socket,sys,time\nsecs=float(sys.argv[1]); t0=time.time(); n=0\nwhile time.time()-t0<secs:\n  n+=1; t=time.time(); step='connect'\n  c=socket.socket(); c.settimeout(10); c.bind(('',0))\n  try:\n    c.connect(('198.19.0.2',5001)); step='echo'; c.sendall(b'x'*1024)\n    d=b''\n    while len(d)<1024:\n      m=c.recv(4096)\n      if not m: raise OSError('closed early')\n      d+=m\n  except OSError as e:\n    print('fail %.2f %s from port %d: %s'%(t-t0,step,c.getsockname()[1],e),flush=True)\n  c.close()\n  time.sleep(max(0,0.05-(time.time()-t)))\nprint('done',n,flush=True)\n";

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn linerate(args: &[&str], cfg: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_linerate")).args(args).arg("-c").arg(cfg).output().unwrap()
}

/// RSS in KiB of process `pid`.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap_or("VmRSS: 0 kB");
    line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// The sum over workers of metric `name` in a scrape.
fn metric_sum(scrape: &str, name: &str) -> u64 {
    scrape
        .lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with('{'))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

fn scrape(lab: &Lab) -> String {
    let code = "import urllib.request\nprint(urllib.request.urlopen('http://127.0.0.1:9420/metrics',timeout=5).read().decode())\n";
    let out = lab.d.command("python3").args(["-c", code]).output().unwrap();
    if !out.status.success() {
        let log = std::fs::read_to_string(lab.dir.join("run.err")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(30).collect();
        panic!(
            "metrics scrape failed; linerate's last lines:\n{}\n{}",
            tail.into_iter().rev().collect::<Vec<_>>().join("\n"),
            text(&out)
        );
    }
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// One sample of the router's memory: RSS (KiB), states, NAT translations.
fn sample(lab: &Lab, pid: u32) -> (u64, u64, u64) {
    let s = scrape(lab);
    (
        rss_kib(pid),
        metric_sum(&s, "linerate_state_table_states"),
        metric_sum(&s, "linerate_nat_sessions"),
    )
}

/// Runs `step(i)` every `every` until `stop`, on a thread of its own.
fn every(
    stop: &Arc<AtomicBool>,
    every: Duration,
    mut step: impl FnMut(u64) + Send + 'static,
) -> std::thread::JoinHandle<()> {
    let stop = Arc::clone(stop);
    std::thread::spawn(move || {
        let mut i = 0;
        let mut next = Instant::now() + every;
        while !stop.load(Ordering::Relaxed) {
            if Instant::now() >= next {
                step(i);
                i += 1;
                next += every;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    })
}

#[test]
fn soak() {
    assert!(is_root(), "needs root (namespaces): run the suite as root");
    let secs = env_or("LINERATE_SOAK_SECS", 150);
    let pps = env_or("LINERATE_SOAK_PPS", 20_000);
    let lab = build("sk");
    let rules = lab.dir.join("rules.conf");
    std::fs::write(&rules, RULES).unwrap();
    let extra = format!(
        "[firewall]\nrules = \"{}\"\n\n[router.kernel_routes]\ntable = \"main\"\n",
        rules.display()
    );
    let cfg = write_config(&lab, "af_xdp", &extra);
    gro_on(lab.a.name(), "lra0");
    gro_on(lab.b.name(), "lrb0");
    let text_cfg = std::fs::read_to_string(&cfg).unwrap().replacen(
        "[router]\n",
        "[router]\nmetrics_listen = \"127.0.0.1:9420\"\n",
        1,
    );
    std::fs::write(&cfg, text_cfg).unwrap();
    // Its log also into a file (same pid: exec), for the report.
    let log = lab.dir.join("run.err");
    let mut cmd = lab.d.command("bash");
    cmd.args(["-c", "exec \"$@\" 2> >(tee \"$LR_LOG\" >&2)", "bash"])
        .env("LR_LOG", &log)
        .arg(env!("CARGO_BIN_EXE_linerate"))
        .args(["run", "-c"])
        .arg(&cfg)
        .args(["--cpu", "1"]);
    let mut dut = start_until(cmd, "forwarding with");
    let pid = dut.0.as_ref().unwrap().id();
    let started = Instant::now();
    let _ = lab.a.exec("ping", &["-c", "1", "-W", "1", "198.19.0.2"]);

    // BGP: B announces, D's BIRD (on the TAP lrhd1) puts the routes in D's kernel.
    let (_d_bird, _) = common::bgp::bird(&lab.d, &lab.dir, "d", D_BIRD);
    let b_conf =
        common::bgp::neighbour_conf_n("198.19.0.2", "198.19.0.1", 65002, "lrb0", 0, BGP_PREFIXES);
    let (_b_bird, b_sock) = common::bgp::bird(&lab.b, &lab.dir, "b", &b_conf);

    // Traffic: UDP flows, and TCP connections.
    let rcv_pid = Arc::new(std::sync::Mutex::new(None));
    let rcv = receiver(lab.b.name().to_owned(), started + Duration::from_secs(secs + 2), &rcv_pid);
    let mut generator = lab.a.command(env!("CARGO_BIN_EXE_linerate"));
    generator
        .args(["gen", "-i", "lra0", "-D", D0_MAC, "-R", &pps.to_string()])
        .args(["-s", "198.18.10.1-198.18.10.20", "-d", "198.19.0.2:2000-198.19.0.2:2099"])
        .args(["-t", &secs.to_string(), "--cpu", "0", "--json"]);
    let generator = generator.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let mut server = lab.b.command("python3");
    server.args(["-c", SERVER]).stderr(Stdio::null());
    let server = start_until_stdout(server);
    let client = lab
        .a
        .command("python3")
        .args(["-c", CLIENT, &secs.to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();

    // Operations.
    let stop = Arc::new(AtomicBool::new(false));
    let mut chores = Vec::new();
    let (c, r) = (cfg.clone(), rules.clone());
    chores.push(every(&stop, Duration::from_secs(30), move |i| {
        let comment = format!("# reload {i}\n");
        std::fs::write(&r, format!("{comment}{RULES}")).unwrap();
        let out = linerate(&["reload"], &c);
        assert!(out.status.success(), "reload: {}", text(&out));
    }));
    let (dns, dir) = (lab.d.name().to_owned(), lab.dir.clone());
    chores.push(every(&stop, Duration::from_secs(10), move |i| {
        let verb = if i % 2 == 0 { "add" } else { "del" };
        let batch = dir.join("routes.batch");
        let mut b = std::fs::File::create(&batch).unwrap();
        for k in 0..2000u32 {
            let via = if verb == "add" { " via 198.19.0.2" } else { "" };
            writeln!(b, "route {verb} 10.{}.{}.0/24{via}", 100 + k / 256, k % 256).unwrap();
        }
        drop(b);
        let out = Command::new("ip").args(["-n", &dns, "-batch"]).arg(&batch).output().unwrap();
        assert!(out.status.success(), "routes: {}", text(&out));
    }));
    // B withdraws its prefixes or announces them again; how long until linerate's FIB has
    // none or all of them (`None`: not within 15 s).
    let bgp = Arc::new(std::sync::Mutex::new(Vec::<(f64, &str, Option<Duration>)>::new()));
    let (bns, bs, c, g) = (lab.b.name().to_owned(), b_sock.clone(), cfg.clone(), Arc::clone(&bgp));
    chores.push(every(&stop, Duration::from_secs(20), move |i| {
        let (verb, want) = if i % 2 == 0 { ("disable", 0) } else { ("enable", BGP_PREFIXES) };
        let at = started.elapsed().as_secs_f64();
        let out = Command::new("ip")
            .args(["netns", "exec", &bns, "birdc", "-s"])
            .arg(&bs)
            .args([verb, "announced"])
            .output()
            .unwrap();
        assert!(out.status.success(), "birdc {verb}: {}", text(&out));
        let t = Instant::now();
        let mut took = None;
        while t.elapsed() < Duration::from_secs(15) {
            if bgp_routes(&c) == want {
                took = Some(t.elapsed());
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        g.lock().unwrap().push((at, verb, took));
    }));
    let c = cfg.clone();
    chores.push(every(&stop, Duration::from_secs(5), move |i| {
        let verb = if i % 2 == 0 { "add" } else { "delete" };
        let out = linerate(&["table", "soak", verb, "203.0.113.9"], &c);
        assert!(out.status.success(), "table: {}", text(&out));
    }));
    let c = cfg.clone();
    chores.push(every(&stop, Duration::from_secs(20), move |_| {
        let out = linerate(&["kill", "states", "--src", "198.18.10.0/24"], &c);
        assert!(out.status.success(), "kill states: {}", text(&out));
    }));
    let (c, dns) = (cfg.clone(), lab.d.name().to_owned());
    chores.push(every(&stop, Duration::from_secs(15), move |_| {
        // Not once the traffic ends: a capture waits for its frames.
        if started.elapsed() + Duration::from_secs(12) > Duration::from_secs(secs) {
            return;
        }
        // Bounded: a capture that never gets its frames is a finding, not a hang.
        let out = Command::new("timeout")
            .args(["10", "ip", "netns", "exec", &dns, env!("CARGO_BIN_EXE_linerate")])
            .args(["capture", "-i", "any"])
            .args(["-c", "100", "-w", "/dev/null", "--config"])
            .arg(&c)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "capture at {:?} ({}): {}",
            started.elapsed(),
            out.status,
            text(&out)
        );
    }));
    // Link flaps and re-creations take turns; each records when it began and ended, and how
    // long after the link came up a ping went through.
    let flaps = Arc::new(std::sync::Mutex::new(Vec::<(f64, f64, Duration)>::new()));
    let links = Arc::new(std::sync::Mutex::new(()));
    let names = (lab.a.name().to_owned(), lab.d.name().to_owned(), lab.b.name().to_owned());
    let (ns, f, l) = (names.clone(), Arc::clone(&flaps), Arc::clone(&links));
    chores.push(every(&stop, Duration::from_secs(60), move |_| {
        let _turn = l.lock().unwrap();
        let at = started.elapsed().as_secs_f64();
        assert!(ip(&ns.2, &["link", "set", "lrb0", "down"]));
        std::thread::sleep(Duration::from_secs(1));
        assert!(ip(&ns.2, &["link", "set", "lrb0", "up"]));
        let back = back_within(&ns.0);
        if back > Duration::from_millis(500) {
            println!("soak: link flap at {at:.0} s: forwarding back after {back:?}");
        }
        f.lock().unwrap().push((at, started.elapsed().as_secs_f64(), back));
    }));
    let (ns, f, l, rp) = (names, Arc::clone(&flaps), Arc::clone(&links), Arc::clone(&rcv_pid));
    chores.push(every(&stop, Duration::from_secs(90), move |_| {
        let _turn = l.lock().unwrap();
        let at = started.elapsed().as_secs_f64();
        // The receiver on lrb0 goes with it: stopped (it prints its count), started again.
        if let Some(p) = *rp.lock().unwrap() {
            let _ = Command::new("kill").args(["-TERM", &p.to_string()]).status();
        }
        assert!(ip(&ns.1, &["link", "del", "lrd1"]));
        recreate_b_side(&ns.1, &ns.2);
        let back = back_within(&ns.0);
        if back > Duration::from_millis(500) {
            println!("soak: re-creation at {at:.0} s: forwarding back after {back:?}");
        }
        f.lock().unwrap().push((at, started.elapsed().as_secs_f64(), back));
    }));

    // Memory at the first tenth, the middle and the end; a scrape every second between.
    let mut samples = Vec::new();
    let (mut scrapes, mut ring_drops, mut bursts) = (0, 0, Vec::new());
    for (i, at) in [secs / 10, secs / 2, secs.saturating_sub(2)].into_iter().enumerate() {
        while started.elapsed() < Duration::from_secs(at) {
            std::thread::sleep(Duration::from_secs(1));
            let now = metric_sum(&scrape(&lab), "linerate_interface_rx_drops_total");
            if now > ring_drops {
                bursts.push((started.elapsed().as_secs(), now - ring_drops));
            }
            ring_drops = now;
            scrapes += 1;
        }
        samples.push((["tenth", "middle", "end"][i], sample(&lab, pid)));
    }
    let client = client.wait_with_output().unwrap();
    stop.store(true, Ordering::Relaxed);
    // A chore that failed is reported with the rest, not instead of it.
    let chore_failures: Vec<String> = chores
        .into_iter()
        .filter_map(|c| c.join().err())
        .map(|e| {
            e.downcast_ref::<String>().cloned().unwrap_or_else(|| {
                e.downcast_ref::<&str>().map_or("a chore panicked".into(), |s| (*s).to_owned())
            })
        })
        .collect();
    let end_stats = stats(&lab.dir.join("control.sock"));
    let drops = end_stats["drops"].clone();
    let rebuilds = end_stats["interfaces"]
        .as_array()
        .and_then(|a| a.iter().find(|i| i["name"] == "lrd1"))
        .and_then(|i| i["rebuilds"].as_u64())
        .unwrap_or(0);
    let rings: Vec<String> = end_stats["interfaces"]
        .as_array()
        .map(|a| {
            let n = |i: &serde_json::Value, k: &str| i[k].as_u64().unwrap_or(0);
            a.iter()
                .map(|i| {
                    format!(
                        "{} rx_drops {} tx_drops {}",
                        i["name"].as_str().unwrap_or("?"),
                        n(i, "rx_drops"),
                        n(i, "tx_drops")
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let generator = generator.wait_with_output().unwrap();
    let received = rcv.join().expect("the receiver's thread");
    drop(server);
    let child = dut.terminate().unwrap();
    let out = child.wait_with_output().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let stderr = std::fs::read_to_string(&log).unwrap_or_default();
    let stderr = stderr.as_str();

    // The report.
    let flaps = flaps.lock().unwrap().clone();
    let failures: Vec<f64> = String::from_utf8_lossy(&client.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix("fail ")?.split(' ').next()?.parse().ok())
        .collect();
    let tried = String::from_utf8_lossy(&client.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("done ")?.parse::<u64>().ok())
        .unwrap_or(0);
    // A connection tried from 10 s before a flap to 2 s after its end may fail.
    let in_flap = |t: f64| flaps.iter().any(|&(from, to, _)| t > from - 10.0 && t < to + 2.0);
    let slowest = flaps.iter().map(|f| f.2).max().unwrap_or_default();
    let unexplained: Vec<f64> = failures.iter().copied().filter(|&t| !in_flap(t)).collect();
    let last = |o: &std::process::Output, key: &str| -> u64 {
        let s = String::from_utf8_lossy(&o.stdout);
        let line = s.lines().last().unwrap_or("{}");
        serde_json::from_str::<serde_json::Value>(line).map_or(0, |v| v[key].as_u64().unwrap_or(0))
    };
    let at: Vec<String> = flaps
        .iter()
        .map(|(from, to, back)| format!("{from:.0}-{to:.0} s (back in {} ms)", back.as_millis()))
        .collect();
    println!(
        "soak: {secs} s at {pps} frames/s, {scrapes} scrapes, link flaps and re-creations at {}",
        at.join(", ")
    );
    for (when, (rss, states, nat)) in &samples {
        println!("  {when:>6}: RSS {rss} KiB, states {states}, NAT translations {nat}");
    }
    println!(
        "  UDP: sent {}, received {}; TCP: {tried} connections, {} failed ({} outside the flaps: {unexplained:?})",
        last(&generator, "sent"),
        received,
        failures.len(),
        unexplained.len()
    );
    let moved: Vec<(String, u64)> = drops
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_u64().filter(|&n| n > 0)?)))
                .collect()
        })
        .unwrap_or_default();
    println!("  drops:");
    for (reason, n) in &moved {
        println!("    {reason} {n}: {}", why(reason));
    }
    println!("  rings: {}; rx drops by second: {bursts:?}", rings.join("; "));
    for l in String::from_utf8_lossy(&client.stdout).lines().filter(|l| l.starts_with("fail ")) {
        println!("  TCP {l}");
    }
    println!("  lrd1 rebuilt {rebuilds} times:");
    for l in stderr.lines().filter(|l| l.contains(" rebuilt as ifindex")) {
        println!("    {l}");
    }
    let bgp = bgp.lock().unwrap().clone();
    let show = |(at, verb, took): &(f64, &str, Option<Duration>)| {
        format!(
            "{verb} at {at:.0} s: {}",
            took.map_or("not within 15 s".into(), |d| format!("{} ms", d.as_millis()))
        )
    };
    println!(
        "  BGP ({BGP_PREFIXES} prefixes) in the FIB after B's {}",
        bgp.iter().map(show).collect::<Vec<_>>().join(", ")
    );
    for f in &chore_failures {
        println!("  chore failed: {f}");
    }
    println!("  exit: {}, panics: {}", out.status, stderr.matches("panicked").count());

    assert!(chore_failures.is_empty(), "chores failed: {chore_failures:?}");
    assert!(out.status.success(), "linerate's exit: {stderr}");
    assert!(!stderr.contains("panicked"), "a panic: {stderr}");
    assert!(unexplained.is_empty(), "TCP connections failed outside the flaps: {unexplained:?}");
    assert!(rebuilds > 0 && rebuilds >= (secs - 5) / 90, "lrd1 rebuilt {rebuilds} times");
    assert!(bgp.iter().all(|b| b.2.is_some()), "BGP routes not followed: {bgp:?}");
    assert!(slowest <= Duration::from_secs(1), "forwarding back {slowest:?} after a link came up");
    let odd: Vec<_> = moved.iter().filter(|(r, _)| why(r) == "unexplained").collect();
    assert!(odd.is_empty(), "drops nothing explains: {odd:?}");
    // An hour: the target, from the first tenth (the tables warmed up) to the end. A short
    // run's tables still fill (TCP states live 90 s after their close): its second half.
    let (from, growth) = if secs >= 600 { (0, 2) } else { (1, 5) };
    let (first, end) = (samples[from].1.0, samples[2].1.0);
    assert!(end * 100 <= first * (100 + growth), "RSS grew from {first} to {end} KiB");
}

/// Why a drop reason moves in the soak (`unexplained` fails it).
fn why(reason: &str) -> &'static str {
    match reason {
        "no_route" => {
            "B's link down (its routes withdrawn), and the replies to the generator's sources (198.18.10.0/24 is on no link of D)"
        }
        "ip_options" => {
            "the hosts' IGMP and MLD reports (router alert), blocked without allow-opts as pf blocks them"
        }
        "filter_blocked" => "what the rules block",
        "state_out_of_window" => {
            "TCP segments outside their state's window (a connection closed on one side)"
        }
        "no_neighbour" => "B unresolved just after its link came back",
        _ => "unexplained",
    }
}

/// Routes to B's BGP prefixes (10.200.0.0/13) in linerate's FIB.
fn bgp_routes(cfg: &Path) -> u32 {
    let out = linerate(&["show", "routes", "--json"], cfg);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let bgp = |r: &&serde_json::Value| r["prefix"].as_str().is_some_and(|p| p.starts_with("10.20"));
    v.as_array().map_or(0, |a| a.iter().filter(bgp).count() as u32)
}

fn ip(ns: &str, args: &[&str]) -> bool {
    Command::new("ip").arg("-n").arg(ns).args(args).output().is_ok_and(|o| o.status.success())
}

fn gro_on(ns: &str, dev: &str) {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "ethtool", "-K", dev, "gro", "on"])
        .output()
        .unwrap();
    assert!(out.status.success(), "ethtool -K {dev} gro on: {}", text(&out));
}

/// The veth pair D (`lrd1`) - B (`lrb0`) created again after D's end was deleted, with
/// another MAC on D's end (linerate gives it the port's back), B's addresses and routes, and
/// GRO on B's end.
fn recreate_b_side(dns: &str, bns: &str) {
    let b_mac = common::B_MAC;
    assert!(ip(
        dns,
        &["link", "add", "lrd1", "address", "02:00:00:00:0d:99", "type", "veth"]
            .into_iter()
            .chain(["peer", "name", "lrb0", "address", b_mac, "netns", bns])
            .collect::<Vec<_>>()
    ));
    assert!(ip(dns, &["link", "set", "lrd1", "up"]));
    assert!(ip(bns, &["link", "set", "lrb0", "up"]));
    assert!(ip(bns, &["addr", "add", "198.19.0.2/24", "dev", "lrb0"]));
    assert!(ip(bns, &["route", "add", "default", "via", "198.19.0.1"]));
    assert!(ip(bns, &["addr", "add", "2001:db8:b::2/64", "dev", "lrb0", "nodad"]));
    assert!(ip(bns, &["-6", "route", "add", "default", "via", "2001:db8:b::1"]));
    gro_on(bns, "lrb0");
}

/// How long after now a ping from A reaches B and comes back (tried every 50 ms, up to 10 s).
fn back_within(ans: &str) -> Duration {
    let took = ping_until_back(ans);
    if took > Duration::from_millis(500) {
        // Who stalls: the router, or the hosts? Their neighbour tables say.
        let show = |ns: &str| {
            let o = Command::new("ip").args(["-n", ns, "neigh"]).output().unwrap();
            String::from_utf8_lossy(&o.stdout).replace('\n', "; ")
        };
        println!("soak: slow back ({took:?}); A's neighbours: {}", show(ans));
    }
    took
}

fn ping_until_back(ans: &str) -> Duration {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        let ok = Command::new("ip")
            .args(["netns", "exec", ans, "ping", "-c", "1", "-W", "0.2", "198.19.0.2"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            return start.elapsed();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    start.elapsed()
}

/// `linerate rcv` on B's `lrb0` until `until`, started again whenever it stops early (its
/// interface deleted); its pid in `pid`. Returns the frames received, all runs together.
fn receiver(
    bns: String,
    until: Instant,
    pid: &Arc<std::sync::Mutex<Option<u32>>>,
) -> std::thread::JoinHandle<u64> {
    let pid = Arc::clone(pid);
    std::thread::spawn(move || {
        let mut total = 0;
        while until > Instant::now() + Duration::from_secs(2) {
            if !ip(&bns, &["link", "show", "lrb0"]) {
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
            let left = until.duration_since(Instant::now()).as_secs().to_string();
            let child = Command::new("ip")
                .args(["netns", "exec", &bns, env!("CARGO_BIN_EXE_linerate")])
                .args(["rcv", "-i", "lrb0", "--json", "-t", &left, "--cpu", "0"])
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            *pid.lock().unwrap() = Some(child.id());
            let out = child.wait_with_output().unwrap();
            *pid.lock().unwrap() = None;
            let s = String::from_utf8_lossy(&out.stdout);
            let line = s.lines().last().unwrap_or("{}");
            total += serde_json::from_str::<serde_json::Value>(line)
                .map_or(0, |v| v["received"].as_u64().unwrap_or(0));
        }
        total
    })
}

/// Starts `cmd` with its stdout piped and waits for a line `ready` on it.
fn start_until_stdout(mut cmd: Command) -> Guard {
    let mut child = cmd.stdout(Stdio::piped()).spawn().unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    assert_eq!(line.trim(), "ready", "the server did not start");
    Guard(Some(child))
}
