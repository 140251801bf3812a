//! The router's own packets through the firewall: what the host stack sends on linerate's
//! TAPs (ssh's replies, BGP, the router's pings) is filtered as pf filters a router's own
//! packets, in one pass, `out` on the interface it leaves by (pf.conf(5): packets the
//! router sends pass only the outbound rules). Its flow's state is looked up first, so that
//! a state made by a connection to the router sees both directions (pf's TCP window
//! tracking needs the replies; without them bulk TCP to the router stalls once it passes
//! the first window), and the `out` rules may keep state, so that the replies to the
//! router's own connections pass `block in` rule sets.
//!
//! Translation (`nat`, `rdr`, `binat`) does not apply to these packets, and a `block
//! return` rule that blocks one drops it without an answer to the host stack.

use fw::packet::{Dir, PacketKey};
use fw::passes::{Hit, Ticket};
use fw::state::{IcmpErrorMatch, StateLookup, StateVerdict, TcpSegment, is_icmp_error};

use super::{Firewall, keys, state_drop_reason};
use crate::counters::DropReason;

impl Firewall {
    /// pf's pass over an IP packet the router sends on logical port `port` (`frame`: its
    /// Ethernet frame, the IP header at `l3`): `Ok` to send it.
    pub fn local_out(
        &mut self,
        frame: &[u8],
        l3: usize,
        v4: bool,
        port: u16,
    ) -> Result<(), DropReason> {
        self.begin_batch();
        let mut key = PacketKey::ZERO;
        let mut tcp = None;
        keys::extract(frame, l3, v4, port, &mut key, &mut tcp);
        key.dir = Dir::Out;
        key.iface = port;
        self.fill_route_bits(&mut key);
        let r = match self.local_icmp_error(frame, l3, &key) {
            Some(r) => r,
            None => self.local_out_key(&key, tcp.as_ref(), port),
        };
        if self.has_log_hit() {
            self.emit_log(frame, l3, port);
        }
        self.blocked_by = None;
        // The router's own connections are not proxied: a handshake step is not acted on.
        if !self.proxy_queue.is_empty() {
            self.proxy_queue.clear();
        }
        self.end_batch();
        r
    }

    /// The `route-to` or `reply-to` of the state that passed the router's own packet
    /// (`local_out` said `Ok`) on logical port `port`, if it routes the packet's side of
    /// its flow (pfSense's `pass out route-to` for the router's traffic on a second WAN;
    /// `reply-to` on the `pass in` rule of a connection to the router).
    pub fn local_route(
        &self,
        frame: &[u8],
        l3: usize,
        v4: bool,
        port: u16,
    ) -> Option<fw::rules::RouteOpt> {
        if !self.routes() {
            return None;
        }
        let (mut key, mut tcp) = (PacketKey::ZERO, None);
        keys::extract(frame, l3, v4, port, &mut key, &mut tcp);
        key.dir = Dir::Out;
        key.iface = port;
        self.route_option(&key).filter(|o| o.af == key.af)
    }

    /// An ICMP error the router sends about a tracked flow (the kernel's port unreachable,
    /// its time exceeded) passes under that flow's state, as in pf; one quoting a TCP
    /// sequence number outside the flow's window is dropped. `None`: not such an error.
    fn local_icmp_error(
        &mut self,
        frame: &[u8],
        l3: usize,
        key: &PacketKey,
    ) -> Option<Result<(), DropReason>> {
        if !is_icmp_error(key.proto, key.src_port) || self.states.is_empty() {
            return None;
        }
        let (quoted, seq) = keys::quoted(frame, l3, key)?;
        let id = match self.states.match_icmp_error(&quoted, seq, self.now) {
            IcmpErrorMatch::Pass(id) => id,
            IcmpErrorMatch::BadSeq(_) => return Some(Err(DropReason::StateOutOfWindow)),
            IcmpErrorMatch::Miss => return None,
        };
        let rule = self.states.rule_of(id).map_or(usize::MAX, |r| r as usize);
        self.count(rule, key.len);
        Some(Ok(()))
    }

    fn local_out_key(
        &mut self,
        key: &PacketKey,
        tcp: Option<&TcpSegment>,
        port: u16,
    ) -> Result<(), DropReason> {
        let mut ticket = Ticket::default();
        if !self.states.is_empty()
            && let StateLookup::Hit { id, verdict, .. } = self.states.lookup(key, tcp, self.now)
        {
            let rule = self.states.rule_of(id).map_or(usize::MAX, |r| r as usize);
            self.count(rule, key.len);
            self.log_state(rule, verdict);
            if let StateVerdict::Drop(d) = verdict {
                return Err(state_drop_reason(d));
            }
            let hit = Hit::of(id, key);
            ticket =
                Ticket { state: Some(id), from_a: hit.from_a, out_settled: false, tag: key.tag };
        }
        self.filter_out(key, port, tcp, ticket)
    }
}
