//! Ports of any backend behind one type, so that a worker can mix AF_XDP, AF_PACKET and
//! in-memory ports. Dispatch is a `match` once per burst, not a virtual call per packet.

use std::fmt;

use crate::afpacket::{self, PacketConfig, PacketError, PacketRx, PacketTx};
use crate::mem::{CountingTx, ReplayRx};
use crate::xdp::{self, Umem, XdpConfig, XdpError, XdpRx, XdpTx};
use crate::{Batch, FramePool, PortStats, RxPort, TxPort};

pub enum AnyRx {
    Xdp(XdpRx),
    Packet(PacketRx),
    Replay(ReplayRx),
}

pub enum AnyTx {
    Xdp(XdpTx),
    Packet(PacketTx),
    Counting(CountingTx),
}

impl RxPort for AnyRx {
    #[inline]
    fn rx_burst(&mut self, pool: &mut FramePool, batch: &mut Batch, max: usize) -> usize {
        match self {
            AnyRx::Xdp(p) => p.rx_burst(pool, batch, max),
            AnyRx::Packet(p) => p.rx_burst(pool, batch, max),
            AnyRx::Replay(p) => p.rx_burst(pool, batch, max),
        }
    }

    fn stats(&self) -> PortStats {
        match self {
            AnyRx::Xdp(p) => p.stats(),
            AnyRx::Packet(p) => p.stats(),
            AnyRx::Replay(p) => p.stats(),
        }
    }

    fn wait_fd(&self) -> Option<std::os::fd::RawFd> {
        match self {
            AnyRx::Xdp(p) => p.wait_fd(),
            AnyRx::Packet(p) => p.wait_fd(),
            AnyRx::Replay(p) => p.wait_fd(),
        }
    }

    #[inline]
    fn take_drops(&mut self) -> crate::RxDrops {
        match self {
            AnyRx::Packet(p) => p.take_drops(),
            AnyRx::Xdp(_) | AnyRx::Replay(_) => crate::RxDrops::default(),
        }
    }
}

impl TxPort for AnyTx {
    #[inline]
    fn tx_burst(&mut self, pool: &mut FramePool, batch: &mut Batch) {
        match self {
            AnyTx::Xdp(p) => p.tx_burst(pool, batch),
            AnyTx::Packet(p) => p.tx_burst(pool, batch),
            AnyTx::Counting(p) => p.tx_burst(pool, batch),
        }
    }

    fn flush(&mut self, pool: &mut FramePool) {
        match self {
            AnyTx::Xdp(p) => p.flush(pool),
            AnyTx::Packet(p) => p.flush(pool),
            AnyTx::Counting(p) => p.flush(pool),
        }
    }

    fn stats(&self) -> PortStats {
        match self {
            AnyTx::Xdp(p) => p.stats(),
            AnyTx::Packet(p) => p.stats(),
            AnyTx::Counting(p) => p.stats(),
        }
    }
}

/// Opens the ports of one worker: every AF_XDP port shares the worker's pool as one UMEM, so
/// a frame received on one is sent on another by passing its descriptor, never copied.
#[derive(Default)]
pub struct PortOpener {
    umem: Option<Umem>,
    /// Fanout group for AF_PACKET rx sockets (several workers on one interface).
    pub fanout: Option<u16>,
    /// Spread the fanout group by the Toeplitz RSS hash instead of the kernel's flow hash.
    pub fanout_rss: bool,
    pub xdp: XdpConfig,
}

/// How a port was opened, for the operator.
pub struct PortKind(String);

impl fmt::Display for PortKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl PortOpener {
    pub fn new() -> Self {
        Self::default()
    }

    /// Opens the next AF_XDP socket on `umem` (a live socket's of the same pool) instead of
    /// registering the pool again.
    pub fn share_umem(&mut self, umem: Umem) {
        self.umem = Some(umem);
    }

    /// An AF_XDP socket on the configured queue of `ifname`.
    pub fn open_xdp(
        &mut self,
        pool: &mut FramePool,
        ifname: &str,
        port: u16,
    ) -> Result<(AnyRx, AnyTx, PortKind), XdpError> {
        let (rx, tx) = xdp::open(pool, ifname, port, &self.xdp, self.umem.as_ref())?;
        if self.umem.is_none() {
            self.umem = Some(rx.umem());
        }
        let (mode, zero_copy) = rx.mode();
        let kind = format!(
            "af_xdp queue {} ({} mode, {})",
            self.xdp.queue,
            match mode {
                xdp::XdpMode::Native => "native",
                xdp::XdpMode::Generic => "generic",
                xdp::XdpMode::Auto => "auto",
            },
            if zero_copy { "zero-copy" } else { "copy" }
        );
        Ok((AnyRx::Xdp(rx), AnyTx::Xdp(tx), PortKind(kind)))
    }

    /// AF_PACKET rx (TPACKET_V3 ring) and tx (mmap ring, qdisc bypass) sockets on `ifname`.
    pub fn open_packet(
        &mut self,
        ifname: &str,
        port: u16,
    ) -> Result<(AnyRx, AnyTx, PortKind), PacketError> {
        let cfg = PacketConfig {
            port,
            fanout: self.fanout,
            fanout_rss: self.fanout_rss,
            ..PacketConfig::default()
        };
        let (mut rx, tx) = afpacket::open(ifname, &cfg)?;
        let mut kind = match self.fanout {
            Some(g) if self.fanout_rss => {
                format!("af_packet (TPACKET_V3, fanout group {g}, Toeplitz RSS)")
            }
            Some(g) => format!("af_packet (TPACKET_V3, fanout group {g})"),
            None => "af_packet (TPACKET_V3)".to_owned(),
        };
        if let Some(flows) = self.xdp.fast_path {
            kind.push_str(&self.skb_fast_path(ifname, flows, &mut rx)?);
        }
        Ok((AnyRx::Packet(rx), AnyTx::Packet(tx), PortKind(kind)))
    }

    /// Puts the fast path at tc ingress of an AF_PACKET port and its filter on `rx`; says how
    /// it went, for the port's kind. Without tc's program (no tcx, a refused program) the port
    /// works as without a fast path; a socket the filter cannot go on is an error, as it
    /// would receive the frames tc forwards too.
    fn skb_fast_path(
        &self,
        ifname: &str,
        flows: u32,
        rx: &mut PacketRx,
    ) -> Result<String, PacketError> {
        let path = crate::sys::ifindex(ifname)
            .ok_or_else(|| XdpError::Config(format!("no interface {ifname}")))
            .and_then(|ifindex| {
                xdp::skb_path::get_or_attach(ifname, ifindex, flows, self.xdp.fail_closed)
            });
        let path = match path {
            Ok(path) => path,
            Err(e) => return Ok(format!(", no fast path: {e}")),
        };
        let prog = path.socket_filter();
        rx.set_filter(prog, path).map_err(|source| PacketError::Sys {
            what: "attaching the fast path's socket filter",
            ifname: ifname.to_owned(),
            source,
        })?;
        Ok(", fast path at tc ingress".to_owned())
    }
}

impl AnyRx {
    /// Goes on from the counters of the port this one replaces.
    pub fn inherit(&mut self, old: PortStats) {
        match self {
            AnyRx::Xdp(x) => x.inherit(old),
            AnyRx::Packet(p) => p.inherit(old),
            AnyRx::Replay(_) => {}
        }
    }

    /// The UMEM of an AF_XDP port, to open another socket of its worker on.
    pub fn umem(&self) -> Option<Umem> {
        match self {
            AnyRx::Xdp(x) => Some(x.umem()),
            AnyRx::Packet(_) | AnyRx::Replay(_) => None,
        }
    }
}

impl AnyTx {
    /// Goes on from the counters of the port this one replaces.
    pub fn inherit(&mut self, old: PortStats) {
        match self {
            AnyTx::Xdp(x) => x.inherit(old),
            AnyTx::Packet(p) => p.inherit(old),
            AnyTx::Counting(_) => {}
        }
    }
}

/// Closes a port whose interface is gone, taking back into `pool` the frames the kernel held
/// for its sockets (AF_PACKET ports hold none: they copy). `wait`: how long to wait for
/// frames still being sent.
pub fn retire(
    rx: AnyRx,
    tx: AnyTx,
    pool: &mut FramePool,
    wait: std::time::Duration,
) -> xdp::Retired {
    let mut total = xdp::Retired::default();
    let mut add = |r: xdp::Retired| {
        total.returned += r.returned;
        total.lost += r.lost;
    };
    if let AnyTx::Xdp(t) = tx {
        add(t.retire(pool, wait));
    }
    if let AnyRx::Xdp(r) = rx {
        add(r.retire(pool));
    }
    total
}
