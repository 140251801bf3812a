//! Opening the interfaces: one socket per worker on every physical interface (an AF_XDP
//! socket on queue w, or a member of the interface's AF_PACKET fanout group), each worker
//! with its own frame pool; then keeping the kernel from processing what AF_PACKET forwards.

use std::net::IpAddr;

use anyhow::{Context, Result, bail};
use config::Backend;
use io::any::{AnyRx, AnyTx, PortKind, PortOpener};

use crate::kernel_bypass::KernelBypass;

/// Frames in each worker's pool: enough to keep every AF_XDP fill ring full plus frames in
/// flight.
const POOL_FRAMES: u32 = 16 * 1024;

/// One worker's side of every physical interface, in port order, and its frame pool.
pub(super) struct WorkerPorts {
    pub rx: Vec<AnyRx>,
    pub tx: Vec<AnyTx>,
    pub pool: io::FramePool,
}

/// Every worker's ports, and what worker 0 found out about each interface.
pub(super) struct OpenedPorts {
    pub per_worker: Vec<WorkerPorts>,
    /// Each physical interface's backend, as `show interfaces` names it.
    pub kinds: Vec<String>,
    /// The interfaces opened with AF_PACKET, with their addresses: the kernel still gets a
    /// copy of their frames.
    pub packet_ifaces: Vec<(String, Vec<IpAddr>)>,
    /// Every interface spreads flows over the workers by linerate's own hash (AF_PACKET
    /// fanout by the symmetric Toeplitz program), so which worker a flow reaches is known.
    pub steered_by_toeplitz: bool,
    /// The AF_PACKET fanout groups' ids start here (one per interface).
    pub fanout_base: u16,
    /// By interface: its fanout group spreads by the Toeplitz program.
    pub fanout_rss: Vec<bool>,
}

/// How the interfaces are being opened, worker after worker.
struct Opening<'a> {
    physical: &'a [config::Interface],
    workers: usize,
    /// The config file's name, for errors.
    path: &'a str,
    /// Each interface's backend: worker 0's choice, for every worker.
    backends: &'a mut [Backend],
    /// AF_PACKET fanout groups are per interface; ids from the pid keep two linerates apart.
    fanout_base: u16,
    /// AF_PACKET fanout spreads flows with the Toeplitz RSS hash (an eBPF program), or, if
    /// the kernel refuses it, with its own flow hash (both symmetric); decided per interface
    /// by worker 0.
    fanout_rss: Vec<bool>,
    fast_path: Option<u32>,
    opened: OpenedPorts,
}

/// Opens every worker's ports. Worker 0 settles each interface's backend (`backends` is
/// updated: every worker uses the one worker 0 ended up with) and fanout hash.
/// With `fast_path` (its flow table's size), AF_XDP ports run the kernel fast path's program.
pub(super) fn open_all(
    physical: &[config::Interface],
    workers: usize,
    firewall: bool,
    fast_path: Option<u32>,
    backends: &mut [Backend],
    path: &str,
) -> Result<OpenedPorts> {
    let mut opening = Opening {
        fast_path,
        physical,
        workers,
        path,
        backends,
        fanout_base: (std::process::id() as u16).wrapping_mul(64),
        fanout_rss: vec![workers > 1; physical.len()],
        opened: OpenedPorts {
            per_worker: Vec::new(),
            kinds: Vec::new(),
            packet_ifaces: Vec::new(),
            steered_by_toeplitz: false,
            fanout_base: 0,
            fanout_rss: Vec::new(),
        },
    };
    for w in 0..workers {
        let ports = opening.worker(w, firewall)?;
        opening.opened.per_worker.push(ports);
    }
    let packet = |(b, rss): (&Backend, &bool)| *b == Backend::AfPacket && *rss;
    opening.opened.steered_by_toeplitz =
        opening.backends.iter().zip(&opening.fanout_rss).all(packet);
    opening.opened.fanout_base = opening.fanout_base;
    opening.opened.fanout_rss = opening.fanout_rss.clone();
    Ok(opening.opened)
}

impl Opening<'_> {
    /// Worker `w`'s socket on every interface, and its frame pool.
    fn worker(&mut self, w: usize, firewall: bool) -> Result<WorkerPorts> {
        let mut ports =
            WorkerPorts { rx: Vec::new(), tx: Vec::new(), pool: io::FramePool::new(POOL_FRAMES) };
        let mut opener = PortOpener::new();
        opener.xdp.queue = w as u32;
        // With a firewall, a frame no worker reads must not reach the kernel's forwarding.
        opener.xdp.fail_closed = firewall;
        opener.xdp.fast_path = self.fast_path;
        let physical = self.physical;
        for (phys, iface) in physical.iter().enumerate() {
            opener.fanout =
                (self.workers > 1).then_some(self.fanout_base.wrapping_add(phys as u16));
            opener.fanout_rss = self.fanout_rss[phys];
            opener.xdp.mode = match iface.xdp_mode {
                config::XdpMode::Auto => io::xdp::XdpMode::Auto,
                config::XdpMode::Native => io::xdp::XdpMode::Native,
                config::XdpMode::Generic => io::xdp::XdpMode::Generic,
            };
            let mut opened_port =
                open(&mut opener, &mut ports.pool, &iface.name, phys as u16, self.backends[phys]);
            if w == 0 && opener.fanout_rss && opened_port.is_err() {
                eprintln!(
                    "linerate: warning: {}: Toeplitz fanout refused ({:#}); using the kernel's flow hash",
                    iface.name,
                    opened_port.as_ref().err().expect("is_err")
                );
                self.fanout_rss[phys] = false;
                opener.fanout_rss = false;
                opened_port = open(
                    &mut opener,
                    &mut ports.pool,
                    &iface.name,
                    phys as u16,
                    self.backends[phys],
                );
            }
            let (r, t, kind) = opened_port.with_context(|| {
                format!("{}: opening interface {:?} for worker {w} (AF_XDP: queue {w}; an interface needs as many queues as workers, see `ethtool -l`)", self.path, iface.name)
            })?;
            if w == 0 {
                self.backends[phys] = self.first_opened(iface, phys, &r, kind);
            }
            ports.rx.push(r);
            ports.tx.push(t);
        }
        Ok(ports)
    }

    /// Notes what worker 0 opened on an interface; returns the backend every worker then
    /// uses.
    fn first_opened(
        &mut self,
        iface: &config::Interface,
        phys: usize,
        rx: &AnyRx,
        kind: PortKind,
    ) -> Backend {
        eprintln!("linerate: {} (port {phys}): {kind}", iface.name);
        if let AnyRx::Xdp(x) = rx
            && x.mode().0 == io::xdp::XdpMode::Generic
        {
            eprintln!(
                "linerate: note: {}: in generic XDP mode the kernel drops GSO frames (from senders on this host with TSO on) larger than a frame buffer; see docs/router.md, \"Offloads\"",
                iface.name
            );
        }
        self.opened.kinds.push(kind.to_string());
        if matches!(rx, AnyRx::Packet(_)) {
            self.opened.packet_ifaces.push((
                iface.name.clone(),
                iface.addresses.iter().map(|a| a.addr).collect::<Vec<_>>(),
            ));
            Backend::AfPacket
        } else {
            Backend::AfXdp
        }
    }
}

fn open(
    opener: &mut PortOpener,
    pool: &mut io::FramePool,
    ifname: &str,
    port: u16,
    backend: Backend,
) -> Result<(AnyRx, AnyTx, PortKind)> {
    match backend {
        Backend::AfXdp => Ok(opener.open_xdp(pool, ifname, port)?),
        Backend::AfPacket => Ok(opener.open_packet(ifname, port)?),
        Backend::Auto => match opener.open_xdp(pool, ifname, port) {
            Ok(p) => Ok(p),
            Err(e) => {
                eprintln!(
                    "linerate: warning: {ifname}: AF_XDP unavailable ({e}); falling back to AF_PACKET"
                );
                Ok(opener.open_packet(ifname, port)?)
            }
        },
        Backend::Memory => {
            bail!("backend \"memory\" is for benchmarks and tests, not for `linerate run`")
        }
    }
}

/// AF_PACKET leaves the kernel a copy of every frame: drops it early (see
/// [`crate::kernel_bypass`]), with everything when the host stack is on.
pub(super) fn bypass_kernel(
    packet_ifaces: &[(String, Vec<IpAddr>)],
    host_stack: bool,
    firewall: bool,
) -> Result<Option<KernelBypass>> {
    if packet_ifaces.is_empty() {
        return Ok(None);
    }
    match KernelBypass::install(packet_ifaces, host_stack) {
        Ok(b) => {
            eprintln!(
                "linerate: the kernel's copies of forwarded frames are dropped by {}",
                b.describe()
            );
            Ok(Some(b))
        }
        Err(e) if firewall && !crate::fail_closed::forwarding_on().is_empty() => {
            bail!(
                "cannot keep the kernel from processing the frames linerate filters ({e}), and the kernel forwards ({}): it would route them unfiltered; set router.fail_closed = true or turn forwarding off",
                crate::fail_closed::forwarding_on().join(", ")
            );
        }
        Err(e) => {
            eprintln!(
                "linerate: warning: cannot keep the kernel from processing forwarded frames ({e}); it will also route every frame linerate forwards, halving throughput"
            );
            Ok(None)
        }
    }
}

/// Each physical port as the fast path sees it (after every port is open).
pub(super) fn fast_path_targets(
    physical: &[config::Interface],
    backends: &[Backend],
) -> Vec<crate::offload::PortTarget> {
    let fast = io::xdp::fastpath::FastPath::current();
    physical
        .iter()
        .zip(backends)
        .map(|(iface, backend)| {
            let ifindex = io::netdev::ifindex(&iface.name).unwrap_or(0);
            // An AF_XDP port runs the program; an AF_PACKET one has a slot if its tc program
            // is attached (`io::xdp::skb_path`).
            let runs = matches!(*backend, Backend::AfXdp | Backend::AfPacket);
            let slot = fast.as_ref().filter(|_| runs).and_then(|f| f.slot_of(ifindex));
            let mac = iface.mac.map_or([0; 6], |m| m.0);
            crate::offload::PortTarget { ifindex, slot, mtu: iface.mtu, mac }
        })
        .collect()
}
