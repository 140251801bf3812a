//! IPv6 translation, pf's NAT66 (`nat`, `rdr` and `binat` rules of family `inet6`): the
//! translations of one worker and the pools they take addresses from.
//!
//! The model is the IPv4 table's ([`super::table`]): each translation holds the out key (the
//! flow's packets as they leave by the translating interface, inside form) and the in key
//! (packets arriving there, wire form), and both index one [`Session6`]. The table is a pair
//! of hash maps over a slab: IPv6 translation is rarer than IPv4's on the routers linerate
//! serves (pf users mostly route IPv6 as it is), so it is written for clarity, not for the
//! IPv4 table's cache lines. Expiry, phases and timeouts are the IPv4 table's.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};

use super::NatKind;
use super::table::{AllocError, Phase, next_phase, phase_timeout};
use crate::rules::Prefix;
use crate::state::Timeouts;

/// An IPv6 flow as the table keys it. ICMPv6 queries carry their identifier in both ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Key6 {
    pub src: u128,
    pub dst: u128,
    pub sport: u16,
    pub dport: u16,
    pub proto: u8,
}

impl Key6 {
    /// The same flow seen from the other end.
    pub fn reversed(&self) -> Key6 {
        Key6 {
            src: self.dst,
            dst: self.src,
            sport: self.dport,
            dport: self.sport,
            proto: self.proto,
        }
    }
}

/// One IPv6 translation (as [`super::table::Session`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Session6 {
    /// The translating interface (port index): the keys only apply there.
    pub iface: u16,
    pub kind: NatKind,
    /// Made by a rule with `pass`.
    pub pass: bool,
    pub out_key: Key6,
    /// New (source address, source port) of packets matching `out_key`.
    pub out_to: (u128, u16),
    pub in_key: Key6,
    /// New (destination address, destination port) of packets matching `in_key`.
    pub in_to: (u128, u16),
    /// Coarse clock (seconds) of the last packet.
    pub last: u32,
    pub phase: Phase,
}

impl Session6 {
    fn expired(&self, now: u32, t: &Timeouts) -> bool {
        now.wrapping_sub(self.last) > phase_timeout(self.out_key.proto, self.phase, t)
    }

    /// Notes a packet: `reply` (of the other direction than the first), its TCP flags.
    pub fn touch(&mut self, now: u32, reply: bool, tcp_flags: u8) {
        self.last = now;
        self.phase = next_phase(self.out_key.proto, self.phase, reply, tcp_flags);
    }
}

/// A keyed folded-multiply hash (the IPv4 table's, `super::table`), with secrets drawn for
/// each table: SipHash, the maps' default, cost NAT66 most of its instructions, and an
/// outsider who does not know the secrets cannot aim flows at one bucket.
#[derive(Debug, Clone, Copy)]
pub struct KeyedHash {
    secret: [u64; 2],
}

impl Default for KeyedHash {
    fn default() -> KeyedHash {
        let seed = std::collections::hash_map::RandomState::new().hash_one(0u64);
        KeyedHash { secret: [seed | 1, seed.rotate_left(32) ^ 0x9e37_79b9_7f4a_7c15 | 1] }
    }
}

/// [`KeyedHash`]'s state: words folded in as they are written.
pub struct KeyedHasher {
    secret: [u64; 2],
    acc: u64,
}

impl BuildHasher for KeyedHash {
    type Hasher = KeyedHasher;

    fn build_hasher(&self) -> KeyedHasher {
        KeyedHasher { secret: self.secret, acc: self.secret[0] }
    }
}

impl Hasher for KeyedHasher {
    fn write(&mut self, bytes: &[u8]) {
        for c in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            self.write_u64(u64::from_le_bytes(w));
        }
    }

    #[inline]
    fn write_u64(&mut self, w: u64) {
        let p = u128::from(self.acc ^ w).wrapping_mul(u128::from(self.secret[1]));
        self.acc = (p as u64) ^ ((p >> 64) as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.acc
    }
}

impl std::hash::Hash for Key6 {
    /// Five words: the addresses' halves, then ports and protocol.
    #[inline]
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.src as u64);
        state.write_u64((self.src >> 64) as u64);
        state.write_u64(self.dst as u64);
        state.write_u64((self.dst >> 64) as u64);
        state.write_u64(
            u64::from(self.sport) << 32 | u64::from(self.dport) << 8 | u64::from(self.proto),
        );
    }
}

/// One worker's IPv6 translations.
#[derive(Debug, Default)]
pub struct Nat6Table {
    slots: Vec<Option<Session6>>,
    free: Vec<usize>,
    by_out: HashMap<Key6, usize, KeyedHash>,
    by_in: HashMap<Key6, usize, KeyedHash>,
    limit: usize,
    sweep_at: usize,
    pub created: u64,
    pub expired: u64,
}

impl Nat6Table {
    /// An empty table of at most `limit` translations.
    pub fn new(limit: usize) -> Nat6Table {
        Nat6Table { limit, ..Nat6Table::default() }
    }

    pub fn set_limit(&mut self, limit: usize) {
        self.limit = limit;
    }

    pub fn len(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The live translation whose out key is `key`.
    pub fn lookup_out(&mut self, key: &Key6, now: u32, t: &Timeouts) -> Option<&mut Session6> {
        let i = *self.by_out.get(key)?;
        self.live(i, now, t)
    }

    /// The live translation whose in key is `key`.
    pub fn lookup_in(&mut self, key: &Key6, now: u32, t: &Timeouts) -> Option<&mut Session6> {
        let i = *self.by_in.get(key)?;
        self.live(i, now, t)
    }

    /// Slot `i`'s translation, removed instead if its time is up.
    fn live(&mut self, i: usize, now: u32, t: &Timeouts) -> Option<&mut Session6> {
        if self.slots.get(i)?.as_ref()?.expired(now, t) {
            self.remove(i);
            self.expired += 1;
            return None;
        }
        self.slots.get_mut(i)?.as_mut()
    }

    /// The translation whose out key is `key`, expired or not, read without touching it
    /// (what state sync sends of a translated flow).
    pub fn peek_out(&self, key: &Key6) -> Option<&Session6> {
        self.slots.get(*self.by_out.get(key)?)?.as_ref()
    }

    /// Adds a peer's translation (state sync), or refreshes ours of the same keys: its last
    /// packet moves on, its phase never back. Returns whether it was added.
    pub fn import(&mut self, s: Session6) -> Result<bool, AllocError> {
        if let Some(&i) = self.by_out.get(&s.out_key)
            && let Some(ours) = self.slots.get_mut(i).and_then(Option::as_mut)
            && ours.in_key == s.in_key
        {
            ours.last = ours.last.max(s.last);
            ours.phase = ours.phase.max(s.phase);
            return Ok(false);
        }
        self.insert(s).map(|()| true)
    }

    /// Whether an in key is taken (expired translations count until swept or looked up).
    pub fn in_key_used(&self, key: &Key6) -> bool {
        self.by_in.contains_key(key)
    }

    /// Adds a translation whose keys the caller found free.
    pub fn insert(&mut self, s: Session6) -> Result<(), AllocError> {
        if self.len() >= self.limit {
            return Err(AllocError::TableFull);
        }
        let i = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(None);
                self.slots.len() - 1
            }
        };
        self.slots[i] = Some(s);
        // A key still named for another translation is taken over, as in the IPv4 table.
        self.by_out.insert(s.out_key, i);
        self.by_in.insert(s.in_key, i);
        self.created += 1;
        Ok(())
    }

    fn remove(&mut self, i: usize) {
        let Some(s) = self.slots.get_mut(i).and_then(Option::take) else { return };
        if self.by_out.get(&s.out_key) == Some(&i) {
            self.by_out.remove(&s.out_key);
        }
        if self.by_in.get(&s.in_key) == Some(&i) {
            self.by_in.remove(&s.in_key);
        }
        self.free.push(i);
    }

    /// Removes expired translations among the next `budget` slots.
    pub fn sweep(&mut self, now: u32, t: &Timeouts, budget: usize) {
        let n = self.slots.len();
        for _ in 0..budget.min(n) {
            if self.sweep_at >= n {
                self.sweep_at = 0;
            }
            let i = self.sweep_at;
            if self.slots[i].is_some_and(|s| s.expired(now, t)) {
                self.remove(i);
                self.expired += 1;
            }
            self.sweep_at += 1;
        }
    }

    /// A free port in `lo..=hi` searched from `start`, that `accept` takes and whose in key
    /// (`key_for(port)`) is not in use; every port is tried before giving up, as pf does.
    pub fn free_port(
        &self,
        (lo, hi): (u16, u16),
        start: u32,
        accept: impl Fn(u16) -> bool,
        key_for: impl Fn(u16) -> Key6,
    ) -> Result<u16, AllocError> {
        let n = u32::from(hi - lo) + 1;
        (0..n)
            .map(|k| lo + (start.wrapping_add(k) % n) as u16)
            .find(|&p| accept(p) && !self.in_key_used(&key_for(p)))
            .ok_or(AllocError::PortsExhausted)
    }
}

/// An IPv6 pool: its prefixes in order (a prefix stands for all its addresses; a /64 is not
/// expanded into a list, as IPv4 pools are).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pool6 {
    pub prefixes: Vec<Prefix>,
}

impl Pool6 {
    /// A pool of one address (an interface's).
    pub fn single(addr: u128) -> Pool6 {
        Pool6 { prefixes: vec![Prefix { af: crate::packet::Af::Inet6, addr, len: 128 }] }
    }

    /// How many addresses the pool holds (saturating at `u128::MAX`).
    fn size(&self) -> u128 {
        self.prefixes
            .iter()
            .fold(0u128, |n, p| n.saturating_add((p.last() - p.first()).saturating_add(1)))
    }

    /// The `i`th address of the pool, counted across its prefixes.
    fn nth(&self, mut i: u128) -> Option<u128> {
        for p in &self.prefixes {
            let n = (p.last() - p.first()).saturating_add(1);
            if i < n {
                return Some(p.first() + i);
            }
            i -= n;
        }
        None
    }

    /// `bitmask`: the first prefix's network bits, `addr`'s host bits.
    pub fn bitmask(&self, addr: u128) -> Option<u128> {
        let p = self.prefixes.first()?;
        let mask = mask6(p.len);
        Some((p.addr & mask) | (addr & !mask))
    }
}

/// The network mask of an IPv6 prefix of `len` bits.
pub fn mask6(len: u8) -> u128 {
    if len == 0 { 0 } else { u128::MAX << (128 - u32::from(len.min(128))) }
}

/// `binat`'s fixed mapping of `addr` between `inside` and `outside` (of the same length):
/// inside to outside (`out`) or back, host bits kept.
pub fn binat_map6(inside: Prefix, outside: Prefix, addr: u128, out: bool) -> u128 {
    let mask = mask6(inside.len);
    let net = if out { outside.addr } else { inside.addr };
    (net & mask) | (addr & !mask)
}

/// What a worker keeps between picks from IPv6 pools (as [`super::pool::PoolCursor`]).
#[derive(Debug, Default)]
pub struct Pool6Cursor {
    next: u128,
    rng: u64,
    sticky: HashMap<(usize, u128), u128>,
}

impl Pool6Cursor {
    pub fn new(seed: u64) -> Pool6Cursor {
        Pool6Cursor { next: 0, rng: seed | 1, sticky: HashMap::new() }
    }

    /// The pool address for source `src` under rule `rule`; [`stick`](Self::stick) keeps it
    /// for `src` once the translation is made (`sticky-address`).
    pub fn choose(
        &mut self,
        pool: &Pool6,
        method: super::PoolMethod,
        sticky: bool,
        rule: usize,
        src: u128,
    ) -> Option<u128> {
        use super::PoolMethod;
        if sticky && let Some(&a) = self.sticky.get(&(rule, src)) {
            return Some(a);
        }
        let n = pool.size();
        if n == 0 {
            return None;
        }
        match method {
            PoolMethod::RoundRobin => {
                let a = pool.nth(self.next % n);
                self.next = self.next.wrapping_add(1);
                a
            }
            PoolMethod::Random => {
                self.rng ^= self.rng >> 12;
                self.rng ^= self.rng << 25;
                self.rng ^= self.rng >> 27;
                let r = self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d);
                pool.nth((u128::from(r) << 64 | u128::from(r.rotate_left(29))) % n)
            }
            // The same for every worker: a host keeps its address whichever worker sees it.
            PoolMethod::SourceHash => {
                let h = (src as u64 ^ (src >> 64) as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                pool.nth(u128::from(h ^ (h >> 29)) % n)
            }
            PoolMethod::Bitmask => pool.bitmask(src),
        }
    }

    /// `src` keeps `addr` under rule `rule` (`sticky-address`).
    pub fn stick(&mut self, rule: usize, src: u128, addr: u128) {
        self.sticky.insert((rule, src), addr);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nat::PoolMethod;
    use crate::packet::Af;

    fn p(addr: u128, len: u8) -> Prefix {
        Prefix { af: Af::Inet6, addr, len }
    }

    const NET: u128 = 0x2001_0db8_0000_0000_0000_0000_0000_0000;

    #[test]
    fn round_robin_walks_the_prefixes_in_order() {
        let pool = Pool6 { prefixes: vec![p(NET | 1, 128), p(NET | 0x10, 127)] };
        let mut c = Pool6Cursor::new(1);
        let picks: Vec<u128> = (0..4)
            .map(|_| c.choose(&pool, PoolMethod::RoundRobin, false, 0, 7).unwrap() - NET)
            .collect();
        assert_eq!(picks, vec![1, 0x10, 0x11, 1]);
    }

    #[test]
    fn a_slash_64_stays_a_prefix_and_its_picks_stay_in_it() {
        let pool = Pool6 { prefixes: vec![p(NET, 64)] };
        let mut c = Pool6Cursor::new(3);
        for m in [PoolMethod::Random, PoolMethod::SourceHash, PoolMethod::Bitmask] {
            for src in 0..50u128 {
                let a = c.choose(&pool, m, false, 0, src << 70 | src).unwrap();
                assert_eq!(a & mask6(64), NET, "{m:?}");
            }
        }
        assert_eq!(pool.bitmask(0xfd00 << 112 | 0xabcd), Some(NET | 0xabcd));
        let h = |c: &mut Pool6Cursor| c.choose(&pool, PoolMethod::SourceHash, false, 0, 42);
        assert_eq!(h(&mut c), h(&mut Pool6Cursor::new(99)), "source-hash: the same everywhere");
    }

    #[test]
    fn sticky_sources_keep_their_address() {
        let pool = Pool6 { prefixes: vec![p(NET | 1, 128), p(NET | 2, 128)] };
        let mut c = Pool6Cursor::new(1);
        let a = c.choose(&pool, PoolMethod::RoundRobin, true, 0, 9).unwrap();
        c.stick(0, 9, a);
        for _ in 0..3 {
            assert_eq!(c.choose(&pool, PoolMethod::RoundRobin, true, 0, 9), Some(a));
        }
    }

    #[test]
    fn binat_maps_host_bits_both_ways() {
        let inside = p(0xfd00 << 112, 64);
        let outside = p(NET, 64);
        let host = 0xfd00 << 112 | 0x1234;
        let out = binat_map6(inside, outside, host, true);
        assert_eq!(out, NET | 0x1234);
        assert_eq!(binat_map6(inside, outside, out, false), host);
    }

    fn session(sport: u16, port: u16) -> Session6 {
        let out_key = Key6 { src: 1, dst: 2, sport, dport: 80, proto: 17 };
        Session6 {
            iface: 1,
            kind: NatKind::Nat,
            pass: false,
            out_key,
            out_to: (3, port),
            in_key: Key6 { src: 2, dst: 3, sport: 80, dport: port, proto: 17 },
            in_to: (1, sport),
            last: 0,
            phase: Phase::First,
        }
    }

    /// Against a plain list: both keys find the translation until its timeout, expiry by
    /// lookup and by sweep, free ports, the limit.
    #[test]
    fn the_table_finds_expires_and_frees() {
        let t = Timeouts::default();
        let mut table = Nat6Table::new(3);
        for k in 0..3 {
            table.insert(session(1000 + k, 50001 + k)).unwrap();
        }
        assert_eq!(table.insert(session(9, 9)), Err(AllocError::TableFull));
        let s = session(1001, 50002);
        assert_eq!(table.lookup_out(&s.out_key, 1, &t).map(|s| s.out_to), Some((3, 50002)));
        assert_eq!(table.lookup_in(&s.in_key, 1, &t).map(|s| s.in_to), Some((1, 1001)));
        let key_for = |p: u16| Key6 { src: 2, dst: 3, sport: 80, dport: p, proto: 17 };
        assert_eq!(table.free_port((50001, 50004), 0, |_| true, key_for), Ok(50004));
        assert_eq!(
            table.free_port((50001, 50003), 0, |_| true, key_for),
            Err(AllocError::PortsExhausted)
        );
        table.lookup_in(&s.in_key, 1, &t).unwrap().touch(1, true, 0);
        let late = 1 + t.udp_single + 1;
        assert!(table.lookup_out(&session(1000, 50001).out_key, late, &t).is_none());
        assert_eq!(table.len(), 2, "expired by its lookup");
        table.sweep(late, &t, 10);
        assert_eq!(table.len(), 1, "the replied-to flow lives on (udp.multiple)");
        assert_eq!(table.expired, 2);
        table.insert(session(7, 50001)).unwrap();
        assert_eq!(table.len(), 2, "a freed slot is used again");
    }
}
