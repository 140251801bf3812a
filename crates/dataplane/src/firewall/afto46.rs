//! NAT46 (OpenBSD pf's `pass in inet ... af-to inet6 from ADDR6 to PREFIX6`) for one worker.
//!
//! A flow's first IPv4 packet arriving on the rule's interface (the rule matched it, as a
//! `rdr pass` rule matches) gets a translation: the rule's IPv6 source address and a free
//! port (an echo identifier for pings), and as destination the IPv4 destination within the
//! rule's /96 (RFC 6052) or the rule's one IPv6 address. The packet passes the in pass by the
//! rule (a state is kept, keyed by the packet as it arrived), and after that pass it is
//! rebuilt as IPv6 ([`super::afto_rewrite::to_v6`]) and routed by the IPv6 table; the out
//! rules do not judge it again (its state decided it). The IPv6 replies are looked up by the
//! translation's IPv6 key on arrival, before the in pass, and rebuilt as IPv4 from the
//! address the client wrote to, so that the state finds them and the IPv4 table routes them.
//! NAT64, the other way, is [`super::afto`].
//!
//! ICMPv6 errors about a translated flow come back as the ICMPv4 errors they stand for (RFC
//! 7915 section 5.2), the packet they quote translated back, from the IPv4 address their
//! source carries in the rule's /96, or else from the router's own address on the client's
//! side. Not here: state sync of the translations, the kernel fast path (translated flows stay
//! in the pipeline), fragments (dropped, `nat_fragment`).

use std::sync::Arc;

use fw::nat::six::{Key6, Nat6Table, Session6};
use fw::nat::table::NatKey;
use fw::nat::{NatKind, NatRule};
use fw::packet::{Af, Dir, PacketKey, proto};
use fw::rules::RuleSet;
use io::rss::{SYMMETRIC_KEY, Toeplitz, queue_for};

use super::CompiledRules;
use super::afto::is_nat46;
use super::afto_rewrite::{Back, ErrorTo4, PortField, error_to_v4, to_v4, to_v6};
use super::nat::alloc_reason;
use super::nat_rewrite::{Kind, read};
use super::nat6_rewrite::{Kind6, read6};
use crate::counters::DropReason;

const SWEEP_BUDGET: usize = 16;

/// A NAT46 rule's addresses: its IPv6 source, and its destination prefix (a /96, or one
/// address as a /128).
#[derive(Clone, Copy)]
struct Af46 {
    src: u128,
    dst: (u128, u8),
}

impl Af46 {
    /// The IPv6 address IPv4 destination `v4` stands for.
    fn destination(&self, v4: u32) -> u128 {
        match self.dst {
            (prefix, 96) => prefix & !0xffff_ffff | u128::from(v4),
            (addr, _) => addr,
        }
    }
}

struct Plan {
    rules: usize,
    /// By rule: its addresses (NAT46 rules only).
    addrs: Vec<Option<Af46>>,
    /// By logical port: a NAT46 rule names it.
    ports: Vec<bool>,
    every_port: bool,
    any: bool,
}

/// What an IPv4 packet of a translated flow becomes: its IPv6 source, source port (or echo
/// identifier) and destination.
pub(crate) type Forward46 = (u128, u16, u128);

/// The NAT46 stage of one worker.
pub(crate) struct Af46Stage {
    /// Translations: out key the client's IPv4 flow (addresses in the low 32 bits), in key
    /// the IPv6 reply's.
    table: Nat6Table,
    plan: Option<Plan>,
    steering: Option<(u16, u16, Toeplitz)>,
    seed: u64,
    /// By logical port: the router's IPv4 address there (an ICMPv6 error from an address that
    /// stands for no IPv4 one comes from it).
    port_v4: Vec<Option<u32>>,
    /// The batch's IPv4 packets to rebuild as IPv6 after the in pass: (index in the batch,
    /// what they become).
    pub pending: Vec<(usize, Forward46)>,
    pub translated: u64,
}

fn key6(k: NatKey) -> Key6 {
    Key6 {
        src: u128::from(k.src),
        dst: u128::from(k.dst),
        sport: k.sport,
        dport: k.dport,
        proto: k.proto,
    }
}

impl Af46Stage {
    pub fn new(seed: u64) -> Af46Stage {
        Af46Stage {
            table: Nat6Table::new(fw::rules::DEFAULT_LIMIT_STATES as usize),
            plan: None,
            steering: None,
            seed,
            port_v4: Vec::new(),
            pending: Vec::new(),
            translated: 0,
        }
    }

    pub fn set_steering(&mut self, worker: u16, workers: u16) {
        self.steering = (workers > 1).then(|| (worker, workers, Toeplitz::new(&SYMMETRIC_KEY)));
    }

    pub fn set_port_v4(&mut self, port_v4: Vec<Option<u32>>) {
        self.port_v4 = port_v4;
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
            self.plan = Some(make_plan(&rules.rules, id));
        }
        self.table.set_limit(usize::try_from(rules.rules.limit_states).unwrap_or(usize::MAX));
        let any = self.plan.as_ref().is_some_and(|p| p.any);
        if self.table.is_empty() {
            return any;
        }
        self.table.sweep(now, &rules.rules.timeouts, SWEEP_BUDGET);
        true
    }

    /// Whether a NAT46 rule may match IPv4 packets arriving on `port`.
    pub fn on_port(&self, port: u16) -> bool {
        self.plan.as_ref().is_some_and(|p| {
            p.every_port || p.ports.get(usize::from(port)).copied().unwrap_or(false)
        })
    }

    /// Whether translations are held (IPv6 replies are then looked up).
    pub fn has_translations(&self) -> bool {
        !self.table.is_empty()
    }

    /// An IPv4 packet `i` of the batch (IP header `ip`) arriving on `port`: if its flow is
    /// translated, or a NAT46 rule matches it (a new translation), it is queued to be rebuilt
    /// as IPv6 after the in pass. `Ok(true)`: so queued (it passes the in pass by its rule).
    pub fn inbound_v4(
        &mut self,
        rs: &RuleSet,
        ip: &[u8],
        port: u16,
        now: u32,
        i: usize,
    ) -> Result<bool, DropReason> {
        let Some(t) = read(ip) else { return Ok(false) };
        let k = key6(t.key);
        let forward = |s: &Session6| (s.out_to.0, s.out_to.1, s.in_key.src);
        if let Some(s) = self.table.lookup_out(&k, now, &rs.timeouts).filter(|s| s.iface == port) {
            s.touch(now, false, t.tcp_flags);
            let f = forward(s);
            self.pending.push((i, f));
            return Ok(true);
        }
        let ports = t.kind == Kind::Ports;
        let key = PacketKey {
            af: Af::Inet,
            dir: Dir::In,
            iface: port,
            proto: t.key.proto,
            src: k.src,
            dst: k.dst,
            src_port: if ports { t.key.sport } else { 0 },
            dst_port: if ports { t.key.dport } else { 0 },
            ..PacketKey::ZERO
        };
        let Some(ri) = rs
            .nat
            .iter()
            .position(|r| r.kind == NatKind::AfTo && is_nat46(r) && r.matches(rs, &key, &|_| None))
        else {
            return Ok(false);
        };
        match t.kind {
            Kind::Ports | Kind::Query { request: true } => {}
            Kind::Fragment => return Err(DropReason::NatFragment),
            _ => return Err(DropReason::NatUntranslatable),
        }
        let s = self.session(ri, &rs.nat[ri], k, ports, port, now)?;
        self.table.insert(s).map_err(alloc_reason)?;
        self.pending.push((i, forward(&s)));
        Ok(true)
    }

    /// A new translation of the client's flow `k` by rule `ri`.
    fn session(
        &mut self,
        ri: usize,
        r: &NatRule,
        k: Key6,
        ports: bool,
        port: u16,
        now: u32,
    ) -> Result<Session6, DropReason> {
        let target = r.target.as_ref().ok_or(DropReason::NatExhausted)?;
        let a = self
            .plan
            .as_ref()
            .and_then(|p| p.addrs.get(ri).copied().flatten())
            .ok_or(DropReason::NatNoAddress)?;
        let dst = a.destination(k.dst as u32);
        let p6 = if k.proto == proto::ICMP { proto::ICMPV6 } else { k.proto };
        let range = if target.static_port {
            (k.sport, k.sport)
        } else {
            target.ports.unwrap_or(fw::nat::DEFAULT_NAT_PORTS)
        };
        // The reply's key as `read6` reads it: an echo's identifier stands for both ports.
        let key_for = |p: u16| Key6 {
            src: dst,
            dst: a.src,
            sport: if ports { k.dport } else { p },
            dport: p,
            proto: p6,
        };
        let steer = self.steering.as_ref();
        let accept = |p: u16| {
            let (sport, dport) = if ports { (k.dport, p) } else { (p, 0) };
            steer.is_none_or(|(worker, workers, hash)| {
                queue_for(hash.ipv6_ports(dst.into(), a.src.into(), sport, dport), *workers)
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
            out_to: (a.src, p),
            in_key: key_for(p),
            in_to: (k.src, k.sport),
            last: now,
            phase: Default::default(),
        })
    }

    /// Rebuilds the IPv4 frame `frame` (IP header at `l3`) as the IPv6 frame `f` says into
    /// `out`: its length (`None`: not translatable, dropped).
    pub fn build_v6(
        &mut self,
        frame: &[u8],
        l3: usize,
        (src, port, dst): Forward46,
        out: &mut [u8],
    ) -> Option<usize> {
        let to = Back { src, dst, port, field: PortField::Src, quote: None };
        let n = to_v6(frame, l3, &to, out)?;
        self.translated += 1;
        Some(n)
    }

    /// An IPv6 packet arriving (`frame`, IP header at `l3`): if it is a reply of a translated
    /// flow, or an ICMPv6 error about one, the IPv4 frame it becomes, built in `out`, and its
    /// IPv4 destination. `Err`: a reply that cannot be translated (dropped).
    pub fn inbound_v6(
        &mut self,
        rs: &RuleSet,
        frame: &[u8],
        l3: usize,
        now: u32,
        out: &mut [u8],
    ) -> Result<Option<(usize, u32)>, DropReason> {
        let Some(t) = frame.get(l3..).and_then(read6) else { return Ok(None) };
        let (lookup, error) = match t.kind {
            Kind6::Ports | Kind6::Query { .. } => (t.key, false),
            Kind6::Error { inner, .. } => (inner.reversed(), true),
            _ => return Ok(None),
        };
        let Some(s) = self.table.lookup_in(&lookup, now, &rs.timeouts) else { return Ok(None) };
        // From the address the client wrote to, back to the client's own port.
        let (server, client, client_port) = (s.out_key.dst as u32, s.in_to.0 as u32, s.in_to.1);
        let n = if error {
            let (server6, iface) = (s.in_key.src, s.iface);
            let to = ErrorTo4 {
                src: self.error_source(t.key.src, server6, server, iface),
                dst: client,
                quote: (client, client_port, server),
            };
            error_to_v4(frame, l3, &to, out)
        } else {
            s.touch(now, true, t.tcp_flags);
            to_v4(frame, l3, (server, client_port, client), PortField::Dst, out)
        };
        let n = n.ok_or(DropReason::NatUntranslatable)?;
        self.translated += 1;
        Ok(Some((n, client)))
    }

    /// The IPv4 source of an ICMPv6 error from `from` about a flow to `server6` (which the
    /// client knows as `server`) whose client is on `iface`: the server's, the IPv4 address
    /// `from` carries in a rule's /96 (RFC 6052), or else the router's own on the client's side.
    fn error_source(&self, from: u128, server6: u128, server: u32, iface: u16) -> u32 {
        if from == server6 {
            return server;
        }
        let embedded = self.plan.as_ref().is_some_and(|p| {
            p.addrs.iter().flatten().any(|a| a.dst.1 == 96 && (a.dst.0 ^ from) >> 32 == 0)
        });
        if embedded {
            return from as u32;
        }
        self.port_v4.get(usize::from(iface)).copied().flatten().unwrap_or(server)
    }
}

#[cold]
fn make_plan(rs: &RuleSet, id: usize) -> Plan {
    let mut ports = Vec::new();
    let (mut every_port, mut any) = (false, false);
    let addrs = rs
        .nat
        .iter()
        .map(|r| {
            if r.kind != NatKind::AfTo || !is_nat46(r) {
                return None;
            }
            any = true;
            every_port |= r.ifaces.is_empty() || r.iface_neg;
            for &i in &r.ifaces {
                let i = usize::from(i);
                if ports.len() <= i {
                    ports.resize(i + 1, false);
                }
                ports[i] = true;
            }
            let t = r.target.as_ref()?;
            let src = match &t.addr {
                fw::nat::NatAddr::Pool(p) => p.first()?.addr,
                _ => return None,
            };
            let dst = t.af_dst?;
            Some(Af46 { src, dst: (dst.addr, dst.len) })
        })
        .collect();
    Plan { rules: id, addrs, ports, every_port, any }
}
