//! The NAT stage of one worker: pf's translation rules (`fw::nat`) applied at the router's
//! edges, around the filter.
//!
//! * [`NatStage::inbound`] runs right after the classify pass, before the inbound filter and
//!   the route lookup, on packets arriving on an interface that translation rules name: a
//!   reply to a `nat`-ed flow gets its inside destination back, a packet `rdr` or `binat`
//!   redirects gets its new destination (so the filter, and the FIB, see the translated
//!   destination, as pf's filter does after `rdr`).
//! * [`NatStage::outbound`] runs in the outbound pass, on packets leaving by such an
//!   interface: `nat` and `binat` rewrite the source, replies of `rdr`-ed flows get their
//!   outside source back. When the out rules must judge the packet (no state out_decided it),
//!   [`NatStage::plan_outbound`] chooses the translation first, the rules judge the packet
//!   with its new source (as pf's, which translates before it filters), and
//!   [`NatStage::commit_outbound`] makes it only if they pass it.
//! * A translation rule with `pass` (`nat pass`, `rdr pass`, `binat pass`) lets the packets
//!   it translates skip the filter rules of that pass; the pass keeps a state instead.
//!
//! ICMP errors about a translated flow are translated with the packet they quote; ICMP query
//! identifiers are translated as ports. A translation is made by the first packet that
//! matches a rule (pf's first-match for translation rules) and lives in the worker's own
//! [`NatTable`] until idle for its protocol's timeout. `binat` needs no table: the mapping
//! is fixed.
//!
//! With several workers, the port of a new `nat` translation is chosen so that the reply's
//! symmetric Toeplitz hash ([`io::rss`], the hash of the AF_PACKET fanout program and of a
//! NIC with the symmetric key) picks this worker: replies come back to the table that holds
//! the translation.

use std::sync::Arc;

use fw::nat::pool::{Pool, PoolCursor};
use fw::nat::table::{AllocError, NatKey, NatTable, Session};
use fw::nat::{NatAddr, NatKind, NatPhase, NatRule, binat_inside, first_match};
use fw::packet::{Af, Dir, PacketKey};
use fw::rules::RuleSet;
use io::batch::MAX_BATCH;
use io::rss::{SYMMETRIC_KEY, Toeplitz, queue_for};

use super::CompiledRules;
use super::nat_rewrite::{
    End, Kind, Tuple, read, read_plain, rewrite, rewrite_error, rewrite_plain,
};
use crate::counters::DropReason;

/// Table slots the expiry sweep examines per batch, at most (it keeps pf's pace,
/// [`NatTable::sweep_paced`]).
const SWEEP_BUDGET: usize = 16;

/// Bytes of translation table (index and slots) up to which a batch's lookups are not
/// prefetched: a table that size stays cached (as the state table's `CACHED_TABLE_BYTES`).
const CACHED_TABLE_BYTES: usize = 1 << 20;

/// Which worker this is, for the choice of ports.
struct Steering {
    worker: u16,
    workers: u16,
    hash: Toeplitz,
}

/// What a rule set needs resolved per worker: each rule's pool (`None` for `no` rules and
/// for `(iface)` without an IPv4 address), and the ports translation applies on.
struct Plan {
    /// Identity of the compiled set the plan was made for.
    rules: usize,
    pools: Vec<Option<Pool>>,
    /// By logical port: some rule (or a translation made earlier) applies there.
    ports: Vec<bool>,
    /// Some rule has no `on` (or `on !`): every port.
    every_port: bool,
}

/// Counters of the NAT stage (read by tests and the exit report).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NatCounts {
    pub sessions: u64,
    pub created: u64,
    pub expired: u64,
    pub translated: u64,
    /// Sources whose `sticky-address` choice is kept.
    pub sticky: u64,
}

/// The NAT stage of one worker.
pub(crate) struct NatStage {
    table: NatTable,
    cursor: PoolCursor,
    /// The IPv4 address of each logical port, for `(iface)` targets.
    port_v4: Vec<Option<u32>>,
    plan: Option<Plan>,
    steering: Option<Steering>,
    seed: u64,
    translated: u64,
    /// Bit `min(port, 63)` set for each logical port translation applies on (every bit when
    /// some rule has no `on`): the per-packet test, exact below port 63 (the plan decides the
    /// rest).
    port_mask: u64,
    /// The batch's prefetched lookups: hash, whether of an out key, and the packet's index
    /// in the batch.
    prefetched: Box<[(u64, bool, u16); MAX_BATCH]>,
    /// The prefetching pass's hash of each packet's out key and the slot its probe named
    /// ([`NO_HINT`](fw::nat::table::NO_HINT): none), by index in the batch (valid while `hashed`): the outbound pass's
    /// lookup reuses them.
    out_hash: Box<[Option<(u64, u32)>; MAX_BATCH]>,
    hashed: bool,
}

/// Whether translation needs anything of this rule set.
pub(crate) fn has_nat(rules: &CompiledRules) -> bool {
    !rules.rules.nat.is_empty()
}

impl NatStage {
    pub fn new(port_v4: Vec<Option<u32>>, seed: u64) -> NatStage {
        NatStage {
            table: NatTable::new(fw::rules::DEFAULT_LIMIT_STATES as usize, seed),
            cursor: PoolCursor::new(seed),
            port_v4,
            plan: None,
            steering: None,
            seed,
            translated: 0,
            port_mask: 0,
            prefetched: Box::new([(0, false, 0); MAX_BATCH]),
            out_hash: Box::new([None; MAX_BATCH]),
            hashed: false,
        }
    }

    /// This is worker `worker` of `workers` (more than one: ports are chosen for the steering).
    pub fn set_steering(&mut self, worker: u16, workers: u16) {
        self.steering = (workers > 1).then(|| Steering {
            worker,
            workers,
            hash: Toeplitz::new(&SYMMETRIC_KEY),
        });
    }

    pub fn counts(&self) -> NatCounts {
        NatCounts {
            sessions: self.table.len() as u64,
            created: self.table.created,
            expired: self.table.expired,
            translated: self.translated,
            sticky: self.cursor.sticky_sources() as u64,
        }
    }

    pub fn table_len(&self) -> u64 {
        self.table.len() as u64
    }

    pub fn table_mut(&mut self) -> &mut NatTable {
        &mut self.table
    }

    /// Once per batch: the plan for `rules` (made again after a reload), a sweep of the
    /// table. `false` when nothing is to translate (no rule, no translation).
    pub fn begin_batch(&mut self, rules: &Arc<CompiledRules>, now: u32) -> bool {
        let id = Arc::as_ptr(rules) as usize;
        if self.plan.as_ref().is_none_or(|p| p.rules != id) {
            let plan = self.make_plan(&rules.rules, id);
            self.port_mask = if plan.every_port {
                u64::MAX
            } else {
                plan.ports
                    .iter()
                    .enumerate()
                    .filter(|(_, on)| **on)
                    .fold(0, |m, (p, _)| m | port_bit(p))
            };
            self.plan = Some(plan);
        }
        self.table.set_limit(usize::try_from(rules.rules.limit_states).unwrap_or(usize::MAX));
        self.table.sweep_paced(now, &rules.rules.timeouts, SWEEP_BUDGET);
        self.hashed = false;
        has_nat(rules) || !self.table.is_empty()
    }

    /// Whether the table outgrew the caches: a batch's lookups are then prefetched
    /// ([`prefetch`](Self::prefetch)) so that their cache misses overlap.
    #[inline(always)]
    pub fn prefetching(&self) -> bool {
        self.table.working_set_bytes() > CACHED_TABLE_BYTES
    }

    /// The batched lookup's first two steps (as the state table's, VPP's and DPDK's) for a
    /// batch's IPv4 packets (`packets`: each one's header on, and its input port): hash the
    /// key each one's lookup will use and prefetch its index line, then probe the lines and
    /// prefetch the sessions they name. A packet arriving on a translating port is looked
    /// up by its in key on arrival, any other by its out key when it leaves (by a
    /// translating port or not: that is not known yet). Only plain TCP and UDP packets, the
    /// ones the fast path reads ([`read_plain`]). `packets` are numbered by their index in
    /// the batch, under which an out key's hash is kept for the lookup ([`out_hash`](Self::out_hash)).
    #[inline(always)]
    pub fn prefetch<'a>(&mut self, packets: impl Iterator<Item = (usize, &'a [u8], u16)>) {
        let mut n = 0;
        self.out_hash.fill(None);
        self.hashed = true;
        for (i, ip, port) in packets.take(MAX_BATCH) {
            let Some((key, _)) = read_plain(ip) else { continue };
            let out = !self.on_port(port);
            let h = if out { self.table.hash_out(&key) } else { self.table.hash_in(&key) };
            self.table.prefetch_index(h);
            self.prefetched[n % MAX_BATCH] = (h, out, i as u16);
            n += 1;
        }
        for &(h, out, i) in &self.prefetched[..n.min(MAX_BATCH)] {
            let slot = self.table.probe(h, out);
            if out {
                self.out_hash[usize::from(i) % MAX_BATCH] = Some((h, slot));
            }
        }
    }

    #[cold]
    fn make_plan(&self, rs: &RuleSet, id: usize) -> Plan {
        let mut ports = self.plan.as_ref().map(|p| p.ports.clone()).unwrap_or_default();
        ports.resize(self.port_v4.len().max(1), false);
        let mut every_port = false;
        let pools = rs
            .nat
            .iter()
            .map(|r| {
                // NAT66's rules are the IPv6 stage's (`super::nat6`), `af-to`'s their own.
                if r.af == Some(Af::Inet6) || r.kind == fw::nat::NatKind::AfTo {
                    return None;
                }
                every_port |= r.ifaces.is_empty() || r.iface_neg;
                for &i in &r.ifaces {
                    if let Some(p) = ports.get_mut(usize::from(i)) {
                        *p = true;
                    }
                }
                v4_pool(rs, &r.target.as_ref()?.addr, &self.port_v4)
            })
            .collect();
        Plan { rules: id, pools, ports, every_port }
    }

    /// Whether translation applies on logical port `port`.
    #[inline(always)]
    pub fn on_port(&self, port: u16) -> bool {
        self.port_mask & port_bit(usize::from(port)) != 0 && (port < 63 || self.on_high_port(port))
    }

    /// Bit `min(port, 63)` set for the ports translation may apply on (see
    /// [`on_port`](Self::on_port)).
    #[inline(always)]
    pub fn port_mask(&self) -> u64 {
        self.port_mask
    }

    /// The hash of packet `i`'s out key and the slot its probe named, if the prefetching
    /// pass computed them (the packet came in on a port that does not translate, so its key
    /// is as it was read then).
    #[inline(always)]
    pub fn out_hash(&self, i: usize) -> Option<(u64, u32)> {
        if self.hashed { self.out_hash[i % MAX_BATCH] } else { None }
    }

    /// [`on_port`](Self::on_port) for ports from 63 on, which share the mask's last bit.
    #[cold]
    fn on_high_port(&self, port: u16) -> bool {
        self.plan.as_ref().is_some_and(|p| {
            p.every_port || p.ports.get(usize::from(port)).copied().unwrap_or(false)
        })
    }

    /// Marks `port` as carrying translations (their replies must be looked up there even
    /// after a reload removes the rule).
    fn note_port(&mut self, port: u16) {
        if let Some(p) = self.plan.as_mut().and_then(|p| p.ports.get_mut(usize::from(port))) {
            *p = true;
            self.port_mask |= port_bit(usize::from(port));
        }
    }

    /// A packet arriving on `port` (`ip`: its IPv4 header on): its destination translated
    /// back (a reply to `nat`) or redirected (`rdr`, `binat`). `Ok(Some(dst))`: the new
    /// destination, for the route lookup, and whether a translation rule with `pass`
    /// redirected it (the inbound filter rules are then skipped).
    pub fn inbound(
        &mut self,
        rs: &RuleSet,
        ip: &mut [u8],
        port: u16,
        now: u32,
    ) -> Result<Option<(u32, bool)>, DropReason> {
        if let Some((key, flags)) = read_plain(ip)
            && let Some(s) =
                self.table.lookup_in(&key, now, &rs.timeouts).filter(|s| s.iface == port)
        {
            s.touch(now, s.kind == NatKind::Nat, flags);
            let (a, p) = s.in_to;
            let pass = s.kind == NatKind::Rdr && s.pass;
            rewrite_plain(ip, key.proto, End::Dst, a, p, false);
            self.translated += 1;
            return Ok(Some((a, pass)));
        }
        let port_v4 = &self.port_v4;
        let addr_of = |i: u16| port_v4.get(usize::from(i)).copied().flatten();
        let Some(t) = read(ip) else { return Ok(None) };
        let timeouts = &rs.timeouts;
        match t.kind {
            Kind::Fragment => {
                let key = key_of(&t, port, Dir::In);
                if first_match(
                    rs,
                    NatPhase::In,
                    &PacketKey { src_port: 0, dst_port: 0, ..key },
                    &addr_of,
                )
                .is_some()
                    || self.is_translation_address(t.key.dst)
                {
                    return Err(DropReason::NatFragment);
                }
                Ok(None)
            }
            Kind::Error { inner, .. } => {
                if let Some(s) = self
                    .table
                    .lookup_in(&inner.reversed(), now, timeouts)
                    .filter(|s| s.iface == port)
                {
                    let (a, p) = s.in_to;
                    rewrite_error(ip, &t, End::Dst, a, End::Src, (a, p));
                    self.translated += 1;
                    return Ok(Some((a, false)));
                }
                // An error about a packet a binat host sent.
                let quoted = PacketKey {
                    iface: port,
                    src: u128::from(inner.dst),
                    dst: u128::from(inner.src),
                    ..key_of(&t, port, Dir::In)
                };
                match first_match(rs, NatPhase::In, &quoted, &addr_of) {
                    Some(r) if r.kind == NatKind::Binat => {
                        let inside = binat_map(r, inner.src, false);
                        rewrite_error(ip, &t, End::Dst, inside, End::Src, (inside, inner.sport));
                        self.translated += 1;
                        Ok(Some((inside, false)))
                    }
                    _ => Ok(None),
                }
            }
            Kind::Ports | Kind::Query { .. } | Kind::Other => {
                if let Some(s) =
                    self.table.lookup_in(&t.key, now, timeouts).filter(|s| s.iface == port)
                {
                    s.touch(now, s.kind == NatKind::Nat, t.tcp_flags);
                    let (a, p) = s.in_to;
                    let pass = s.kind == NatKind::Rdr && s.pass;
                    rewrite(ip, &t, End::Dst, a, p);
                    self.translated += 1;
                    return Ok(Some((a, pass)));
                }
                if matches!(t.kind, Kind::Query { request: false }) {
                    return Ok(None);
                }
                let key = key_of(&t, port, Dir::In);
                let Some((ri, r)) =
                    first_match(rs, NatPhase::In, &key, &addr_of).map(|r| (rule_index(rs, r), r))
                else {
                    return Ok(None);
                };
                let (a, p) = match r.kind {
                    NatKind::Binat => (binat_map(r, t.key.dst, false), t.key.dport),
                    _ => self.redirect(ri, r, &t, port, now)?,
                };
                rewrite(ip, &t, End::Dst, a, p);
                self.translated += 1;
                Ok(Some((a, r.pass)))
            }
        }
    }

    /// A packet leaving by `port`: its source translated (`nat`, `binat`) or given back its
    /// outside form (a reply of an `rdr`-ed flow).
    pub fn outbound(
        &mut self,
        rs: &RuleSet,
        ip: &mut [u8],
        port: u16,
        now: u32,
    ) -> Result<(), DropReason> {
        if self.outbound_plain(&rs.timeouts, ip, port, now, false, None) {
            return Ok(());
        }
        self.outbound_other(rs, ip, port, now)
    }

    /// [`outbound`](Self::outbound)'s common case: a plain TCP or UDP packet ([`read_plain`])
    /// of a flow translated already, rewritten (with `ttl`, its TTL decremented in the same
    /// checksum update; `hash`: its out key's and the slot the prefetching pass's probe
    /// named, if known). `false`: another packet, left as it is.
    #[inline(always)]
    pub fn outbound_plain(
        &mut self,
        timeouts: &fw::state::Timeouts,
        ip: &mut [u8],
        port: u16,
        now: u32,
        ttl: bool,
        hash: Option<(u64, u32)>,
    ) -> bool {
        let Some((key, flags)) = read_plain(ip) else { return false };
        let s = match hash {
            Some((h, slot)) => self.table.lookup_out_hinted(&key, h, slot, now, timeouts),
            None => self.table.lookup_out(&key, now, timeouts),
        };
        if let Some(s) = s.filter(|s| s.iface == port) {
            s.touch(now, s.kind == NatKind::Rdr, flags);
            let (a, p) = s.out_to;
            rewrite_plain(ip, key.proto, End::Src, a, p, ttl);
            self.translated += 1;
            return true;
        }
        false
    }

    /// [`outbound`](Self::outbound) for a packet [`outbound_plain`](Self::outbound_plain)
    /// left: out of line, so that the common case's caller stays small.
    #[inline(never)]
    pub fn outbound_other(
        &mut self,
        rs: &RuleSet,
        ip: &mut [u8],
        port: u16,
        now: u32,
    ) -> Result<(), DropReason> {
        let port_v4 = &self.port_v4;
        let addr_of = |i: u16| port_v4.get(usize::from(i)).copied().flatten();
        let Some(t) = read(ip) else { return Ok(()) };
        let timeouts = &rs.timeouts;
        match t.kind {
            Kind::Fragment => {
                let key = key_of(&t, port, Dir::Out);
                if first_match(
                    rs,
                    NatPhase::Out,
                    &PacketKey { src_port: 0, dst_port: 0, ..key },
                    &addr_of,
                )
                .is_some()
                {
                    return Err(DropReason::NatFragment);
                }
                Ok(())
            }
            Kind::Error { inner, .. } => {
                if let Some(s) = self
                    .table
                    .lookup_out(&inner.reversed(), now, timeouts)
                    .filter(|s| s.iface == port)
                {
                    let (a, p) = s.out_to;
                    rewrite_error(ip, &t, End::Src, a, End::Dst, (a, p));
                    self.translated += 1;
                    return Ok(());
                }
                let quoted = PacketKey {
                    src: u128::from(inner.dst),
                    dst: u128::from(inner.src),
                    ..key_of(&t, port, Dir::Out)
                };
                if let Some(r) = first_match(rs, NatPhase::Out, &quoted, &addr_of)
                    .filter(|r| r.kind == NatKind::Binat)
                {
                    let outside = binat_map(r, inner.dst, true);
                    rewrite_error(ip, &t, End::Src, outside, End::Dst, (outside, inner.dport));
                    self.translated += 1;
                }
                Ok(())
            }
            Kind::Ports | Kind::Query { .. } | Kind::Other => {
                if let Some(s) =
                    self.table.lookup_out(&t.key, now, timeouts).filter(|s| s.iface == port)
                {
                    s.touch(now, s.kind == NatKind::Rdr, t.tcp_flags);
                    let (a, p) = s.out_to;
                    rewrite(ip, &t, End::Src, a, p);
                    self.translated += 1;
                    return Ok(());
                }
                if matches!(t.kind, Kind::Query { request: false }) {
                    return Ok(());
                }
                let key = key_of(&t, port, Dir::Out);
                let Some((ri, r)) =
                    first_match(rs, NatPhase::Out, &key, &addr_of).map(|r| (rule_index(rs, r), r))
                else {
                    return Ok(());
                };
                let (a, p) = match r.kind {
                    NatKind::Binat => (binat_map(r, t.key.src, true), t.key.sport),
                    _ => self.translate_source(ri, r, &t, port, now)?,
                };
                rewrite(ip, &t, End::Src, a, p);
                self.translated += 1;
                Ok(())
            }
        }
    }

    /// What [`outbound`](Self::outbound) will do to a packet leaving by `port`, decided
    /// without changing the table: its new source, and the translation it would add. The out
    /// rules judge the packet with that source (pf translates before it filters); only if
    /// they pass it does [`commit_outbound`](Self::commit_outbound) make the translation, so
    /// a blocked flow leaves no translation and no port in use behind.
    pub fn plan_outbound(
        &mut self,
        rs: &RuleSet,
        ip: &[u8],
        port: u16,
        now: u32,
    ) -> Result<OutPlan, DropReason> {
        let timeouts = &rs.timeouts;
        if let Some((key, _)) = read_plain(ip)
            && let Some(s) = self.table.lookup_out(&key, now, timeouts).filter(|s| s.iface == port)
        {
            return Ok(OutPlan {
                src: Some((s.out_to.0, Some(s.out_to.1))),
                pass: s.kind != NatKind::Rdr && s.pass,
                new: None,
            });
        }
        let port_v4 = &self.port_v4;
        let addr_of = |i: u16| port_v4.get(usize::from(i)).copied().flatten();
        let Some(t) = read(ip) else { return Ok(OutPlan::NONE) };
        match t.kind {
            Kind::Fragment => {
                let key = key_of(&t, port, Dir::Out);
                if first_match(
                    rs,
                    NatPhase::Out,
                    &PacketKey { src_port: 0, dst_port: 0, ..key },
                    &addr_of,
                )
                .is_some()
                {
                    return Err(DropReason::NatFragment);
                }
                Ok(OutPlan::NONE)
            }
            Kind::Error { inner, .. } => {
                if let Some(s) = self
                    .table
                    .lookup_out(&inner.reversed(), now, timeouts)
                    .filter(|s| s.iface == port)
                {
                    return Ok(OutPlan { src: Some((s.out_to.0, None)), pass: false, new: None });
                }
                let quoted = PacketKey {
                    src: u128::from(inner.dst),
                    dst: u128::from(inner.src),
                    ..key_of(&t, port, Dir::Out)
                };
                Ok(
                    match first_match(rs, NatPhase::Out, &quoted, &addr_of)
                        .filter(|r| r.kind == NatKind::Binat)
                    {
                        Some(r) => OutPlan {
                            src: Some((binat_map(r, inner.dst, true), None)),
                            pass: false,
                            new: None,
                        },
                        None => OutPlan::NONE,
                    },
                )
            }
            Kind::Ports | Kind::Query { .. } | Kind::Other => {
                let ports = t.kind == Kind::Ports;
                if let Some(s) =
                    self.table.lookup_out(&t.key, now, timeouts).filter(|s| s.iface == port)
                {
                    let pass = s.kind != NatKind::Rdr && s.pass;
                    return Ok(OutPlan {
                        src: Some((s.out_to.0, ports.then_some(s.out_to.1))),
                        pass,
                        new: None,
                    });
                }
                if matches!(t.kind, Kind::Query { request: false }) {
                    return Ok(OutPlan::NONE);
                }
                let key = key_of(&t, port, Dir::Out);
                let Some((ri, r)) =
                    first_match(rs, NatPhase::Out, &key, &addr_of).map(|r| (rule_index(rs, r), r))
                else {
                    return Ok(OutPlan::NONE);
                };
                if r.kind == NatKind::Binat {
                    return Ok(OutPlan {
                        src: Some((binat_map(r, t.key.src, true), ports.then_some(t.key.sport))),
                        pass: r.pass,
                        new: None,
                    });
                }
                // The table's limit, checked now: a full table must not fail the packet after
                // the rules passed it (and kept its state).
                if self.table.len() >= usize::try_from(rs.limit_states).unwrap_or(usize::MAX) {
                    return Err(DropReason::NatExhausted);
                }
                let pass = r.pass;
                let (session, sticky) = self.source_session(ri, r, &t, port, now)?;
                Ok(OutPlan {
                    src: Some((session.out_to.0, ports.then_some(session.out_to.1))),
                    pass,
                    new: Some((session, sticky)),
                })
            }
        }
    }

    /// Makes the translation `plan` chose (its out rules passed the packet) and applies it to
    /// the packet, as [`outbound`](Self::outbound) does.
    pub fn commit_outbound(
        &mut self,
        rs: &RuleSet,
        ip: &mut [u8],
        port: u16,
        now: u32,
        plan: OutPlan,
    ) -> Result<(), DropReason> {
        if let Some((session, sticky)) = plan.new {
            self.add_source(session, sticky, port)?;
        }
        self.outbound(rs, ip, port, now)
    }

    /// A new `nat` translation for the flow of `t` leaving by `port`, added to the table.
    fn translate_source(
        &mut self,
        ri: usize,
        r: &NatRule,
        t: &Tuple,
        port: u16,
        now: u32,
    ) -> Result<(u32, u16), DropReason> {
        let (session, sticky) = self.source_session(ri, r, t, port, now)?;
        self.add_source(session, sticky, port)?;
        Ok(session.out_to)
    }

    /// Adds a `nat` translation [`source_session`](Self::source_session) chose, and only then
    /// its source's `sticky-address` choice (`sticky`: the rule's index), so that a flow the
    /// out rules block, or the table refuses, leaves none behind.
    fn add_source(
        &mut self,
        session: Session,
        sticky: Option<usize>,
        port: u16,
    ) -> Result<(), DropReason> {
        self.table.insert(session).map_err(alloc_reason)?;
        self.note_port(port);
        if let Some(ri) = sticky {
            self.cursor.stick(ri, session.out_key.src, session.out_to.0);
        }
        Ok(())
    }

    /// The new `nat` translation for the flow of `t` leaving by `port`, not yet added: an
    /// address from the pool, a free port (query identifier) for which the reply steers to
    /// this worker; and with `sticky-address`, the rule's index (the choice is remembered
    /// when the translation is added, [`add_source`](Self::add_source)).
    fn source_session(
        &mut self,
        ri: usize,
        r: &NatRule,
        t: &Tuple,
        port: u16,
        now: u32,
    ) -> Result<(Session, Option<usize>), DropReason> {
        let target = r.target.as_ref().ok_or(DropReason::NatExhausted)?;
        let pool = self
            .plan
            .as_ref()
            .and_then(|p| p.pools.get(ri))
            .and_then(|p| p.as_ref())
            .ok_or(DropReason::NatNoAddress)?;
        let k = t.key;
        let addr = self
            .cursor
            .choose(pool, target.method, target.sticky, ri, k.src)
            .ok_or(DropReason::NatNoAddress)?;
        let query = matches!(t.kind, Kind::Query { .. });
        let range = match t.kind {
            Kind::Other => (0, 0),
            _ if target.static_port => (k.sport, k.sport),
            _ => target.ports.unwrap_or(fw::nat::DEFAULT_NAT_PORTS),
        };
        let key_for = |p: u16| NatKey {
            src: k.dst,
            dst: addr,
            sport: if query { p } else { k.dport },
            dport: p,
            proto: k.proto,
        };
        // The reply's receive hash: its ports, or for a query its identifier and 0 (what
        // AF_PACKET's fanout program hashes, io::afpacket::toeplitz).
        let steer =
            self.steering.as_ref().filter(|_| matches!(t.kind, Kind::Ports | Kind::Query { .. }));
        let reply_ports = |p: u16| if query { (p, 0) } else { (k.dport, p) };
        let accept = |p: u16| {
            let (sport, dport) = reply_ports(p);
            steer.is_none_or(|s| {
                queue_for(s.hash.ipv4_ports(k.dst.into(), addr.into(), sport, dport), s.workers)
                    == s.worker
            })
        };
        let start = start_port(self.seed, &k);
        let p = self.table.free_port(range, start, accept, key_for).map_err(alloc_reason)?;
        let session = Session {
            iface: port,
            kind: NatKind::Nat,
            pass: r.pass,
            out_key: k,
            out_to: (addr, p),
            in_key: key_for(p),
            in_to: (k.src, k.sport),
            last: now,
            phase: Default::default(),
        };
        Ok((session, target.sticky.then_some(ri)))
    }

    /// A new `rdr` translation for the flow of `t` arriving on `port`.
    fn redirect(
        &mut self,
        ri: usize,
        r: &NatRule,
        t: &Tuple,
        port: u16,
        now: u32,
    ) -> Result<(u32, u16), DropReason> {
        let target = r.target.as_ref().ok_or(DropReason::NatExhausted)?;
        let pool = self
            .plan
            .as_ref()
            .and_then(|p| p.pools.get(ri))
            .and_then(|p| p.as_ref())
            .ok_or(DropReason::NatNoAddress)?;
        let k = t.key;
        let addr = match target.method {
            // bitmask grafts the pool's network onto the destination being redirected.
            fw::nat::PoolMethod::Bitmask => fw::nat::pool::bitmask(pool, k.dst),
            m => self
                .cursor
                .choose(pool, m, target.sticky, ri, k.src)
                .ok_or(DropReason::NatNoAddress)?,
        };
        let new_port = if t.kind == Kind::Ports { fw::nat::rdr_port(r, k.dport) } else { k.dport };
        let query = matches!(t.kind, Kind::Query { .. });
        let out_key = NatKey {
            src: addr,
            dst: k.src,
            sport: new_port,
            dport: if query { new_port } else { k.sport },
            proto: k.proto,
        };
        let session = Session {
            iface: port,
            kind: NatKind::Rdr,
            pass: r.pass,
            out_key,
            out_to: (k.dst, k.dport),
            in_key: k,
            in_to: (addr, new_port),
            last: now,
            phase: Default::default(),
        };
        self.table.insert(session).map_err(alloc_reason)?;
        self.note_port(port);
        if target.sticky && target.method != fw::nat::PoolMethod::Bitmask {
            self.cursor.stick(ri, k.src, addr);
        }
        Ok((addr, new_port))
    }

    /// Whether `addr` is an address translations use (a pool's, an interface's, binat's
    /// outside): what a fragment to it would need translating.
    fn is_translation_address(&self, addr: u32) -> bool {
        self.plan
            .as_ref()
            .is_some_and(|p| p.pools.iter().flatten().any(|pool| pool.addrs.contains(&addr)))
    }
}

/// What NAT's outbound pass will do to a packet ([`NatStage::plan_outbound`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct OutPlan {
    /// The packet's new source address, and port (TCP and UDP; `None`: kept); `None`: the
    /// packet leaves untranslated.
    pub src: Option<(u32, Option<u16>)>,
    /// The translation is by a rule with `pass` (`nat pass`, `binat pass`): the out rules are
    /// skipped.
    pub pass: bool,
    /// The translation to add, and with `sticky-address` its rule's index.
    new: Option<(Session, Option<usize>)>,
}

impl OutPlan {
    const NONE: OutPlan = OutPlan { src: None, pass: false, new: None };

    /// `key` (the packet as the inbound pass saw it) as it will leave: what the out rules
    /// judge.
    pub fn seen(&self, key: &PacketKey) -> PacketKey {
        match self.src {
            Some((addr, port)) => {
                PacketKey { src: u128::from(addr), src_port: port.unwrap_or(key.src_port), ..*key }
            }
            None => *key,
        }
    }
}

/// The IPv4 pool a translation's `addr` stands for (`port_v4`: each port's address, for
/// `(IFACE)`); `None` where it has no address.
pub(crate) fn v4_pool(rs: &RuleSet, addr: &NatAddr, port_v4: &[Option<u32>]) -> Option<Pool> {
    match addr {
        NatAddr::Iface(i) => port_v4.get(usize::from(*i)).copied().flatten().map(Pool::single),
        NatAddr::Pool(p) => Some(Pool::new(p)),
        NatAddr::Table(t) => v4_table_pool(rs, *t),
    }
}

/// Table `t`'s IPv4 addresses as a pool (`None` while it has none: translations by it fail
/// as `nat_no_address`, as pf's do with an empty pool). The first [`fw::nat::pool::MAX_POOL_ADDRS`]
/// addresses, as for any IPv4 pool.
fn v4_table_pool(rs: &RuleSet, t: usize) -> Option<Pool> {
    let prefixes = fw::nat::table_pool(rs, t, Af::Inet);
    (!prefixes.is_empty()).then(|| Pool::new(&prefixes))
}

/// The bit of `port` in [`NatStage`]'s port mask.
#[inline(always)]
pub(crate) fn port_bit(port: usize) -> u64 {
    1 << port.min(63)
}

/// The index of `r` in the rule set (rules are compared by address: `r` comes from `rs`).
pub(crate) fn rule_index(rs: &RuleSet, r: &NatRule) -> usize {
    rs.nat.iter().position(|x| std::ptr::eq(x, r)).unwrap_or(0)
}

pub(crate) fn alloc_reason(_: AllocError) -> DropReason {
    DropReason::NatExhausted
}

/// The classifier's view of a packet NAT reads, to match translation rules.
fn key_of(t: &Tuple, port: u16, dir: Dir) -> PacketKey {
    let ports = t.kind == Kind::Ports;
    PacketKey {
        af: Af::Inet,
        dir,
        iface: port,
        proto: t.key.proto,
        src: u128::from(t.key.src),
        dst: u128::from(t.key.dst),
        src_port: if ports { t.key.sport } else { 0 },
        dst_port: if ports { t.key.dport } else { 0 },
        ..PacketKey::ZERO
    }
}

/// `binat`'s fixed mapping of `addr`: inside to outside (`out`) or back, host bits kept.
fn binat_map(r: &NatRule, addr: u32, out: bool) -> u32 {
    let (Some(inside), Some(NatAddr::Pool(o))) =
        (binat_inside(r), r.target.as_ref().map(|t| &t.addr))
    else {
        return addr;
    };
    let Some(outside) = o.first() else { return addr };
    let mask = if inside.len == 0 { 0 } else { u32::MAX << (32 - u32::from(inside.len)) };
    let net = if out { outside.addr as u32 } else { inside.addr as u32 };
    (net & mask) | (addr & !mask)
}

/// Where the port search of a new translation starts: a keyed hash of the flow, so that
/// ports are spread and not predictable from outside.
fn start_port(seed: u64, k: &NatKey) -> u32 {
    let mut h = seed ^ (u64::from(k.src) << 32 | u64::from(k.dst));
    h = (h ^ (u64::from(k.sport) << 16 | u64::from(k.dport))).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (h >> 32) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stage(rules: &str) -> NatStage {
        let iface = |n: &str| n.strip_prefix('p').and_then(|i| i.parse().ok());
        let rules = Arc::new(
            CompiledRules::parse(rules, std::path::Path::new("nat.conf"), &iface).unwrap(),
        );
        let mut s = NatStage::new(vec![Some(0xc000_0201); 80], 1);
        s.begin_batch(&rules, 0);
        s
    }

    /// The port mask is exact below port 63; from 63 on, the plan decides.
    #[test]
    fn ports_that_translate_on_both_sides_of_the_mask() {
        let mut s = stage(
            "nat on p2 from any to any -> 192.0.2.1\nnat on p70 from any to any -> 192.0.2.1\n",
        );
        let on: Vec<u16> = (0..80).filter(|&p| s.on_port(p)).collect();
        assert_eq!(on, vec![2, 70]);
        // A translation made on a port keeps it translating (its replies arrive there).
        s.note_port(64);
        s.note_port(5);
        let on: Vec<u16> = (0..80).filter(|&p| s.on_port(p)).collect();
        assert_eq!(on, vec![2, 5, 64, 70]);
        let s = stage("nat from any to any -> 192.0.2.1\n");
        assert!((0..80).all(|p| s.on_port(p)), "a rule without `on`: every port");
    }
}
