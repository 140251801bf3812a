//! The exception path: frames the forwarding node hands to the slow path instead of a tx port.
//!
//! VPP calls this "punt". The fast path decides *that* something needs the control plane (a
//! frame for the router, an ICMP error to send, a next hop to resolve, a packet to fragment)
//! and hands the frame over with a [`Punt`] saying why; the slow path ([`crate::slowpath`],
//! another thread) does the rest. The worker stays simple and fast: it never builds replies,
//! never waits and never holds a lock.
//!
//! [`PuntPort`] is where a worker's punts go: in benchmarks and tests a counting sink, in
//! `linerate run` a [`PuntSender`], the worker's punt stage. It sorts each frame into a
//! [`PuntClass`], throttles packets per unresolved next hop, polices each class with a token
//! bucket and copies what passes into that class's bounded queue to the slow path (the frame
//! goes back to the worker's pool at once). The slow path ([`PuntReceiver::serve`]) takes
//! ARP and neighbour discovery first, so a flood of one class (packets towards unresolved
//! addresses, traffic to the router) cannot starve resolution and break forwarding to real
//! neighbours. Every frame a class refuses is counted under a [`PuntDrop`] reason; the fast
//! path never blocks.

use io::batch::MAX_BATCH;
use io::mem::CountingTx;
use io::{Batch, FrameDesc, FramePool, TxPort};
use lpm::NextHop;
use wire::icmp_reply::IcmpError;
use wire::{EtherType, IpProtocol, Ipv6Packet};

mod police;
mod queue;
mod stats;
pub use police::{NextHopThrottle, PuntPolicy, RateLimit};
pub use queue::{PuntClock, PuntReceiver, PuntSender, punt_channel};
pub use stats::{PuntDrop, PuntDrops, PuntStats};

/// Why a frame left the fast path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Punt {
    /// For the router itself: its addresses, ARP, NDP and other multicast, broadcast.
    Local,
    /// Dropped (and counted); the slow path may send this ICMP error about it.
    Error(IcmpError),
    /// A TCP segment a `block return` rule refused: the slow path answers it with a reset of
    /// this TTL (0: 64) ([`wire::tcp_reset`]).
    Reset { ttl: u8 },
    /// The next hop's link-layer address is unknown: resolve it, then send the frame (its
    /// TTL already decremented) on logical port `port`.
    Unresolved { next_hop: NextHop, port: u16 },
    /// The same for a packet `route-to` or `reply-to` sends to `gateway`: resolve the
    /// gateway (not the packet's destination, which a connected route's next hop would be).
    Via { gateway: std::net::IpAddr, port: u16 },
    /// IPv4 without DF, larger than the MTU of logical port `port`: fragment (RFC 791) and
    /// send to `mac` (TTL already decremented).
    Fragment { port: u16, mac: wire::MacAddr },
}

/// The punts of one batch: frames with their reason and logical input port.
pub struct PuntBatch {
    items: Vec<(FrameDesc, Punt, u16)>,
}

impl Default for PuntBatch {
    fn default() -> Self {
        PuntBatch { items: Vec::with_capacity(MAX_BATCH) }
    }
}

impl PuntBatch {
    #[inline]
    pub fn push(&mut self, desc: FrameDesc, punt: Punt, in_port: u16) {
        self.items.push((desc, punt, in_port));
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn drain(&mut self) -> std::vec::Drain<'_, (FrameDesc, Punt, u16)> {
        self.items.drain(..)
    }
}

/// Where a worker's punted frames go.
pub trait PuntPort {
    /// Takes every frame of `punts` (leaving it empty), returning each to `pool` when done.
    fn punt_burst(&mut self, pool: &mut FramePool, punts: &mut PuntBatch);
}

/// Benchmarks and tests: punted frames are counted (as sent) and freed.
impl PuntPort for CountingTx {
    fn punt_burst(&mut self, pool: &mut FramePool, punts: &mut PuntBatch) {
        let mut batch = Batch::new();
        for (desc, _, _) in punts.drain() {
            batch.push(desc);
        }
        self.tx_burst(pool, &mut batch);
    }
}

/// A punted frame as the slow path receives it: a copy, so the worker's pool never waits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PuntedFrame {
    pub punt: Punt,
    /// Physical port it arrived on.
    pub phys: u16,
    /// Logical port it arrived on.
    pub in_port: u16,
    pub frame: Vec<u8>,
}

/// What a punted frame is, for its queue and its policer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PuntClass {
    /// ARP and IPv6 neighbour discovery: what resolution and forwarding to neighbours need.
    ArpNd,
    /// Everything else for the router: pings, the host stack's traffic, broadcast, multicast.
    Local,
    /// Waiting for its next hop's link-layer address.
    Resolve,
    /// To fragment.
    Fragment,
    /// To send an ICMP error (or a firewall's TCP reset) about.
    IcmpError,
}

impl PuntClass {
    /// Every class, in the order the slow path serves them.
    pub const ALL: [PuntClass; 5] = [
        PuntClass::ArpNd,
        PuntClass::Local,
        PuntClass::Resolve,
        PuntClass::Fragment,
        PuntClass::IcmpError,
    ];

    /// Stable snake_case name (counters, config keys).
    pub fn name(self) -> &'static str {
        match self {
            PuntClass::ArpNd => "arp_nd",
            PuntClass::Local => "local",
            PuntClass::Resolve => "resolve",
            PuntClass::Fragment => "fragment",
            PuntClass::IcmpError => "icmp_error",
        }
    }

    /// The class of a frame punted for `punt`. Only frames for the router are looked at:
    /// ARP, and ICMPv6 of the neighbour-discovery types (RFC 4861 4: 133 to 137) right after
    /// the IPv6 header, as RFC 4861 validation wants it (extension headers fail it anyway).
    pub fn of(punt: Punt, frame: &[u8]) -> PuntClass {
        match punt {
            Punt::Local if is_arp_nd(frame) => PuntClass::ArpNd,
            Punt::Local => PuntClass::Local,
            Punt::Unresolved { .. } | Punt::Via { .. } => PuntClass::Resolve,
            Punt::Fragment { .. } => PuntClass::Fragment,
            Punt::Error(_) | Punt::Reset { .. } => PuntClass::IcmpError,
        }
    }
}

fn is_arp_nd(frame: &[u8]) -> bool {
    let Ok(l2) = wire::parse_l2(frame) else { return false };
    match l2.ethertype {
        EtherType::Arp => true,
        EtherType::Ipv6 => Ipv6Packet::new_checked(&frame[l2.l3_offset..]).is_ok_and(|ip| {
            ip.next_header() == IpProtocol::Icmpv6
                && ip.payload().first().is_some_and(|t| (133..=137).contains(t))
        }),
        _ => false,
    }
}

#[cfg(test)]
mod tests;
