//! The forwarding node: parse -> validate -> route -> neighbour rewrite, over a whole batch.
//!
//! Shaped like a VPP graph node: it takes a vector of frames and decides a next step for each
//! (an output port, the local exit, or a drop counted under its reason). It runs in three
//! passes so that the FIB lookups of a batch are issued together and their cache misses
//! overlap (the LPM's batched lookup prefetches 8 tbl24 lines at a time):
//!   1. classify (`forward/classify.rs`): L2 parse, RFC 1812 5.2.2 validation, martian
//!      checks; collect destinations (frame data of packet i+4 is prefetched while packet i
//!      is parsed);
//!   2. look up every IPv4 and every IPv6 destination of the batch;
//!   3. apply: adjacency, TTL / hop-limit check and decrement, MTU check, L2 rewrite (MACs,
//!      and the 802.1Q tag of the output port: tags are read, pushed, popped in software),
//!      enqueue.
//!
//! Frames the fast path does not finish go to the punt batch with the reason ([`Punt`]): for
//! the router (ARP, NDP, its addresses, broadcast, multicast), an ICMP error to send about a
//! dropped packet (TTL exceeded, no route, too big; rate-limited here, per worker, so a flood
//! of errors never reaches the slow path), a next hop to resolve, a packet to fragment.
//!
//! With a firewall ([`crate::filter`]), a filter pass between 1 and 2 extracts each routed
//! packet's firewall key and runs the state lookup, else the `in` rules; apply runs the `out`
//! rules on the output port. Whether a firewall is configured is tested per batch, never per
//! packet, and the firewall's passes are separate out-of-line functions, so the path without
//! a firewall compiles as if the filter stage did not exist. They are in `forward/filtered.rs`;
//! `forward/route_opts.rs` has the pass for `route-to` and `reply-to`.
//!
//! Every call is static: no trait object per packet.

use std::sync::Arc;
use std::time::Instant;

use io::batch::MAX_BATCH;
use io::ratelimit::TokenBucket;
use io::{Batch, FrameDesc, FramePool};
use lpm::NextHop;
use wire::icmp_reply::IcmpError;
use wire::{EtherType, EthernetFrame, Ipv4Packet, Ipv6Packet, MacAddr};

use crate::adjacency::Adjacency;
use crate::counters::{Counts, DropReason};
use crate::fib::Fib;
use crate::filter::modulate;
use crate::filter::nat::{NatCounts, NatStage};
use crate::filter::{FilterStage, Firewall, Refusal, Routed, RoutedPacket, RoutedV4};
use crate::ports::{OutPort, PortInfo, PortMap};
use crate::punt::{Punt, PuntBatch};
use crate::tap::{Point, Tap};
use fw::state::Modulation;

mod classify;
mod filtered;
mod route_opts;

pub use route_opts::HostVia;

/// Ethernet header without a tag.
const ETH_LEN: usize = 14;
/// 802.1Q tag: TPID + TCI.
const TAG_LEN: usize = 4;

/// Packets of the batch whose data is prefetched ahead of the one being parsed.
const PREFETCH_AHEAD: usize = 4;

/// Decision of the classify pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Drop(DropReason),
    /// For the router; arrived on logical port `in_port`.
    Local {
        in_port: u16,
    },
    /// IPv4 to route; the IP header starts at `l3`; `slot` indexes the lookup arrays.
    V4 {
        l3: u16,
        slot: u16,
        in_port: u16,
    },
    V6 {
        l3: u16,
        slot: u16,
        in_port: u16,
    },
    /// `synproxy state`'s answer to a client's SYN, built in the SYN's buffer: sent back out
    /// of the port the SYN came in on.
    Reflect,
}

impl Routed for Step {
    #[inline(always)]
    fn routed(&self) -> Option<RoutedPacket> {
        match *self {
            Step::V4 { l3, in_port, .. } => Some(RoutedPacket {
                l3: l3 as usize,
                v4: true,
                in_port,
            }),
            Step::V6 { l3, in_port, .. } => Some(RoutedPacket {
                l3: l3 as usize,
                v4: false,
                in_port,
            }),
            _ => None,
        }
    }

    #[inline(always)]
    fn drop_for(&mut self, reason: DropReason) {
        *self = Step::Drop(reason);
    }
}

/// The forwarding node of one worker.
pub struct Forwarder {
    fib: Arc<Fib>,
    /// Grace-period handles: the LPM reuses a freed tbl8 group only after every reader
    /// reported a quiescent state (between two batches) since it was freed.
    v4_reader: lpm::Reader,
    v6_reader: lpm::Reader,
    ports: PortMap,
    pub counts: Counts,
    /// ICMP errors this worker may hand to the slow path (`None`: send none).
    icmp_limit: Option<TokenBucket>,
    epoch: Instant,
    /// The clock read at the first error of the batch (read at most once per batch).
    batch_now: Option<u64>,
    // Per-batch scratch, allocated once: decisions, and destinations to look up together.
    steps: Box<[Step; MAX_BATCH]>,
    v4_dst: Box<[u32; MAX_BATCH]>,
    v4_nh: Box<[Option<NextHop>; MAX_BATCH]>,
    v6_dst: Box<[u128; MAX_BATCH]>,
    v6_nh: Box<[Option<NextHop>; MAX_BATCH]>,
    /// With a firewall: where each IPv4 packet to route is, by lookup slot (the quick loop's
    /// list, see [`crate::filter::FilterStage`]).
    v4_at: Box<[RoutedV4; MAX_BATCH]>,
    filter: Option<FilterStage>,
    /// The IPv4 address of each logical port (NAT's `(iface)` targets).
    port_v4: Vec<Option<u32>>,
    /// With several workers, which one this is (NAT chooses ports that steer replies here).
    nat_steering: (u16, u16),
    /// An armed capture (`linerate capture`), if any.
    tap: Option<Tap>,
    /// `route-to` / `reply-to`: the option routing each packet of the batch, if any
    /// (valid while `via_any`, see `forward/route_opts.rs`).
    via: Box<[Option<fw::rules::RouteOpt>; MAX_BATCH]>,
    via_any: bool,
    /// Some `out` rule has `route-to` (this batch's set): the apply pass asks after the out
    /// pass whether the state it made routes the packet ([`Self::reroute_after_out`]).
    routes_out: bool,
}

/// Destinations collected by the classify pass.
struct Lookups<'a> {
    v4: &'a mut [u32; MAX_BATCH],
    n4: usize,
    v6: &'a mut [u128; MAX_BATCH],
    n6: usize,
    v4_at: &'a mut [RoutedV4; MAX_BATCH],
}

impl Forwarder {
    pub fn new(fib: Arc<Fib>, ports: &[PortInfo]) -> Self {
        Forwarder {
            v4_reader: fib.v4.reader(),
            v6_reader: fib.v6.reader(),
            fib,
            ports: PortMap::new(ports),
            counts: Counts::default(),
            icmp_limit: None,
            epoch: Instant::now(),
            batch_now: None,
            steps: Box::new([Step::Drop(DropReason::Truncated); MAX_BATCH]),
            v4_dst: Box::new([0; MAX_BATCH]),
            v4_nh: Box::new([None; MAX_BATCH]),
            v6_dst: Box::new([0; MAX_BATCH]),
            v6_nh: Box::new([None; MAX_BATCH]),
            v4_at: Box::new([RoutedV4::default(); MAX_BATCH]),
            filter: None,
            port_v4: ports.iter().map(|p| p.ipv4().map(u32::from)).collect(),
            nat_steering: (0, 1),
            tap: None,
            via: Box::new([None; MAX_BATCH]),
            via_any: false,
            routes_out: false,
        }
    }

    /// Lets this worker send up to `per_second` ICMP errors (bursts of up to a tenth of a
    /// second's worth, at least 1); 0 sends none.
    pub fn set_icmp_rate(&mut self, per_second: u64) {
        self.icmp_limit =
            (per_second > 0).then(|| TokenBucket::new(per_second, (per_second / 10).max(1)));
    }

    /// ICMP errors allowed and suppressed by the rate limit so far.
    pub fn icmp_counts(&self) -> (u64, u64) {
        self.icmp_limit
            .as_ref()
            .map_or((0, 0), |b| (b.allowed(), b.suppressed()))
    }

    /// Adds (or replaces) the firewall stage.
    pub fn set_firewall(&mut self, mut fw: Firewall) {
        fw.set_fib(Arc::clone(&self.fib));
        let mut nat = NatStage::new(self.port_v4.clone(), crate::filter::random_seed());
        nat.set_steering(self.nat_steering.0, self.nat_steering.1);
        self.filter = Some(FilterStage::new(fw, nat));
    }

    /// This forwarder is worker `worker` of `workers`: new `nat` translations pick ports whose
    /// replies the symmetric receive hash steers to this worker.
    pub fn set_nat_steering(&mut self, worker: u16, workers: u16) {
        self.nat_steering = (worker, workers);
        if let Some(f) = &mut self.filter {
            f.nat.set_steering(worker, workers);
        }
    }

    pub fn nat_table_mut(&mut self) -> Option<&mut fw::nat::table::NatTable> {
        self.filter.as_mut().map(|f| f.nat.table_mut())
    }

    /// The NAT stage's counters (`None` without a firewall).
    pub fn nat_counts(&self) -> Option<NatCounts> {
        self.filter.as_ref().map(|f| f.nat.counts())
    }

    /// Arms (or, with `None`, ends) a capture.
    pub fn set_tap(&mut self, tap: Option<Tap>) {
        self.tap = tap;
    }

    /// The armed capture, if it copies frames at `point`.
    #[inline(always)]
    pub fn tap_at(&mut self, point: Point) -> Option<&mut Tap> {
        self.tap.as_mut().filter(|t| t.at(point))
    }

    /// Which flows of the batch being processed may go to the kernel's fast path: none while
    /// a capture is armed, every one without a firewall, else what its rules let go
    /// ([`crate::offload`]).
    pub fn offload_policy(&self) -> crate::offload::OffloadPolicy {
        match (&self.tap, &self.filter) {
            (Some(_), _) => crate::offload::OffloadPolicy::NONE,
            (None, None) => crate::offload::OffloadPolicy::STATELESS,
            (None, Some(f)) => f.fw.offload_policy(),
        }
    }

    pub fn firewall(&self) -> Option<&Firewall> {
        self.filter.as_ref().map(|f| &f.fw)
    }

    pub fn firewall_mut(&mut self) -> Option<&mut Firewall> {
        self.filter.as_mut().map(|f| &mut f.fw)
    }

    /// The firewall's pass over a packet the router sends on logical port `port`
    /// ([`Firewall::local_out`]); frames that are not IP pass (pf does not see them).
    /// `Ok(Some(via))`: the state that passed it routes it (`route-to`, `reply-to`), by
    /// [`host_frame_via`](Self::host_frame_via).
    pub fn local_out(&mut self, frame: &[u8], port: u16) -> Result<Option<HostVia>, DropReason> {
        let Some(fw) = self.firewall_mut() else {
            return Ok(None);
        };
        let Ok(l2) = wire::parse_l2(frame) else {
            return Err(DropReason::Truncated);
        };
        let v4 = match l2.ethertype {
            EtherType::Ipv4 => true,
            EtherType::Ipv6 => false,
            _ => return Ok(None),
        };
        fw.local_out(frame, l2.l3_offset, v4, port)?;
        // `route-to` / `reply-to`: the state that passed it may send it elsewhere.
        match fw.local_route(frame, l2.l3_offset, v4, port) {
            Some(opt) => self.host_via(opt).map(Some),
            None => Ok(None),
        }
    }

    /// Handles every frame of `input` (leaving it empty): forwarded frames are appended to
    /// `outputs[physical port]`, frames for the slow path to `punts`, the rest freed and
    /// counted. Each output must have room for a whole input batch (callers flush after each
    /// call).
    pub fn process(
        &mut self,
        pool: &mut FramePool,
        input: &mut Batch,
        outputs: &mut [Batch],
        punts: &mut PuntBatch,
    ) {
        let descs = input.as_slice();
        self.counts.rx += descs.len() as u64;
        self.batch_now = None;
        // With a firewall, a few extra branches per batch (never per packet); the firewall's
        // passes are out of line, its classify pass too (which also lists where the IPv4
        // packets are, and their UDP flows for the quick loop), so the code without one
        // compiles (inlining included) as if the filter stage did not exist.
        let flows = self.filter.as_ref().is_some_and(|f| f.reads_udp_flows());
        let (n4, n6) = match (&self.filter, flows) {
            (None, _) => self.classify::<false, false>(pool, descs),
            (Some(_), true) => self.classify_filtered::<true>(pool, descs),
            (Some(_), false) => self.classify_filtered::<false>(pool, descs),
        };
        if self.filter.is_some() {
            self.nat_in(pool, descs);
            self.filter_in(pool, descs, n4, n6, flows);
            if self
                .filter
                .as_ref()
                .is_some_and(|f| !f.fw.proxy_queue.is_empty())
            {
                self.synproxy(pool, input);
            }
            self.via_any = false;
            self.routes_out = self.filter.as_ref().is_some_and(|f| f.fw.routes_out());
            if self.filter.as_ref().is_some_and(|f| f.fw.routes()) {
                self.route_options(pool, input.as_slice());
            }
        }
        if n4 > 0 {
            self.fib
                .v4
                .lookup_batch(&self.v4_dst[..n4], &mut self.v4_nh[..n4]);
        }
        if n6 > 0 {
            self.fib
                .v6
                .lookup_batch(&self.v6_dst[..n6], &mut self.v6_nh[..n6]);
        }
        if self.via_any {
            self.check_route_options();
        }
        if self.filter.is_some() {
            self.apply_filtered(pool, input, outputs, punts);
            // `synproxy state`'s ACKs to servers, after the batch's frames.
            if self
                .filter
                .as_ref()
                .is_some_and(|f| !f.proxy_out.is_empty())
            {
                self.proxy_out(pool, outputs);
            }
            return;
        }
        for (desc, i) in input.drain().zip(0..MAX_BATCH) {
            let step = self.steps[i % MAX_BATCH];
            self.apply::<false, false, false, false>(pool, desc, i, step, outputs, punts);
        }
    }

    /// Declares that this worker holds no reference into the FIB (call between batches).
    #[inline]
    pub fn quiescent(&self) {
        self.v4_reader.quiescent();
        self.v6_reader.quiescent();
    }

    /// Declares this worker idle (asleep, no lookups) until [`online`](Self::online), so the
    /// FIB's writer does not wait for it.
    pub fn offline(&self) {
        self.v4_reader.offline();
        self.v6_reader.offline();
    }

    pub fn online(&self) {
        self.v4_reader.online();
        self.v6_reader.online();
    }

    /// The rest of a packet's way after the lookups. `FW`: with the firewall's out pass (and
    /// NAT's), for a batch where some packet needs it; `NAT`: with NAT's outbound pass only,
    /// for a batch whose packets states settled; `SCRUB` (with `FW`): the outbound scrub
    /// rules first.
    #[inline(always)]
    fn apply<const FW: bool, const NAT: bool, const SCRUB: bool, const MOD: bool>(
        &mut self,
        pool: &mut FramePool,
        mut desc: FrameDesc,
        i: usize,
        step: Step,
        outputs: &mut [Batch],
        punts: &mut PuntBatch,
    ) {
        let (l3, nh, v4, in_port) = match step {
            // A blocked packet's answer, if its rule has one, is in the filter stage's list.
            Step::Drop(DropReason::FilterBlocked) => return self.blocked(pool, desc, i, punts),
            Step::Drop(DropReason::FragmentNoFirst) => return self.hold_fragment(pool, desc),
            Step::Drop(reason) => return self.drop(pool, desc, reason),
            Step::Reflect => return self.reflect(pool, desc, outputs),
            Step::Local { in_port } => {
                return self.local_rewritten::<MOD>(pool, desc, in_port, punts);
            }
            Step::V4 { l3, slot, in_port } => (
                l3 as usize,
                self.v4_nh[slot as usize % MAX_BATCH],
                true,
                in_port,
            ),
            Step::V6 { l3, slot, in_port } => (
                l3 as usize,
                self.v6_nh[slot as usize % MAX_BATCH],
                false,
                in_port,
            ),
        };
        let Some(id) = nh else {
            return self.error(
                pool,
                desc,
                in_port,
                DropReason::NoRoute,
                IcmpError::NoRoute,
                punts,
            );
        };
        let (mut id, adj) = match self.fib.adj.get(id) {
            Adjacency::Multipath { members, paths } => {
                self.path(pool, desc, l3, v4, members, paths)
            }
            adj => (id, adj),
        };
        let (mut port, mut mac) = match adj {
            Adjacency::Forward { port, mac } => (port, Some(mac)),
            Adjacency::Unresolved { port } => (port, None),
            Adjacency::Local => return self.local_rewritten::<MOD>(pool, desc, in_port, punts),
            Adjacency::Blackhole => return self.drop(pool, desc, DropReason::Blackhole),
            Adjacency::Unreachable => {
                return self.error(
                    pool,
                    desc,
                    in_port,
                    DropReason::NoRoute,
                    IcmpError::NoRoute,
                    punts,
                );
            }
            // A group's member is never a group (the writer never makes one).
            Adjacency::Multipath { .. } => return self.drop(pool, desc, DropReason::NoRoute),
        };
        let Some(&(mut out_port)) = self.ports.output(port) else {
            return self.drop(pool, desc, DropReason::TxError);
        };
        // With NAT only, a packet it translates has its TTL decremented in the same checksum
        // update (or left, if it would reach zero).
        if NAT && v4 && self.filter.as_ref().is_some_and(|f| f.nat.on_port(port)) {
            match self.nat_only(pool, desc, i, l3, port) {
                Ok(true) => {}
                Ok(false) => {
                    return self.error(
                        pool,
                        desc,
                        in_port,
                        DropReason::TtlExpired,
                        IcmpError::TimeExceeded,
                        punts,
                    );
                }
                Err(reason) => return self.drop(pool, desc, reason),
            }
        } else if !decrement_ttl(pool.frame_mut(desc), l3, v4) {
            return self.error(
                pool,
                desc,
                in_port,
                DropReason::TtlExpired,
                IcmpError::TimeExceeded,
                punts,
            );
        }
        // `modulate state`: the flow as its state is keyed, read before NAT's out pass
        // translates the packet.
        let target = if MOD {
            modulate::target(pool.frame(desc).get(l3..).unwrap_or(&[]), v4)
        } else {
            None
        };
        // pf's out pass runs after routing (and, as in the kernel's ip_forward, after the TTL
        // check), on the output interface.
        if FW && let Err(stop) = self.out_pass::<SCRUB>(pool, desc, i, l3, port, v4) {
            return match stop {
                OutStop::Refuse(refusal) => self.refuse(pool, desc, in_port, refusal, punts),
                OutStop::Drop(reason) => self.drop(pool, desc, reason),
            };
        }
        // `route-to` on an `out` rule: the state the out pass made may send it elsewhere.
        if FW && self.routes_out {
            match self.reroute_after_out(pool, desc, i, l3, v4) {
                None => {}
                Some(Ok((to_id, to_port, to_mac))) => {
                    let Some(&to) = self.ports.output(to_port) else {
                        return self.drop(pool, desc, DropReason::TxError);
                    };
                    (id, port, mac, out_port) = (to_id, to_port, to_mac, to);
                }
                Some(Err(reason)) => return self.drop(pool, desc, reason),
            }
        }
        // After the out pass, which may have created the state.
        let rewrite = if MOD { self.modulation(target) } else { None };
        // The frame length bounds the IP length (plus at most the padding of a minimum-size
        // frame, far below any MTU), so only frames longer than the MTU read the header.
        if usize::from(desc.len) - l3 > usize::from(out_port.mtu) {
            return self.too_big(
                pool,
                desc,
                l3,
                v4,
                in_port,
                (id, port, mac),
                out_port,
                punts,
                rewrite,
            );
        }
        if MOD && let Some((m, target)) = rewrite {
            modulate::apply(
                pool.frame_mut(desc).get_mut(l3..).unwrap_or(&mut []),
                target,
                m,
            );
        }
        let Some(mac) = mac else {
            self.counts.slow_path += 1;
            return punts.push(desc, self.unresolved(i, id, port), in_port);
        };
        let Some(out) = outputs.get_mut(out_port.phys as usize) else {
            return self.drop(pool, desc, DropReason::TxError);
        };
        // Same header length in and out (untagged to untagged, tagged to tagged): rewrite in
        // place; a tag to push or pop moves the frame's start (out of line).
        if l3 == usize::from(out_port.hdr) {
            rewrite_l2_in_place(pool.frame_mut(desc), &out_port, mac);
        } else if !write_l2(pool, &mut desc, l3, &out_port, mac) {
            return self.drop(pool, desc, DropReason::TxError);
        }
        debug_assert!(!out.is_full(), "output batch not flushed");
        out.push(desc);
        self.counts.forwarded += 1;
    }

    /// The member of a multipath group this packet's flow takes, and its adjacency
    /// (out of line: only multipath routes pay for the flow hash).
    #[inline(never)]
    fn path(
        &self,
        pool: &FramePool,
        desc: FrameDesc,
        l3: usize,
        v4: bool,
        members: u32,
        paths: u16,
    ) -> (NextHop, Adjacency) {
        let hash = crate::ecmp::flow_hash(&pool.frame(desc)[l3..], v4, self.fib.ecmp_seed);
        let id = self.fib.adj.member(members, crate::ecmp::pick(hash, paths));
        (id, self.fib.adj.get(id))
    }

    /// A packet longer than the output MTU: IPv4 without DF is fragmented by the slow path
    /// (RFC 791; RFC 1812 5.2.6 lets a router do it), anything else is dropped with an ICMP
    /// "fragmentation needed" / "packet too big" carrying the MTU (RFC 1191, RFC 4443 3.2).
    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn too_big(
        &mut self,
        pool: &mut FramePool,
        desc: FrameDesc,
        l3: usize,
        v4: bool,
        in_port: u16,
        next: (NextHop, u16, Option<MacAddr>),
        out_port: OutPort,
        punts: &mut PuntBatch,
        rewrite: Option<(Modulation, modulate::Target)>,
    ) {
        let (next_hop, port, mac) = next;
        // Not resolved yet: the slow path resolves, then fragments when it sends.
        let later = match mac {
            Some(mac) => Punt::Fragment { port, mac },
            None => Punt::Unresolved { next_hop, port },
        };
        let frame = pool.frame(desc);
        let (ip_len, df) = if v4 {
            let ip = Ipv4Packet::new_unchecked(&frame[l3..]);
            (usize::from(ip.total_len()), ip.dont_frag())
        } else {
            (
                40 + usize::from(Ipv6Packet::new_unchecked(&frame[l3..]).payload_len()),
                true,
            )
        };
        let mtu = usize::from(out_port.mtu);
        // A packet that leaves (whole, or in fragments) leaves modulated; an error about it
        // quotes it as its sender sent it.
        if let Some((m, target)) = rewrite
            && (ip_len <= mtu || !df)
        {
            modulate::apply(
                pool.frame_mut(desc).get_mut(l3..).unwrap_or(&mut []),
                target,
                m,
            );
        }
        if ip_len <= mtu {
            // Bytes after the IP packet (a frame carrying trailing data) made it look long;
            // the packet itself fits: the slow path sends it with its new L2 header.
            self.counts.slow_path += 1;
            return punts.push(desc, later, in_port);
        }
        if df {
            // The error quotes the packet as its sender sent it (not modulated).
            let err = IcmpError::PacketTooBig {
                mtu: u32::from(out_port.mtu),
            };
            return self.error(pool, desc, in_port, DropReason::TooBig, err, punts);
        }
        self.counts.slow_path += 1;
        punts.push(desc, later, in_port);
    }

    /// A dropped packet the sender should hear about: counted under `reason`, and handed to
    /// the slow path for an ICMP error if this worker's rate limit allows one now.
    #[cold]
    #[inline(never)]
    fn error(
        &mut self,
        pool: &mut FramePool,
        desc: FrameDesc,
        in_port: u16,
        reason: DropReason,
        err: IcmpError,
        punts: &mut PuntBatch,
    ) {
        self.counts.drop(reason);
        if self.tap.is_some() {
            self.tap_drop(pool, desc, reason);
        }
        let now = *self
            .batch_now
            .get_or_insert_with(|| self.epoch.elapsed().as_nanos() as u64);
        if self
            .icmp_limit
            .as_mut()
            .is_some_and(|limit| limit.allow(now))
        {
            punts.push(desc, Punt::Error(err), in_port);
        } else {
            pool.free(desc);
        }
    }

    /// `synproxy state`'s SYN-ACK, built in the client's SYN: out of the port the SYN came
    /// in on. The SYN counts as consumed by the proxy (`synproxy`).
    #[cold]
    #[inline(never)]
    fn reflect(&mut self, pool: &mut FramePool, desc: FrameDesc, outputs: &mut [Batch]) {
        self.counts.drop(DropReason::Synproxy);
        match outputs.get_mut(usize::from(desc.port)) {
            Some(out) if !out.is_full() => out.push(desc),
            _ => pool.free(desc),
        }
    }

    /// A later fragment that came before its first: held until it comes
    /// ([`crate::filter::frag_hold`]), or dropped if there is no room.
    #[cold]
    #[inline(never)]
    fn hold_fragment(&mut self, pool: &mut FramePool, desc: FrameDesc) {
        if let Some(f) = &mut self.filter {
            let frame = pool.frame(desc);
            let l2 = wire::parse_l2(frame).ok();
            let ip = l2.and_then(|l2| frame.get(l2.l3_offset..)).unwrap_or(&[]);
            let now = f.fw.now();
            let later = match l2.map(|l2| l2.ethertype) {
                Some(EtherType::Ipv4) => crate::filter::frags::ident(ip)
                    .filter(|(_, first)| !first)
                    .map(|(id, _)| (id, f.frags.has_first(id, now))),
                Some(EtherType::Ipv6) => crate::filter::frags6::ident(ip)
                    .filter(|(_, first)| !first)
                    .map(|(id, _)| (id, f.frags6.has_first(id, now))),
                _ => None,
            };
            if let Some((ident, first_seen)) = later {
                let expires = now.saturating_add(f.fw.frag_settings().0);
                if f.held.hold(ident, desc, expires, first_seen).is_ok() {
                    return;
                }
            }
        }
        self.drop(pool, desc, DropReason::FragmentNoFirst)
    }

    /// Later fragments waiting for their first (neither forwarded nor dropped yet).
    pub fn fragments_held(&self) -> usize {
        self.filter.as_ref().map_or(0, |f| f.held.waiting())
    }

    /// Whether fragments wait for their first, or were released or expired since
    /// [`held_fragments`](Self::held_fragments) was last called.
    pub fn holds_fragments(&self) -> bool {
        self.filter.as_ref().is_some_and(|f| f.held.busy())
    }

    /// The fragments that waited for their first: those it released, up to `max`, into
    /// `batch`, to go through [`process`](Self::process) again (their arrival is counted
    /// already); those past their time freed and counted as `fragment_no_first`. Returns
    /// how many went into `batch`.
    pub fn held_fragments(&mut self, pool: &mut FramePool, batch: &mut Batch, max: usize) -> usize {
        let Some(f) = &mut self.filter else { return 0 };
        f.held.expire(f.fw.now());
        let mut expired = 0;
        for d in f.held.take_expired() {
            pool.free(d);
            expired += 1;
        }
        let mut n = 0;
        for d in f.held.take_released(max.min(batch.room())) {
            batch.push(d);
            n += 1;
        }
        for _ in 0..expired {
            self.counts.drop(DropReason::FragmentNoFirst);
        }
        self.counts.rx -= n as u64;
        n
    }

    #[inline(always)]
    fn drop(&mut self, pool: &mut FramePool, desc: FrameDesc, reason: DropReason) {
        self.counts.drop(reason);
        if self.tap.is_some() {
            self.tap_drop(pool, desc, reason);
        }
        pool.free(desc);
    }

    /// Copies a dropped frame for a capture at the drop point.
    #[cold]
    #[inline(never)]
    fn tap_drop(&mut self, pool: &FramePool, desc: FrameDesc, reason: DropReason) {
        if let Some(t) = self.tap_at(Point::Drop) {
            t.copy_desc(pool, desc, desc.port, Some(reason));
        }
    }

    #[inline(always)]
    fn local(&mut self, desc: FrameDesc, in_port: u16, punts: &mut PuntBatch) {
        self.counts.local += 1;
        punts.push(desc, Punt::Local, in_port);
    }
}

/// Whether the routed packet `step` (its destination in `lookups`) is for the router itself.
fn to_router(fib: &Fib, step: Step, lookups: &Lookups) -> bool {
    let nh = match step {
        Step::V4 { slot, .. } => fib.v4.lookup(lookups.v4[usize::from(slot) % MAX_BATCH]),
        Step::V6 { slot, .. } => fib.v6.lookup(lookups.v6[usize::from(slot) % MAX_BATCH]),
        _ => None,
    };
    nh.is_some_and(|nh| fib.adj.get(nh) == Adjacency::Local)
}

/// Why the out pass stopped a packet.
enum OutStop {
    Drop(DropReason),
    /// A `block return` rule blocked it: answer as it says.
    Refuse(Refusal),
}

/// RFC 1812 5.3.1: a packet whose TTL would reach zero is not forwarded. Decrements the TTL
/// (hop limit) of the packet at `l3` and returns true, or returns false if it would reach
/// zero. The classify pass validated lengths, so the views cannot fail.
#[inline(always)]
fn decrement_ttl(frame: &mut [u8], l3: usize, v4: bool) -> bool {
    if v4 {
        let mut ip = Ipv4Packet::new_unchecked(&mut frame[l3..]);
        if ip.ttl() <= 1 {
            return false;
        }
        ip.decrement_ttl();
    } else {
        let mut ip = Ipv6Packet::new_unchecked(&mut frame[l3..]);
        let hops = ip.hop_limit();
        if hops <= 1 {
            return false;
        }
        ip.set_hop_limit(hops - 1);
    }
    true
}

/// The output L2 header when its length does not change (untagged to untagged, tagged to
/// tagged): MACs, and the output port's tag.
#[inline(always)]
fn rewrite_l2_in_place(frame: &mut [u8], out: &OutPort, mac: MacAddr) {
    let mut eth = EthernetFrame::new_unchecked(&mut *frame);
    eth.set_dst_addr(mac);
    eth.set_src_addr(out.mac);
    if out.tci != 0 {
        frame[14..16].copy_from_slice(&out.tci.to_be_bytes());
    }
}

/// Writes the output L2 header in front of the IP packet at `l3`: MACs, and the 802.1Q tag of
/// the output port if it has one. The frame's start moves when the header length changes (a
/// tag pushed into the headroom, or popped). Returns false if the headroom is too small.
#[inline(never)]
fn write_l2(
    pool: &mut FramePool,
    desc: &mut FrameDesc,
    l3: usize,
    out: &OutPort,
    mac: MacAddr,
) -> bool {
    let hdr = if out.tci == 0 {
        ETH_LEN
    } else {
        ETH_LEN + TAG_LEN
    };
    // The EtherType of the IP packet sits right before l3 in both layouts; only what is in
    // front of it changes.
    let moved = if hdr > l3 {
        pool.push_front(desc, hdr - l3)
    } else {
        pool.pull_front(desc, l3 - hdr)
    };
    if !moved {
        return false;
    }
    let frame = pool.frame_mut(*desc);
    frame[0..6].copy_from_slice(&mac.0);
    frame[6..12].copy_from_slice(&out.mac.0);
    if out.tci != 0 {
        frame[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
        frame[14..16].copy_from_slice(&out.tci.to_be_bytes());
    }
    true
}
