//! Why packets did not go out, and where the others went: one counter per named reason.
//!
//! As VPP's error counters: every packet that leaves the forwarding path other than through a
//! tx port is counted under exactly one [`DropReason`], so that rx = forwarded + local +
//! slow_path + the sum of the drops, always. The worker counts in plain integers while it handles a batch
//! and publishes them to [`WorkerCounters`] (atomics, one writer) after each batch, so a
//! reader on another thread sees figures at most one batch old without slowing the worker.

use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! drop_reasons {
    ($($variant:ident => $name:literal, $doc:literal;)*) => {
        /// A reason a packet was not forwarded.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum DropReason { $(#[doc = $doc] $variant,)* }

        impl DropReason {
            /// Every reason, in counter order.
            pub const ALL: &'static [DropReason] = &[$(DropReason::$variant,)*];
            /// Stable snake_case name used in output, JSON and metrics.
            pub fn name(self) -> &'static str {
                match self { $(DropReason::$variant => $name,)* }
            }
        }
    };
}

drop_reasons! {
    Truncated => "truncated", "Frame shorter than the headers it announces.";
    UnknownEthertype => "unknown_ethertype", "Neither IPv4, IPv6 nor ARP.";
    UnknownVlan => "unknown_vlan", "802.1Q tag with no sub-interface configured for it.";
    NotForUs => "not_for_us", "Unicast frame to another station's MAC address.";
    BadVersion => "bad_version", "IP version field does not match the ethertype (RFC 1812 5.2.2).";
    BadLength => "bad_length", "IP header or total length inconsistent (RFC 1812 5.2.2).";
    BadChecksum => "bad_checksum", "IPv4 header checksum wrong (RFC 1812 5.2.2).";
    MartianSource => "martian_source", "Source that must never be forwarded (RFC 1812 5.3.7).";
    MartianDestination => "martian_destination", "Destination that must never be forwarded.";
    TtlExpired => "ttl_expired", "TTL or hop limit would reach zero (RFC 1812 5.3.1).";
    NoRoute => "no_route", "No FIB entry covers the destination.";
    NoNeighbour => "no_neighbour", "Next hop's link-layer address unknown.";
    TxError => "tx_error", "Output port could not take the frame.";
    TooBig => "too_big", "Larger than the output MTU and not to be fragmented (IPv4 DF, or IPv6).";
    FilterBlocked => "filter_blocked", "Blocked by a firewall rule (in or out).";
    StateOutOfWindow => "state_out_of_window", "TCP segment outside its state's windows (pf's BADSTATE).";
    Synproxy => "synproxy", "A packet of a `synproxy state` connection in its handshake: the handshake packets the router answers itself (the client's SYN and ACK, the server's SYN-ACK) and anything else, dropped (pf's SYNPROXY).";
    RouteTo => "route_to", "A packet of a state whose rule has `route-to` or `reply-to`, when the routing table reaches the gateway through another interface than the rule names, or not at all.";
    StateLimit => "state_limit", "A keep-state rule passed it but the state table is full.";
    RuleStateMax => "rule_state_max", "A keep-state rule with `max N` passed it, but the rule has N states already (pf's max).";
    SrcStateLimit => "src_state_limit", "A keep-state rule with `max-src-states N` passed it, but its source has N states of the rule already (pf's SRCLIMIT).";
    SrcNodeLimit => "src_node_limit", "A source-tracking rule passed it from a new source, but the rule has its `max-src-nodes` sources, or `set limit src-nodes` are in use (pf's SRCLIMIT).";
    SrcConnLimit => "src_conn_limit", "It established a TCP connection beyond its source's `max-src-conn`: the state is removed (pf's SRCLIMIT).";
    SrcConnRateLimit => "src_conn_rate_limit", "It established a TCP connection beyond its source's `max-src-conn-rate`: the state is removed (pf's SRCLIMIT).";
    OffloadMalformed => "offload_malformed", "Sent by this host with offload metadata (virtio_net_hdr) that does not match the frame.";
    FrameTooLong => "frame_too_long", "Longer than a frame buffer holds (1984 bytes): the link's MTU is above the interface's (linerate takes no jumbo frames).";
    GsoUnsupported => "gso_unsupported", "A GSO frame linerate does not segment: not TCP or UDP, IPv6 extension headers, or datagrams larger than a frame buffer.";
    FragmentNoFirst => "fragment_no_first", "Later fragment whose first fragment did not come in time (pf's frag timeout), or that found no room to wait for it.";
    FragmentTiny => "fragment_tiny", "First IPv4 fragment too short for its L4 header (RFC 1858).";
    FragmentOverlap => "fragment_overlap", "IPv4 TCP fragment at offset 8, over the flags (RFC 1858).";
    IpOptions => "ip_options", "IP options or IPv6 routing / hop-by-hop options, and the rule or state passing it lacks allow-opts (pf).";
    NatExhausted => "nat_exhausted", "A nat rule matched but no translation was free: every port of its range in use towards that destination, or the translation table full.";
    NatNoAddress => "nat_no_address", "A nat rule translates to `(interface)` and the interface has no address of its family.";
    NatFragment => "nat_fragment", "A fragment of a flow NAT would translate: linerate does not reassemble.";
    NatUntranslatable => "nat_untranslatable", "A packet of a flow `af-to` translates that NAT64 does not translate (an IPv6 extension header, an ICMP message other than echo and the errors RFC 7915 maps, or a frame that would outgrow its buffer).";
    ScrubBadTcp => "scrub_bad_tcp", "A TCP segment a scrub rule matched with flags pf's normalization drops (SYN with RST or FIN; FIN, PSH or URG without ACK; none of SYN, ACK, RST) or a data offset below 5.";
    Blackhole => "blackhole", "Discarded by a blackhole route (config, or a kernel route of type blackhole).";
    LinkLocal => "link_local", "A link-local source or destination (IPv4 169.254/16, RFC 3927 2.7; IPv6 fe80::/10, RFC 4291 2.5.6) on a packet not for one of the router's addresses: never forwarded.";
}

/// Number of drop reasons.
pub const DROP_REASONS: usize = DropReason::ALL.len();

/// Counters of one worker as plain integers: what the fast path increments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub rx: u64,
    pub forwarded: u64,
    /// Packets for the router itself (and ARP/NDP, broadcast, multicast): the "local" exit.
    pub local: u64,
    /// Handed to the slow path to be sent later: waiting for ARP/NDP, or to be fragmented.
    pub slow_path: u64,
    pub drops: [u64; DROP_REASONS],
}

// By hand: `Default` is derived for arrays of at most 32 elements.
impl Default for Counts {
    fn default() -> Self {
        Counts { rx: 0, forwarded: 0, local: 0, slow_path: 0, drops: [0; DROP_REASONS] }
    }
}

impl Counts {
    #[inline(always)]
    pub fn drop(&mut self, reason: DropReason) {
        self.drops[reason as usize] += 1;
    }

    pub fn dropped(&self) -> u64 {
        self.drops.iter().sum()
    }

    /// (reason, count) for every reason.
    pub fn drops_by_reason(&self) -> impl Iterator<Item = (DropReason, u64)> + '_ {
        DropReason::ALL.iter().map(|&r| (r, self.drops[r as usize]))
    }

    /// The frames an rx port dropped itself (see [`io::RxPort::take_drops`]): received, and
    /// dropped under their reasons, so that the sum over the reasons still adds up.
    pub fn from_rx_drops(d: &io::RxDrops) -> Counts {
        let mut c = Counts {
            rx: d.offload_malformed + d.gso_unsupported + d.too_long + d.runt,
            ..Counts::default()
        };
        c.drops[DropReason::OffloadMalformed as usize] = d.offload_malformed;
        c.drops[DropReason::GsoUnsupported as usize] = d.gso_unsupported;
        c.drops[DropReason::FrameTooLong as usize] = d.too_long;
        c.drops[DropReason::Truncated as usize] = d.runt;
        c
    }

    /// Element-wise difference, for rates and per-run figures.
    pub fn since(&self, earlier: &Counts) -> Counts {
        let mut out = Counts {
            rx: self.rx - earlier.rx,
            forwarded: self.forwarded - earlier.forwarded,
            local: self.local - earlier.local,
            slow_path: self.slow_path - earlier.slow_path,
            drops: [0; DROP_REASONS],
        };
        for (i, d) in out.drops.iter_mut().enumerate() {
            *d = self.drops[i] - earlier.drops[i];
        }
        out
    }

    /// Element-wise sum (to total several workers).
    pub fn add(&mut self, other: &Counts) {
        self.rx += other.rx;
        self.forwarded += other.forwarded;
        self.local += other.local;
        self.slow_path += other.slow_path;
        for (d, o) in self.drops.iter_mut().zip(other.drops.iter()) {
            *d += o;
        }
    }
}

/// A worker's counters as published for other threads.
#[derive(Debug)]
pub struct WorkerCounters {
    rx: AtomicU64,
    forwarded: AtomicU64,
    local: AtomicU64,
    slow_path: AtomicU64,
    drops: [AtomicU64; DROP_REASONS],
    /// Per physical port, published on request (see [`WorkerCounters::port_snapshot`]).
    ports: Box<[PortCounters]>,
    icmp_sent: AtomicU64,
    icmp_suppressed: AtomicU64,
    /// Per physical port: what the node did with the frames received on it.
    port_counts: std::sync::Mutex<Vec<Counts>>,
    /// Port-statistics requests made and served: the worker publishes when they differ.
    requested: AtomicU64,
    served: AtomicU64,
}

// By hand: `Default` is derived for arrays of at most 32 elements.
impl Default for WorkerCounters {
    fn default() -> Self {
        WorkerCounters {
            rx: AtomicU64::default(),
            forwarded: AtomicU64::default(),
            local: AtomicU64::default(),
            slow_path: AtomicU64::default(),
            drops: std::array::from_fn(|_| AtomicU64::new(0)),
            ports: Box::default(),
            icmp_sent: AtomicU64::default(),
            icmp_suppressed: AtomicU64::default(),
            port_counts: std::sync::Mutex::default(),
            requested: AtomicU64::default(),
            served: AtomicU64::default(),
        }
    }
}

#[derive(Debug, Default)]
struct PortCounters {
    rx_packets: AtomicU64,
    rx_bytes: AtomicU64,
    rx_dropped: AtomicU64,
    tx_packets: AtomicU64,
    tx_bytes: AtomicU64,
    tx_dropped: AtomicU64,
}

/// One worker's view of its ports (its queue of each interface) and of its ICMP limiter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PortSnapshot {
    pub ports: Vec<io::PortStats>,
    /// Per physical port: the node's counters for frames received on it.
    pub counts: Vec<Counts>,
    pub icmp_sent: u64,
    pub icmp_suppressed: u64,
}

impl WorkerCounters {
    /// Counters for a worker with `ports` physical ports.
    pub fn new(ports: usize) -> Self {
        WorkerCounters {
            ports: (0..ports).map(|_| PortCounters::default()).collect(),
            ..Default::default()
        }
    }

    /// Whether a reader asked for port statistics since the last publication (two loads;
    /// the worker checks once per poll).
    #[inline]
    pub fn port_stats_wanted(&self) -> bool {
        self.requested.load(Ordering::Relaxed) != self.served.load(Ordering::Relaxed)
    }

    /// The worker's answer to a request: its ports' statistics and ICMP counts.
    pub fn publish_ports(
        &self,
        stats: impl Iterator<Item = io::PortStats>,
        counts: &[Counts],
        icmp: (u64, u64),
    ) {
        let want = self.requested.load(Ordering::Acquire);
        counts.clone_into(&mut self.port_counts.lock().unwrap_or_else(|e| e.into_inner()));
        for (c, s) in self.ports.iter().zip(stats) {
            c.rx_packets.store(s.rx_packets, Ordering::Relaxed);
            c.rx_bytes.store(s.rx_bytes, Ordering::Relaxed);
            c.rx_dropped.store(s.rx_dropped, Ordering::Relaxed);
            c.tx_packets.store(s.tx_packets, Ordering::Relaxed);
            c.tx_bytes.store(s.tx_bytes, Ordering::Relaxed);
            c.tx_dropped.store(s.tx_dropped, Ordering::Relaxed);
        }
        self.icmp_sent.store(icmp.0, Ordering::Relaxed);
        self.icmp_suppressed.store(icmp.1, Ordering::Relaxed);
        self.served.store(want, Ordering::Release);
    }

    /// Asks the worker for fresh port statistics and waits up to `wait` for them (a worker
    /// that is not polling, e.g. stopped, leaves the last published figures).
    pub fn port_snapshot(&self, wait: std::time::Duration) -> PortSnapshot {
        let want = self.requested.fetch_add(1, Ordering::AcqRel) + 1;
        let deadline = std::time::Instant::now() + wait;
        while self.served.load(Ordering::Acquire) < want && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        let ports = self
            .ports
            .iter()
            .map(|c| io::PortStats {
                rx_packets: c.rx_packets.load(Ordering::Relaxed),
                rx_bytes: c.rx_bytes.load(Ordering::Relaxed),
                rx_dropped: c.rx_dropped.load(Ordering::Relaxed),
                tx_packets: c.tx_packets.load(Ordering::Relaxed),
                tx_bytes: c.tx_bytes.load(Ordering::Relaxed),
                tx_dropped: c.tx_dropped.load(Ordering::Relaxed),
            })
            .collect();
        PortSnapshot {
            ports,
            counts: self.port_counts.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            icmp_sent: self.icmp_sent.load(Ordering::Relaxed),
            icmp_suppressed: self.icmp_suppressed.load(Ordering::Relaxed),
        }
    }

    /// Publishes the worker's running totals. Only the owning worker calls this: a plain
    /// store per counter, no read-modify-write.
    pub fn publish(&self, c: &Counts) {
        self.rx.store(c.rx, Ordering::Relaxed);
        self.forwarded.store(c.forwarded, Ordering::Relaxed);
        self.local.store(c.local, Ordering::Relaxed);
        self.slow_path.store(c.slow_path, Ordering::Relaxed);
        for (a, &v) in self.drops.iter().zip(c.drops.iter()) {
            a.store(v, Ordering::Relaxed);
        }
    }

    /// A copy of the last published totals.
    pub fn snapshot(&self) -> Counts {
        let mut drops = [0; DROP_REASONS];
        for (d, a) in drops.iter_mut().zip(self.drops.iter()) {
            *d = a.load(Ordering::Relaxed);
        }
        Counts {
            rx: self.rx.load(Ordering::Relaxed),
            forwarded: self.forwarded.load(Ordering::Relaxed),
            local: self.local.load(Ordering::Relaxed),
            slow_path: self.slow_path.load(Ordering::Relaxed),
            drops,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_snake_case() {
        let mut names: Vec<_> = DropReason::ALL.iter().map(|r| r.name()).collect();
        assert!(names.iter().all(|n| n.chars().all(|c| c.is_ascii_lowercase() || c == '_')));
        names.sort();
        names.dedup();
        assert_eq!(names.len(), DROP_REASONS);
    }

    #[test]
    fn publish_snapshot_and_since() {
        let shared = WorkerCounters::default();
        let mut c = Counts { rx: 10, forwarded: 7, local: 1, ..Default::default() };
        c.drop(DropReason::NoRoute);
        c.drop(DropReason::NoRoute);
        shared.publish(&c);
        let snap = shared.snapshot();
        assert_eq!(snap, c);
        assert_eq!(snap.dropped(), 2);
        let later = Counts { rx: 15, forwarded: 12, ..snap };
        assert_eq!(later.since(&snap).forwarded, 5);
    }

    #[test]
    fn port_drops_count_as_received_and_dropped() {
        let c = Counts::from_rx_drops(&io::RxDrops {
            offload_malformed: 2,
            gso_unsupported: 3,
            too_long: 4,
            runt: 1,
        });
        assert_eq!((c.rx, c.dropped()), (10, 10));
        assert_eq!(c.drops[DropReason::FrameTooLong as usize], 4);
        assert_eq!(c.drops[DropReason::GsoUnsupported as usize], 3);
        assert_eq!(c.drops[DropReason::OffloadMalformed as usize], 2);
    }
}
