//! The NAT translation table (`fw::nat::table::NatTable`, one open-addressing index over both
//! keys of every session) against a plain reference: two `HashMap`s, out key and in key to a
//! session, as pf's state keys. Random inserts (keys drawn from a small universe, so that keys
//! taken over by a later session happen), lookups by both keys, `in_key_used`, clock advances
//! with expiry on lookup and by partial and full sweeps, limit changes and a full table; the
//! index's invariants checked as it goes. Seed override: `FW_STATE_SEED=<u64>`.

use std::collections::HashMap;

use fw::nat::NatKind;
use fw::nat::table::{AllocError, NatKey, NatTable, Phase, Session};
use fw::state::Timeouts;

mod common;
use common::Rng;

/// The reference: sessions by id (their `out_to` address), and which session each key finds.
#[derive(Default)]
struct Model {
    sessions: HashMap<u32, Session>,
    outs: HashMap<NatKey, u32>,
    ins: HashMap<NatKey, u32>,
    expired: u64,
}

impl Model {
    fn remove(&mut self, id: u32) {
        let s = self.sessions.remove(&id).expect("removing a session the model holds");
        if self.outs.get(&s.out_key) == Some(&id) {
            self.outs.remove(&s.out_key);
        }
        if self.ins.get(&s.in_key) == Some(&id) {
            self.ins.remove(&s.in_key);
        }
    }

    fn expired_ids(&self, now: u32, t: &Timeouts) -> Vec<u32> {
        self.sessions
            .iter()
            .filter(|(_, s)| now.wrapping_sub(s.last) > s.timeout(t))
            .map(|(&id, _)| id)
            .collect()
    }
}

/// A key of the universe: 4 x 4 addresses, 8 x 8 ports, TCP or UDP.
fn key(rng: &mut Rng) -> NatKey {
    NatKey {
        src: 0x0a00_0000 | rng.below(4) as u32,
        dst: 0xc000_0200 | rng.below(4) as u32,
        sport: 1000 + rng.below(8) as u16,
        dport: 50_000 + rng.below(8) as u16,
        proto: if rng.below(2) == 0 { 6 } else { 17 },
    }
}

fn session(rng: &mut Rng, id: u32, now: u32) -> Session {
    let (out_key, in_key) = (key(rng), key(rng));
    Session {
        iface: rng.below(3) as u16,
        kind: if rng.below(2) == 0 { NatKind::Nat } else { NatKind::Rdr },
        pass: false,
        out_key,
        out_to: (id, out_key.sport ^ 0x4000),
        in_key,
        in_to: (0x0a01_0001, in_key.dport ^ 0x4000),
        last: now,
        phase: Phase::First,
    }
}

/// One lookup by `out` key or in key, in both, compared; a hit is touched in both.
fn lookup(
    t: &mut NatTable,
    m: &mut Model,
    k: &NatKey,
    out: bool,
    now: u32,
    tmo: &Timeouts,
    flags: u8,
) {
    let want = if out { m.outs.get(k) } else { m.ins.get(k) }.copied();
    let got = if out { t.lookup_out(k, now, tmo) } else { t.lookup_in(k, now, tmo) };
    let Some(id) = want else {
        assert!(got.is_none(), "key {k:?} (out: {out}) found a session the model does not have");
        return;
    };
    let ms = m.sessions[&id];
    if now.wrapping_sub(ms.last) > ms.timeout(tmo) {
        assert!(got.is_none(), "expired session {id} found");
        m.remove(id);
        m.expired += 1;
        return;
    }
    let s = got.unwrap_or_else(|| panic!("session {id} not found by {k:?} (out: {out})"));
    assert_eq!(*s, ms, "session {id}");
    s.touch(now, !out, flags);
    let after = *s;
    m.sessions.get_mut(&id).expect("hit").touch(now, !out, flags);
    assert_eq!(after, m.sessions[&id]);
}

fn check(t: &NatTable, m: &Model) {
    t.debug_check();
    assert_eq!(t.len(), m.sessions.len(), "sessions");
    assert_eq!(t.expired, m.expired, "expired");
}

/// `ops` random operations on a table of at most `limit` sessions (`limit_changes`: the
/// limit moves now and then, as a reload's `set limit states`).
fn run(seed: u64, ops: usize, limit: usize, limit_changes: bool) {
    let mut rng = Rng(seed | 1);
    let tmo = Timeouts::default();
    let mut t = NatTable::new(limit, seed);
    let mut m = Model::default();
    let (mut now, mut next_id, mut full) = (0u32, 0u32, 0u64);
    for op in 0..ops {
        match rng.below(100) {
            0..=29 => {
                let s = session(&mut rng, next_id, now);
                next_id += 1;
                let r = t.insert(s);
                if m.sessions.len() >= limit {
                    assert_eq!(r, Err(AllocError::TableFull), "op {op}: insert into a full table");
                    full += 1;
                } else {
                    assert_eq!(r, Ok(()), "op {op}: insert");
                    m.sessions.insert(s.out_to.0, s);
                    m.outs.insert(s.out_key, s.out_to.0);
                    m.ins.insert(s.in_key, s.out_to.0);
                }
            }
            30..=74 => {
                let (k, out) = (key(&mut rng), rng.below(2) == 0);
                let flags = [0, 0, 0x10, 0x01, 0x04][rng.below(5) as usize];
                lookup(&mut t, &mut m, &k, out, now, &tmo, flags);
            }
            75..=84 => {
                let k = key(&mut rng);
                assert_eq!(
                    t.in_key_used(&k),
                    m.ins.contains_key(&k),
                    "op {op}: in_key_used({k:?})"
                );
            }
            // A slow clock (a second every ~200 operations), so that the table fills up.
            85..=93 => now += u32::from(rng.below(20) == 0) * rng.below(8) as u32,
            94..=96 => {
                // A partial sweep removes some expired sessions, which ones depends on the
                // slots; then a full one, after which both hold no expired session.
                let before = m.sessions.len();
                let dead = m.expired_ids(now, &tmo);
                t.sweep(now, &tmo, 1 + rng.below(64) as usize);
                t.debug_check();
                assert!(
                    t.len() <= before && t.len() >= before - dead.len(),
                    "op {op}: partial sweep"
                );
                t.sweep(now, &tmo, usize::MAX);
                for id in dead {
                    m.remove(id);
                    m.expired += 1;
                }
                check(&t, &m);
            }
            97 if rng.below(30) == 0 => now += 100 + rng.below(400) as u32,
            _ => {
                if limit_changes {
                    let l = limit / 2 + rng.below(limit as u64) as usize;
                    t.set_limit(l);
                    return_limit(&mut t, &mut m, l, &mut rng, &mut next_id, now, op);
                    t.set_limit(limit);
                }
            }
        }
        if op % 997 == 0 {
            check(&t, &m);
        }
    }
    check(&t, &m);
    eprintln!(
        "{} sessions at the end, {} expired, {full} inserts refused for a full table, clock at {now}",
        t.len(),
        t.expired
    );
    assert!(full > 0, "the table was never full");
}

/// Under a changed limit `l`: inserts until full, which must be at `l` sessions (or never,
/// if it already holds more: none is removed).
fn return_limit(
    t: &mut NatTable,
    m: &mut Model,
    l: usize,
    rng: &mut Rng,
    next_id: &mut u32,
    now: u32,
    op: usize,
) {
    for _ in 0..4 {
        let s = session(rng, *next_id, now);
        *next_id += 1;
        match t.insert(s) {
            Ok(()) => {
                assert!(m.sessions.len() < l, "op {op}: insert above limit {l}");
                m.sessions.insert(s.out_to.0, s);
                m.outs.insert(s.out_key, s.out_to.0);
                m.ins.insert(s.in_key, s.out_to.0);
            }
            Err(e) => assert!(
                e == AllocError::TableFull && m.sessions.len() >= l,
                "op {op}: refused under limit {l}"
            ),
        }
    }
}

/// A small table, full much of the time.
#[test]
fn model_small_table_often_full() {
    run(common::seed(0x5eed_0019), 300_000, 300, false);
}

/// A table that grows through several index rebuilds, its limit moving.
#[test]
fn model_growing_table_limit_changes() {
    run(common::seed(0x5eed_0019) ^ 0x1177, 300_000, 1800, true);
}

/// Many distinct keys: 200,000 sessions whose keys never collide, each found by both keys,
/// half removed by expiry and sweep, the rest still found; the index stays consistent.
#[test]
fn many_sessions_found_by_both_keys() {
    let tmo = Timeouts::default();
    let mut t = NatTable::new(usize::MAX, 42);
    let n = 200_000u32;
    let s = |i: u32| {
        let out_key =
            NatKey { src: 0x0a00_0000 + i, dst: 0x0808_0808, sport: 1000, dport: 53, proto: 17 };
        let in_key = NatKey {
            src: 0x0808_0808,
            dst: 0xc000_0201 + (i >> 16),
            sport: 53,
            dport: i as u16,
            proto: 17,
        };
        Session {
            iface: 1,
            kind: NatKind::Nat,
            pass: false,
            out_key,
            out_to: (in_key.dst, in_key.dport),
            in_key,
            in_to: (out_key.src, 1000),
            last: 0,
            phase: Phase::First,
        }
    };
    for i in 0..n {
        t.insert(s(i)).unwrap();
    }
    t.debug_check();
    // Slots of 64 bytes, and two index words a session at most half full.
    let per = t.memory_bytes() as f64 / f64::from(n);
    assert!(per <= 128.0, "{per} bytes per session");
    for i in 0..n {
        assert_eq!(t.lookup_in(&s(i).in_key, 10, &tmo).map(|x| x.in_to.0 - 0x0a00_0000), Some(i));
        let x = t.lookup_out(&s(i).out_key, 10, &tmo).expect("found by its out key");
        assert_eq!(x.in_to.0 - 0x0a00_0000, i);
        if i % 2 == 1 {
            x.touch(25, true, 0);
        }
    }
    // udp.single (30 s) after 0; udp.multiple (60 s) after 25.
    t.sweep(50, &tmo, usize::MAX);
    t.debug_check();
    assert_eq!(t.len(), n as usize / 2);
    for i in 0..n {
        let hit = t.lookup_in(&s(i).in_key, 50, &tmo).is_some();
        assert_eq!(hit, i % 2 == 1, "session {i}");
    }
}

/// The bench's translations (`linerate bench --nat-sessions`: addresses and ports counting
/// up together), 1M of them: the keyed hash spreads such structured keys as well as random
/// ones, so that a lookup probes about 1.5 words at the index's load (just under half).
#[test]
fn structured_keys_probe_few_words() {
    let mut t = NatTable::new(usize::MAX, 0x1234_5678);
    let n = 1_000_000usize;
    t.reserve(n);
    let ext = 0xc000_0201;
    for i in 0..n {
        let (src, dst) = (0xac10_0000u32 + (i >> 16) as u32, 0x6440_0000u32 + (i >> 16) as u32);
        let (sport, port) = (i as u16, 1024 + (i % 64000) as u16);
        let out_key = NatKey { src, dst, sport, dport: 9, proto: 17 };
        let in_key = NatKey { src: dst, dst: ext, sport: 9, dport: port, proto: 17 };
        t.insert(Session {
            iface: 1,
            kind: NatKind::Nat,
            pass: false,
            out_key,
            out_to: (ext, port),
            in_key,
            in_to: (src, sport),
            last: 0,
            phase: Phase::First,
        })
        .unwrap();
    }
    let mean = t.debug_check();
    eprintln!(
        "mean distance from home {mean:.3} words, {:.1} bytes a session",
        t.memory_bytes() as f64 / n as f64
    );
    assert!(mean < 1.0, "mean distance {mean} words");
}
