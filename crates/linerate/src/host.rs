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
use dataplane::punt::PuntReceiver;
use dataplane::slowpath::{SlowIo, SlowPath};
use io::afpacket::RawSender;
use io::tap::Tap;

/// The slow path's I/O: raw senders per physical port, TAPs per logical port.
pub struct HostIo {
    senders: Vec<RawSender>,
    taps: Vec<Option<Tap>>,
    /// Frames that could not be sent (socket buffer full, link down) or written to a TAP.
    pub send_errors: u64,
}

impl SlowIo for HostIo {
    fn send_wire(&mut self, phys: u16, frame: &[u8]) {
        match self.senders.get(phys as usize) {
            Some(s) if s.send(frame).is_ok() => {}
            _ => self.send_errors += 1,
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
    let out = crate::tools::command("ip").map_err(anyhow::Error::msg)?.args(args).output().context("running ip (iproute2)")?;
    if !out.status.success() {
        bail!("`ip {}`: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

/// Creates and configures the TAP of every interface (`None` for all when the host stack is
/// off), then opens the raw senders.
pub fn open(cfg: &Config, ports: &[dataplane::PortInfo]) -> Result<HostIo> {
    let physical: Vec<&config::Interface> = cfg.interfaces.iter().filter(|i| i.vlan.is_none()).collect();
    let senders = physical
        .iter()
        .map(|i| RawSender::open(&i.name).with_context(|| format!("opening a raw socket on {}", i.name)))
        .collect::<Result<Vec<_>>>()?;
    let mut taps = Vec::new();
    for (i, (iface, port)) in cfg.interfaces.iter().zip(ports).enumerate() {
        if !cfg.router.host_stack {
            taps.push(None);
            continue;
        }
        let name = iface.tap_name(i);
        let tap = Tap::open(&name, i as u16).with_context(|| format!("creating host-stack TAP {name} for {}", iface.name))?;
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
    if cfg.router.host_stack {
        for r in &cfg.routes {
            if let Err(e) = host_route(cfg, r) {
                eprintln!("linerate: warning: host stack route: {e:#}");
            }
        }
    }
    Ok(HostIo { senders, taps, send_errors: 0 })
}

/// Gives the host stack a static route through the TAPs, marked as linerate's (protocol
/// `config::PROTO_LINERATE`, so `router.kernel_routes` never mirrors it back).
fn host_route(cfg: &Config, r: &config::Route) -> Result<()> {
    let tap = |name: &str| cfg.interfaces.iter().position(|x| x.name == name).map(|i| cfg.interfaces[i].tap_name(i));
    let prefix = format!("{}/{}", r.prefix.addr, r.prefix.len);
    let proto = config::PROTO_LINERATE.to_string();
    let mut args: Vec<String> = ["route", "replace", &prefix, "proto", &proto].iter().map(|s| s.to_string()).collect();
    let hops = r.next_hops();
    match &hops[..] {
        [] => args.extend(["dev".into(), tap(&r.interface).unwrap_or_default()]),
        [(gw, i)] => args.extend(["via".into(), gw.to_string(), "dev".into(), tap(i).unwrap_or_default()]),
        many => {
            for (gw, i) in many {
                args.extend(["nexthop".into(), "via".into(), gw.to_string(), "dev".into(), tap(i).unwrap_or_default()]);
            }
        }
    }
    ip(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

/// Names of the TAPs, for the operator.
pub fn tap_names(cfg: &Config) -> Vec<String> {
    cfg.interfaces.iter().enumerate().map(|(i, x)| x.tap_name(i)).collect()
}

/// The addresses the kernel has on interface `ifname` (one `ip` call): with the host stack
/// on, the router's addresses belong on its TAP, and a copy on the kernel's interface would
/// have the kernel answer for them twice.
pub fn kernel_addresses(ifname: &str) -> Vec<IpAddr> {
    let out = crate::tools::command("ip").ok().and_then(|mut c| c.args(["-o", "addr", "show", "dev", ifname]).output().ok());
    let text = out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default();
    text.split_whitespace().filter_map(|w| w.split('/').next()?.parse().ok()).collect()
}

/// Punted frames handled per hold of the slow path's lock: the TAPs and timers wait at most
/// this long.
const SERVE_BUDGET: usize = 1024;

/// Runs the slow path until `stop`: punted frames as they come (ARP and NDP first, see
/// [`PuntReceiver::serve`]), TAP frames, timers.
pub fn run(slow: Arc<Mutex<SlowPath>>, mut io: HostIo, punts: PuntReceiver, stop: Arc<AtomicBool>) -> HostIo {
    let epoch = Instant::now();
    let now = || epoch.elapsed().as_nanos() as u64;
    let mut buf = vec![0u8; 65536];
    let mut next_tick = Duration::ZERO;
    {
        let mut sp = slow.lock().unwrap_or_else(|e| e.into_inner());
        sp.start(&mut io);
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
            next_tick = epoch.elapsed() + Duration::from_millis(100);
        }
    }
    io
}
