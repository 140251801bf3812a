//! NAT64 (OpenBSD pf's `pass in inet6 ... to PREFIX/96 af-to inet from ADDR`) for one worker.
//!
//! A flow's first IPv6 packet arriving on the rule's interface (the rule matched it, as a
//! `rdr pass` rule matches) gets a translation: the pool's IPv4 address and a free port (an
//! echo identifier for pings), and the IPv4 destination in the last 32 bits of its
//! destination (RFC 6052). The packet passes the in pass by the rule (a state is kept, keyed
//! by the packet as it arrived, pf's wire side), and after that pass it is rebuilt as IPv4
//! ([`super::afto_rewrite::to_v4`]) and routed by the IPv4 table; the out rules do not judge
//! it again (its state decided it, as pf's state has both keys). The IPv4 replies, and ICMP
//! errors about the flow, are looked up by the translation's IPv4 key on arrival, before the
//! in pass, and rebuilt as IPv6 from the server's address inside the /96 to the client, so
//! that the state finds them and the IPv6 table routes them.
//!
//! Not here: `af-to inet6` (NAT46: [`super::afto46`]), state sync of the translations, the kernel fast path
//! (translated flows stay in the pipeline), IPv6 extension headers and fragments (dropped,
//! counted as `nat_fragment`).

use std::sync::Arc;

use fw::nat::pool::{Pool, PoolCursor};
use fw::nat::six::{Key6, Nat6Table, Session6};
use fw::nat::{NatKind, NatRule};
use fw::packet::{Af, Dir, PacketKey, proto};
use fw::rules::RuleSet;
use io::rss::{SYMMETRIC_KEY, Toeplitz, queue_for};

use super::CompiledRules;
use super::afto_rewrite::{Back, PortField, to_v4, to_v6};
use super::nat::{alloc_reason, v4_pool};
use super::nat_rewrite::{Kind, read};
use super::nat6_rewrite::{Kind6, read6};
use crate::counters::DropReason;

const SWEEP_BUDGET: usize = 16;

/// Whether `af-to` rule `r` is NAT46 (`af-to inet6`, for IPv4 packets).
pub(crate) fn is_nat46(r: &NatRule) -> bool {
    r.target.as_ref().is_some_and(|t| t.af_dst.is_some())
}

/// The largest frame a translation builds (an IPv4 frame of 1500 bytes grows by 20).
pub(crate) const MAX_FRAME: usize = 2048;

struct Plan {
    rules: usize,
    /// By rule: its IPv4 pool (`af-to` rules only).
    pools: Vec<Option<Pool>>,
    /// By logical port: an `af-to` rule names it.
    ports: Vec<bool>,
    every_port: bool,
    any: bool,
}

/// The NAT64 stage of one worker.
pub(crate) struct AfToStage {
    /// Translations: out key the client's IPv6 flow, in key the IPv4 reply's (IPv4 addresses
    /// in the low 32 bits).
    table: Nat6Table,
    cursor: PoolCursor,
    port_v4: Vec<Option<u32>>,
    plan: Option<Plan>,
    steering: Option<(u16, u16, Toeplitz)>,
    seed: u64,
    /// The batch's IPv6 packets to rebuild as IPv4 after the in pass: (index in the batch,
    /// source, port, destination).
    pub pending: Vec<(usize, (u32, u16, u32))>,
    pub translated: u64,
}

impl AfToStage {
    pub fn new(port_v4: Vec<Option<u32>>, seed: u64) -> AfToStage {
        AfToStage {
            table: Nat6Table::new(fw::rules::DEFAULT_LIMIT_STATES as usize),
            cursor: PoolCursor::new(seed),
            port_v4,
            plan: None,
            steering: None,
            seed,
            pending: Vec::new(),
            translated: 0,
        }
    }

    pub fn set_steering(&mut self, worker: u16, workers: u16) {
        self.steering = (workers > 1).then(|| (worker, workers, Toeplitz::new(&SYMMETRIC_KEY)));
    }

    pub fn len(&self) -> usize {
        self.table.len()
    }

    pub fn counts(&self) -> (u64, u64) {
        (self.table.created, self.table.expired)
    }

    /// Once per batch: the plan for `rules`, a sweep. `false`: nothing to translate.
    pub fn begin_batch(&mut self, rules: &Arc<CompiledRules>, now: u32) -> bool {
        self.pending.clear();
        let id = Arc::as_ptr(rules) as usize;
        if self.plan.as_ref().is_none_or(|p| p.rules != id) {
            self.plan = Some(self.make_plan(&rules.rules, id));
        }
        self.table.set_limit(usize::try_from(rules.rules.limit_states).unwrap_or(usize::MAX));
        let any = self.plan.as_ref().is_some_and(|p| p.any);
        // Without `af-to`, this is all a batch pays.
        if self.table.is_empty() {
            return any;
        }
        self.table.sweep(now, &rules.rules.timeouts, SWEEP_BUDGET);
        true
    }

    #[cold]
    fn make_plan(&self, rs: &RuleSet, id: usize) -> Plan {
        let mut ports = vec![false; self.port_v4.len().max(1)];
        let (mut every_port, mut any) = (false, false);
        let pools = rs
            .nat
            .iter()
            .map(|r| {
                // NAT46's rules (for IPv4) are `super::afto46`'s.
                if r.kind != NatKind::AfTo || is_nat46(r) {
                    return None;
                }
                any = true;
                every_port |= r.ifaces.is_empty() || r.iface_neg;
                for &i in &r.ifaces {
                    if let Some(p) = ports.get_mut(usize::from(i)) {
                        *p = true;
                    }
                }
                v4_pool(rs, &r.target.as_ref()?.addr, &self.port_v4)
            })
            .collect();
        Plan { rules: id, pools, ports, every_port, any }
    }

    /// Whether an `af-to` rule may match IPv6 packets arriving on `port`.
    pub fn on_port(&self, port: u16) -> bool {
        self.plan.as_ref().is_some_and(|p| {
            p.every_port || p.ports.get(usize::from(port)).copied().unwrap_or(false)
        })
    }

    /// Whether translations are held (IPv4 replies are then looked up).
    pub fn has_translations(&self) -> bool {
        !self.table.is_empty()
    }

    /// An IPv6 packet `i` of the batch arriving on `port`: if its flow is translated, or an
    /// `af-to` rule matches it (a new translation), it is queued to be rebuilt as IPv4 after
    /// the in pass. `Ok(true)`: so queued (it passes the in pass by its rule).
    pub fn inbound_v6(
        &mut self,
        rs: &RuleSet,
        ip: &[u8],
        port: u16,
        now: u32,
        i: usize,
    ) -> Result<bool, DropReason> {
        let Some(t) = read6(ip) else { return Ok(false) };
        let queued = |s: &Session6| (s.out_to.0 as u32, s.out_to.1, s.in_key.src as u32);
        if let Some(s) =
            self.table.lookup_out(&t.key, now, &rs.timeouts).filter(|s| s.iface == port)
        {
            s.touch(now, false, t.tcp_flags);
            let q = queued(s);
            self.pending.push((i, q));
            return Ok(true);
        }
        let key = PacketKey {
            af: Af::Inet6,
            dir: Dir::In,
            iface: port,
            proto: t.key.proto,
            src: t.key.src,
            dst: t.key.dst,
            src_port: if t.kind == Kind6::Ports { t.key.sport } else { 0 },
            dst_port: if t.kind == Kind6::Ports { t.key.dport } else { 0 },
            ..PacketKey::ZERO
        };
        let Some(ri) = rs.nat.iter().position(|r| {
            r.kind == NatKind::AfTo && !is_nat46(r) && r.matches(rs, &key, &|_| None)
        }) else {
            return Ok(false);
        };
        match t.kind {
            Kind6::Ports | Kind6::Query { request: true } => {}
            Kind6::Fragment => return Err(DropReason::NatFragment),
            _ => return Err(DropReason::NatUntranslatable),
        }
        let s = self.session(ri, &rs.nat[ri], t.key, t.kind, port, now)?;
        self.table.insert(s).map_err(alloc_reason)?;
        self.pending.push((i, queued(&s)));
        Ok(true)
    }

    /// A new translation of the client's flow `k` by rule `ri`.
    fn session(
        &mut self,
        ri: usize,
        r: &NatRule,
        k: Key6,
        kind: Kind6,
        port: u16,
        now: u32,
    ) -> Result<Session6, DropReason> {
        let target = r.target.as_ref().ok_or(DropReason::NatExhausted)?;
        let pool = self
            .plan
            .as_ref()
            .and_then(|p| p.pools.get(ri))
            .and_then(|p| p.as_ref())
            .ok_or(DropReason::NatNoAddress)?;
        let addr = self
            .cursor
            .choose(pool, target.method, target.sticky, ri, k.src as u32 ^ (k.src >> 96) as u32)
            .ok_or(DropReason::NatNoAddress)?;
        let dst = k.dst as u32;
        let query = kind != Kind6::Ports;
        let p4 = if k.proto == proto::ICMPV6 { proto::ICMP } else { k.proto };
        let range = if target.static_port {
            (k.sport, k.sport)
        } else {
            target.ports.unwrap_or(fw::nat::DEFAULT_NAT_PORTS)
        };
        let key_for = |p: u16| Key6 {
            src: u128::from(dst),
            dst: u128::from(addr),
            sport: if query { p } else { k.dport },
            dport: p,
            proto: p4,
        };
        let steer = self.steering.as_ref();
        let accept = |p: u16| {
            let (sport, dport) = if query { (p, 0) } else { (k.dport, p) };
            steer.is_none_or(|(worker, workers, hash)| {
                queue_for(hash.ipv4_ports(dst.into(), addr.into(), sport, dport), *workers)
                    == *worker
            })
        };
        let start = (self.seed ^ (k.src as u64) ^ u64::from(k.sport) << 17) as u32;
        let p = self.table.free_port(range, start, accept, key_for).map_err(alloc_reason)?;
        Ok(Session6 {
            iface: port,
            kind: NatKind::AfTo,
            pass: true,
            out_key: k,
            out_to: (u128::from(addr), p),
            in_key: key_for(p),
            in_to: (k.src, k.sport),
            last: now,
            phase: Default::default(),
        })
    }

    /// Rebuilds the IPv6 frame `frame` (IP header at `l3`) as the IPv4 frame `q` says into
    /// `out`: its length (`None`: not translatable, dropped).
    pub fn build_v4(
        &mut self,
        frame: &[u8],
        l3: usize,
        q: (u32, u16, u32),
        out: &mut [u8],
    ) -> Option<usize> {
        let n = to_v4(frame, l3, q, PortField::Src, out)?;
        self.translated += 1;
        Some(n)
    }

    /// An IPv4 packet arriving (`frame`, IP header at `l3`): if it is a reply of a translated
    /// flow, or an ICMP error about one, the IPv6 frame it becomes, built in `out`, and its
    /// IPv6 destination. `Err`: a reply that cannot be translated (dropped).
    pub fn inbound_v4(
        &mut self,
        rs: &RuleSet,
        frame: &[u8],
        l3: usize,
        now: u32,
        out: &mut [u8],
    ) -> Result<Option<(usize, u128)>, DropReason> {
        let Some(t) = frame.get(l3..).and_then(read) else { return Ok(None) };
        let key6 = |k: fw::nat::table::NatKey| Key6 {
            src: u128::from(k.src),
            dst: u128::from(k.dst),
            sport: k.sport,
            dport: k.dport,
            proto: k.proto,
        };
        let (lookup, error) = match t.kind {
            Kind::Error { inner, .. } => (key6(inner.reversed()), true),
            Kind::Fragment | Kind::Other => (key6(t.key), false),
            _ => (key6(t.key), false),
        };
        let Some(s) = self.table.lookup_in(&lookup, now, &rs.timeouts) else { return Ok(None) };
        if !error {
            s.touch(now, true, t.tcp_flags);
        }
        let prefix = s.out_key.dst & !0xffff_ffff;
        let server = prefix | u128::from(t.key.src);
        let back = if error {
            let quote = (s.out_key.src, s.out_key.sport, s.out_key.dst);
            Back {
                src: server,
                dst: s.out_key.src,
                port: 0,
                field: PortField::Dst,
                quote: Some(quote),
            }
        } else {
            let field = PortField::Dst;
            Back { src: server, dst: s.in_to.0, port: s.in_to.1, field, quote: None }
        };
        let n = to_v6(frame, l3, &back, out).ok_or(DropReason::NatUntranslatable)?;
        self.translated += 1;
        Ok(Some((n, back.dst)))
    }
}
