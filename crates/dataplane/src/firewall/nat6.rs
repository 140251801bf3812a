//! The NAT66 stage of one worker: pf's `nat`, `rdr` and `binat` rules of family `inet6`,
//! applied to IPv6 packets where [`super::nat::NatStage`] applies the IPv4 ones, with the
//! same order against the filter: inbound translation before the in rules and the route
//! lookup, outbound translation chosen before the out rules judge the packet as it will
//! leave ([`Nat6Stage::plan_outbound`]) and made only if they pass it
//! ([`Nat6Stage::commit_outbound`]). As pf's NAT66, it is stateful and port-translating
//! (not RFC 6296's stateless prefix translation): `nat` maps many inside hosts onto the
//! pool's addresses and ports, `rdr` redirects, `binat` maps one prefix onto another.
//! ICMPv6 echo identifiers are translated as ports, and ICMPv6 errors about a translated
//! flow with the packet they quote.
//!
//! Not here (IPv4 only): state sync of the translations, the kernel fast path's share of
//! the flows (translated IPv6 flows stay in the pipeline), `to (IFACE)` in a rule.

use std::sync::Arc;

use fw::nat::six::{Key6, Nat6Table, Pool6, Pool6Cursor, Session6, binat_map6};
use fw::nat::{NatAddr, NatKind, NatPhase, NatRule, binat_inside, first_match6};
use fw::packet::{Af, Dir, PacketKey};
use fw::rules::RuleSet;
use io::rss::{SYMMETRIC_KEY, Toeplitz, queue_for};

use super::CompiledRules;
use super::nat::{alloc_reason, rule_index};
use super::nat_rewrite::End;
use super::nat6_rewrite::{Kind6, Tuple6, read6, rewrite_error6, rewrite6};
use crate::counters::DropReason;

/// Table slots the expiry sweep examines per batch.
const SWEEP_BUDGET: usize = 16;

/// What a rule set needs resolved per worker for IPv6.
struct Plan6 {
    rules: usize,
    /// By rule: its IPv6 pool (`None` for other rules and `(IFACE)` without an address).
    pools: Vec<Option<Pool6>>,
    /// By logical port: some IPv6 rule (or a translation made earlier) applies there.
    ports: Vec<bool>,
    every_port: bool,
    /// Some rule translates IPv6.
    any: bool,
}

/// The NAT66 stage of one worker.
pub(crate) struct Nat6Stage {
    table: Nat6Table,
    cursor: Pool6Cursor,
    /// The first global IPv6 address of each logical port, for `(iface)` targets.
    port_v6: Vec<Option<u128>>,
    plan: Option<Plan6>,
    /// This worker and how many there are, when more than one.
    steering: Option<(u16, u16, Toeplitz)>,
    seed: u64,
    pub translated: u64,
}

impl Nat6Stage {
    pub fn new(port_v6: Vec<Option<u128>>, seed: u64) -> Nat6Stage {
        Nat6Stage {
            table: Nat6Table::new(fw::rules::DEFAULT_LIMIT_STATES as usize),
            cursor: Pool6Cursor::new(seed),
            port_v6,
            plan: None,
            steering: None,
            seed,
            translated: 0,
        }
    }

    pub fn set_steering(&mut self, worker: u16, workers: u16) {
        self.steering = (workers > 1).then(|| (worker, workers, Toeplitz::new(&SYMMETRIC_KEY)));
    }

    pub fn len(&self) -> usize {
        self.table.len()
    }

    pub fn table_mut(&mut self) -> &mut Nat6Table {
        &mut self.table
    }

    pub fn counts(&self) -> (u64, u64) {
        (self.table.created, self.table.expired)
    }

    /// Once per batch: the plan for `rules`, a sweep. `false`: nothing to translate.
    pub fn begin_batch(&mut self, rules: &Arc<CompiledRules>, now: u32) -> bool {
        let id = Arc::as_ptr(rules) as usize;
        if self.plan.as_ref().is_none_or(|p| p.rules != id) {
            self.plan = Some(self.make_plan(&rules.rules, id));
        }
        self.table.set_limit(usize::try_from(rules.rules.limit_states).unwrap_or(usize::MAX));
        let any = self.plan.as_ref().is_some_and(|p| p.any);
        // Without NAT66, this is all a batch pays.
        if self.table.is_empty() {
            return any;
        }
        self.table.sweep(now, &rules.rules.timeouts, SWEEP_BUDGET);
        true
    }

    #[cold]
    fn make_plan(&self, rs: &RuleSet, id: usize) -> Plan6 {
        let mut ports = self.plan.as_ref().map(|p| p.ports.clone()).unwrap_or_default();
        ports.resize(self.port_v6.len().max(1), false);
        let (mut every_port, mut any) = (false, false);
        let pools = rs
            .nat
            .iter()
            .map(|r| {
                // af-to's rules are IPv6 but translate to IPv4 (`super::afto`).
                if r.af != Some(Af::Inet6) || r.kind == NatKind::AfTo {
                    return None;
                }
                any = true;
                every_port |= r.ifaces.is_empty() || r.iface_neg;
                for &i in &r.ifaces {
                    if let Some(p) = ports.get_mut(usize::from(i)) {
                        *p = true;
                    }
                }
                match &r.target.as_ref()?.addr {
                    NatAddr::Iface(i) => {
                        self.port_v6.get(usize::from(*i)).copied().flatten().map(Pool6::single)
                    }
                    NatAddr::Pool(p) => Some(Pool6 { prefixes: p.clone() }),
                    NatAddr::Table(t) => {
                        let prefixes = fw::nat::table_pool(rs, *t, Af::Inet6);
                        (!prefixes.is_empty()).then_some(Pool6 { prefixes })
                    }
                }
            })
            .collect();
        Plan6 { rules: id, pools, ports, every_port, any }
    }

    /// Whether NAT66 applies on logical port `port`.
    pub fn on_port(&self, port: u16) -> bool {
        self.plan.as_ref().is_some_and(|p| {
            p.every_port || p.ports.get(usize::from(port)).copied().unwrap_or(false)
        })
    }

    fn note_port(&mut self, port: u16) {
        if let Some(p) = self.plan.as_mut().and_then(|p| p.ports.get_mut(usize::from(port))) {
            *p = true;
        }
    }

    fn pool(&self, ri: usize) -> Result<&Pool6, DropReason> {
        let pool = self.plan.as_ref().and_then(|p| p.pools.get(ri)).and_then(|p| p.as_ref());
        pool.ok_or(DropReason::NatNoAddress)
    }

    /// A packet arriving on `port` (`ip`: its IPv6 header on): its destination translated
    /// back (a reply to `nat`) or redirected (`rdr`, `binat`). `Ok(Some((dst, pass)))`: the
    /// new destination, and whether a rule with `pass` redirected it.
    pub fn inbound(
        &mut self,
        rs: &RuleSet,
        ip: &mut [u8],
        port: u16,
        now: u32,
    ) -> Result<Option<(u128, bool)>, DropReason> {
        let Some(t) = read6(ip) else { return Ok(None) };
        let timeouts = &rs.timeouts;
        match t.kind {
            Kind6::Fragment => {
                let key = key_of(&t, port, Dir::In);
                match first_match6(rs, NatPhase::In, &key) {
                    Some(_) => Err(DropReason::NatFragment),
                    None => Ok(None),
                }
            }
            Kind6::Error { inner, .. } => {
                if let Some(s) = self
                    .table
                    .lookup_in(&inner.reversed(), now, timeouts)
                    .filter(|s| s.iface == port)
                {
                    let (a, p) = s.in_to;
                    rewrite_error6(ip, &t, End::Dst, a, End::Src, (a, p));
                    self.translated += 1;
                    return Ok(Some((a, false)));
                }
                let quoted =
                    PacketKey { src: inner.dst, dst: inner.src, ..key_of(&t, port, Dir::In) };
                match first_match6(rs, NatPhase::In, &quoted) {
                    Some(r) if r.kind == NatKind::Binat => {
                        let inside = binat6(r, inner.src, false);
                        rewrite_error6(ip, &t, End::Dst, inside, End::Src, (inside, inner.sport));
                        self.translated += 1;
                        Ok(Some((inside, false)))
                    }
                    _ => Ok(None),
                }
            }
            Kind6::Ports | Kind6::Query { .. } | Kind6::Other => {
                if let Some(s) =
                    self.table.lookup_in(&t.key, now, timeouts).filter(|s| s.iface == port)
                {
                    s.touch(now, s.kind == NatKind::Nat, t.tcp_flags);
                    let (a, p) = s.in_to;
                    let pass = s.kind == NatKind::Rdr && s.pass;
                    rewrite6(ip, &t, End::Dst, a, p);
                    self.translated += 1;
                    return Ok(Some((a, pass)));
                }
                if matches!(t.kind, Kind6::Query { request: false }) {
                    return Ok(None);
                }
                let key = key_of(&t, port, Dir::In);
                let Some((ri, r)) =
                    first_match6(rs, NatPhase::In, &key).map(|r| (rule_index(rs, r), r))
                else {
                    return Ok(None);
                };
                let (a, p) = match r.kind {
                    NatKind::Binat => (binat6(r, t.key.dst, false), t.key.dport),
                    _ => self.redirect(ri, r, &t, port, now)?,
                };
                rewrite6(ip, &t, End::Dst, a, p);
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
        let plan = self.plan_outbound(rs, ip, port, now)?;
        self.commit_outbound(rs, ip, port, now, plan)
    }

    /// What [`outbound`](Self::outbound) will do to a packet leaving by `port`, decided
    /// without changing the table (as [`super::nat::NatStage::plan_outbound`]).
    pub fn plan_outbound(
        &mut self,
        rs: &RuleSet,
        ip: &[u8],
        port: u16,
        now: u32,
    ) -> Result<OutPlan6, DropReason> {
        let Some(t) = read6(ip) else { return Ok(OutPlan6::NONE) };
        let plan = self.plan_of(rs, &t, port, now)?;
        Ok(OutPlan6 { read: Some(t), ..plan })
    }

    /// [`plan_outbound`](Self::plan_outbound) for the packet read as `t`.
    fn plan_of(
        &mut self,
        rs: &RuleSet,
        t: &Tuple6,
        port: u16,
        now: u32,
    ) -> Result<OutPlan6, DropReason> {
        let t = *t;
        let timeouts = &rs.timeouts;
        let key = key_of(&t, port, Dir::Out);
        match t.kind {
            Kind6::Fragment => match first_match6(rs, NatPhase::Out, &key) {
                Some(_) => Err(DropReason::NatFragment),
                None => Ok(OutPlan6::NONE),
            },
            Kind6::Error { inner, .. } => {
                if let Some(s) = self
                    .table
                    .lookup_out(&inner.reversed(), now, timeouts)
                    .filter(|s| s.iface == port)
                {
                    let (a, p) = s.out_to;
                    return Ok(OutPlan6 { change: Change::Error(a, p), ..OutPlan6::NONE });
                }
                let quoted = PacketKey { src: inner.dst, dst: inner.src, ..key };
                Ok(match first_match6(rs, NatPhase::Out, &quoted) {
                    Some(r) if r.kind == NatKind::Binat => {
                        let a = binat6(r, inner.dst, true);
                        OutPlan6 { change: Change::Error(a, inner.dport), ..OutPlan6::NONE }
                    }
                    _ => OutPlan6::NONE,
                })
            }
            Kind6::Ports | Kind6::Query { .. } | Kind6::Other => {
                if let Some(s) =
                    self.table.lookup_out(&t.key, now, timeouts).filter(|s| s.iface == port)
                {
                    s.touch(now, s.kind == NatKind::Rdr, t.tcp_flags);
                    let pass = s.kind != NatKind::Rdr && s.pass;
                    let change = Change::Source(s.out_to);
                    return Ok(OutPlan6 { change, pass, ..OutPlan6::NONE });
                }
                if matches!(t.kind, Kind6::Query { request: false }) {
                    return Ok(OutPlan6::NONE);
                }
                let Some((ri, r)) =
                    first_match6(rs, NatPhase::Out, &key).map(|r| (rule_index(rs, r), r))
                else {
                    return Ok(OutPlan6::NONE);
                };
                if r.kind == NatKind::Binat {
                    let to = (binat6(r, t.key.src, true), t.key.sport);
                    let change = Change::Source(to);
                    return Ok(OutPlan6 { change, pass: r.pass, ..OutPlan6::NONE });
                }
                if self.table.len() >= usize::try_from(rs.limit_states).unwrap_or(usize::MAX) {
                    return Err(DropReason::NatExhausted);
                }
                let (session, sticky) = self.source_session(ri, r, &t, port, now)?;
                Ok(OutPlan6 {
                    change: Change::Source(session.out_to),
                    pass: r.pass,
                    new: Some((session, sticky)),
                    read: None,
                })
            }
        }
    }

    /// Makes the translation `plan` chose (the out rules passed the packet) and applies it.
    pub fn commit_outbound(
        &mut self,
        _rs: &RuleSet,
        ip: &mut [u8],
        port: u16,
        _now: u32,
        plan: OutPlan6,
    ) -> Result<(), DropReason> {
        if let Some((session, sticky)) = plan.new {
            self.table.insert(session).map_err(alloc_reason)?;
            self.note_port(port);
            if let Some(ri) = sticky {
                self.cursor.stick(ri, session.out_key.src, session.out_to.0);
            }
        }
        // The packet as the plan read it (it has not changed since).
        let Some(t) = plan.read.or_else(|| read6(ip)) else { return Ok(()) };
        match plan.change {
            Change::None => return Ok(()),
            Change::Source((a, p)) => rewrite6(ip, &t, End::Src, a, p),
            Change::Error(a, p) => rewrite_error6(ip, &t, End::Src, a, End::Dst, (a, p)),
        }
        self.translated += 1;
        Ok(())
    }

    /// The new `nat` translation for the flow of `t` leaving by `port`, not yet added.
    fn source_session(
        &mut self,
        ri: usize,
        r: &NatRule,
        t: &Tuple6,
        port: u16,
        now: u32,
    ) -> Result<(Session6, Option<usize>), DropReason> {
        let target = r.target.as_ref().ok_or(DropReason::NatExhausted)?;
        let k = t.key;
        let pool = self.pool(ri)?.clone();
        let addr = self
            .cursor
            .choose(&pool, target.method, target.sticky, ri, k.src)
            .ok_or(DropReason::NatNoAddress)?;
        let query = matches!(t.kind, Kind6::Query { .. });
        let range = match t.kind {
            Kind6::Other => (0, 0),
            _ if target.static_port => (k.sport, k.sport),
            _ => target.ports.unwrap_or(fw::nat::DEFAULT_NAT_PORTS),
        };
        let key_for = |p: u16| Key6 {
            src: k.dst,
            dst: addr,
            sport: if query { p } else { k.dport },
            dport: p,
            proto: k.proto,
        };
        let steer = self.steering.as_ref().filter(|_| t.kind != Kind6::Other);
        let accept = |p: u16| {
            let (sport, dport) = if query { (p, 0) } else { (k.dport, p) };
            steer.is_none_or(|(worker, workers, hash)| {
                let h = hash.ipv6_ports(k.dst.into(), addr.into(), sport, dport);
                queue_for(h, *workers) == *worker
            })
        };
        let start = start_port(self.seed, &k);
        let p = self.table.free_port(range, start, accept, key_for).map_err(alloc_reason)?;
        let session = Session6 {
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
        t: &Tuple6,
        port: u16,
        now: u32,
    ) -> Result<(u128, u16), DropReason> {
        let target = r.target.as_ref().ok_or(DropReason::NatExhausted)?;
        let k = t.key;
        let pool = self.pool(ri)?.clone();
        let addr = match target.method {
            fw::nat::PoolMethod::Bitmask => pool.bitmask(k.dst).ok_or(DropReason::NatNoAddress)?,
            m => self
                .cursor
                .choose(&pool, m, target.sticky, ri, k.src)
                .ok_or(DropReason::NatNoAddress)?,
        };
        let new_port = if t.kind == Kind6::Ports { fw::nat::rdr_port(r, k.dport) } else { k.dport };
        let query = matches!(t.kind, Kind6::Query { .. });
        let out_key = Key6 {
            src: addr,
            dst: k.src,
            sport: new_port,
            dport: if query { new_port } else { k.sport },
            proto: k.proto,
        };
        let session = Session6 {
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
}

/// What NAT66's outbound pass does to a packet.
#[derive(Debug, Clone, Copy)]
enum Change {
    None,
    /// The source becomes (address, port or identifier).
    Source((u128, u16)),
    /// An ICMPv6 error about a translated flow: its source and the quote's destination
    /// become (address, port).
    Error(u128, u16),
}

/// What NAT66's outbound pass will do to a packet ([`Nat6Stage::plan_outbound`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct OutPlan6 {
    change: Change,
    /// By a rule with `pass`: the out rules are skipped.
    pub pass: bool,
    new: Option<(Session6, Option<usize>)>,
    /// The packet as the plan read it.
    read: Option<Tuple6>,
}

impl OutPlan6 {
    const NONE: OutPlan6 = OutPlan6 { change: Change::None, pass: false, new: None, read: None };

    /// `key` (as the inbound pass saw it) as it will leave: what the out rules judge.
    pub fn seen(&self, key: &PacketKey) -> PacketKey {
        match self.change {
            Change::Source((a, p)) if key.src_port != 0 || key.dst_port != 0 => {
                PacketKey { src: a, src_port: p, ..*key }
            }
            Change::Source((a, _)) | Change::Error(a, _) => PacketKey { src: a, ..*key },
            Change::None => *key,
        }
    }
}

/// The classifier's view of a packet NAT66 reads, to match translation rules.
fn key_of(t: &Tuple6, port: u16, dir: Dir) -> PacketKey {
    let ports = t.kind == Kind6::Ports;
    PacketKey {
        af: Af::Inet6,
        dir,
        iface: port,
        proto: t.key.proto,
        src: t.key.src,
        dst: t.key.dst,
        src_port: if ports { t.key.sport } else { 0 },
        dst_port: if ports { t.key.dport } else { 0 },
        ..PacketKey::ZERO
    }
}

/// `binat`'s mapping of `addr` by rule `r`: inside to outside (`out`) or back.
fn binat6(r: &NatRule, addr: u128, out: bool) -> u128 {
    match (binat_inside(r), r.target.as_ref().map(|t| &t.addr)) {
        (Some(inside), Some(NatAddr::Pool(o))) => match o.first() {
            Some(outside) => binat_map6(inside, *outside, addr, out),
            None => addr,
        },
        _ => addr,
    }
}

/// Where the port search of a new translation starts: a keyed hash of the flow.
fn start_port(seed: u64, k: &Key6) -> u32 {
    let fold = |a: u128| (a as u64) ^ ((a >> 64) as u64);
    let mut h = seed ^ fold(k.src).rotate_left(17) ^ fold(k.dst);
    h = (h ^ (u64::from(k.sport) << 16 | u64::from(k.dport))).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (h >> 32) as u32
}
