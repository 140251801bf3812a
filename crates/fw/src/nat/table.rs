//! One worker's translations: each holds the two keys pf's state holds for a translated flow
//! (pf's `PF_SK_WIRE` and `PF_SK_STACK`), seen from this router's edges:
//!
//! * the **out** key: the flow's packets as they are about to leave by the translating
//!   interface, inside form; their source is rewritten to [`Session::out_to`];
//! * the **in** key: packets as they arrive on that interface, wire form; their destination is
//!   rewritten to [`Session::in_to`].
//!
//! For `nat` the out key is the inside host's packet (`lan:p -> remote:q`, source becomes
//! `ext:P`) and the in key its reply (`remote:q -> ext:P`, destination becomes `lan:p`). For
//! `rdr` the in key is the client's packet (`client -> ext:80`, destination becomes
//! `srv:8080`) and the out key the server's reply. Both keys index one [`Session`], so the
//! two directions expire together. No lock: only the owning worker touches its table.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};

use super::NatKind;
use crate::state::Timeouts;

/// An IPv4 flow as the table keys it. ICMP queries carry their identifier in both ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NatKey {
    pub src: u32,
    pub dst: u32,
    pub sport: u16,
    pub dport: u16,
    pub proto: u8,
}

impl std::hash::Hash for NatKey {
    /// Two words: two rounds of the table's hasher instead of five.
    #[inline]
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(u64::from(self.src) << 32 | u64::from(self.dst));
        state.write_u64(u64::from(self.sport) << 32 | u64::from(self.dport) << 8 | u64::from(self.proto));
    }
}

impl NatKey {
    /// The same flow seen from the other end.
    pub fn reversed(&self) -> NatKey {
        NatKey { src: self.dst, dst: self.src, sport: self.dport, dport: self.sport, proto: self.proto }
    }
}

/// How far a translated TCP flow got, for its timeout (pf's `tcp.*` timeouts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Phase {
    /// Only the first direction seen.
    #[default]
    First,
    /// Both directions seen.
    Established,
    /// A FIN seen.
    Closing,
    /// A RST seen.
    Closed,
}

/// One translation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Session {
    /// The translating interface (port index): the keys only apply there.
    pub iface: u16,
    pub kind: NatKind,
    /// Index of the rule that made it (for counters).
    pub rule: u32,
    pub out_key: NatKey,
    /// New (source address, source port) of packets matching `out_key`.
    pub out_to: (u32, u16),
    pub in_key: NatKey,
    /// New (destination address, destination port) of packets matching `in_key`.
    pub in_to: (u32, u16),
    /// Coarse clock (seconds) of the last packet.
    pub last: u32,
    pub phase: Phase,
}

impl Session {
    /// Seconds of idleness after which the session is gone.
    pub fn timeout(&self, t: &Timeouts) -> u32 {
        match self.out_key.proto {
            6 => match self.phase {
                Phase::First => t.tcp_first,
                Phase::Established => t.tcp_established,
                Phase::Closing => t.tcp_finwait,
                Phase::Closed => t.tcp_closed,
            },
            17 => match self.phase {
                Phase::First => t.udp_single,
                _ => t.udp_multiple,
            },
            1 => t.icmp_first,
            _ => match self.phase {
                Phase::First => t.other_single,
                _ => t.other_multiple,
            },
        }
    }

    fn expired(&self, now: u32, t: &Timeouts) -> bool {
        now.wrapping_sub(self.last) > self.timeout(t)
    }

    /// Notes a packet: `reply` (it matched the key of the other direction than the first
    /// packet's), and its TCP flags.
    pub fn touch(&mut self, now: u32, reply: bool, tcp_flags: u8) {
        self.last = now;
        if self.out_key.proto == 6 {
            if tcp_flags & 0x04 != 0 {
                self.phase = Phase::Closed;
            } else if tcp_flags & 0x01 != 0 && self.phase != Phase::Closed {
                self.phase = Phase::Closing;
            } else if reply && self.phase == Phase::First {
                self.phase = Phase::Established;
            }
        } else if reply && self.phase == Phase::First {
            self.phase = Phase::Established;
        }
    }
}

/// A seeded multiply-xorshift hasher for the keys (13 bytes): far cheaper than SipHash, and
/// seeded per worker so that outsiders cannot aim collisions at the table.
#[derive(Clone, Copy)]
pub struct KeyHasher {
    seed: u64,
}

impl BuildHasher for KeyHasher {
    type Hasher = KeyHash;
    fn build_hasher(&self) -> KeyHash {
        KeyHash(self.seed)
    }
}

pub struct KeyHash(u64);

impl Hasher for KeyHash {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u8(b);
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.write_u64(u64::from(i));
    }
    fn write_u16(&mut self, i: u16) {
        self.write_u64(u64::from(i));
    }
    fn write_u32(&mut self, i: u32) {
        self.write_u64(u64::from(i));
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0 ^ i).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29);
    }
    fn finish(&self) -> u64 {
        let h = self.0.wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h ^ (h >> 31)
    }
}

/// Why a translation could not be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocError {
    /// Every port of the range is in use towards that destination (or steers elsewhere).
    PortsExhausted,
    /// The table holds its limit of sessions.
    TableFull,
}

/// The table of one worker.
pub struct NatTable {
    sessions: Vec<Session>,
    /// Slots of `sessions` free for reuse.
    free: Vec<u32>,
    /// `true` for the slots in use.
    live: Vec<bool>,
    outs: HashMap<NatKey, u32, KeyHasher>,
    ins: HashMap<NatKey, u32, KeyHasher>,
    limit: usize,
    sweep_at: usize,
    pub created: u64,
    pub expired: u64,
}

impl NatTable {
    /// An empty table of at most `limit` sessions; `seed` keys its hash.
    pub fn new(limit: usize, seed: u64) -> NatTable {
        let h = KeyHasher { seed: seed | 1 };
        NatTable {
            sessions: Vec::new(),
            free: Vec::new(),
            live: Vec::new(),
            outs: HashMap::with_hasher(h),
            ins: HashMap::with_hasher(KeyHasher { seed: seed.rotate_left(17) | 1 }),
            limit,
            sweep_at: 0,
            created: 0,
            expired: 0,
        }
    }

    /// Sets the most sessions the table holds (a lower limit removes none: new translations
    /// are refused until under it).
    pub fn set_limit(&mut self, limit: usize) {
        self.limit = limit;
    }

    pub fn len(&self) -> usize {
        self.outs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.outs.is_empty()
    }

    /// Reserves room for `n` sessions (the bench's large tables).
    pub fn reserve(&mut self, n: usize) {
        self.sessions.reserve(n);
        self.live.reserve(n);
        self.outs.reserve(n);
        self.ins.reserve(n);
    }

    /// Bytes the table holds (sessions, slot flags, both indexes at their capacity).
    pub fn memory_bytes(&self) -> usize {
        let entry = std::mem::size_of::<(NatKey, u32)>() + 1;
        self.sessions.capacity() * std::mem::size_of::<Session>()
            + self.live.capacity()
            + self.free.capacity() * 4
            + (self.outs.capacity() + self.ins.capacity()) * entry
    }

    fn live_session(&mut self, i: u32, now: u32, t: &Timeouts) -> Option<&mut Session> {
        if self.sessions[i as usize].expired(now, t) {
            self.remove(i);
            self.expired += 1;
            return None;
        }
        Some(&mut self.sessions[i as usize])
    }

    /// The session whose out key is `key`, if it has not expired.
    #[inline]
    pub fn lookup_out(&mut self, key: &NatKey, now: u32, t: &Timeouts) -> Option<&mut Session> {
        let i = *self.outs.get(key)?;
        self.live_session(i, now, t)
    }

    /// The session whose in key is `key`, if it has not expired.
    #[inline]
    pub fn lookup_in(&mut self, key: &NatKey, now: u32, t: &Timeouts) -> Option<&mut Session> {
        let i = *self.ins.get(key)?;
        self.live_session(i, now, t)
    }

    /// Whether an in key is taken (expired sessions count until swept or looked up).
    pub fn in_key_used(&self, key: &NatKey) -> bool {
        self.ins.contains_key(key)
    }

    /// Adds a session; its keys must be free (the caller checked with the lookups).
    pub fn insert(&mut self, s: Session) -> Result<(), AllocError> {
        if self.len() >= self.limit {
            return Err(AllocError::TableFull);
        }
        let i = match self.free.pop() {
            Some(i) => {
                self.sessions[i as usize] = s;
                self.live[i as usize] = true;
                i
            }
            None => {
                self.sessions.push(s);
                self.live.push(true);
                (self.sessions.len() - 1) as u32
            }
        };
        self.outs.insert(s.out_key, i);
        self.ins.insert(s.in_key, i);
        self.created += 1;
        Ok(())
    }

    fn remove(&mut self, i: u32) {
        let s = self.sessions[i as usize];
        if self.outs.get(&s.out_key) == Some(&i) {
            self.outs.remove(&s.out_key);
        }
        if self.ins.get(&s.in_key) == Some(&i) {
            self.ins.remove(&s.in_key);
        }
        self.live[i as usize] = false;
        self.free.push(i);
    }

    /// Examines up to `budget` slots from where the last sweep stopped and removes the
    /// expired sessions (a little per batch, as the state table does).
    pub fn sweep(&mut self, now: u32, t: &Timeouts, budget: usize) {
        let n = self.sessions.len();
        if n == 0 {
            return;
        }
        for _ in 0..budget.min(n) {
            let i = self.sweep_at % n;
            self.sweep_at = i + 1;
            if self.live[i] && self.sessions[i].expired(now, t) {
                self.remove(i as u32);
                self.expired += 1;
            }
        }
    }

    /// A free port in `lo..=hi` searched from `start`: one that `accept` takes (the worker's
    /// steering) and whose in key (`key_for(port)`) is not in use. Every port of the range is
    /// tried before giving up, as pf does, so a tuple in use is never handed out and a free
    /// one is always found.
    pub fn free_port(&self, (lo, hi): (u16, u16), start: u32, accept: impl Fn(u16) -> bool, key_for: impl Fn(u16) -> NatKey) -> Result<u16, AllocError> {
        let n = u32::from(hi - lo) + 1;
        for k in 0..n {
            let port = lo + ((start.wrapping_add(k)) % n) as u16;
            if accept(port) && !self.in_key_used(&key_for(port)) {
                return Ok(port);
            }
        }
        Err(AllocError::PortsExhausted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(sport: u16, nat_port: u16) -> Session {
        let out_key = NatKey { src: 0x0a00_0002, dst: 0x0808_0808, sport, dport: 53, proto: 17 };
        Session {
            iface: 1,
            kind: NatKind::Nat,
            rule: 0,
            out_key,
            out_to: (0xc000_0201, nat_port),
            in_key: NatKey { src: 0x0808_0808, dst: 0xc000_0201, sport: 53, dport: nat_port, proto: 17 },
            in_to: (0x0a00_0002, sport),
            last: 0,
            phase: Phase::First,
        }
    }

    #[test]
    fn both_keys_find_the_session_until_it_expires() {
        let t = Timeouts::default();
        let mut nt = NatTable::new(10, 7);
        let s = session(1000, 50001);
        nt.insert(s).unwrap();
        assert_eq!(nt.lookup_out(&s.out_key, 5, &t).map(|s| s.out_to), Some((0xc000_0201, 50001)));
        assert_eq!(nt.lookup_in(&s.in_key, 5, &t).map(|s| s.in_to), Some((0x0a00_0002, 1000)));
        // udp.single (30 s) after the first packet only.
        assert!(nt.lookup_in(&s.in_key, 40, &t).is_none());
        assert!(nt.is_empty());
        assert_eq!(nt.expired, 1);
    }

    #[test]
    fn free_port_skips_used_and_gives_up_when_full() {
        let mut nt = NatTable::new(100, 7);
        let range = (50001, 50004);
        for (i, p) in (50001..=50004).enumerate() {
            let port = nt.free_port(range, 0, |_| true, |p| NatKey { dport: p, ..session(0, 0).in_key }).unwrap();
            assert_eq!(port, p);
            nt.insert(session(1000 + i as u16, port)).unwrap();
        }
        assert_eq!(nt.free_port(range, 3, |_| true, |p| NatKey { dport: p, ..session(0, 0).in_key }), Err(AllocError::PortsExhausted));
        // Another destination has its own ports (endpoint-dependent mapping).
        let other = NatKey { src: 0x0101_0101, ..session(0, 0).in_key };
        assert_eq!(nt.free_port(range, 0, |_| true, |p| NatKey { dport: p, ..other }), Ok(50001));
        // Steering: only even ports accepted.
        let nt = NatTable::new(100, 7);
        assert_eq!(nt.free_port(range, 0, |p| p % 2 == 0, |p| NatKey { dport: p, ..other }), Ok(50002));
    }

    #[test]
    fn sweep_removes_expired_and_reuses_slots() {
        let t = Timeouts::default();
        let mut nt = NatTable::new(2, 7);
        nt.insert(session(1, 50001)).unwrap();
        nt.insert(session(2, 50002)).unwrap();
        assert_eq!(nt.insert(session(3, 50003)), Err(AllocError::TableFull));
        nt.sweep(1000, &t, 16);
        assert!(nt.is_empty());
        nt.insert(session(3, 50003)).unwrap();
        assert_eq!(nt.len(), 1);
    }
}
