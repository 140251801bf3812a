//! The forwarding node of one worker, over a whole batch. Shaped like a VPP graph node: a
//! vector of frames in, a decision per frame ([`Next`]: an output port, the router itself,
//! or a drop counted under its reason), every call static. [`Forwarder::process`] runs the
//! stages in the packet's order, each over the whole batch, each in its file:
//!
//! 1. classify (`forward/classify.rs`): L2 parse, RFC 1812 5.2.2 validation, martian
//!    checks, the destinations to look up (packet i+4's data prefetched while packet i is
//!    parsed);
//! 2. translate in (`forward/translate_in.rs`, firewall): inbound scrub, `rdr`, `binat`,
//!    replies to `nat`;
//! 3. filter in (`forward/filter_in.rs`, firewall): the state of each packet, else the `in`
//!    rules; `synproxy state`;
//! 4. route options (`forward/route_opts.rs`, firewall): `route-to` / `reply-to` make the
//!    gateway the address to look up;
//! 5. route (here): every IPv4 and every IPv6 destination of the batch looked up together,
//!    so that their cache misses overlap (the LPM prefetches 8 tbl24 lines at a time);
//! 6. send (`forward/send.rs`): per packet its adjacency, TTL, with a firewall the out rules
//!    and outbound translation (`forward/filter_out.rs`), MTU, link-layer rewrite, output.
//!
//! Frames the node does not finish go to the punt batch with the reason ([`crate::punt::Punt`]): for
//! the router (ARP, NDP, its addresses, broadcast, multicast), an ICMP error to send about a
//! dropped packet (TTL exceeded, no route, too big; rate-limited here, per worker, so a flood
//! of errors never reaches the slow path), a next hop to resolve, a packet to fragment.
//!
//! Whether a firewall is configured is tested per batch, never per packet, and the
//! firewall's stages are out-of-line functions, so the path without a firewall compiles as
//! if they did not exist.

use std::sync::Arc;
use std::time::Instant;

use io::batch::MAX_BATCH;
use io::ratelimit::TokenBucket;
use io::{Batch, FramePool};
use lpm::NextHop;
use wire::EtherType;

use crate::counters::{Counts, DropReason};
use crate::fib::Fib;
use crate::firewall::afto::AfToStage;
use crate::firewall::nat::{NatCounts, NatStage};
use crate::firewall::nat6::Nat6Stage;
use crate::firewall::{Firewall, FirewallStage, RoutedV4};
use crate::next::Next;
use crate::ports::{PortInfo, PortMap};
use crate::punt::PuntBatch;
use crate::tap::{Point, Tap};

mod classify;
mod filter_in;
mod filter_out;
mod route_opts;
mod send;
mod translate_in;

pub use route_opts::HostVia;
use route_opts::RouteOptions;

/// Ethernet header without a tag.
const ETH_LEN: usize = 14;
/// 802.1Q tag: TPID + TCI.
const TAG_LEN: usize = 4;

/// Packets of the batch whose data is prefetched ahead of the one being parsed.
const PREFETCH_AHEAD: usize = 4;

/// What the send pass does besides forwarding, as the bits of its const parameter: each
/// combination is its own compiled loop, so a batch pays only for what it needs.
mod mode {
    /// Route and send: no firewall, or none of its passes needed by this batch.
    pub const PLAIN: u8 = 0;
    /// The firewall's out pass (and outbound translation) for packets no state out_decided.
    pub const FILTER_OUT: u8 = 1;
    /// Outbound translation only, for a batch whose packets states out_decided.
    pub const TRANSLATE_OUT: u8 = 2;
    /// With `FILTER_OUT`: the outbound scrub rules first.
    pub const SCRUB_OUT: u8 = 4;
    /// `modulate state`'s rewrite of the TCP packets of states that modulate.
    pub const MODULATE: u8 = 8;

    /// Whether `mode` has `flag`.
    #[inline(always)]
    pub const fn has(mode: u8, flag: u8) -> bool {
        mode & flag != 0
    }
}

/// What the classify pass found in the batch: how many IPv4 and IPv6 destinations to look
/// up, and whether it read the IPv4 UDP flows for the firewall's quick loop.
#[derive(Clone, Copy)]
struct Found {
    n4: usize,
    n6: usize,
    udp_flows: bool,
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
    next: Box<[Next; MAX_BATCH]>,
    v4_dst: Box<[u32; MAX_BATCH]>,
    v4_nh: Box<[Option<NextHop>; MAX_BATCH]>,
    v6_dst: Box<[u128; MAX_BATCH]>,
    v6_nh: Box<[Option<NextHop>; MAX_BATCH]>,
    /// With a firewall: where each IPv4 packet to route is, by lookup slot (the quick loop's
    /// list, see [`crate::firewall::FirewallStage`]).
    v4_at: Box<[RoutedV4; MAX_BATCH]>,
    firewall: Option<FirewallStage>,
    /// The IPv4 address of each logical port (NAT's `(iface)` targets).
    port_v4: Vec<Option<u32>>,
    /// The first global IPv6 address of each logical port (NAT66's `(iface)` targets).
    port_v6: Vec<Option<u128>>,
    /// With several workers, which one this is (NAT chooses ports that steer replies here).
    nat_steering: (u16, u16),
    /// An armed capture (`linerate capture`), if any.
    tap: Option<Tap>,
    /// `route-to` / `reply-to`: each packet's option, if its state's rule routes it.
    route_opts: RouteOptions,
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
            next: Box::new([Next::Drop(DropReason::Truncated); MAX_BATCH]),
            v4_dst: Box::new([0; MAX_BATCH]),
            v4_nh: Box::new([None; MAX_BATCH]),
            v6_dst: Box::new([0; MAX_BATCH]),
            v6_nh: Box::new([None; MAX_BATCH]),
            v4_at: Box::new([RoutedV4::default(); MAX_BATCH]),
            firewall: None,
            port_v4: ports.iter().map(|p| p.ipv4().map(u32::from)).collect(),
            port_v6: ports.iter().map(global_v6).collect(),
            nat_steering: (0, 1),
            tap: None,
            route_opts: RouteOptions::new(),
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
        self.icmp_limit.as_ref().map_or((0, 0), |b| (b.allowed(), b.suppressed()))
    }

    /// Adds (or replaces) the firewall stage.
    pub fn set_firewall(&mut self, mut fw: Firewall) {
        fw.set_fib(Arc::clone(&self.fib));
        let mut nat = NatStage::new(self.port_v4.clone(), crate::firewall::random_seed());
        nat.set_steering(self.nat_steering.0, self.nat_steering.1);
        let mut nat6 = Nat6Stage::new(self.port_v6.clone(), crate::firewall::random_seed());
        nat6.set_steering(self.nat_steering.0, self.nat_steering.1);
        let mut afto = AfToStage::new(self.port_v4.clone(), crate::firewall::random_seed());
        afto.set_steering(self.nat_steering.0, self.nat_steering.1);
        let mut stage = FirewallStage::new(fw, nat, nat6, afto);
        stage.afto46.set_steering(self.nat_steering.0, self.nat_steering.1);
        stage.afto46.set_port_v4(self.port_v4.clone());
        self.firewall = Some(stage);
    }

    /// This forwarder is worker `worker` of `workers`: new `nat` translations pick ports whose
    /// replies the symmetric receive hash steers to this worker.
    pub fn set_nat_steering(&mut self, worker: u16, workers: u16) {
        self.nat_steering = (worker, workers);
        if let Some(f) = &mut self.firewall {
            f.nat.set_steering(worker, workers);
            f.nat6.set_steering(worker, workers);
            f.afto.set_steering(worker, workers);
            f.afto46.set_steering(worker, workers);
        }
    }

    pub fn nat_table_mut(&mut self) -> Option<&mut fw::nat::table::NatTable> {
        self.firewall.as_mut().map(|f| f.nat.table_mut())
    }

    /// The NAT stage's counters (`None` without a firewall).
    pub fn nat_counts(&self) -> Option<NatCounts> {
        self.firewall.as_ref().map(|f| {
            let mut c = f.nat.counts();
            // NAT66's translations count with IPv4's.
            for ((created, expired), len, translated) in [
                (f.nat6.counts(), f.nat6.len(), f.nat6.translated),
                (f.afto.counts(), f.afto.len(), f.afto.translated),
                (f.afto46.counts(), f.afto46.len(), f.afto46.translated),
            ] {
                c.sessions += len as u64;
                c.created += created;
                c.expired += expired;
                c.translated += translated;
            }
            c
        })
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
        match (&self.tap, &self.firewall) {
            (Some(_), _) => crate::offload::OffloadPolicy::NONE,
            (None, None) => crate::offload::OffloadPolicy::STATELESS,
            (None, Some(f)) => f.fw.offload_policy(),
        }
    }

    pub fn firewall(&self) -> Option<&Firewall> {
        self.firewall.as_ref().map(|f| &f.fw)
    }

    pub fn firewall_mut(&mut self) -> Option<&mut Firewall> {
        self.firewall.as_mut().map(|f| &mut f.fw)
    }

    /// The firewall and its NAT table (state sync's view of the worker).
    pub(crate) fn firewall_and_nat(
        &mut self,
    ) -> Option<(&mut Firewall, crate::firewall::sync::NatTables<'_>)> {
        self.firewall.as_mut().map(|f| {
            let tables =
                crate::firewall::sync::NatTables { v4: f.nat.table_mut(), v6: f.nat6.table_mut() };
            (&mut f.fw, tables)
        })
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
        self.counts.rx += input.len() as u64;
        self.batch_now = None;
        let mut found = self.classify(pool, input.as_slice());
        if self.firewall.is_some() {
            self.translate_in(pool, input.as_mut_slice(), &mut found);
            self.filter_in(pool, input, found);
            self.translate_af(pool, input.as_mut_slice(), &mut found);
            self.route_options(pool, input.as_slice());
        }
        self.route(found);
        match self.firewall {
            None => self.send::<{ mode::PLAIN }>(pool, input, outputs, punts),
            Some(_) => self.send_filtered(pool, input, outputs, punts),
        }
    }

    /// Stage 5: every destination of the batch looked up, then, where a rule routes a packet
    /// (`route-to`), whether the table reaches its gateway where the rule says.
    #[inline(always)]
    fn route(&mut self, found: Found) {
        let Found { n4, n6, .. } = found;
        if n4 > 0 {
            self.fib.v4.lookup_batch(&self.v4_dst[..n4], &mut self.v4_nh[..n4]);
        }
        if n6 > 0 {
            self.fib.v6.lookup_batch(&self.v6_dst[..n6], &mut self.v6_nh[..n6]);
        }
        if self.route_opts.any {
            self.check_route_options();
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
}

/// The first IPv6 address of `port` that is not link-local: what `(IFACE)` stands for in a
/// NAT66 rule.
fn global_v6(port: &PortInfo) -> Option<u128> {
    port.addresses.iter().find_map(|(a, _)| match a {
        std::net::IpAddr::V6(a) if a.segments()[0] & 0xffc0 != 0xfe80 => Some(u128::from(*a)),
        _ => None,
    })
}
