//! The state table against a plain `HashMap` reference model: random insert / lookup (both
//! directions) / ICMP-error lookup / remove / clock advance / partial sweep sequences over UDP,
//! ICMP echo and other-protocol flows (IPv4 and IPv6), >= 1M operations per run; in one run,
//! limit changes too (lower and higher, as a reload's `set limit states`).
//! Seed override: `FW_STATE_SEED=<u64>`.

use std::collections::HashMap;

use fw::packet::{Af, Dir, PacketKey, proto};
use fw::state::{InsertError, StateId, StateLookup, StateTable, StateVerdict, Timeouts};

mod common;
use common::Rng;

type Ep = (u128, u16);

/// The model's own canonical key: (af, proto, low endpoint, high endpoint).
type MKey = (Af, u8, Ep, Ep);

fn ep_pair(k: &PacketKey) -> (Ep, Ep) {
    if k.proto == proto::ICMP || k.proto == proto::ICMPV6 {
        // pf's keys: a request as sent from its identifier to its type, the reply as sent
        // from the request's type to the identifier (every identifier here is 0).
        match k.src_port {
            0 => ((k.src, 8), (k.dst, 0)),
            129 => ((k.src, 128), (k.dst, 0)),
            t => ((k.src, 0), (k.dst, t)),
        }
    } else {
        ((k.src, k.src_port), (k.dst, k.dst_port))
    }
}

fn mkey(k: &PacketKey) -> MKey {
    let (s, d) = ep_pair(k);
    (k.af, k.proto, s.min(d), s.max(d))
}

#[derive(Clone, Copy, Debug)]
struct MEntry {
    id: u32,
    init: Ep,
    deadline: u32,
    /// The timeout `deadline` was set with (what adaptive scaling shortens).
    secs: u32,
    st: [u8; 2],
}

fn flip(k: &PacketKey) -> PacketKey {
    let (sp, dp) = if k.proto == proto::ICMP {
        (if k.src_port == 8 { 0 } else { 8 }, 0)
    } else if k.proto == proto::ICMPV6 {
        (if k.src_port == 128 { 129 } else { 128 }, 0)
    } else {
        (k.dst_port, k.src_port)
    };
    PacketKey { src: k.dst, dst: k.src, src_port: sp, dst_port: dp, ..*k }
}

/// A universe of flows with small address/port pools so that endpoint orderings vary.
fn universe(rng: &mut Rng, n: usize) -> Vec<PacketKey> {
    let mut seen = std::collections::HashSet::new();
    let mut v = Vec::with_capacity(n);
    while v.len() < n {
        let v6 = rng.below(5) == 0;
        let addr = |r: &mut Rng| -> u128 {
            let h = r.below(64) as u128;
            if v6 { 0x2001_0db8u128 << 96 | h << 17 | 1 } else { 0x0a00_0000 | h }
        };
        let (p, sp, dp) = match rng.below(10) {
            0..=6 => (
                proto::UDP,
                1000 + rng.below(40) as u16,
                [53, 123, 1000, 1001][rng.below(4) as usize],
            ),
            7 | 8 => {
                if v6 {
                    (proto::ICMPV6, 128, 0)
                } else {
                    (proto::ICMP, 8, 0)
                }
            }
            _ => (47, 0, 0),
        };
        let k = PacketKey {
            af: if v6 { Af::Inet6 } else { Af::Inet },
            dir: Dir::In,
            iface: rng.below(4) as u16,
            proto: p,
            src: addr(rng),
            dst: addr(rng),
            src_port: sp,
            dst_port: dp,
            tcp_flags: 0,
            len: 60,
            icmp_id: 0,
            ip_opts: false,
            route: 0,
            tag: 0,
        };
        if seen.insert(mkey(&k)) {
            v.push(k);
        }
    }
    v
}

struct Model {
    to: Timeouts,
    map: HashMap<MKey, MEntry>,
    ids: HashMap<u32, MKey>,
}

impl Model {
    fn take(&mut self, k: &MKey) {
        let e = self.map.remove(k).unwrap();
        self.ids.remove(&e.id);
    }
    fn first_timeout(&self, p: u8) -> u32 {
        match p {
            proto::UDP => self.to.udp_first,
            proto::ICMP | proto::ICMPV6 => self.to.icmp_first,
            _ => self.to.other_first,
        }
    }

    /// A new entry for `k` created at `now` under slot `id`.
    fn fresh(&self, id: u32, k: &PacketKey, now: u32) -> MEntry {
        let (s, _) = ep_pair(k);
        MEntry {
            id,
            init: s,
            deadline: now + self.first_timeout(k.proto),
            secs: self.first_timeout(k.proto),
            st: if k.proto == proto::ICMP || k.proto == proto::ICMPV6 { [0, 0] } else { [1, 0] },
        }
    }

    /// The timeout after a packet `k` of a live entry `e`, advancing `e`'s pseudo-states.
    fn refresh_timeout(&self, k: &PacketKey, e: &mut MEntry, from_init: bool) -> u32 {
        let to = &self.to;
        let (si, di) = if from_init { (0, 1) } else { (1, 0) };
        if k.proto == proto::ICMP || k.proto == proto::ICMPV6 {
            to.icmp_error
        } else {
            if e.st[si] < 1 {
                e.st[si] = 1;
            }
            if e.st[di] == 1 {
                e.st[di] = 2;
            }
            let multi = e.st == [2, 2];
            match (k.proto == proto::UDP, multi) {
                (true, true) => to.udp_multiple,
                (true, false) => to.udp_single,
                (false, true) => to.other_multiple,
                (false, false) => to.other_single,
            }
        }
    }

    /// Whether `e` is dead at `now`, with pf's adaptive scaling over the entries held
    /// (pf_state_expires: timeout * (end - states) / (end - start) above the start, 0 from
    /// the end on).
    fn dead(&self, e: &MEntry, now: u32) -> bool {
        let (start, end, n) = (
            u64::from(self.to.adaptive_start),
            u64::from(self.to.adaptive_end),
            self.map.len() as u64,
        );
        let secs = u64::from(e.secs);
        let kept = match () {
            _ if end == 0 || start >= end || n <= start => secs,
            _ if n >= end => 0,
            _ => secs * (end - n) / (end - start),
        };
        u64::from(e.deadline) - (secs - kept) <= u64::from(now)
    }

    /// What a lookup of `k` must answer at `now`, updating the model as the table does.
    fn lookup(&mut self, k: &PacketKey, mk: &MKey, now: u32) -> StateLookup {
        match self.map.get(mk).copied() {
            None => StateLookup::Miss,
            Some(e) if self.dead(&e, now) => {
                self.take(mk);
                StateLookup::Miss
            }
            Some(mut e) => {
                let (s, d) = ep_pair(k);
                let from_init = s == e.init || s == d;
                let tmo = self.refresh_timeout(k, &mut e, from_init);
                e.deadline = now + tmo;
                e.secs = tmo;
                self.map.insert(*mk, e);
                StateLookup::Hit {
                    id: StateId(e.id),
                    dir_from_initiator: from_init,
                    verdict: StateVerdict::Pass,
                }
            }
        }
    }

    /// What an ICMP error quoting `mk` must find at `now`.
    fn lookup_icmp_error(&mut self, mk: &MKey, now: u32) -> Option<StateId> {
        match self.map.get(mk).copied() {
            None => None,
            Some(e) if self.dead(&e, now) => {
                self.take(mk);
                None
            }
            Some(e) => Some(StateId(e.id)),
        }
    }
}

/// The packet key the table holds a dead model entry `dk` under; the other fields from `k`.
fn stored_key(dk: &MKey, k: &PacketKey) -> PacketKey {
    let pk = PacketKey {
        af: dk.0,
        proto: dk.1,
        src: dk.2.0,
        src_port: dk.2.1,
        dst: dk.3.0,
        dst_port: dk.3.1,
        ..*k
    };
    if dk.1 == proto::ICMP || dk.1 == proto::ICMPV6 {
        // The request: from the end keyed by its identifier (0) to the type.
        let (id_end, type_end) = if dk.2.1 == 0 { (dk.2, dk.3) } else { (dk.3, dk.2) };
        PacketKey { src: id_end.0, dst: type_end.0, src_port: type_end.1, dst_port: 0, ..pk }
    } else {
        pk
    }
}

/// One run: the table under test beside the model, the clock and what was seen.
struct Harness {
    rng: Rng,
    table: StateTable,
    model: Model,
    uni: Vec<PacketKey>,
    now: u32,
    /// The initial limit.
    base: usize,
    limit: usize,
    /// The largest limit so far: slot ids stay below it.
    cap: usize,
    /// The clock advances on one in `adv` clock operations.
    adv: u64,
    hits: u64,
    fulls: u64,
    swept: u64,
}

impl Harness {
    /// `adaptive`: pf's adaptive scaling (start, end), or the default (off at these sizes).
    fn new(seed: u64, limit: usize, flows: usize, adv: u64, adaptive: Option<(u32, u32)>) -> Self {
        let mut rng = Rng(seed | 1);
        let to = Timeouts {
            udp_first: 6,
            udp_single: 3,
            udp_multiple: 9,
            icmp_first: 4,
            icmp_error: 2,
            other_first: 5,
            other_single: 2,
            other_multiple: 7,
            ..Timeouts::default()
        };
        let to = match adaptive {
            Some((adaptive_start, adaptive_end)) => Timeouts { adaptive_start, adaptive_end, ..to },
            None => to,
        };
        let table = StateTable::new(limit, to, seed);
        let uni = universe(&mut rng, flows);
        Harness {
            rng,
            table,
            model: Model { to, map: HashMap::new(), ids: HashMap::new() },
            uni,
            now: 1,
            base: limit,
            limit,
            cap: limit,
            adv,
            hits: 0,
            fulls: 0,
            swept: 0,
        }
    }

    /// A flow of the universe, either way round, on a random interface and direction.
    fn draw_key(&mut self) -> PacketKey {
        let rng = &mut self.rng;
        let k0 = self.uni[rng.below(self.uni.len() as u64) as usize];
        let k = if rng.below(2) == 0 { k0 } else { flip(&k0) };
        PacketKey {
            iface: rng.below(4) as u16,
            dir: if rng.below(2) == 0 { Dir::In } else { Dir::Out },
            ..k
        }
    }

    /// One random operation on a random flow, checked against the model.
    fn step(&mut self, op: usize) {
        let k = self.draw_key();
        let mk = mkey(&k);
        let r = self.rng.below(100);
        if r < 40 {
            self.lookup(op, &k, &mk);
        } else if r < 65 {
            self.insert(op, &k, &mk);
        } else if r < 80 {
            if self.rng.below(self.adv) == 0 {
                self.now += 1 + self.rng.below(2) as u32;
            }
        } else if r < 81 {
            self.sweep(op, &k);
        } else if r < 90 {
            // ICMP error quoting the flow.
            let got = self.table.lookup_icmp_error(&k, None, self.now);
            let want = self.model.lookup_icmp_error(&mk, self.now);
            assert_eq!(got, want, "op {op}: icmp error");
        } else if r < 91 {
            self.remove(op);
        } else {
            self.outside(&k);
        }
    }

    fn lookup(&mut self, op: usize, k: &PacketKey, mk: &MKey) {
        let got = self.table.lookup(k, None, self.now);
        let want = self.model.lookup(k, mk, self.now);
        if matches!(want, StateLookup::Hit { .. }) {
            self.hits += 1;
        }
        assert_eq!(got, want, "op {op}: lookup {k:?}");
    }

    fn insert(&mut self, op: usize, k: &PacketKey, mk: &MKey) {
        let now = self.now;
        let got = self.table.insert(k, op as u32, now, None);
        let m = &mut self.model;
        match m.map.get(mk).copied() {
            Some(e) if !m.dead(&e, now) => {
                assert_eq!(got, Err(InsertError::Exists(StateId(e.id))), "op {op}")
            }
            Some(e) => {
                assert_eq!(got, Ok(StateId(e.id)), "op {op}: replace dead");
                let ne = m.fresh(e.id, k, now);
                m.map.insert(*mk, ne);
            }
            None if m.map.len() >= self.limit => {
                assert_eq!(got, Err(InsertError::Full), "op {op}");
                self.fulls += 1;
            }
            None => {
                let id = got.unwrap_or_else(|e| panic!("op {op}: insert failed {e:?}")).0;
                assert!((id as usize) < self.cap);
                assert!(m.ids.insert(id, *mk).is_none(), "op {op}: id {id} handed out twice");
                let ne = m.fresh(id, k, now);
                m.map.insert(*mk, ne);
            }
        }
    }

    /// Partial sweep; the model learns which dead entries went.
    fn sweep(&mut self, op: usize, k: &PacketKey) {
        let now = self.now;
        let budget = self.rng.below(self.limit as u64 / 2 + 2) as usize;
        let n = self.table.expire(now, budget);
        let dead: Vec<MKey> = self
            .model
            .map
            .iter()
            .filter(|(_, e)| self.model.dead(e, now))
            .map(|(k, _)| *k)
            .collect();
        let mut gone = 0;
        for dk in dead {
            let e = self.model.map[&dk];
            if !self.table.debug_contains(&stored_key(&dk, k)) {
                assert!(
                    self.table.info(StateId(e.id)).is_none(),
                    "op {op}: swept slot still in use"
                );
                self.model.take(&dk);
                gone += 1;
            }
        }
        assert_eq!(n, gone, "op {op}: sweep removed");
        self.swept += n as u64;
    }

    /// Remove by id (tracked or not).
    fn remove(&mut self, op: usize) {
        let id = self.rng.below(self.cap as u64 + 2) as u32;
        let want = self.model.ids.get(&id).copied();
        assert_eq!(self.table.remove(StateId(id)), want.is_some(), "op {op}: remove {id}");
        if let Some(mk) = want {
            self.model.take(&mk);
        }
    }

    /// A flow outside the universe.
    fn outside(&mut self, k: &PacketKey) {
        let nk =
            PacketKey { src_port: 60000 + self.rng.below(100) as u16, proto: proto::UDP, ..*k };
        assert_eq!(self.table.lookup(&nk, None, self.now), StateLookup::Miss);
        assert_eq!(self.table.lookup_icmp_error(&nk, None, self.now), None);
    }

    /// A reload's new limit, from a tenth to twice the initial one: existing states stay (the
    /// model keeps them all), new flows wait for `len < limit`.
    fn change_limit(&mut self) {
        let t = &mut self.table;
        self.limit = (self.base / 10 + self.rng.below(2 * self.base as u64) as usize).max(1);
        // A higher limit than the table holds takes memory allocated beforehand, as the
        // control thread does for a reload.
        if self.limit > t.capacity() {
            t.grow_into(fw::state::StateMemory::try_new(self.limit).unwrap());
        }
        t.set_limit(self.limit);
        self.cap = self.cap.max(self.limit);
        assert_eq!(t.limit(), self.limit);
        assert_eq!(t.capacity(), self.cap);
        t.debug_check();
    }
}

fn run(seed: u64, ops: usize, limit: usize, flows: usize, adv: u64, resize: bool) {
    run_scaled(seed, ops, limit, flows, adv, resize, None);
}

fn run_scaled(
    seed: u64,
    ops: usize,
    limit: usize,
    flows: usize,
    adv: u64,
    resize: bool,
    adaptive: Option<(u32, u32)>,
) {
    let mut h = Harness::new(seed, limit, flows, adv, adaptive);
    for op in 0..ops {
        h.step(op);
        if resize && h.rng.below(5000) == 0 {
            h.change_limit();
        }
        assert_eq!(h.table.len(), h.model.map.len(), "op {op}: len");
        if op % 100_000 == 0 {
            h.table.debug_check();
        }
    }
    h.table.debug_check();
    let c = h.table.counters();
    let Harness { base, limit, cap, hits, fulls, swept, now, .. } = h;
    eprintln!(
        "seed {seed}: {ops} ops, limit {base} (last {limit}, largest {cap}), {flows} flows: {hits} hits, {fulls} full, {swept} swept, now {now}, {c:?}"
    );
    assert!(hits > ops as u64 / 20 && fulls > 0 && c.expired_lookup > 0 && c.expired_sweep > 0);
}

/// Small table, many more flows than slots: the limit is hit often.
#[test]
fn model_small_table_often_full() {
    run(common::seed(0x5eed_0001), 1_000_000, 512, 2000, 100, false);
}

/// Larger table near its limit.
#[test]
fn model_large_table() {
    run(common::seed(0x5eed_0001) ^ 0xabcdef, 1_000_000, 20_000, 40_000, 6000, false);
}

/// The limit changes now and then, lower (states above it stay) and higher (the table grows).
#[test]
fn model_limit_changes() {
    run(common::seed(0x5eed_0001) ^ 0x1177, 1_000_000, 1000, 3000, 300, true);
}

/// pf's adaptive timeouts: from half the limit on, every timeout shrinks with the entries
/// held, to a third at the limit (`set timeout { adaptive.start 256, adaptive.end 1024 }`
/// with 512 states); the table's deadlines, sweeps and lookups follow the count as the
/// model's do.
#[test]
fn model_adaptive_timeouts() {
    run_scaled(
        common::seed(0x5eed_0001) ^ 0xada,
        1_000_000,
        512,
        2000,
        300,
        false,
        Some((256, 1024)),
    );
}

/// The same with the limit changing around the end: from 700 entries on (the limit goes
/// up to 1024) every state is dead.
#[test]
fn model_adaptive_end_below_limit() {
    run_scaled(
        common::seed(0x5eed_0001) ^ 0xade,
        1_000_000,
        512,
        2000,
        300,
        true,
        Some((100, 700)),
    );
}
