//! Creating a state for the first packet of a flow.

use super::index::Found;
use super::quick::mark_steady;
use super::{
    Class, Entry, F_INIT_B, F_SLOPPY, F_USED, Flow, InsertError, NONE, StateId, StateOptions,
    StateTable, TcpSegment, Tmo, class, pseudo_state, sub, tcp, tcp_flags, tcp_state,
};
use crate::packet::{PacketKey, proto};

impl StateTable {
    /// Creates the state for the first packet of a flow (default options).
    pub fn insert(
        &mut self,
        key: &PacketKey,
        rule: u32,
        now: u32,
        tcp: Option<&TcpSegment>,
    ) -> Result<StateId, InsertError> {
        self.insert_with(key, rule, now, tcp, StateOptions::default())
    }

    /// Creates the state for the first packet of a flow, holding both of pf's states (the
    /// packet's `in` and `out` states, see `sub.rs`): it settles every packet of the flow.
    /// The packet's source is the initiator. A dead entry for the same flow is replaced in
    /// place. Never allocates.
    pub fn insert_with(
        &mut self,
        key: &PacketKey,
        rule: u32,
        now: u32,
        tcp: Option<&TcpSegment>,
        opts: StateOptions,
    ) -> Result<StateId, InsertError> {
        let id = self.create(key, rule, now, tcp, opts)?;
        let e = &mut self.slots[id];
        sub::add(e, true, opts);
        sub::add(e, false, opts);
        if e.key.proto() == proto::UDP {
            mark_steady(e, self.want);
        }
        Ok(StateId(id as u32))
    }

    /// A new entry for `key`'s flow (no pf state in it yet), or `Exists`.
    pub(super) fn create(
        &mut self,
        key: &PacketKey,
        rule: u32,
        now: u32,
        tcp: Option<&TcpSegment>,
        opts: StateOptions,
    ) -> Result<usize, InsertError> {
        self.create_flow(&Flow::of(key), rule, now, tcp, opts)
    }

    /// [`create`](Self::create) for a flow built already (a state imported from a peer).
    pub(super) fn create_flow(
        &mut self,
        flow: &Flow,
        rule: u32,
        now: u32,
        tcp: Option<&TcpSegment>,
        opts: StateOptions,
    ) -> Result<usize, InsertError> {
        let Flow { key: fk, from_a } = *flow;
        let h = self.hash(&fk);
        let id = match self.find(&fk, h) {
            Ok(Found { id, .. }) => {
                if !self.dead(id, now) {
                    self.counters.insert_exists += 1;
                    return Err(InsertError::Exists(StateId(id as u32)));
                }
                self.counters.expired_lookup += 1;
                self.release_limits(id);
                id
            }
            Err(pos) => {
                if self.len >= self.limit {
                    self.counters.insert_full += 1;
                    return Err(InsertError::Full);
                }
                let id = if self.free_head != NONE {
                    let id = self.free_head as usize;
                    self.free_head = self.slots[id].rule;
                    id
                } else {
                    self.slots.push(Entry::default());
                    self.tcp.push(Default::default());
                    self.slots.len() - 1
                };
                self.index[pos] = self.word(h, id);
                self.len += 1;
                id
            }
        };
        let mut e = Entry { key: fk, rule, flags: F_USED, ..Entry::default() };
        if !from_a {
            e.flags |= F_INIT_B;
        }
        let t = match class(fk.proto()) {
            Class::Tcp => {
                let peers = &mut self.tcp[id];
                *peers = Default::default();
                let [src, dst] = peers;
                match tcp {
                    Some(seg) => tcp::init(src, dst, seg),
                    None => {
                        src.state = tcp_state::SYN_SENT;
                        dst.state = tcp_state::CLOSED;
                    }
                }
                if opts.sloppy || tcp.is_none() {
                    e.flags |= F_SLOPPY;
                }
                Tmo::TcpFirst
            }
            Class::Udp => {
                e.pseudo[0] = pseudo_state::SINGLE;
                Tmo::UdpFirst
            }
            Class::Other => {
                e.pseudo[0] = pseudo_state::SINGLE;
                Tmo::OtherFirst
            }
            Class::Icmp => Tmo::IcmpFirst,
        };
        if opts.modulate
            && let Some(seg) =
                tcp.filter(|s| s.flags & (tcp_flags::SYN | tcp_flags::ACK) == tcp_flags::SYN)
            && class(fk.proto()) == Class::Tcp
        {
            e.seqdiff = self.seqdiff(h, seg.seq);
            self.modulated = true;
        }
        if opts.synproxy
            && let Some(seg) = tcp.filter(|s| {
                s.flags & (tcp_flags::SYN | tcp_flags::ACK | tcp_flags::RST) == tcp_flags::SYN
            })
            && class(fk.proto()) == Class::Tcp
        {
            self.proxy_start(&mut e, id, h, seg);
        }
        e.tmo = t as u8;
        e.profile = self.profile_of(rule);
        e.expire = self.deadline(now, t, e.profile);
        if fk.proto() == proto::UDP {
            mark_steady(&mut e, self.want);
        }
        self.slots[id] = e;
        self.counters.inserts += 1;
        self.journal_changed(id);
        Ok(id)
    }

    /// `modulate state`'s offset for an initiator whose SYN carries `seq` (pf_create_state:
    /// `seqdiff = pf_tcp_iss() - seq`, never 0): the initial sequence number the responder
    /// sees is the keyed hash of the flow (`h`, under the table's secret) and a counter, as
    /// pf's `pf_tcp_iss` (RFC 6528) is, so it cannot be predicted from the initiator's.
    fn seqdiff(&mut self, h: u64, seq: u32) -> u32 {
        self.iss = self.iss.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut x = self.iss ^ h;
        let iss = super::flow::splitmix64(&mut x) as u32;
        match iss.wrapping_sub(seq) {
            0 => 1,
            d => d,
        }
    }
}
