//! Where the kernel's receive work for the router's interfaces runs: in NAPI threads pinned
//! to the workers' CPUs below the workers' priority (`io::napi`), so that no overload can
//! starve a worker (receive livelock). Undone when the returned value is dropped.

use std::os::fd::OwnedFd;

use config::Backend;
use io::napi::{NapiError, NapiThreads};

/// The placed threads, held until linerate exits, and which workers have receive work on
/// their CPU.
pub struct ReceivePlacement {
    _threads: Vec<NapiThreads>,
    /// XDP pass programs that give veths (AF_PACKET ports) their NAPI where GRO cannot.
    _pass_links: Vec<OwnedFd>,
    /// GRO turned on to give veths (AF_PACKET ports) their NAPI.
    _gro: Vec<io::ethtool::gro::GroOn>,
    /// Per worker: some interface's receive thread runs on its CPU, so it sleeps at once
    /// when idle (the thread runs only then).
    pub on_worker: Vec<bool>,
}

/// Places the receive work of every interface in `physical` (opened with `backends`) on the
/// CPUs `cpus` of the workers reading it. Interfaces where that cannot be done keep the
/// kernel's default, with a warning.
pub fn place(
    physical: &[config::Interface],
    backends: &[Backend],
    cpus: &[usize],
) -> ReceivePlacement {
    let mut p = ReceivePlacement {
        _threads: Vec::new(),
        _pass_links: Vec::new(),
        _gro: Vec::new(),
        on_worker: vec![false; cpus.len()],
    };
    for (iface, &backend) in physical.iter().zip(backends) {
        match place_one(&iface.name, backend, cpus, &mut p) {
            Ok(t) => p._threads.push(t),
            Err(e) => eprintln!(
                "linerate: warning: {}: the kernel's receive work stays in softirq context, where an overload can starve the worker: {e}",
                iface.name
            ),
        }
    }
    p
}

/// Places the receive work of an interface created again while running (see
/// [`crate::rebuild`]), as [`place`] did at start; undone when dropped.
pub fn place_again(
    ifname: &str,
    backend: Backend,
    cpus: &[usize],
) -> Result<ReceivePlacement, String> {
    let mut p = ReceivePlacement {
        _threads: Vec::new(),
        _pass_links: Vec::new(),
        _gro: Vec::new(),
        on_worker: vec![false; cpus.len()],
    };
    let threads = place_one(ifname, backend, cpus, &mut p)?;
    p._threads.push(threads);
    Ok(p)
}

fn place_one(
    ifname: &str,
    backend: Backend,
    cpus: &[usize],
    p: &mut ReceivePlacement,
) -> Result<NapiThreads, String> {
    let ifindex = io::netdev::ifindex(ifname).map_err(|e| e.to_string())?;
    let mut threads = match NapiThreads::enable(ifname, ifindex) {
        Err(NapiError::NoNapi { .. }) if backend == Backend::AfPacket => {
            napi_for_packet_port(ifname, ifindex, p)?
        }
        other => other.map_err(|e| e.to_string())?,
    };
    place_threads(&mut threads, backend, cpus, p)?;
    Ok(threads)
}

/// A veth gets a NAPI instance from GRO (or, where GRO cannot be turned on, from an XDP
/// program, which also turns its peer's TSO off: TCP through the router then pays for
/// segmenting in software).
fn napi_for_packet_port(
    ifname: &str,
    ifindex: u32,
    p: &mut ReceivePlacement,
) -> Result<NapiThreads, String> {
    if let Ok(gro) = io::ethtool::gro::enable(ifname) {
        p._gro.extend(gro);
        if let Ok(threads) = NapiThreads::enable(ifname, ifindex) {
            return Ok(threads);
        }
    }
    let link = io::xdp::attach_pass(ifname).map_err(|e| format!("no NAPI, and {e}"))?;
    p._pass_links.push(link);
    NapiThreads::enable(ifname, ifindex).map_err(|e| e.to_string())
}

/// Pins each NAPI thread of an interface to a CPU of the workers reading it.
fn place_threads(
    threads: &mut NapiThreads,
    backend: Backend,
    cpus: &[usize],
    p: &mut ReceivePlacement,
) -> Result<(), String> {
    let napis: Vec<(u32, Option<u32>)> =
        threads.napis().iter().map(|n| (n.id, n.rx_queues.first().copied())).collect();
    for (i, (id, queue)) in napis.into_iter().enumerate() {
        // AF_XDP: worker w reads queue w. AF_PACKET: every worker reads every queue through
        // its fanout group; spread the NAPI threads over them.
        let worker = match (backend, queue) {
            (Backend::AfXdp, Some(q)) => q as usize,
            _ => i,
        } % cpus.len();
        threads.place(id, cpus[worker]).map_err(|e| e.to_string())?;
        p.on_worker[worker] = true;
    }
    Ok(())
}
