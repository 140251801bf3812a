//! Stage 6, rewrite and send (the last pass of the node): per packet, its adjacency (a member
//! of a multipath group by flow hash), the TTL or hop limit (RFC 1812 5.3.1), with a
//! firewall its out rules and outbound translation (`forward/filter_out.rs`), the MTU, the
//! link-layer rewrite (MACs, and the output port's 802.1Q tag: read, pushed, popped in
//! software), and the output batch; or the punt batch, or a drop counted under its reason.

use io::batch::MAX_BATCH;
use io::{Batch, FrameDesc, FramePool};
use lpm::NextHop;
use wire::icmp_reply::IcmpError;
use wire::{EthernetFrame, Ipv4Packet, Ipv6Packet, MacAddr};

use super::filter_out::OutStop;
use super::{ETH_LEN, Forwarder, TAG_LEN, mode};
use crate::adjacency::Adjacency;
use crate::counters::DropReason;
use crate::firewall::modulate;
use crate::next::Next;
use crate::ports::OutPort;
use crate::punt::{Punt, PuntBatch};
use crate::tap::Point;
use fw::state::Modulation;

impl Forwarder {
    /// Stage 6: every packet of the batch sent, punted or dropped, doing what `MODE` says
    /// besides ([`mode`]).
    #[inline(always)]
    pub(super) fn send<const MODE: u8>(
        &mut self,
        pool: &mut FramePool,
        input: &mut Batch,
        outputs: &mut [Batch],
        punts: &mut PuntBatch,
    ) {
        for (desc, i) in input.drain().zip(0..MAX_BATCH) {
            let next = self.next[i % MAX_BATCH];
            self.send_one::<MODE>(pool, desc, i, next, outputs, punts);
        }
    }

    /// The rest of packet `i`'s way after the lookups, with what `MODE` adds ([`mode`]).
    #[inline(always)]
    pub(super) fn send_one<const MODE: u8>(
        &mut self,
        pool: &mut FramePool,
        mut desc: FrameDesc,
        i: usize,
        next: Next,
        outputs: &mut [Batch],
        punts: &mut PuntBatch,
    ) {
        let (l3, nh, v4, in_port) = match next {
            // A blocked packet's answer, if its rule has one, is in the filter stage's list.
            Next::Drop(DropReason::FilterBlocked) => return self.blocked(pool, desc, i, punts),
            Next::Drop(DropReason::FragmentNoFirst) => return self.hold_fragment(pool, desc),
            Next::Drop(reason) => return self.drop(pool, desc, reason),
            Next::Reflect => return self.reflect(pool, desc, outputs),
            Next::Local { in_port } => {
                return self.local_rewritten::<MODE>(pool, desc, in_port, punts);
            }
            Next::V4 { l3, slot, in_port } => {
                (l3 as usize, self.v4_nh[slot as usize % MAX_BATCH], true, in_port)
            }
            Next::V6 { l3, slot, in_port } => {
                (l3 as usize, self.v6_nh[slot as usize % MAX_BATCH], false, in_port)
            }
        };
        let Some(id) = nh else {
            return self.error(pool, desc, in_port, DropReason::NoRoute, IcmpError::NoRoute, punts);
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
            Adjacency::Local => return self.local_rewritten::<MODE>(pool, desc, in_port, punts),
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
        if mode::has(MODE, mode::TRANSLATE_OUT)
            && v4
            && self.firewall.as_ref().is_some_and(|f| f.nat.on_port(port))
        {
            match self.translate_out_only(pool, desc, i, l3, port) {
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
        } else if mode::has(MODE, mode::TRANSLATE_OUT)
            && !v4
            && let Err(reason) = self.translate_out6(pool, desc, l3, port)
        {
            return self.drop(pool, desc, reason);
        }
        // `modulate state`: the flow as its state is keyed, read before NAT's out pass
        // translates the packet.
        let target = if mode::has(MODE, mode::MODULATE) {
            modulate::target(pool.frame(desc).get(l3..).unwrap_or(&[]), v4)
        } else {
            None
        };
        // pf's out pass runs after routing (and, as in the kernel's ip_forward, after the TTL
        // check), on the output interface.
        if mode::has(MODE, mode::FILTER_OUT)
            && let Err(stop) = self.filter_out::<MODE>(pool, desc, i, l3, port, v4)
        {
            return match stop {
                OutStop::Refuse(refusal) => self.refuse(pool, desc, in_port, refusal, punts),
                OutStop::Drop(reason) => self.drop(pool, desc, reason),
            };
        }
        // `route-to` on an `out` rule: the state the out pass made may send it elsewhere.
        if mode::has(MODE, mode::FILTER_OUT) && self.route_opts.out_rules {
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
        let rewrite = if mode::has(MODE, mode::MODULATE) { self.modulation(target) } else { None };
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
        if mode::has(MODE, mode::MODULATE)
            && let Some((m, target)) = rewrite
        {
            modulate::apply(pool.frame_mut(desc).get_mut(l3..).unwrap_or(&mut []), target, m);
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
    pub(super) fn path(
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
    pub(super) fn too_big(
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
            (40 + usize::from(Ipv6Packet::new_unchecked(&frame[l3..]).payload_len()), true)
        };
        let mtu = usize::from(out_port.mtu);
        // A packet that leaves (whole, or in fragments) leaves modulated; an error about it
        // quotes it as its sender sent it.
        if let Some((m, target)) = rewrite
            && (ip_len <= mtu || !df)
        {
            modulate::apply(pool.frame_mut(desc).get_mut(l3..).unwrap_or(&mut []), target, m);
        }
        if ip_len <= mtu {
            // Bytes after the IP packet (a frame carrying trailing data) made it look long;
            // the packet itself fits: the slow path sends it with its new L2 header.
            self.counts.slow_path += 1;
            return punts.push(desc, later, in_port);
        }
        if df {
            // The error quotes the packet as its sender sent it (not modulated).
            let err = IcmpError::PacketTooBig { mtu: u32::from(out_port.mtu) };
            return self.error(pool, desc, in_port, DropReason::TooBig, err, punts);
        }
        self.counts.slow_path += 1;
        punts.push(desc, later, in_port);
    }

    /// A dropped packet the sender should hear about: counted under `reason`, and handed to
    /// the slow path for an ICMP error if this worker's rate limit allows one now.
    #[cold]
    #[inline(never)]
    pub(super) fn error(
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
        let now = *self.batch_now.get_or_insert_with(|| self.epoch.elapsed().as_nanos() as u64);
        if self.icmp_limit.as_mut().is_some_and(|limit| limit.allow(now)) {
            punts.push(desc, Punt::Error(err), in_port);
        } else {
            pool.free(desc);
        }
    }

    /// `synproxy state`'s SYN-ACK, built in the client's SYN: out of the port the SYN came
    /// in on. The SYN counts as consumed by the proxy (`synproxy`).
    #[cold]
    #[inline(never)]
    pub(super) fn reflect(&mut self, pool: &mut FramePool, desc: FrameDesc, outputs: &mut [Batch]) {
        self.counts.drop(DropReason::Synproxy);
        match outputs.get_mut(usize::from(desc.port)) {
            Some(out) if !out.is_full() => out.push(desc),
            _ => pool.free(desc),
        }
    }

    #[inline(always)]
    pub(super) fn drop(&mut self, pool: &mut FramePool, desc: FrameDesc, reason: DropReason) {
        self.counts.drop(reason);
        if self.tap.is_some() {
            self.tap_drop(pool, desc, reason);
        }
        pool.free(desc);
    }

    /// Copies a dropped frame for a capture at the drop point.
    #[cold]
    #[inline(never)]
    pub(super) fn tap_drop(&mut self, pool: &FramePool, desc: FrameDesc, reason: DropReason) {
        if let Some(t) = self.tap_at(Point::Drop) {
            t.copy_desc(pool, desc, desc.port, Some(reason));
        }
    }

    #[inline(always)]
    pub(super) fn local(&mut self, desc: FrameDesc, in_port: u16, punts: &mut PuntBatch) {
        self.counts.local += 1;
        punts.push(desc, Punt::Local, in_port);
    }
}

/// RFC 1812 5.3.1: a packet whose TTL would reach zero is not forwarded. Decrements the TTL
/// (hop limit) of the packet at `l3` and returns true, or returns false if it would reach
/// zero. The classify pass validated lengths, so the views cannot fail.
#[inline(always)]
pub(super) fn decrement_ttl(frame: &mut [u8], l3: usize, v4: bool) -> bool {
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
pub(super) fn rewrite_l2_in_place(frame: &mut [u8], out: &OutPort, mac: MacAddr) {
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
pub(super) fn write_l2(
    pool: &mut FramePool,
    desc: &mut FrameDesc,
    l3: usize,
    out: &OutPort,
    mac: MacAddr,
) -> bool {
    let hdr = if out.tci == 0 { ETH_LEN } else { ETH_LEN + TAG_LEN };
    // The EtherType of the IP packet sits right before l3 in both layouts; only what is in
    // front of it changes.
    let moved =
        if hdr > l3 { pool.push_front(desc, hdr - l3) } else { pool.pull_front(desc, l3 - hdr) };
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
