//! Rebuilding a port in place (issue 46) when its interface is deleted and created again
//! under the same name (a NIC re-plugged, a veth a container runtime recreated, a driver
//! reloaded): the old interface's sockets, XDP program and NAPI threads are gone with it, so
//! each worker opens its socket on the new interface and takes back the frames the old one
//! held, the fast path's slot moves to the new ifindex, and the NAPI threads are placed
//! again. The router's states, translations, routes and counters stay.
//!
//! An AF_PACKET port's sockets join a new fanout group (the old one was bound to the old
//! interface), its tc fast path and socket filter come with them, and the tc program that
//! drops the kernel's copy of its frames is attached to the new interface.
//!
//! Opening a socket needs the capabilities `run` dropped: with `router.rebuild_ports` it
//! keeps them in its permitted set, and a worker raises them on its own thread only for the
//! moment it opens its side (`crate::privilege::raised`).

use std::net::IpAddr;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow, bail};
use config::Backend;
use dataplane::worker::PortJob;
use io::any::{AnyRx, AnyTx, PortOpener};
use io::xdp::Retired;
use io::{RxPort, TxPort};

/// How long a worker may take to run its job (it runs between two polls: milliseconds).
const JOB_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a retired socket's frames being sent may take to complete.
const SEND_WAIT: Duration = Duration::from_millis(50);

/// What rebuilding needs of the running router.
pub struct Rebuilder {
    /// Each worker's queue of port jobs.
    pub jobs: Vec<Sender<PortJob<AnyRx, AnyTx>>>,
    pub physical: Vec<config::Interface>,
    pub backends: Vec<Backend>,
    /// A frame no worker reads must not reach the kernel's forwarding (a firewall).
    pub fail_closed: bool,
    /// The fast path's flow table size, if on.
    pub fast_path: Option<u32>,
    /// The workers' CPUs, for the NAPI threads (with `router.napi_threads`).
    pub napi_cpus: Option<Vec<usize>>,
    pub offload: Option<Arc<crate::offload::Offload>>,
    /// The receive work placed for rebuilt interfaces, put back at exit like the others.
    pub placed: Mutex<Vec<crate::receive::ReceivePlacement>>,
    /// AF_PACKET: the fanout groups' first id and, by interface, whether a group spreads by
    /// the Toeplitz program.
    pub fanout: (u16, Vec<bool>),
    /// Rebuilds so far (each takes new fanout group ids).
    pub rebuilt: AtomicU16,
    /// AF_PACKET: the kernel's copies are dropped by tc programs (`Some(everything)`: with
    /// the host stack on, every frame), attached again to a rebuilt interface.
    pub bypass: Option<bool>,
    pub bypassed: Mutex<Vec<io::xdp::kernel_copy::KernelCopyDrop>>,
    /// Where the slow path takes its raw sender on a rebuilt interface (ARP, NDP, ICMP).
    pub senders: Arc<crate::host::SenderSwaps>,
}

/// One worker's side of a rebuilt port.
struct Opened {
    kind: String,
    retired: Retired,
}

impl Rebuilder {
    /// Rebuilds physical port `phys`, whose interface is now `ifindex` (it was `old`).
    /// Returns a line for the log.
    pub fn rebuild(&self, phys: usize, old: u32, ifindex: u32) -> Result<String> {
        let started = Instant::now();
        let iface = self.physical.get(phys).ok_or_else(|| anyhow!("no port {phys}"))?;
        let backend = *self.backends.get(phys).ok_or_else(|| anyhow!("no port {phys}"))?;
        if io::netdev::ifindex(&iface.name).ok() != Some(ifindex) {
            bail!("interface {} changed again while being rebuilt", iface.name);
        }
        if io::netdev::name_of(old).is_some() {
            // Renamed, not deleted: the kernel still uses the old sockets' rings.
            bail!("its old interface (ifindex {old}) still exists under another name");
        }
        let mac = self.keep_mac(iface)?;
        if let Some(fast) = io::xdp::fastpath::FastPath::current() {
            fast.move_slot(old, ifindex)
                .map_err(|e| anyhow!("moving its fast path slot to the new interface: {e}"))?;
        }
        let mut kinds = Vec::new();
        let mut retired = Retired::default();
        let group = self.fanout_group(phys);
        for (w, jobs) in self.jobs.iter().enumerate() {
            let opened = self.on_worker(w, jobs, phys, group)?;
            retired.returned += opened.retired.returned;
            retired.lost += opened.retired.lost;
            kinds.push(opened.kind);
        }
        let sender =
            crate::privilege::raised(|| io::afpacket::RawSender::open_even_down(&iface.name))
                .map_err(|e| anyhow!("the slow path's raw socket: {e}"))?;
        self.senders.offer(phys, sender);
        if let Some(o) = &self.offload {
            o.port_rebuilt(phys, ifindex);
        }
        let bypass = self.bypass_again(iface, backend)?;
        let napi = self.place_napi(&iface.name, backend);
        Ok(format!(
            "interface {} rebuilt as ifindex {ifindex} in {} ms: {}{mac}{bypass}{napi}; frames of the old sockets: {} back in the pools, {} lost",
            iface.name,
            started.elapsed().as_millis(),
            kinds.first().map_or("", String::as_str),
            retired.returned,
            retired.lost,
        ))
    }

    /// Gives the new interface the port's MAC address if it came with another one, so that
    /// the neighbours' caches stay right. Returns a note for the log.
    fn keep_mac(&self, iface: &config::Interface) -> Result<String> {
        let Some(want) = iface.mac else { return Ok(String::new()) };
        let has = io::netdev::mac_address(&iface.name)?;
        if has == want.0 {
            return Ok(String::new());
        }
        crate::privilege::raised(|| io::netdev::set_mac_address(&iface.name, want.0))
            .map_err(|e| anyhow!("giving it the port's MAC address {want}: {e}"))?;
        Ok(format!(", its MAC set back to {want}"))
    }

    /// A new fanout group id for an AF_PACKET port (`None`: one worker, no group), past every
    /// id taken at start and by earlier rebuilds.
    fn fanout_group(&self, phys: usize) -> Option<(u16, bool)> {
        if self.jobs.len() < 2 {
            return None;
        }
        let n = self.physical.len() as u16;
        let round = self.rebuilt.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
        let id = self.fanout.0.wrapping_add(n.wrapping_mul(round)).wrapping_add(phys as u16);
        Some((id, self.fanout.1.get(phys).copied().unwrap_or(false)))
    }

    /// Has worker `w` open its socket on the new interface and retire the old one.
    fn on_worker(
        &self,
        w: usize,
        jobs: &Sender<PortJob<AnyRx, AnyTx>>,
        phys: usize,
        group: Option<(u16, bool)>,
    ) -> Result<Opened> {
        let (done_tx, done) = channel();
        let mut opener = PortOpener::new();
        opener.fanout = group.map(|g| g.0);
        opener.fanout_rss = group.is_some_and(|g| g.1);
        opener.xdp.queue = w as u32;
        opener.xdp.fail_closed = self.fail_closed;
        opener.xdp.fast_path = self.fast_path;
        let iface = &self.physical[phys];
        opener.xdp.mode = match iface.xdp_mode {
            config::XdpMode::Auto => io::xdp::XdpMode::Auto,
            config::XdpMode::Native => io::xdp::XdpMode::Native,
            config::XdpMode::Generic => io::xdp::XdpMode::Generic,
        };
        let (name, backend) = (iface.name.clone(), self.backends[phys]);
        let job: PortJob<AnyRx, AnyTx> = Box::new(move |rx, tx, pool| {
            let _ = done_tx.send(reopen(opener, (&name, backend), phys, rx, tx, pool));
        });
        jobs.send(job).map_err(|_| anyhow!("worker {w} has stopped"))?;
        match done.recv_timeout(JOB_TIMEOUT) {
            Ok(r) => r.map_err(|e| anyhow!("worker {w}: {e}")),
            Err(_) => bail!("worker {w} did not rebuild its side within {JOB_TIMEOUT:?}"),
        }
    }

    /// AF_PACKET: the tc program that drops the kernel's copy of the port's frames, on the new
    /// interface. Returns a note for the log.
    fn bypass_again(&self, iface: &config::Interface, backend: Backend) -> Result<String> {
        let Some(everything) = self.bypass.filter(|_| backend == Backend::AfPacket) else {
            return Ok(String::new());
        };
        let addrs: Vec<IpAddr> = iface.addresses.iter().map(|a| a.addr).collect();
        let ifaces = [(iface.name.clone(), addrs)];
        let drop = crate::privilege::raised(|| {
            io::xdp::kernel_copy::KernelCopyDrop::attach(&ifaces, everything)
        })
        .map_err(|e| anyhow!("the kernel's copies of its frames: {e}"))?;
        self.bypassed.lock().unwrap_or_else(|e| e.into_inner()).push(drop);
        Ok(", the kernel's copies dropped".to_owned())
    }

    /// Moves the new interface's receive work into NAPI threads on the workers' CPUs, as at
    /// start (`crate::receive`). Returns a note for the log.
    fn place_napi(&self, ifname: &str, backend: Backend) -> String {
        let Some(cpus) = &self.napi_cpus else { return String::new() };
        match crate::privilege::raised(|| crate::receive::place_again(ifname, backend, cpus)) {
            Ok(t) => {
                self.placed.lock().unwrap_or_else(|e| e.into_inner()).push(t);
                ", NAPI threads placed".to_owned()
            }
            Err(e) => format!(", NAPI threads not placed: {e}"),
        }
    }
}

/// On the worker's thread: its socket on the new interface (AF_XDP: sharing its pool's UMEM
/// with a live port if there is one), in place of the old one, whose frames go back to the
/// pool.
fn reopen(
    mut opener: PortOpener,
    (ifname, backend): (&str, Backend),
    phys: usize,
    rx: &mut [AnyRx],
    tx: &mut [AnyTx],
    pool: &mut io::FramePool,
) -> Result<Opened, String> {
    if phys >= rx.len() || phys >= tx.len() {
        return Err(format!("no port {phys}"));
    }
    let opened = if backend == Backend::AfPacket {
        crate::privilege::raised(|| opener.open_packet(ifname, phys as u16))
            .map_err(|e| e.to_string())
    } else {
        // A socket can share the UMEM of a bound socket only: not the one whose interface went.
        let live = rx.iter().enumerate().filter(|&(i, _)| i != phys).find_map(|(_, r)| r.umem());
        if let Some(u) = live {
            opener.share_umem(u);
        }
        crate::privilege::raised(|| opener.open_xdp(pool, ifname, phys as u16))
            .map_err(|e| e.to_string())
    };
    let (mut new_rx, mut new_tx, kind) = opened?;
    new_rx.inherit(rx[phys].stats());
    new_tx.inherit(tx[phys].stats());
    let old_rx = std::mem::replace(&mut rx[phys], new_rx);
    let old_tx = std::mem::replace(&mut tx[phys], new_tx);
    let retired = io::any::retire(old_rx, old_tx, pool, SEND_WAIT);
    Ok(Opened { kind: kind.to_string(), retired })
}
