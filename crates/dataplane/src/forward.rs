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

/// The forwarding node of one worker.
pub struct Forwarder {
    fib: Arc<Fib>,
    port_macs: Vec<MacAddr>,
    pub counts: Counts,
    steps: Vec<Step>,
    v4_dst: Vec<u32>,
    v4_nh: Vec<Option<NextHop>>,
    v6_dst: Vec<u128>,
    v6_nh: Vec<Option<NextHop>>,
}

impl Forwarder {
    pub fn new(fib: Arc<Fib>, ports: &[PortInfo]) -> Self {
        Forwarder {
            fib,
            port_macs: ports.iter().map(|p| p.mac).collect(),
            counts: Counts::default(),
            steps: Vec::with_capacity(MAX_BATCH),
            v4_dst: Vec::with_capacity(MAX_BATCH),
            v4_nh: vec![None; MAX_BATCH],
            v6_dst: Vec::with_capacity(MAX_BATCH),
            v6_nh: vec![None; MAX_BATCH],
        }
    }

    /// Handles every frame of `input` (leaving it empty): forwarded frames are appended to
    /// `outputs[port]`, frames for the router to `local`, the rest freed and counted.
    /// Each output must have room for a whole input batch (callers flush after each call).
    pub fn process(&mut self, pool: &mut FramePool, input: &mut Batch, outputs: &mut [Batch], local: &mut Batch) {
        let descs = input.as_slice();
        self.counts.rx += descs.len() as u64;
        self.classify(pool, descs);
        if !self.v4_dst.is_empty() {
            let n = self.v4_dst.len();
            self.fib.v4.lookup_batch(&self.v4_dst, &mut self.v4_nh[..n]);
        }
        if !self.v6_dst.is_empty() {
            let n = self.v6_dst.len();
            self.fib.v6.lookup_batch(&self.v6_dst, &mut self.v6_nh[..n]);
        }
        for (i, desc) in input.drain().enumerate() {
            let step = self.steps[i];
            self.apply(pool, desc, step, outputs, local);
        }
    }

    fn classify(&mut self, pool: &FramePool, descs: &[FrameDesc]) {
        self.steps.clear();
        self.v4_dst.clear();
        self.v6_dst.clear();
        for d in descs.iter().take(PREFETCH_AHEAD) {
            pool.prefetch(*d);
        }
        for (i, &desc) in descs.iter().enumerate() {
            if let Some(&ahead) = descs.get(i + PREFETCH_AHEAD) {
                pool.prefetch(ahead);
            }
            let port_mac = self.port_macs.get(desc.port as usize).copied().unwrap_or(MacAddr([0; 6]));
            let step = classify_frame(pool.frame(desc), port_mac, &mut self.v4_dst, &mut self.v6_dst);
            self.steps.push(step);
        }
    }

    #[inline(always)]
    fn apply(&mut self, pool: &mut FramePool, desc: FrameDesc, step: Step, outputs: &mut [Batch], local: &mut Batch) {
        let (l3, nh, v4) = match step {
            Step::Drop(reason) => return self.drop(pool, desc, reason),
            Step::Local => return self.local(desc, local),
            Step::V4 { l3, slot } => (l3 as usize, self.v4_nh[slot as usize], true),
            Step::V6 { l3, slot } => (l3 as usize, self.v6_nh[slot as usize], false),
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
fn classify_frame(frame: &[u8], port_mac: MacAddr, v4_dst: &mut Vec<u32>, v6_dst: &mut Vec<u128>) -> Step {
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
        EtherType::Ipv4 => classify_ipv4(&frame[l3..], l3, v4_dst),
        EtherType::Ipv6 => classify_ipv6(&frame[l3..], l3, v6_dst),
        EtherType::Arp => Step::Local,
        _ => Step::Drop(DropReason::UnknownEthertype),
    }
}

/// RFC 1812 5.2.2 validation and 5.3.7 martian filtering of an IPv4 header.
#[inline(always)]
fn classify_ipv4(bytes: &[u8], l3: usize, v4_dst: &mut Vec<u32>) -> Step {
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
    let slot = v4_dst.len() as u16;
    v4_dst.push(dst);
    Step::V4 { l3: l3 as u16, slot }
}

/// IPv6 header checks (RFC 8200 section 3; RFC 4291 address scopes).
#[inline(always)]
fn classify_ipv6(bytes: &[u8], l3: usize, v6_dst: &mut Vec<u128>) -> Step {
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
    let slot = v6_dst.len() as u16;
    v6_dst.push(dst);
    Step::V6 { l3: l3 as u16, slot }
}

fn ip_error_reason(e: wire::Error) -> DropReason {
    match e {
        wire::Error::Truncated => DropReason::Truncated,
        wire::Error::BadVersion => DropReason::BadVersion,
        _ => DropReason::BadLength,
    }
}
