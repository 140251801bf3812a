//! The slow-path thread of `linerate run` and the host-stack TAPs it serves.
//!
//! One thread runs [`dataplane::slowpath::SlowPath`] over real I/O: the workers' punt channel,
//! one AF_PACKET raw socket per physical interface to send (ARP, NDP, ICMP, packets released
//! by resolution, what the kernel sends), and one TAP per interface (sub-interfaces included)
//! for the host stack. The TAP gets the interface's MAC, MTU and addresses (IPv6 without DAD:
//! they are the router's, already in use) and the config's static routes, so the kernel can
//! answer ssh or BGP from anywhere the router reaches.

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use config::Config;
use dataplane::host_out::HostOutSender;
use dataplane::punt::PuntReceiver;
use dataplane::slowpath::{SlowIo, SlowPath};
use io::afpacket::RawSender;
use io::tap::Tap;

/// Raw senders opened on interfaces created again ([`crate::rebuild`]), by physical port,
/// for the slow-path thread to take in place of its own; `pending` says one is waiting.
#[derive(Default)]
pub struct SenderSwaps {
    pending: AtomicBool,
    senders: Mutex<Vec<Option<RawSender>>>,
}

impl SenderSwaps {
    /// Hands physical port `phys`'s new sender to the slow-path thread.
    pub fn offer(&self, phys: usize, sender: RawSender) {
        let mut all = self.senders.lock().unwrap_or_else(|e| e.into_inner());
        if all.len() <= phys {
            all.resize_with(phys + 1, || None);
        }
        all[phys] = Some(sender);
        self.pending.store(true, Ordering::Release);
    }
}

/// The slow path's I/O: raw senders per physical port, TAPs per logical port.
pub struct HostIo {
    senders: Vec<RawSender>,
    /// New senders for ports rebuilt on their interfaces created again.
    swaps: Arc<SenderSwaps>,
    taps: Vec<Option<Tap>>,
    /// Frames that could not be sent (socket buffer full, link down, a worker's queue of the
    /// router's own packets full) or written to a TAP.
    pub send_errors: u64,
    /// With a firewall: the workers that filter and send the host stack's IP packets.
    host_out: Option<HostOutSender>,
    /// The static routes on their way to the TAPs, until `ip` is done.
    routes: Option<HostRoutes>,
}

impl HostIo {
    /// Sends the host stack's IP packets through the workers' firewalls from now on.
    pub fn set_host_out(&mut self, out: HostOutSender) {
        self.host_out = Some(out);
    }

    /// Where the rebuilt ports' new raw senders go.
    pub fn sender_swaps(&self) -> Arc<SenderSwaps> {
        Arc::clone(&self.swaps)
    }

    /// Takes the new senders waiting, if any (a relaxed load when none is).
    fn take_swaps(&mut self) {
        if !self.swaps.pending.swap(false, Ordering::Acquire) {
            return;
        }
        let mut all = self.swaps.senders.lock().unwrap_or_else(|e| e.into_inner());
        for (phys, new) in all.iter_mut().enumerate() {
            if let (Some(new), Some(old)) = (new.take(), self.senders.get_mut(phys)) {
                *old = new;
            }
        }
    }
}

impl SlowIo for HostIo {
    fn send_wire(&mut self, phys: u16, frame: &[u8]) {
        self.take_swaps();
        match self.senders.get(phys as usize) {
            Some(s) if s.send(frame).is_ok() => {}
            _ => self.send_errors += 1,
        }
    }

    fn send_from_host(&mut self, port: u16, phys: u16, untagged: &[u8], frame: &[u8]) {
        let ip = matches!(untagged.get(12..14), Some([0x08, 0x00] | [0x86, 0xdd]));
        match &mut self.host_out {
            Some(out) if ip => {
                if !out.send(port, phys, untagged, frame) {
                    self.send_errors += 1;
                }
            }
            _ => self.send_wire(phys, frame),
        }
    }

    fn send_host(&mut self, port: u16, frame: &[u8]) {
        match self.taps.get(port as usize) {
            Some(Some(t)) if matches!(t.send(frame), Ok(true)) => {}
            _ => self.send_errors += 1,
        }
    }
}

fn ip(args: &[&str]) -> Result<()> {
    let out = crate::tools::command("ip")
        .map_err(anyhow::Error::msg)?
        .args(args)
        .output()
        .context("running ip (iproute2)")?;
    if !out.status.success() {
        bail!("`ip {}`: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

/// Creates and configures the TAP of every interface (`None` for all when the host stack is
/// off), then opens the raw senders.
impl HostIo {
    /// A second handle on each TAP (by logical port; `None` without one), for the link events
    /// thread, which sets their carrier as their ports' links go.
    pub fn tap_handles(&self) -> Vec<Option<Tap>> {
        self.taps.iter().map(|t| t.as_ref().and_then(|t| t.try_clone().ok())).collect()
    }
}

pub fn open(cfg: &Config, ports: &[dataplane::PortInfo]) -> Result<HostIo> {
    let physical: Vec<&config::Interface> =
        cfg.interfaces.iter().filter(|i| i.vlan.is_none()).collect();
    let senders = physical
        .iter()
        .map(|i| {
            RawSender::open(&i.name).with_context(|| format!("opening a raw socket on {}", i.name))
        })
        .collect::<Result<Vec<_>>>()?;
    let mut taps = Vec::new();
    for (i, (iface, port)) in cfg.interfaces.iter().zip(ports).enumerate() {
        if !cfg.router.host_stack {
            taps.push(None);
            continue;
        }
        let name = iface.tap_name(i);
        let tap = Tap::open(&name, i as u16)
            .with_context(|| format!("creating host-stack TAP {name} for {}", iface.name))?;
        tap.set_mac(port.mac.0).with_context(|| format!("setting the MAC of {name}"))?;
        ip(&["link", "set", "dev", &name, "mtu", &iface.mtu.to_string()])?;
        for a in &iface.addresses {
            let cidr = format!("{}/{}", a.addr, a.prefix_len);
            let mut args = vec!["addr", "replace", &cidr, "dev", &name];
            if a.addr.is_ipv6() {
                args.push("nodad");
            }
            ip(&args)?;
        }
        tap.set_up(true).with_context(|| format!("bringing {name} up"))?;
        taps.push(Some(tap));
    }
    let routes = if cfg.router.host_stack && !cfg.routes.is_empty() {
        match HostRoutes::start(cfg) {
            Ok(r) => Some(r),
            Err(e) => {
                eprintln!("linerate: warning: host stack routes: {e:#}");
                None
            }
        }
    } else {
        None
    };
    Ok(HostIo { senders, swaps: Arc::default(), taps, send_errors: 0, host_out: None, routes })
}

/// The config's static routes being given to the TAPs by one `ip -batch` run in the
/// background: a full table takes the kernel tens of seconds, and forwarding does not wait
/// for it (only the host stack's own traffic uses these routes). `ip` is started before the
/// privileges are dropped (it keeps its own credentials); the batch is written to its stdin
/// by a thread the slow path starts ([`HostRoutes::feed`]), which has none.
pub struct HostRoutes {
    child: std::process::Child,
    /// `ip`'s stderr: an unlinked file (a pipe nobody reads would stall it on many errors).
    errors: std::fs::File,
    /// What `feed` writes.
    routes: Vec<HostRoute>,
    taps: Vec<String>,
    count: usize,
    started: Instant,
}

/// One static route as the host stack gets it.
struct HostRoute {
    prefix: IpAddr,
    len: u8,
    /// Gateway and TAP (an index into `HostRoutes::taps`): one without a gateway for a
    /// connected route, several for multipath.
    hops: Vec<(Option<IpAddr>, usize)>,
}

impl HostRoutes {
    fn start(cfg: &Config) -> Result<HostRoutes> {
        use std::os::unix::fs::OpenOptionsExt;
        let taps: Vec<String> =
            cfg.interfaces.iter().enumerate().map(|(i, x)| x.tap_name(i)).collect();
        let index: std::collections::HashMap<&str, usize> =
            cfg.interfaces.iter().enumerate().map(|(i, x)| (x.name.as_str(), i)).collect();
        let routes = cfg
            .routes
            .iter()
            .filter_map(|r| {
                let hops = match r.next_hops() {
                    h if h.is_empty() => vec![(None, *index.get(r.interface.as_str())?)],
                    h => h
                        .iter()
                        .map(|(g, i)| Some((Some(*g), *index.get(i)?)))
                        .collect::<Option<Vec<_>>>()?,
                };
                Some(HostRoute { prefix: r.prefix.addr, len: r.prefix.len, hops })
            })
            .collect();
        // A new file (never one an attacker placed there), unlinked at once.
        let path = std::env::temp_dir()
            .join(format!("linerate-host-routes-{}.errors", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let errors = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .with_context(|| format!("creating {}", path.display()));
        let _ = std::fs::remove_file(&path);
        let errors = errors?;
        let child = crate::tools::command("ip")
            .map_err(anyhow::Error::msg)?
            .args(["-force", "-batch", "-"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(errors.try_clone().context("ip's stderr")?)
            .spawn()
            .context("running ip (iproute2)")?;
        eprintln!(
            "linerate: host stack: giving the TAPs {} routes in the background",
            cfg.routes.len()
        );
        Ok(HostRoutes {
            child,
            errors,
            routes,
            taps,
            count: cfg.routes.len(),
            started: Instant::now(),
        })
    }

    /// Writes the batch to `ip` from a thread of its own (call it from a thread without
    /// privileges: the writer inherits them).
    fn feed(&mut self) {
        use std::io::Write as _;
        let Some(stdin) = self.child.stdin.take() else { return };
        let (routes, taps) = (std::mem::take(&mut self.routes), std::mem::take(&mut self.taps));
        let spawned = std::thread::Builder::new().name("lr-host-routes".into()).spawn(move || {
            let mut out = std::io::BufWriter::with_capacity(1 << 16, stdin);
            for HostRoute { prefix, len, hops } in routes {
                // Marked as linerate's (protocol 250), so the kernel-route mirror never takes them back.
                let mut line =
                    format!("route replace {prefix}/{len} proto {}", config::PROTO_LINERATE);
                let multipath = hops.len() > 1;
                for (via, tap) in hops {
                    let via = via.map_or(String::new(), |v| format!(" via {v}"));
                    line.push_str(&format!(
                        "{}{via} dev {}",
                        if multipath { " nexthop" } else { "" },
                        taps[tap]
                    ));
                }
                if writeln!(out, "{line}").is_err() {
                    return; // `ip` is gone; `poll` reports it.
                }
            }
            let _ = out.flush();
        });
        if let Err(e) = spawned {
            eprintln!("linerate: warning: host stack routes: starting the writer: {e}");
        }
    }

    /// Whether `ip` is done; reports how it went when it is.
    fn poll(&mut self) -> bool {
        let status = match self.child.try_wait() {
            Ok(None) => return false,
            Ok(Some(status)) => status,
            Err(e) => {
                eprintln!("linerate: warning: host stack routes: waiting for ip: {e}");
                return true;
            }
        };
        if status.success() {
            eprintln!(
                "linerate: host stack: {} routes on the TAPs in {:.1} s",
                self.count,
                self.started.elapsed().as_secs_f64()
            );
        } else {
            let mut errors = String::new();
            let _ = std::io::Seek::rewind(&mut self.errors);
            let _ = std::io::Read::read_to_string(
                &mut std::io::Read::take(&mut self.errors, 4096),
                &mut errors,
            );
            let shown: Vec<&str> = errors.lines().take(6).collect();
            eprintln!(
                "linerate: warning: host stack: `ip -batch` refused some of {} routes: {}",
                self.count,
                shown.join("; ")
            );
        }
        true
    }
}

impl Drop for HostRoutes {
    fn drop(&mut self) {
        // After `router.user` took over, `ip` (still root) may not be ours to kill: then it
        // ends by itself when its stdin closes with this process, and is not waited for.
        if self.child.kill().is_ok() {
            let _ = self.child.wait();
        }
    }
}

/// Names of the TAPs, for the operator.
pub fn tap_names(cfg: &Config) -> Vec<String> {
    cfg.interfaces.iter().enumerate().map(|(i, x)| x.tap_name(i)).collect()
}

/// The addresses the kernel has on interface `ifname` (one `ip` call): with the host stack
/// on, the router's addresses belong on its TAP, and a copy on the kernel's interface would
/// have the kernel answer for them twice.
pub fn kernel_addresses(ifname: &str) -> Vec<IpAddr> {
    let out = crate::tools::command("ip")
        .ok()
        .and_then(|mut c| c.args(["-o", "addr", "show", "dev", ifname]).output().ok());
    let text = out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default();
    text.split_whitespace().filter_map(|w| w.split('/').next()?.parse().ok()).collect()
}

/// Punted frames handled per hold of the slow path's lock: the TAPs and timers wait at most
/// this long.
const SERVE_BUDGET: usize = 1024;

/// Runs the slow path until `stop`: punted frames as they come (ARP and NDP first, see
/// [`PuntReceiver::serve`]), TAP frames, timers.
pub fn run(
    slow: Arc<Mutex<SlowPath>>,
    mut io: HostIo,
    punts: PuntReceiver,
    stop: Arc<AtomicBool>,
) -> HostIo {
    let epoch = Instant::now();
    let now = || epoch.elapsed().as_nanos() as u64;
    let mut buf = vec![0u8; 65536];
    let mut next_tick = Duration::ZERO;
    {
        let mut sp = slow.lock().unwrap_or_else(|e| e.into_inner());
        sp.start(&mut io);
    }
    if let Some(routes) = io.routes.as_mut() {
        routes.feed();
    }
    let mut busy = false;
    while !stop.load(Ordering::Relaxed) {
        // Waiting for the workers' doorbell is the idle sleep: TAP frames wait at most this
        // long. A full budget last time: more is queued, no sleep.
        if !busy {
            punts.wait(Duration::from_millis(1));
        }
        let mut sp = slow.lock().unwrap_or_else(|e| e.into_inner());
        busy = punts.serve(SERVE_BUDGET, |msg| sp.handle(&mut io, msg, now())) == SERVE_BUDGET;
        for port in 0..io.taps.len() {
            for _ in 0..64 {
                let n = match &io.taps[port] {
                    Some(t) => match t.recv(&mut buf) {
                        Ok(Some(n)) => n,
                        _ => break,
                    },
                    None => break,
                };
                sp.from_host(&mut io, port as u16, &buf[..n]);
            }
        }
        if epoch.elapsed() >= next_tick {
            sp.tick(&mut io, now());
            if io.routes.as_mut().is_some_and(HostRoutes::poll) {
                io.routes = None;
            }
            next_tick = epoch.elapsed() + Duration::from_millis(100);
        }
    }
    slow.lock().unwrap_or_else(|e| e.into_inner()).stop(&mut io);
    io
}

#[cfg(test)]
mod tests {
    /// The config's largest MTU is what a frame buffer holds with an Ethernet header and a
    /// tag: the host stack's TAP takes the interface's MTU, and its packets pass through a
    /// worker's frame buffers with a firewall.
    #[test]
    fn the_largest_mtu_fits_a_frame_buffer() {
        assert_eq!(usize::from(config::MAX_MTU), io::pool::MAX_FRAME_LEN - 18);
    }
}
