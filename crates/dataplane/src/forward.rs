//! The forwarding node: parse -> validate -> route -> neighbour rewrite, over a whole batch.
//!
//! Shaped like a VPP graph node: it takes a vector of frames and decides a next step for each
//! (an output port, the local exit, or a drop counted under its reason). It runs in three
//! passes so that the FIB lookups of a batch are issued together and their cache misses
//! overlap (the LPM's batched lookup prefetches 8 tbl24 lines at a time):
//!   1. classify: L2 parse, RFC 1812 5.2.2 validation, martian checks; collect destinations
//!      (frame data of packet i+4 is prefetched while packet i is parsed);
//!   2. look up every IPv4 and every IPv6 destination of the batch;
//!   3. apply: adjacency, TTL / hop-limit check and decrement, MAC rewrite, enqueue.
//!
//! With a firewall ([`crate::filter`]), a filter pass between 1 and 2 extracts each routed
//! packet's firewall key and runs the state lookup, else the `in` rules; apply runs the `out`
//! rules on the output port. Whether a firewall is configured is tested per batch, never per
//! packet, and the firewall's passes are separate out-of-line functions, so the path without
//! a firewall is the same machine code as before.
//!
//! Every call is static: no trait object per packet.

use std::net::Ipv4Addr;
use std::sync::Arc;

use io::batch::MAX_BATCH;
use io::{Batch, FrameDesc, FramePool};
use lpm::NextHop;
use wire::{EtherType, EthernetFrame, Ipv4Packet, Ipv6Packet, MacAddr};

use crate::adjacency::Adjacency;
use crate::counters::{Counts, DropReason};
use crate::fib::{Fib, PortInfo};
use crate::filter::{FilterStage, Firewall, Routed};

/// Packets of the batch whose data is prefetched ahead of the one being parsed.
const PREFETCH_AHEAD: usize = 4;

/// Decision of the classify pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Drop(DropReason),
    Local,
    /// IPv4 to route; the IP header starts at `l3`; `slot` indexes the lookup arrays.
    V4 { l3: u16, slot: u16 },
    V6 { l3: u16, slot: u16 },
}

impl Routed for Step {
    #[inline(always)]
    fn routed(&self) -> Option<(usize, bool)> {
        match *self {
            Step::V4 { l3, .. } => Some((l3 as usize, true)),
            Step::V6 { l3, .. } => Some((l3 as usize, false)),
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
    port_macs: Vec<MacAddr>,
    pub counts: Counts,
    // Per-batch scratch, allocated once: decisions, and destinations to look up together.
    steps: Box<[Step; MAX_BATCH]>,
    v4_dst: Box<[u32; MAX_BATCH]>,
    v4_nh: Box<[Option<NextHop>; MAX_BATCH]>,
    v6_dst: Box<[u128; MAX_BATCH]>,
    v6_nh: Box<[Option<NextHop>; MAX_BATCH]>,
    filter: Option<FilterStage>,
}

/// Destinations collected by the classify pass.
struct Lookups<'a> {
    v4: &'a mut [u32; MAX_BATCH],
    n4: usize,
    v6: &'a mut [u128; MAX_BATCH],
    n6: usize,
}

impl Forwarder {
    pub fn new(fib: Arc<Fib>, ports: &[PortInfo]) -> Self {
        Forwarder {
            v4_reader: fib.v4.reader(),
            v6_reader: fib.v6.reader(),
            fib,
            port_macs: ports.iter().map(|p| p.mac).collect(),
            counts: Counts::default(),
            steps: Box::new([Step::Local; MAX_BATCH]),
            v4_dst: Box::new([0; MAX_BATCH]),
            v4_nh: Box::new([None; MAX_BATCH]),
            v6_dst: Box::new([0; MAX_BATCH]),
            v6_nh: Box::new([None; MAX_BATCH]),
            filter: None,
        }
    }

    /// Adds (or replaces) the firewall stage.
    pub fn set_firewall(&mut self, fw: Firewall) {
        self.filter = Some(FilterStage::new(fw));
    }

    pub fn firewall(&self) -> Option<&Firewall> {
        self.filter.as_ref().map(|f| &f.fw)
    }

    pub fn firewall_mut(&mut self) -> Option<&mut Firewall> {
        self.filter.as_mut().map(|f| &mut f.fw)
    }

    /// Handles every frame of `input` (leaving it empty): forwarded frames are appended to
    /// `outputs[port]`, frames for the router to `local`, the rest freed and counted.
    /// Each output must have room for a whole input batch (callers flush after each call).
    pub fn process(&mut self, pool: &mut FramePool, input: &mut Batch, outputs: &mut [Batch], local: &mut Batch) {
        let descs = input.as_slice();
        self.counts.rx += descs.len() as u64;
        let (n4, n6) = self.classify(pool, descs);
        // With a firewall, two extra branches per batch (never per packet); the firewall's
        // passes are out of line, so the code without one compiles (inlining included) as it
        // did before the filter stage existed: every hot function keeps a single call site.
        if self.filter.is_some() {
            self.filter_in(pool, descs);
        }
        if n4 > 0 {
            self.fib.v4.lookup_batch(&self.v4_dst[..n4], &mut self.v4_nh[..n4]);
        }
        if n6 > 0 {
            self.fib.v6.lookup_batch(&self.v6_dst[..n6], &mut self.v6_nh[..n6]);
        }
        if self.filter.is_some() {
            return self.apply_filtered(pool, input, outputs, local);
        }
        for (desc, i) in input.drain().zip(0..MAX_BATCH) {
            let step = self.steps[i % MAX_BATCH];
            self.apply::<false>(pool, desc, i, step, outputs, local);
        }
    }

    /// The filter pass, right after classify (the frames are still in cache): state lookups,
    /// else the `in` rules (see [`crate::filter::FilterStage`]).
    #[inline(never)]
    fn filter_in(&mut self, pool: &FramePool, descs: &[FrameDesc]) {
        if let Some(f) = &mut self.filter {
            f.filter_in(pool, descs, &mut self.steps[..]);
        }
    }

    /// The apply pass with the `out` rules, or as without a firewall when no packet of the
    /// batch needs them (every one matched a state, the common case, or there are none).
    #[inline(never)]
    fn apply_filtered(&mut self, pool: &mut FramePool, input: &mut Batch, outputs: &mut [Batch], local: &mut Batch) {
        if self.filter.as_ref().is_some_and(|f| f.out_pass) {
            for (desc, i) in input.drain().zip(0..MAX_BATCH) {
                let step = self.steps[i % MAX_BATCH];
                self.apply::<true>(pool, desc, i, step, outputs, local);
            }
        } else {
            for (desc, i) in input.drain().zip(0..MAX_BATCH) {
                let step = self.steps[i % MAX_BATCH];
                self.apply::<false>(pool, desc, i, step, outputs, local);
            }
        }
        if let Some(f) = &mut self.filter {
            f.fw.end_batch();
        }
    }

    /// Declares that this worker holds no reference into the FIB (call between batches).
    #[inline]
    pub fn quiescent(&self) {
        self.v4_reader.quiescent();
        self.v6_reader.quiescent();
    }

    /// Fills `steps` for every frame; returns how many IPv4 and IPv6 lookups it queued.
    fn classify(&mut self, pool: &FramePool, descs: &[FrameDesc]) -> (usize, usize) {
        let mut lookups = Lookups { v4: &mut self.v4_dst, n4: 0, v6: &mut self.v6_dst, n6: 0 };
        for d in descs.iter().take(PREFETCH_AHEAD) {
            pool.prefetch(*d);
        }
        for (i, (&desc, step)) in descs.iter().zip(self.steps.iter_mut()).enumerate() {
            if let Some(&ahead) = descs.get(i + PREFETCH_AHEAD) {
                pool.prefetch(ahead);
            }
            let port_mac = self.port_macs.get(desc.port as usize).copied().unwrap_or(MacAddr([0; 6]));
            *step = classify_frame(pool.frame(desc), port_mac, &mut lookups);
        }
        (lookups.n4, lookups.n6)
    }

    #[inline(always)]
    fn apply<const FW: bool>(&mut self, pool: &mut FramePool, desc: FrameDesc, i: usize, step: Step, outputs: &mut [Batch], local: &mut Batch) {
        let (l3, nh, v4) = match step {
            Step::Drop(reason) => return self.drop(pool, desc, reason),
            Step::Local => return self.local(desc, local),
            Step::V4 { l3, slot } => (l3 as usize, self.v4_nh[slot as usize % MAX_BATCH], true),
            Step::V6 { l3, slot } => (l3 as usize, self.v6_nh[slot as usize % MAX_BATCH], false),
        };
        let Some(id) = nh else { return self.drop(pool, desc, DropReason::NoRoute) };
        let (port, mac) = match self.fib.adj.get(id) {
            Adjacency::Forward { port, mac } => (port, mac),
            Adjacency::Local => return self.local(desc, local),
            Adjacency::Unresolved { .. } => return self.drop(pool, desc, DropReason::NoNeighbour),
            Adjacency::Blackhole => return self.drop(pool, desc, DropReason::NoRoute),
        };
        let (Some(out), Some(&src_mac)) = (outputs.get_mut(port as usize), self.port_macs.get(port as usize)) else {
            return self.drop(pool, desc, DropReason::TxError);
        };
        let frame = pool.frame_mut(desc);
        // RFC 1812 5.3.1: a packet whose TTL would reach zero is not forwarded. The classify
        // pass validated lengths, so the views below cannot fail.
        if v4 {
            let mut ip = Ipv4Packet::new_unchecked(&mut frame[l3..]);
            if ip.ttl() <= 1 {
                return self.drop(pool, desc, DropReason::TtlExpired);
            }
            ip.decrement_ttl();
        } else {
            let mut ip = Ipv6Packet::new_unchecked(&mut frame[l3..]);
            let hops = ip.hop_limit();
            if hops <= 1 {
                return self.drop(pool, desc, DropReason::TtlExpired);
            }
            ip.set_hop_limit(hops - 1);
        }
        // pf's out pass runs after routing (and, as in the kernel's ip_forward, after the TTL
        // check), on the output interface; a packet whose flow has a state skips it.
        if FW && let Some(f) = &mut self.filter {
            let i = i % MAX_BATCH;
            if !f.stateful[i] && f.fw.has_out()
                && let Err(reason) = f.fw.filter_out(&f.keys[i], port, f.tcp[i].as_ref())
            {
                return self.drop(pool, desc, reason);
            }
        }
        let frame = pool.frame_mut(desc);
        let mut eth = EthernetFrame::new_unchecked(frame);
        eth.set_dst_addr(mac);
        eth.set_src_addr(src_mac);
        debug_assert!(!out.is_full(), "output batch not flushed");
        out.push(desc);
        self.counts.forwarded += 1;
    }

    #[inline(always)]
    fn drop(&mut self, pool: &mut FramePool, desc: FrameDesc, reason: DropReason) {
        self.counts.drop(reason);
        pool.free(desc);
    }

    #[inline(always)]
    fn local(&mut self, desc: FrameDesc, local: &mut Batch) {
        self.counts.local += 1;
        local.push(desc);
    }
}

/// The classify pass for one frame: the checks that need only the frame's bytes.
#[inline(always)]
fn classify_frame(frame: &[u8], port_mac: MacAddr, lookups: &mut Lookups) -> Step {
    let l2 = match wire::parse_l2(frame) {
        Ok(l2) => l2,
        Err(_) => return Step::Drop(DropReason::Truncated),
    };
    if l2.vlans[0].is_some() {
        return Step::Drop(DropReason::UnknownVlan);
    }
    // A router takes unicast frames addressed to its own port only (it is not a bridge).
    let dst_mac = EthernetFrame::new_unchecked(frame).dst_addr();
    let group = dst_mac.is_multicast();
    if !group && dst_mac != port_mac {
        return Step::Drop(DropReason::NotForUs);
    }
    let l3 = l2.l3_offset;
    match l2.ethertype {
        EtherType::Ipv4 => classify_ipv4(&frame[l3..], l3, lookups),
        EtherType::Ipv6 => classify_ipv6(&frame[l3..], l3, lookups),
        EtherType::Arp => Step::Local,
        _ => Step::Drop(DropReason::UnknownEthertype),
    }
}

/// RFC 1812 5.2.2 validation and 5.3.7 martian filtering of an IPv4 header.
#[inline(always)]
fn classify_ipv4(bytes: &[u8], l3: usize, lookups: &mut Lookups) -> Step {
    let ip = match Ipv4Packet::new_checked(bytes) {
        Ok(ip) => ip,
        Err(e) => return Step::Drop(ip_error_reason(e)),
    };
    if !ip.verify_checksum() {
        return Step::Drop(DropReason::BadChecksum);
    }
    let src = u32::from(ip.src_addr());
    let dst = ip.dst_addr_u32();
    let (src_hi, dst_hi) = ((src >> 24) as u8, (dst >> 24) as u8);
    // Sources 0/8, 127/8, multicast and class E / broadcast are never valid senders.
    if src_hi == 0 || src_hi == 127 || src_hi >= 224 {
        return Step::Drop(DropReason::MartianSource);
    }
    // Multicast and limited broadcast are for the host stack (no multicast routing).
    if (224..240).contains(&dst_hi) || dst == u32::from(Ipv4Addr::BROADCAST) {
        return Step::Local;
    }
    if dst_hi == 0 || dst_hi == 127 || dst_hi >= 240 {
        return Step::Drop(DropReason::MartianDestination);
    }
    // At most MAX_BATCH frames per batch, so the slot always exists.
    let slot = lookups.n4;
    lookups.v4[slot % MAX_BATCH] = dst;
    lookups.n4 += 1;
    Step::V4 { l3: l3 as u16, slot: slot as u16 }
}

/// IPv6 header checks (RFC 8200 section 3; RFC 4291 address scopes).
#[inline(always)]
fn classify_ipv6(bytes: &[u8], l3: usize, lookups: &mut Lookups) -> Step {
    let ip = match Ipv6Packet::new_checked(bytes) {
        Ok(ip) => ip,
        Err(e) => return Step::Drop(ip_error_reason(e)),
    };
    let src = ip.src_addr();
    let dst = ip.dst_addr_u128();
    if src.is_multicast() || src.is_loopback() {
        return Step::Drop(DropReason::MartianSource);
    }
    // Multicast (NDP among it) and link-local destinations are never forwarded.
    if (dst >> 120) == 0xff || (dst >> 118) == 0x3fa {
        return Step::Local;
    }
    if dst == 0 || dst == 1 {
        return Step::Drop(DropReason::MartianDestination);
    }
    let slot = lookups.n6;
    lookups.v6[slot % MAX_BATCH] = dst;
    lookups.n6 += 1;
    Step::V6 { l3: l3 as u16, slot: slot as u16 }
}

fn ip_error_reason(e: wire::Error) -> DropReason {
    match e {
        wire::Error::Truncated => DropReason::Truncated,
        wire::Error::BadVersion => DropReason::BadVersion,
        _ => DropReason::BadLength,
    }
}
