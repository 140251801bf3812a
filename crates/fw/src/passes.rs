//! pf's two passes over a forwarded packet: inbound on the interface it arrived on, then,
//! once the route lookup has chosen the output interface, outbound on that one (pf.c,
//! `pf_test` runs once per direction). Each pass is decided by a pf state of its own if one
//! matches (`state/sub.rs`), else by the rules of that direction and interface; a pass that
//! keeps state creates the state of that pass. The packet is forwarded only if both pass.
//!
//! The data plane looks the state up once per packet and runs [`Passes::inbound`] for a
//! packet that missed or whose state does not settle it, then [`Passes::outbound`] after the
//! route lookup with the [`Ticket`] the inbound pass returned. [`crate::reference::Pf`] is
//! the plain model of the same semantics that the property tests compare against.
//!
//! IP options (pf's `allow-opts`): a packet with options ([`PacketKey::ip_opts`]) passes a
//! pass only if the state or the rule that passes it has `allow-opts`; pf's implicit default
//! pass does not.

use crate::classifier::{Classifier, VerdictCache};
use crate::packet::{Dir, PacketKey};
use crate::rules::{Action, RuleSet, StateMode, StatePolicy};
use crate::state::{
    Flow, InsertError, LimitRefusal, Pass, RuleLimits, SrcRefusal, StateId, StateOptions,
    StateTable, SubState, TcpSegment, is_icmp_error,
};
use crate::verdict::Verdict;
use std::sync::Arc;

/// Why a pass drops a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Drop {
    /// A `block` rule decided.
    Blocked,
    /// It carries IP options and what passes it lacks `allow-opts`.
    IpOptions,
    /// A state was to be created and the table is full.
    StateLimit,
    /// A state was to be created and its rule has its `max` states.
    RuleMax,
    /// A state was to be created and its source has its rule's `max-src-states`.
    SrcStates,
    /// A state was to be created for a new source and its rule has its `max-src-nodes`
    /// sources, or there are `set limit src-nodes` already.
    SrcNodes,
    /// A SYN opened a `synproxy state`: the router answers it itself
    /// ([`StateTable::take_proxy`]).
    Synproxy,
}

impl Drop {
    /// The drop for a state its rule's limits refused.
    fn limit(r: LimitRefusal) -> Drop {
        match r {
            LimitRefusal::Max => Drop::RuleMax,
            LimitRefusal::Source(SrcRefusal::States) => Drop::SrcStates,
            LimitRefusal::Source(SrcRefusal::Nodes) => Drop::SrcNodes,
        }
    }
}

/// What a pass counts: the packet under rule `rule` (`None`: pf's default, or the pass was
/// decided by a state, which the caller counted at the lookup) and whether it created a
/// state for that rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Count {
    pub rule: Option<usize>,
    /// The packet was decided by the rules (not by a state).
    pub by_rules: bool,
    pub created: bool,
}

/// What the inbound pass of a packet leaves to its outbound pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ticket {
    /// The flow's entry, if it has one (found by the lookup or created by the inbound pass).
    pub state: Option<StateId>,
    /// The hit's sender side (see [`Hit`]; an ICMP error's passes are those of the flow it
    /// quotes, as sent by that flow's other end).
    pub from_a: bool,
    /// The outbound pass is settled already: the entry's pf state for it floats and allows
    /// what the packet carries.
    pub out_settled: bool,
    /// The tag the packet leaves the inbound pass with (pf's `tag`, 0: none): what the
    /// outbound pass's `tagged` sees.
    pub tag: u8,
}

/// The rules and states one worker filters with.
pub struct Passes<'a> {
    pub rules: &'a RuleSet,
    pub classifier: &'a Classifier,
    /// The worker's verdict cache in front of `classifier`, if it has one.
    pub cache: Option<&'a mut VerdictCache>,
    pub states: &'a mut StateTable,
    pub now: u32,
    /// The state counts of the rules with `max` ([`RuleLimits::of`] the rules), if any.
    pub limits: Option<&'a Arc<RuleLimits>>,
}

/// A hit of the state lookup, for [`Passes::inbound`]: the entry and whether the packet's
/// sender (for an ICMP error: the other end of the flow it quotes) is endpoint A of its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hit {
    pub id: StateId,
    pub from_a: bool,
}

impl Hit {
    /// The hit of a packet of `key`'s own flow.
    pub fn of(id: StateId, key: &PacketKey) -> Hit {
        Hit { id, from_a: Flow::of(key).from_a() }
    }
}

/// The outcome of a pass the rules decide with verdict `v` (from the rules of `key`'s
/// direction and interface) when it needs no state table: no state matched, the packet has
/// no IP options, the interface is not skipped and the verdict keeps no state. `None`: the
/// pass needs [`Passes`] (with `v`, see [`Passes::inbound_with`]). The data plane's common
/// case, without building a [`Passes`].
#[inline(always)]
pub fn stateless(rules: &RuleSet, v: &Verdict, key: &PacketKey) -> Option<Result<(), Drop>> {
    if key.ip_opts
        || v.keep_state != StateMode::None
        || (!rules.skip.is_empty() && rules.skip.contains(&key.iface))
    {
        return None;
    }
    Some(if v.action == Action::Block { Err(Drop::Blocked) } else { Ok(()) })
}

impl Passes<'_> {
    /// The inbound pass of `key` (as received: `dir` In, `iface` the input interface).
    /// `hit`: the flow's entry if the lookup found one (and let the packet through).
    #[inline(always)]
    pub fn inbound(
        &mut self,
        key: &PacketKey,
        tcp: Option<&TcpSegment>,
        hit: Option<Hit>,
    ) -> (Result<Ticket, Drop>, Count) {
        self.inbound_with(key, tcp, hit, None)
    }

    /// [`inbound`](Self::inbound) with the rules' verdict for `key`, if the caller has it.
    #[inline(always)]
    pub fn inbound_with(
        &mut self,
        key: &PacketKey,
        tcp: Option<&TcpSegment>,
        hit: Option<Hit>,
        v: Option<Verdict>,
    ) -> (Result<Ticket, Drop>, Count) {
        if self.skipped(key.iface) {
            let ticket = Ticket {
                state: hit.map(|h| h.id),
                from_a: hit.is_some_and(|h| h.from_a),
                out_settled: false,
                tag: key.tag,
            };
            return (Ok(ticket), Count::default());
        }
        if let Some(h) = hit {
            return self.inbound_hit(key, tcp, h, v);
        }
        let (r, count) = self.rules(key, tcp, Pass::In, v);
        (r.map(|(state, tag)| Ticket { state, tag, ..Ticket::default() }), count)
    }

    /// [`inbound`](Self::inbound) for a packet whose flow has an entry (`v`: the rules'
    /// verdict if the caller has it, used when the entry has no `in` state for the packet).
    #[inline(never)]
    fn inbound_hit(
        &mut self,
        key: &PacketKey,
        tcp: Option<&TcpSegment>,
        hit: Hit,
        v: Option<Verdict>,
    ) -> (Result<Ticket, Drop>, Count) {
        let [sin, sout] = self.states.sub_states(hit.id, hit.from_a).unwrap_or([None, None]);
        let out_settled = sout.is_some_and(|o| o.bound.is_none() && (o.allow_opts || !key.ip_opts));
        let ticket = Ticket { state: Some(hit.id), from_a: hit.from_a, out_settled, tag: key.tag };
        if let Some(s) = sin.filter(|s| s.on(key.iface)) {
            let ticket = Ticket { tag: if s.tag != 0 { s.tag } else { key.tag }, ..ticket };
            let r = if key.ip_opts && !s.allow_opts { Err(Drop::IpOptions) } else { Ok(ticket) };
            return (r, Count::default());
        }
        let (r, count) = self.rules(key, tcp, Pass::In, v);
        (r.map(|(_, tag)| Ticket { tag, ..ticket }), count)
    }

    /// The outbound pass of `key` (as the inbound pass saw it) on interface `port`.
    #[inline]
    pub fn outbound(
        &mut self,
        key: &PacketKey,
        port: u16,
        tcp: Option<&TcpSegment>,
        ticket: Ticket,
    ) -> (Result<(), Drop>, Count) {
        self.outbound_seen(key, port, tcp, ticket, |p, k| p.verdict(k))
    }

    /// The outbound pass of a packet that leaves translated (`nat`, `binat`): the rules judge
    /// it as it leaves, `seen` (its new source; pf translates before it filters), while its
    /// state stays keyed by `key`, the form the inbound pass and the state lookup see, so
    /// that the flow keeps one entry. `pass`: a translation rule with `pass` decides instead
    /// of the rules (pf's default pass, keeping state).
    #[inline(never)]
    pub fn outbound_translated(
        &mut self,
        key: &PacketKey,
        seen: &PacketKey,
        port: u16,
        tcp: Option<&TcpSegment>,
        ticket: Ticket,
        pass: bool,
    ) -> (Result<(), Drop>, Count) {
        let seen = PacketKey { dir: Dir::Out, iface: port, tag: ticket.tag, ..*seen };
        self.outbound_seen(key, port, tcp, ticket, |p, _| {
            if pass { Verdict::TRANSLATION_PASS } else { p.verdict(&seen) }
        })
    }

    #[inline(always)]
    fn outbound_seen(
        &mut self,
        key: &PacketKey,
        port: u16,
        tcp: Option<&TcpSegment>,
        ticket: Ticket,
        judge: impl FnOnce(&mut Self, &PacketKey) -> Verdict,
    ) -> (Result<(), Drop>, Count) {
        if self.skipped(port) {
            return (Ok(()), Count::default());
        }
        let key = PacketKey { dir: Dir::Out, iface: port, tag: ticket.tag, ..*key };
        // Read now: an earlier packet's outbound pass may have added it since the lookup.
        let sub = ticket.state.and_then(|id| self.out_state(id, &key, &ticket));
        if let Some(s) = sub.filter(|s| s.on(port)) {
            let r = if key.ip_opts && !s.allow_opts { Err(Drop::IpOptions) } else { Ok(()) };
            return (r, Count::default());
        }
        let v = judge(self, &key);
        let (r, count) = self.rules(&key, tcp, Pass::Out, Some(v));
        (r.map(|_| ()), count)
    }

    /// The rules' verdict for `key`, through the cache if there is one.
    #[inline(always)]
    fn verdict(&mut self, key: &PacketKey) -> Verdict {
        match self.cache.as_deref_mut() {
            Some(c) => c.classify(self.classifier, key),
            None => self.classifier.classify(key),
        }
    }

    /// `set skip on`: pf does not filter this interface at all.
    #[inline(always)]
    fn skipped(&self, iface: u16) -> bool {
        !self.rules.skip.is_empty() && self.rules.skip.contains(&iface)
    }

    /// The entry's pf state for the outbound pass of `key`, if the entry is still its flow's
    /// (an ICMP error's entry is the quoted flow's: taken as the inbound pass found it).
    fn out_state(&self, id: StateId, key: &PacketKey, ticket: &Ticket) -> Option<SubState> {
        let subs = if is_icmp_error(key.proto, key.src_port) {
            self.states.sub_states(id, ticket.from_a)
        } else {
            self.states.sub_states_of(id, key)
        };
        subs?[1]
    }

    /// The rules of `key`'s direction and interface: `Ok((entry, tag))` if the packet passes
    /// (the entry its `keep state` created or joined, if any, and the tag it leaves with).
    #[inline(always)]
    fn rules(
        &mut self,
        key: &PacketKey,
        tcp: Option<&TcpSegment>,
        pass: Pass,
        v: Option<Verdict>,
    ) -> (Result<(Option<StateId>, u8), Drop>, Count) {
        let v = match v {
            Some(v) => v,
            None => self.verdict(key),
        };
        let count = Count { rule: v.rule, by_rules: true, created: false };
        if v.action == Action::Block {
            return (Err(Drop::Blocked), count);
        }
        // Only the inbound pass's tag travels (to the outbound pass); an outbound pass's is
        // kept by the state it creates, computed there.
        let tag = match pass {
            Pass::In if v.tag != 0 => v.tag,
            Pass::In => key.tag,
            Pass::Out => 0,
        };
        if v.keep_state == StateMode::None && !key.ip_opts {
            return (Ok((None, tag)), count);
        }
        let (r, count) = self.options_and_state(key, tcp, pass, v.rule, v.keep_state, v.tag);
        (r.map(|id| (id, tag)), count)
    }

    /// The rest of [`rules`](Self::rules) for a passing packet: the rule's `allow-opts`, and
    /// its state (which tags the packets it passes as the verdict's `tag`, else as the packet
    /// came).
    #[inline(never)]
    fn options_and_state(
        &mut self,
        key: &PacketKey,
        tcp: Option<&TcpSegment>,
        pass: Pass,
        i: Option<usize>,
        keep: StateMode,
        tag: u8,
    ) -> (Result<Option<StateId>, Drop>, Count) {
        let tag = if tag != 0 { tag } else { key.tag };
        let mut count = Count { rule: i, by_rules: true, created: false };
        let allow_opts = i.is_some_and(|i| self.rules.rules[i].allow_opts);
        if key.ip_opts && !allow_opts {
            return (Err(Drop::IpOptions), count);
        }
        let sloppy = match keep {
            StateMode::None => return (Ok(None), count),
            // pf creates no state for ICMP errors.
            _ if is_icmp_error(key.proto, key.src_port) => return (Ok(None), count),
            StateMode::Keep | StateMode::Modulate | StateMode::Synproxy => false,
            StateMode::KeepSloppy => true,
        };
        let modulate = keep == StateMode::Modulate;
        let policy =
            i.and_then(|i| self.rules.rules[i].state_policy).unwrap_or(self.rules.state_policy);
        let bound = (policy == StatePolicy::IfBound).then_some(key.iface);
        // An outbound pass never proxies (the router's own SYNs, a rule without direction).
        let synproxy = keep == StateMode::Synproxy && pass == Pass::In;
        let opts = StateOptions { sloppy, allow_opts, bound, tag, modulate, synproxy };
        let rule = i.unwrap_or(usize::MAX).min(u32::MAX as usize) as u32;
        let held = match i.and_then(|i| Some((i, self.limits.filter(|l| l.limits(i))?))) {
            Some((i, l)) => match l.acquire(i, key, self.now) {
                Ok(h) => Some(h),
                Err(e) => {
                    self.states.count_refusal(e);
                    return (Err(Drop::limit(e)), count);
                }
            },
            None => None,
        };
        let r = self.states.keep(key, rule, self.now, tcp, opts, pass);
        if let Some(h) = held {
            self.states.tick(self.now);
            // Counted once per pf state the rule added; given back with its entry.
            match r {
                Ok((id, true)) => self.states.hold_limit(id, h),
                _ => h.release(self.now),
            }
        }
        match r {
            Ok((id, added)) => {
                count.created = added;
                // `route-to` on an `out` rule: the flow's entry (which the inbound pass may
                // have made, under its own rule) holds one rule index; the out rule's, which
                // says where the flow's packets go, takes it.
                if pass == Pass::Out && i.is_some_and(|i| self.rules.rules[i].route.is_some()) {
                    self.states.set_rule(id, rule);
                }
                // The SYN that opened a `synproxy state` is answered by the router, not passed.
                if synproxy && self.states.proxy_pending() {
                    return (Err(Drop::Synproxy), count);
                }
                (Ok(Some(id)), count)
            }
            Err(InsertError::Full) => (Err(Drop::StateLimit), count),
            Err(InsertError::Exists(id)) => (Ok(Some(id)), count),
        }
    }
}
