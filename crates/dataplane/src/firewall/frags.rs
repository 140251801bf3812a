//! IPv4 fragments through the filter: every fragment of a datagram gets the key of its first
//! fragment, so the rules and states see the datagram, as pf does with its default
//! `set reassemble yes`, without holding or copying any data (a "virtual" reassembly: what
//! is kept per datagram is its ports, not its bytes).
//!
//! * A first fragment (offset 0, MF) must hold its whole TCP header, or the first 8 bytes of
//!   UDP and ICMP (RFC 1858 3.1 and RFC 3128: a filter that does not reassemble drops a
//!   first fragment too small to be judged); its ports are recorded under (source,
//!   destination, protocol, identification).
//! * A later fragment takes those ports. A TCP fragment at offset 8 bytes could rewrite the
//!   TCP flags the first was judged by, and is dropped (RFC 1858 4, the overlapping fragment
//!   attack); other offsets cannot reach the 8 bytes the filter read. A later fragment with
//!   no recorded first (reordered ahead of it, or its datagram evicted or expired) waits for
//!   it, a bounded number of them ([`super::frag_hold`]), and is dropped if it does not come
//!   in time.
//! * A datagram's entry goes when all its bytes have passed, when its time (pf's `set
//!   timeout frag`, 30 s by default) has expired, or when a newer datagram needs its slot (a
//!   full set evicts its oldest). The table holds pf's `set limit frags` datagrams (5000 by
//!   default), in sets of [`WAYS`].
//!
//! Fragments of one datagram must reach the same worker: the RSS hashes linerate uses and
//! NICs' hash fragments by addresses only ([`io::rss`]). Other protocols (ESP, GRE, ...)
//! carry no ports: their fragments are judged as they are, alike. IPv6 fragments have a table of
//! their own ([`super::frags6`]).

use fw::packet::{PacketKey, proto};

use super::datagrams::{Datagrams, first_ports};
pub use super::datagrams::{FragCounts, WAYS};
use super::frag_hold::Ident;
use crate::counters::DropReason;

/// Datagrams in flight tracked per worker until the rules say (pf's default `set limit
/// frags`).
pub const SLOTS: usize = 5000;

/// One worker's table of datagrams being forwarded in fragments.
pub struct FragTable {
    datagrams: Datagrams,
}

/// The IPv4 header fields a fragment is judged by.
struct Frag {
    src: u32,
    dst: u32,
    id: u16,
    proto: u8,
    /// Offset of its payload in the datagram, in bytes.
    offset: u32,
    more: bool,
    /// Its payload (after the IP header, to the end of the packet).
    len: u32,
}

impl Frag {
    fn ident(&self) -> Ident {
        (self.src.into(), self.dst.into(), self.id.into(), self.proto)
    }
}

fn parse(ip: &[u8]) -> Option<(Frag, &[u8])> {
    let h: &[u8; 20] = ip.first_chunk()?;
    let hl = usize::from(h[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([h[2], h[3]])).min(ip.len());
    let payload = ip.get(hl..total)?;
    let flags = u16::from_be_bytes([h[6], h[7]]);
    let addr = |i: usize| u32::from_be_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
    let f = Frag {
        src: addr(12),
        dst: addr(16),
        id: u16::from_be_bytes([h[4], h[5]]),
        proto: h[9],
        offset: u32::from(flags & 0x1fff) * 8,
        more: flags & 0x2000 != 0,
        len: payload.len() as u32,
    };
    Some((f, payload))
}

/// The datagram of IPv4 fragment `ip`, and whether it is its first fragment.
pub fn ident(ip: &[u8]) -> Option<(super::frag_hold::Ident, bool)> {
    let (f, _) = parse(ip)?;
    Some((f.ident(), f.offset == 0 && f.more))
}

/// Whether the IPv4 packet `ip` (validated by the classify pass) is a fragment.
#[inline(always)]
pub fn is_fragment_v4(ip: &[u8]) -> bool {
    ip.get(6..8).is_some_and(|b| u16::from_be_bytes([b[0], b[1]]) & 0x3fff != 0)
}

impl FragTable {
    pub fn new(seed: u64) -> FragTable {
        FragTable { datagrams: Datagrams::new(SLOTS, seed) }
    }

    /// Datagrams the table holds.
    pub fn capacity(&self) -> usize {
        self.datagrams.capacity()
    }

    /// Holds `datagrams` (rounded up to whole sets) from now on, if it does not already:
    /// a new `set limit frags`. The datagrams in flight are forgotten, so their later
    /// fragments are dropped as `fragment_no_first`.
    pub fn resize(&mut self, datagrams: usize) {
        self.datagrams.resize(datagrams);
    }

    /// What the table did.
    pub fn counts(&self) -> FragCounts {
        self.datagrams.counts
    }

    /// Whether datagram `ident`'s first fragment is recorded (at `now`): a later fragment
    /// judged before it, in the same batch, need not wait.
    pub fn has_first(&mut self, ident: Ident, now: u32) -> bool {
        self.datagrams.has_first(ident, now)
    }

    /// Judges IPv4 fragment `ip` (its `key` as [`super::keys::extract`] built it), at `now`
    /// (seconds), a first fragment's datagram living `timeout` seconds: fills in the ports a
    /// later fragment inherits, or the reason to drop it.
    pub fn judge(
        &mut self,
        ip: &[u8],
        key: &mut PacketKey,
        now: u32,
        timeout: u32,
    ) -> Result<(), DropReason> {
        let Some((f, payload)) = parse(ip) else {
            return Ok(());
        };
        if !matches!(f.proto, proto::TCP | proto::UDP | proto::ICMP) {
            return Ok(());
        }
        if f.offset == 0 {
            (key.src_port, key.dst_port) = first_ports(f.proto, proto::ICMP, payload)?;
            // Offset 0 and no MF: not a fragment after all.
            if f.more {
                self.datagrams.first(f.ident(), (key.src_port, key.dst_port), f.len, now, timeout);
            }
            return Ok(());
        }
        if f.proto == proto::TCP && f.offset == 8 {
            return Err(DropReason::FragmentOverlap);
        }
        (key.src_port, key.dst_port) =
            self.datagrams.later(f.ident(), f.offset, f.len, f.more, now)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fw::packet::{Af, Dir};

    /// An IPv4 fragment: `id`, payload offset (bytes), MF, protocol, payload.
    fn frag(id: u16, offset: u16, more: bool, p: u8, payload: &[u8]) -> Vec<u8> {
        let mut b = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, p, 0, 0, 10, 0, 0, 1, 10, 0, 1, 2];
        let total = (20 + payload.len()) as u16;
        b[2..4].copy_from_slice(&total.to_be_bytes());
        b[4..6].copy_from_slice(&id.to_be_bytes());
        let flags = (offset / 8) | if more { 0x2000 } else { 0 };
        b[6..8].copy_from_slice(&flags.to_be_bytes());
        b.extend_from_slice(payload);
        b
    }

    fn key(p: u8) -> PacketKey {
        PacketKey {
            af: Af::Inet,
            dir: Dir::In,
            iface: 0,
            proto: p,
            src: 0x0a00_0001,
            dst: 0x0a00_0102,
            src_port: 0,
            dst_port: 0,
            tcp_flags: 0,
            len: 0,
            icmp_id: 0,
            ip_opts: false,
            route: 0,
            tag: 0,
        }
    }

    /// A UDP header for ports 4000 -> 53 announcing a 3000-byte datagram, then data.
    fn udp_start(len: usize) -> Vec<u8> {
        let mut p = vec![0x0f, 0xa0, 0x00, 0x35, 0x0b, 0xb8, 0, 0];
        p.resize(len, 0xab);
        p
    }

    #[test]
    fn later_fragments_take_the_first_fragments_ports_until_complete() {
        let mut t = FragTable::new(7);
        let mut k = key(proto::UDP);
        t.judge(&frag(9, 0, true, proto::UDP, &udp_start(1480)), &mut k, 0, 30).unwrap();
        assert_eq!((k.src_port, k.dst_port), (4000, 53));
        let mut k = key(proto::UDP);
        t.judge(&frag(9, 1480, true, proto::UDP, &[0; 1480]), &mut k, 1, 30).unwrap();
        assert_eq!((k.src_port, k.dst_port), (4000, 53));
        let mut k = key(proto::UDP);
        t.judge(&frag(9, 2960, false, proto::UDP, &[0; 48]), &mut k, 1, 30).unwrap();
        assert_eq!((k.src_port, k.dst_port), (4000, 53));
        // Complete: the entry is gone, a stray copy of a later fragment is dropped.
        let mut k = key(proto::UDP);
        assert_eq!(
            t.judge(&frag(9, 1480, true, proto::UDP, &[0; 1480]), &mut k, 1, 30),
            Err(DropReason::FragmentNoFirst)
        );
        assert_eq!(t.counts(), FragCounts { tracked: 1, evicted: 0 });
    }

    #[test]
    fn adversarial_fragments_are_dropped() {
        let mut t = FragTable::new(7);
        // A later fragment before (or without) its first.
        assert_eq!(
            t.judge(&frag(1, 1480, false, proto::UDP, &[0; 8]), &mut key(proto::UDP), 0, 30),
            Err(DropReason::FragmentNoFirst)
        );
        // A first fragment too short for the TCP header (RFC 1858 tiny fragment).
        assert_eq!(
            t.judge(&frag(2, 0, true, proto::TCP, &[0; 16]), &mut key(proto::TCP), 0, 30),
            Err(DropReason::FragmentTiny)
        );
        assert_eq!(
            t.judge(&frag(2, 0, true, proto::UDP, &[0; 4]), &mut key(proto::UDP), 0, 30),
            Err(DropReason::FragmentTiny)
        );
        // TCP at offset 8 rewrites the flags (RFC 1858 overlapping fragment).
        let mut tcp = vec![0u8; 24];
        tcp[0..4].copy_from_slice(&[0, 80, 0, 22]);
        t.judge(&frag(3, 0, true, proto::TCP, &tcp), &mut key(proto::TCP), 0, 30).unwrap();
        assert_eq!(
            t.judge(&frag(3, 8, false, proto::TCP, &[0; 16]), &mut key(proto::TCP), 0, 30),
            Err(DropReason::FragmentOverlap)
        );
        let mut k = key(proto::TCP);
        t.judge(&frag(3, 24, false, proto::TCP, &[0; 16]), &mut k, 0, 30).unwrap();
        assert_eq!((k.src_port, k.dst_port), (80, 22));
        // Other protocols pass through untouched (their key has no ports to inherit).
        assert_eq!(t.judge(&frag(4, 1480, false, 47, &[0; 8]), &mut key(47), 0, 30), Ok(()));
        // Truncated headers are left to the rules.
        assert_eq!(t.judge(&[0x45, 0, 0], &mut key(proto::UDP), 0, 30), Ok(()));
    }

    #[test]
    fn entries_expire_and_a_full_set_evicts_the_oldest() {
        let mut t = FragTable::new(7);
        t.judge(&frag(5, 0, true, proto::UDP, &udp_start(64)), &mut key(proto::UDP), 0, 30)
            .unwrap();
        assert!(
            t.judge(&frag(5, 64, true, proto::UDP, &[0; 8]), &mut key(proto::UDP), 30, 30).is_ok()
        );
        assert_eq!(
            t.judge(&frag(5, 72, true, proto::UDP, &[0; 8]), &mut key(proto::UDP), 31, 30),
            Err(DropReason::FragmentNoFirst)
        );
        // Flood one worker with first fragments: memory stays SLOTS entries, and the table
        // keeps tracking the newest datagrams.
        let mut t = FragTable::new(7);
        for id in 0..20_000u16 {
            t.judge(&frag(id, 0, true, proto::UDP, &udp_start(64)), &mut key(proto::UDP), 1, 30)
                .unwrap();
        }
        assert_eq!(t.counts().tracked, 20_000);
        assert!(t.counts().evicted >= 20_000 - SLOTS as u64);
        let mut k = key(proto::UDP);
        t.judge(&frag(19_999, 64, false, proto::UDP, &[0; 8]), &mut k, 1, 30).unwrap();
        assert_eq!(k.dst_port, 53);
    }

    /// `set timeout frag` and `set limit frags`: a datagram lives the timeout its first
    /// fragment was judged under; a table resized to 10 datagrams holds 12 (whole sets of
    /// 4) and forgets those in flight.
    #[test]
    fn timeout_and_size_follow_the_rules() {
        let mut t = FragTable::new(7);
        t.judge(&frag(5, 0, true, proto::UDP, &udp_start(64)), &mut key(proto::UDP), 0, 5).unwrap();
        assert!(
            t.judge(&frag(5, 64, true, proto::UDP, &[0; 8]), &mut key(proto::UDP), 5, 30).is_ok()
        );
        assert_eq!(
            t.judge(&frag(5, 72, true, proto::UDP, &[0; 8]), &mut key(proto::UDP), 6, 30),
            Err(DropReason::FragmentNoFirst)
        );
        assert_eq!(t.capacity(), SLOTS);
        t.judge(&frag(6, 0, true, proto::UDP, &udp_start(64)), &mut key(proto::UDP), 0, 30)
            .unwrap();
        t.resize(10);
        assert_eq!(t.capacity(), 12);
        assert_eq!(
            t.judge(&frag(6, 64, false, proto::UDP, &[0; 8]), &mut key(proto::UDP), 1, 30),
            Err(DropReason::FragmentNoFirst)
        );
        for id in 0..1000u16 {
            t.judge(&frag(id, 0, true, proto::UDP, &udp_start(64)), &mut key(proto::UDP), 1, 30)
                .unwrap();
        }
        assert!(t.counts().evicted >= 1000 - 12);
        t.resize(12);
        let mut k = key(proto::UDP);
        t.judge(&frag(999, 64, false, proto::UDP, &[0; 8]), &mut k, 1, 30).unwrap();
        assert_eq!(k.dst_port, 53, "resizing to the size it has keeps what it holds");
    }

    #[test]
    fn fragment_bits() {
        assert!(is_fragment_v4(&frag(1, 0, true, 17, &[])));
        assert!(is_fragment_v4(&frag(1, 8, false, 17, &[])));
        assert!(!is_fragment_v4(&frag(1, 0, false, 17, &[])));
        let mut df = frag(1, 0, false, 17, &[]);
        df[6] = 0x40;
        assert!(!is_fragment_v4(&df), "DF alone");
        assert!(!is_fragment_v4(&[0x45]));
    }
}
