//! Looking a packet up and tracking it: the general lookup, the data plane's IPv4 fast path
//! ([`StateTable::lookup_v4`]), and ICMP errors matched to the flow they quote.

use super::index::{Found, find_v4};
use super::proxy::{PROXIED, PROXY_DST, PROXY_SRC};
use super::quick::{mark_steady, steady_bits};
use super::{
    Class, Entry, F_INIT_B, F_SLOPPY, Flow, FlowHit, FlowV4, IcmpErrorMatch, Modulation,
    StateDropReason, StateId, StateLookup, StateTable, StateVerdict, TcpSegment, Tmo, class,
    pseudo_states, tcp, tcp_flags, tcp_state,
};
use crate::packet::{PacketKey, proto};

/// A hit of the general lookup, tracked.
struct Tracked {
    /// The state's slot.
    id: usize,
    /// The packet goes the way of the flow's first packet.
    from_init: bool,
    verdict: StateVerdict,
    /// The rule that created the state.
    rule: u32,
}

impl StateTable {
    /// Looks up the state of a packet and tracks it. `tcp` is the segment for TCP packets
    /// (`None`: flag-only sloppy tracking from `key.tcp_flags`). `now`: coarse clock, seconds.
    #[inline]
    pub fn lookup(&mut self, key: &PacketKey, tcp: Option<&TcpSegment>, now: u32) -> StateLookup {
        self.lookup_flow(&Flow::of(key), tcp, key.tcp_flags, now)
    }

    /// [`lookup`](Self::lookup) of a packet whose flow the caller has built already
    /// ([`Flow::of`] its key; `flags`: its TCP flags): the data plane keeps the flow's
    /// orientation for the passes that follow.
    #[inline]
    pub fn lookup_flow(
        &mut self,
        f: &Flow,
        tcp: Option<&TcpSegment>,
        flags: u8,
        now: u32,
    ) -> StateLookup {
        let found = self.find(&f.key, self.hash(&f.key));
        match self.track(found, f.from_a, f.key.proto(), tcp, flags, now) {
            Some(Tracked { id, from_init, verdict, .. }) => {
                StateLookup::Hit { id: StateId(id as u32), dir_from_initiator: from_init, verdict }
            }
            None => StateLookup::Miss,
        }
    }

    /// [`lookup`](Self::lookup) for an IPv4 flow built straight from the frame: the data
    /// plane's fast path. `h` is its [`hash_v4`](Self::hash_v4), `probe` what
    /// [`probe`](Self::probe) returned for it, if it was called. `None` is a miss.
    ///
    /// Written as one straight path for a UDP hit, everything else out of line, so that the
    /// loop that inlines it keeps its registers for the common case.
    #[inline(always)]
    pub fn lookup_v4(
        &mut self,
        f: &FlowV4,
        h: u64,
        probe: Option<u32>,
        tcp: Option<&TcpSegment>,
        now: u32,
    ) -> Option<FlowHit> {
        // From where the prefetch pass's probe stopped, else from the home bucket.
        let start = match probe {
            Some(p) => p as usize,
            None => self.home(h),
        };
        let Some(id) = find_v4(&self.index, &self.slots, f, h, start) else {
            if probe.is_none() {
                self.counters.misses += 1;
                return None;
            }
            // From the hint, the flow may still be between its home and the hint (moved there
            // by a deletion since the probe): the slow path probes from home.
            return self.lookup_v4_slow(f, h, tcp, now);
        };
        let scaled = self.len > self.adaptive_from;
        let e = self.slots.get_mut(id)?;
        if e.expire <= now
            || f.proto() != proto::UDP
            || scaled
            || e.allow & super::RULE_ADAPTIVE != 0
        {
            return self.lookup_v4_slow(f, h, tcp, now);
        }
        let from_init = f.from_a() ^ (e.flags & F_INIT_B != 0);
        let t =
            if pseudo_states(&mut e.pseudo, from_init) { Tmo::UdpMultiple } else { Tmo::UdpSingle };
        let class_changed = e.tmo != t as u8;
        e.tmo = t as u8;
        e.expire = now.saturating_add(self.secs[t as usize]);
        steady_bits(e, self.want);
        if e.profile != 0 {
            // Under its rule's own timeouts: their deadline, and never steady.
            own_timeouts(e, &self.secs, &self.profiles, now, t);
        }
        self.counters.hits += 1;
        let want = self.want[usize::from(f.from_a())];
        let hit = FlowHit {
            id: StateId(id as u32),
            rule: e.rule,
            verdict: StateVerdict::Pass,
            settled: e.flags & want == want,
        };
        if class_changed {
            self.journal_changed(id);
        } else {
            self.journal_refreshed(id, now);
        }
        Some(hit)
    }

    /// [`lookup_v4`](Self::lookup_v4) for everything but a UDP hit: the general lookup.
    #[inline(never)]
    fn lookup_v4_slow(
        &mut self,
        f: &FlowV4,
        h: u64,
        tcp: Option<&TcpSegment>,
        now: u32,
    ) -> Option<FlowHit> {
        let found = self.find(&f.flow().key, h);
        let flags = tcp.map_or(0, |s| s.flags);
        let Tracked { id, verdict, rule, .. } =
            self.track(found, f.from_a(), f.proto(), tcp, flags, now)?;
        let want = self.want[usize::from(f.from_a())];
        Some(FlowHit {
            id: StateId(id as u32),
            rule,
            verdict,
            settled: self.slots[id].flags & want == want,
        })
    }

    /// The lookup proper, given the outcome of `find`: what it found, on a hit.
    #[inline]
    fn track(
        &mut self,
        found: Result<Found, usize>,
        from_a: bool,
        proto_: u8,
        tcp: Option<&TcpSegment>,
        flags: u8,
        now: u32,
    ) -> Option<Tracked> {
        let Ok(Found { pos, id }) = found else {
            self.counters.misses += 1;
            return None;
        };
        let e = &self.slots[id];
        if self.dead(id, now) {
            return self.expired(pos, id);
        }
        let from_init = from_a ^ (e.flags & F_INIT_B != 0);
        if matches!(e.proxy(), PROXY_SRC | PROXY_DST) && proto_ == proto::TCP {
            let verdict = self.proxy_track(id, from_init, tcp, now);
            self.counters.hits += 1;
            return Some(Tracked { id, from_init, verdict, rule: self.slots[id].rule });
        }
        let e = &mut self.slots[id];
        let mut verdict = StateVerdict::Pass;
        // The packet made both ends of a TCP connection established (source tracking counts
        // connections from then on).
        let mut established = false;
        let refresh = match class(proto_) {
            Class::Udp | Class::Other => {
                Some(match (proto_ == proto::UDP, pseudo_states(&mut e.pseudo, from_init)) {
                    (true, true) => Tmo::UdpMultiple,
                    (true, false) => Tmo::UdpSingle,
                    (false, true) => Tmo::OtherMultiple,
                    (false, false) => Tmo::OtherSingle,
                })
            }
            Class::Icmp => Some(Tmo::IcmpError),
            Class::Tcp => {
                let flags = tcp.map_or(flags, |s| s.flags);
                let [p0, p1] = &mut self.tcp[id];
                let (src, dst) = if from_init { (p0, p1) } else { (p1, p0) };
                if src.state >= tcp_state::FIN_WAIT_2
                    && dst.state >= tcp_state::FIN_WAIT_2
                    && flags & (tcp_flags::SYN | tcp_flags::ACK) == tcp_flags::SYN
                {
                    // New connection reusing the ports of a closed one: drop the old state,
                    // the rules decide about the new one.
                    self.journal_removed(id);
                    self.remove_at(pos, id);
                    self.counters.reused_closed += 1;
                    self.counters.misses += 1;
                    return None;
                }
                let opening =
                    src.state < tcp_state::ESTABLISHED || dst.state < tcp_state::ESTABLISHED;
                let demodulated;
                let tcp = match tcp {
                    // `modulate state`: each end acknowledges the other's shifted numbers; the
                    // state tracks each end's own (pf_tcp_track_full: `ack - dst->seqdiff`).
                    Some(seg) if e.seqdiff != 0 => {
                        let ack_sub = offsets(e, self.mod_key, from_init).map_or(0, |m| m.ack_sub);
                        demodulated = TcpSegment { ack: seg.ack.wrapping_sub(ack_sub), ..*seg };
                        Some(&demodulated)
                    }
                    _ => tcp,
                };
                let t = match tcp {
                    Some(seg) if e.flags & F_SLOPPY == 0 => {
                        let mut track = tcp::track_full(src, dst, seg);
                        let synced = e.pseudo[1] == super::PICK_UP && e.proxy() == 0;
                        if synced && track == tcp::Track::Drop {
                            tcp::pick_up(src, dst, seg);
                            track = tcp::track_full(src, dst, seg);
                            self.counters.picked_up += 1;
                        } else if synced && matches!(track, tcp::Track::Pass(_)) {
                            e.pseudo[1] = 0;
                        }
                        match track {
                            tcp::Track::Pass(t) => Some(t),
                            tcp::Track::PassNoRefresh => None,
                            tcp::Track::Drop => {
                                verdict = StateVerdict::Drop(StateDropReason::OutOfWindow);
                                None
                            }
                        }
                    }
                    _ => Some(tcp::track_sloppy(src, dst, flags)),
                };
                established = opening
                    && src.state == tcp_state::ESTABLISHED
                    && dst.state == tcp_state::ESTABLISHED;
                t
            }
        };
        let mut class_changed = false;
        if let Some(t) = refresh {
            class_changed = e.tmo != t as u8;
            e.tmo = t as u8;
            e.expire = super::deadline(&self.secs, &self.profiles, now, t, e.profile);
        }
        if proto_ == proto::UDP {
            mark_steady(e, self.want);
        }
        let rule = e.rule;
        if class_changed {
            self.journal_changed(id);
        } else {
            self.journal_refreshed(id, now);
        }
        self.counters.hits += 1;
        if verdict != StateVerdict::Pass {
            self.counters.drop_out_of_window += 1;
        }
        if established
            && !self.limited.is_empty()
            && let Some(reason) = self.established(id, now)
        {
            // pf kills the state; the rules decide about the flow's next packets.
            self.journal_removed(id);
            self.remove_at(pos, id);
            return Some(Tracked { id, from_init, verdict: StateVerdict::Drop(reason), rule });
        }
        Some(Tracked { id, from_init, verdict, rule })
    }

    /// A dead entry found by a lookup: reclaimed, and the lookup misses.
    #[cold]
    fn expired(&mut self, pos: usize, id: usize) -> Option<Tracked> {
        self.remove_at(pos, id);
        self.counters.expired_lookup += 1;
        self.counters.misses += 1;
        None
    }

    /// Finds the state of the flow an ICMP error quotes. `quoted` is the inner (quoted) header's
    /// 5-tuple as it appears in the error (its source is the host the error is sent back to;
    /// either orientation finds the state). `quoted_tcp_seq`: the quoted TCP sequence number,
    /// checked against the sender's window as pf does (skipped for sloppy states).
    /// The state's timeout is not refreshed. The caller should also check that the error is
    /// addressed to the quoted packet's source. `None` also for a quoted sequence number
    /// outside the window: see [`match_icmp_error`](Self::match_icmp_error) to tell the two
    /// apart.
    pub fn lookup_icmp_error(
        &mut self,
        quoted: &PacketKey,
        quoted_tcp_seq: Option<u32>,
        now: u32,
    ) -> Option<StateId> {
        match self.match_icmp_error(quoted, quoted_tcp_seq, now) {
            IcmpErrorMatch::Pass(id) => Some(id),
            IcmpErrorMatch::BadSeq(_) | IcmpErrorMatch::Miss => None,
        }
    }

    /// As [`lookup_icmp_error`](Self::lookup_icmp_error), telling a miss (the rules decide,
    /// as pf does) from a state whose window the quoted sequence number is outside (pf drops
    /// the error without evaluating the rules).
    pub fn match_icmp_error(
        &mut self,
        quoted: &PacketKey,
        quoted_tcp_seq: Option<u32>,
        now: u32,
    ) -> IcmpErrorMatch {
        let Flow { key: fk, from_a } = Flow::of(quoted);
        let h = self.hash(&fk);
        let Found { pos, id } = match self.find(&fk, h) {
            Ok(found) => found,
            Err(_) => {
                self.counters.icmp_error_misses += 1;
                return IcmpErrorMatch::Miss;
            }
        };
        let e = &self.slots[id];
        if self.dead(id, now) {
            self.remove_at(pos, id);
            self.counters.expired_lookup += 1;
            self.counters.icmp_error_misses += 1;
            return IcmpErrorMatch::Miss;
        }
        if let (Class::Tcp, Some(seq), false) =
            (class(fk.proto()), quoted_tcp_seq, e.flags & F_SLOPPY != 0)
        {
            let from_init = from_a ^ (e.flags & F_INIT_B != 0);
            // An error about a packet of a modulated flow comes from beyond the firewall: it
            // quotes the shifted sequence number (pf_test_state_icmp).
            let seq = match offsets(e, self.mod_key, from_init) {
                Some(m) => seq.wrapping_sub(m.seq_add),
                None => seq,
            };
            let [p0, p1] = &self.tcp[id];
            let (src, dst) = if from_init { (p0, p1) } else { (p1, p0) };
            if !tcp::icmp_quoted_seq_ok(src, dst, seq) {
                self.counters.icmp_error_bad_seq += 1;
                return IcmpErrorMatch::BadSeq(StateId(id as u32));
            }
        }
        self.counters.icmp_error_hits += 1;
        IcmpErrorMatch::Pass(StateId(id as u32))
    }
}

impl StateTable {
    /// How a packet of `flow` is to be rewritten for its state's `modulate state`, if the flow
    /// has a live state that modulates (the caller rewrites the packet as it leaves; see
    /// [`Modulation`]). Does not track the packet.
    pub fn modulation(&self, flow: &Flow, now: u32) -> Option<Modulation> {
        let Ok(Found { id, .. }) = self.find(&flow.key, self.hash(&flow.key)) else { return None };
        let e = &self.slots[id];
        if self.dead(id, now) {
            return None;
        }
        offsets(e, self.mod_key, flow.from_a ^ (e.flags & F_INIT_B != 0))
    }

    /// [`modulation`](Self::modulation) of state `id` for a packet from endpoint A of its key
    /// (`from_a`) or B.
    pub fn modulation_of(&self, id: StateId, from_a: bool) -> Option<Modulation> {
        let e = self.slots.get(id.0 as usize)?;
        offsets(e, self.mod_key, from_a ^ (e.flags & F_INIT_B != 0))
    }
}

/// The rewrite of a packet of entry `e` from the initiator (`from_init`) or the responder:
/// `modulate state`'s offsets, or a proxied connection's (`synproxy state`: the responder's
/// numbers shifted by `seqdiff`, the initiator's left); `None` when nothing is rewritten
/// (no offset, or a proxied connection still in its handshake).
#[inline]
fn offsets(e: &super::Entry, key: u64, from_init: bool) -> Option<Modulation> {
    if e.seqdiff == 0 {
        return None;
    }
    match e.proxy() {
        0 => Some(modulation_for(e.seqdiff, key, from_init)),
        PROXIED if from_init => Some(Modulation { seq_add: 0, ack_sub: e.seqdiff }),
        PROXIED => Some(Modulation { seq_add: e.seqdiff, ack_sub: 0 }),
        _ => None,
    }
}

/// The rewrite of a packet from the initiator (`from_init`) or from the responder, for a
/// state whose initiator's offset is `seqdiff`. The responder's offset (pf draws it at the
/// responder's first packet, "use random iss for the TCP server") is derived from it under
/// the table's secret `key`, so that the entry holds one number: random to anyone without
/// the secret, as the initiator's is, and never 0.
#[inline]
fn modulation_for(seqdiff: u32, key: u64, from_init: bool) -> Modulation {
    let mut x = key ^ u64::from(seqdiff);
    let responder = match super::flow::splitmix64(&mut x) as u32 {
        0 => 1,
        d => d,
    };
    if from_init {
        Modulation { seq_add: seqdiff, ack_sub: responder }
    } else {
        Modulation { seq_add: responder, ack_sub: seqdiff }
    }
}

/// A UDP hit's entry under its rule's own timeouts (`profile` not 0), after the fast path
/// refreshed it by the table's: the rule's deadline, and no steady bits (`quick.rs`).
#[cold]
#[inline(never)]
fn own_timeouts(
    e: &mut Entry,
    secs: &[u32; Tmo::ALL.len()],
    profiles: &[[Option<u32>; Tmo::ALL.len()]],
    now: u32,
    t: Tmo,
) {
    e.expire = super::deadline(secs, profiles, now, t, e.profile);
    mark_steady(e, [0, 0]);
}
