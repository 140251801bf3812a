//! Stage 3, filter in (with a firewall): each routed packet's state, else the `in` rules of
//! its input interface ([`crate::firewall::FirewallStage`]); then `synproxy state`'s answers,
//! for a batch with a handshake to proxy; and later fragments that came before their first,
//! held until it comes.

use io::batch::MAX_BATCH;
use io::{Batch, FrameDesc, FramePool};
use wire::EtherType;

use super::classify::classify_frame;
use super::{Forwarder, Found, Lookups};
use crate::adjacency::Adjacency;
use crate::counters::DropReason;
use crate::fib::Fib;
use crate::firewall::RoutedV4;
use crate::next::Next;

impl Forwarder {
    /// Stage 3: each routed packet's state, else the `in` rules
    /// ([`crate::firewall::FirewallStage`]); then `synproxy state`'s answers if the batch has a
    /// handshake to proxy.
    #[inline(never)]
    pub(super) fn filter_in(&mut self, pool: &mut FramePool, input: &mut Batch, found: Found) {
        let Some(f) = &mut self.firewall else { return };
        let v4 = &self.v4_at[..found.n4.min(MAX_BATCH)];
        f.filter_in(pool, input.as_slice(), &mut self.next[..], v4, found.n6 == 0, found.udp_flows);
        if !f.fw.proxy_queue.is_empty() {
            self.synproxy(pool, input);
        }
    }

    /// `synproxy state`'s packets for the handshake packets the in pass dropped as
    /// `synproxy` (the firewall queued what to send for each, in batch order), each built
    /// in the buffer of the packet that called for it ([`crate::firewall::synproxy`]): the
    /// client's SYN becomes the router's SYN-ACK (sent back), the client's ACK the router's
    /// SYN to the server and the server's SYN-ACK the ACK to the client (both forwarded as
    /// the packets were to be, past the out pass, as pf's generated packets), and the
    /// server's ACK is built in a new buffer, sent after the batch. The in pass left these
    /// packets as drops, so that its loops stay as without `synproxy state`; their classify
    /// decisions (route lookup slots included) are made again here, in the same order.
    /// Only for a batch with such a packet.
    #[cold]
    #[inline(never)]
    pub(super) fn synproxy(&mut self, pool: &mut FramePool, input: &mut Batch) {
        use crate::firewall::synproxy::{self, DEFAULT_MSS, Segment};
        use fw::state::{
            ProxyStep,
            tcp_flags::{ACK, SYN},
        };
        let Some(f) = &mut self.firewall else { return };
        let mut queue = std::mem::take(&mut f.fw.proxy_queue);
        let mut proxy_steps = queue.drain(..);
        let (mut v4, mut v6, mut at) =
            ([0u32; MAX_BATCH], [0u128; MAX_BATCH], [RoutedV4::default(); MAX_BATCH]);
        let mut lookups = Lookups { v4: &mut v4, n4: 0, v6: &mut v6, n6: 0, v4_at: &mut at };
        let mut buf = [0u8; synproxy::MAX_FRAME];
        for (i, desc) in input.as_mut_slice().iter_mut().enumerate().take(MAX_BATCH) {
            let classified = classify_frame::<false>(
                pool.frame(*desc),
                desc.port,
                &self.ports,
                &mut lookups,
                Some((desc.addr, i as u16)),
            );
            if self.next[i] != Next::Drop(DropReason::Synproxy) {
                continue;
            }
            let Some(proxy_step) = proxy_steps.next() else { break };
            let (Some(proxy_step), Some(r)) = (proxy_step, classified.routed()) else {
                continue;
            };
            let (l3, v4) = (r.l3, r.v4);
            let built = match proxy_step {
                // A SYN to the router's own address: not proxied (the host's answer never
                // reaches the forwarder's proxy); its state becomes a plain one.
                ProxyStep::SynAck { id, .. } if to_router(&self.fib, classified, &lookups) => {
                    f.fw.unproxy(id);
                    self.next[i] = classified;
                    f.out_decided[i % MAX_BATCH] = true;
                    continue;
                }
                ProxyStep::SynAck { id, seq, ack } => {
                    let mss = synproxy::mss_of(pool.frame(*desc), l3, v4).unwrap_or(DEFAULT_MSS);
                    f.fw.set_proxy_mss(id, mss);
                    // Window 0, as pf: the client sends nothing before the server's window.
                    let s = Segment { seq, ack, flags: SYN | ACK, win: 0, mss: Some(mss) };
                    synproxy::build(pool.frame(*desc), l3, v4, true, s, &mut buf)
                        .map(|n| (n, Next::Reflect))
                }
                ProxyStep::SynToServer { seq, win, mss } => {
                    let s = Segment { seq, ack: 0, flags: SYN, win, mss: Some(mss) };
                    synproxy::build(pool.frame(*desc), l3, v4, false, s, &mut buf)
                        .map(|n| (n, classified))
                }
                ProxyStep::Established { to_server, to_client } => {
                    let back = Segment {
                        seq: to_server.seq,
                        ack: to_server.ack,
                        flags: ACK,
                        win: to_server.win,
                        mss: None,
                    };
                    if let Some(n) =
                        synproxy::build(pool.frame(*desc), l3, v4, true, back, &mut buf)
                        && let Some(mut copy) = pool.alloc()
                    {
                        pool.write(&mut copy, &buf[..n]);
                        copy.port = desc.port;
                        f.proxy_out.push(copy);
                    }
                    let on = Segment {
                        seq: to_client.seq,
                        ack: to_client.ack,
                        flags: ACK,
                        win: to_client.win,
                        mss: None,
                    };
                    synproxy::build(pool.frame(*desc), l3, v4, false, on, &mut buf)
                        .map(|n| (n, classified))
                }
            };
            if let Some((n, next)) = built {
                pool.write(desc, &buf[..n]);
                self.next[i] = next;
                // The out pass is skipped for the router's own handshake packets.
                f.out_decided[i % MAX_BATCH] = true;
            }
        }
        drop(proxy_steps);
        // The queue's buffer is kept for the next batch.
        f.fw.proxy_queue = queue;
    }

    /// A later fragment that came before its first: held until it comes
    /// ([`crate::firewall::frag_hold`]), or dropped if there is no room.
    #[cold]
    #[inline(never)]
    pub(super) fn hold_fragment(&mut self, pool: &mut FramePool, desc: FrameDesc) {
        if let Some(f) = &mut self.firewall {
            let frame = pool.frame(desc);
            let l2 = wire::parse_l2(frame).ok();
            let ip = l2.and_then(|l2| frame.get(l2.l3_offset..)).unwrap_or(&[]);
            let now = f.fw.now();
            let later = match l2.map(|l2| l2.ethertype) {
                Some(EtherType::Ipv4) => crate::firewall::frags::ident(ip)
                    .filter(|(_, first)| !first)
                    .map(|(id, _)| (id, f.frags.has_first(id, now))),
                Some(EtherType::Ipv6) => crate::firewall::frags6::ident(ip)
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
        self.firewall.as_ref().map_or(0, |f| f.held.waiting())
    }

    /// Whether fragments wait for their first, or were released or expired since
    /// [`held_fragments`](Self::held_fragments) was last called.
    pub fn holds_fragments(&self) -> bool {
        self.firewall.as_ref().is_some_and(|f| f.held.busy())
    }

    /// The fragments that waited for their first: those it released, up to `max`, into
    /// `batch`, to go through [`process`](Self::process) again (their arrival is counted
    /// already); those past their time freed and counted as `fragment_no_first`. Returns
    /// how many went into `batch`.
    pub fn held_fragments(&mut self, pool: &mut FramePool, batch: &mut Batch, max: usize) -> usize {
        let Some(f) = &mut self.firewall else { return 0 };
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
}

/// Whether the routed packet `next` (its destination in `lookups`) is for the router itself.
fn to_router(fib: &Fib, next: Next, lookups: &Lookups) -> bool {
    let nh = match next {
        Next::V4 { slot, .. } => fib.v4.lookup(lookups.v4[usize::from(slot) % MAX_BATCH]),
        Next::V6 { slot, .. } => fib.v6.lookup(lookups.v6[usize::from(slot) % MAX_BATCH]),
        _ => None,
    };
    nh.is_some_and(|nh| fib.adj.get(nh) == Adjacency::Local)
}
