//! IPv6 fragments through the filter, as [`super::frags`] does for IPv4: every fragment of a
//! datagram gets the protocol and ports of its first fragment, so the rules and states see
//! the datagram, as pf does when it reassembles (RFC 8200 4.5 fragments; pf reassembles
//! IPv6 with `scrub`, and OpenBSD always).
//!
//! * A first fragment (offset 0, M set) must hold the whole upper-layer header it starts
//!   (TCP's 20 bytes, 8 of UDP and ICMPv6; RFC 7112 requires the whole header chain in the
//!   first fragment), or it is dropped (`fragment_tiny`); its protocol and ports are recorded
//!   under (source, destination, identification, protocol).
//! * A later fragment takes them; a TCP fragment at offset 8 could rewrite the flags the
//!   first was judged by and is dropped (`fragment_overlap`); one that comes ahead of its
//!   first waits for it ([`super::frag_hold`]), as an IPv4 one does.
//! * A datagram's entry goes when all its bytes have passed, when pf's `set timeout frag`
//!   has expired, or when a newer datagram needs its slot (the oldest of its set goes).
//!
//! Fragments of one datagram reach one worker: the RSS hashes hash IPv6 fragments by
//! addresses only, as IPv4's ([`io::rss`]).

use fw::packet::{PacketKey, proto};

use super::datagrams::{Datagrams, first_ports};
use super::frag_hold::Ident;
use crate::counters::DropReason;

/// Datagrams in flight per worker: fewer than IPv4's table holds (its entries are larger,
/// and IPv6 fragments are rarer: only the sender fragments).
pub const SLOTS: usize = 1024;

const HOP_BY_HOP: u8 = 0;
const ROUTING: u8 = 43;
const FRAGMENT: u8 = 44;
const AH: u8 = 51;
const DEST_OPTS: u8 = 60;

/// One worker's IPv6 datagrams being forwarded in fragments.
pub struct FragTable6 {
    datagrams: Datagrams,
}

/// What the fragment header of an IPv6 packet says.
#[derive(Debug, PartialEq, Eq)]
struct Frag6 {
    src: u128,
    dst: u128,
    id: u32,
    /// The header after the fragment header: the upper layer's protocol.
    proto: u8,
    offset: u32,
    more: bool,
    /// After the fragment header: its bytes in this packet.
    rest: usize,
    /// Where they start in the packet.
    at: usize,
}

impl Frag6 {
    fn ident(&self) -> Ident {
        (self.src, self.dst, self.id, self.proto)
    }
}

/// The fragment header of IPv6 packet `ip`, walking the extension headers before it (at
/// most 8, as pf). `None` if there is none, or the header chain is cut short.
fn parse(ip: &[u8]) -> Option<Frag6> {
    let h: &[u8; 40] = ip.first_chunk()?;
    let end = (40 + usize::from(u16::from_be_bytes([h[4], h[5]]))).min(ip.len());
    let (mut next, mut off) = (h[6], 40);
    for _ in 0..8 {
        let e = ip.get(off..off + 8).filter(|_| off + 8 <= end)?;
        let len = match next {
            HOP_BY_HOP | ROUTING | DEST_OPTS => (usize::from(e[1]) + 1) * 8,
            AH => (usize::from(e[1]) + 2) * 4,
            FRAGMENT => {
                let word = u16::from_be_bytes([e[2], e[3]]);
                let addr =
                    |i: usize| u128::from_be_bytes(h[i..i + 16].try_into().expect("16 bytes"));
                return Some(Frag6 {
                    src: addr(8),
                    dst: addr(24),
                    id: u32::from_be_bytes([e[4], e[5], e[6], e[7]]),
                    proto: e[0],
                    offset: u32::from(word & 0xfff8),
                    more: word & 1 != 0,
                    rest: end - (off + 8),
                    at: off + 8,
                });
            }
            _ => return None,
        };
        (next, off) = (e[0], off + len);
    }
    None
}

/// Whether IPv6 packet `ip` may be a fragment: an extension header follows its fixed header
/// (most packets carry their upper layer right after it). [`is_fragment_v6`] tells.
#[inline(always)]
pub fn may_be_fragment(ip: &[u8]) -> bool {
    ip.get(6).is_some_and(|&n| matches!(n, HOP_BY_HOP | ROUTING | FRAGMENT | AH | DEST_OPTS))
}

/// Whether IPv6 packet `ip` is a fragment (not an atomic one: offset 0 without M, RFC 6946).
pub fn is_fragment_v6(ip: &[u8]) -> bool {
    may_be_fragment(ip) && parse(ip).is_some_and(|f| f.offset != 0 || f.more)
}

/// The datagram of IPv6 fragment `ip`, and whether it is its first fragment.
pub fn ident(ip: &[u8]) -> Option<(super::frag_hold::Ident, bool)> {
    let f = parse(ip)?;
    Some((f.ident(), f.offset == 0 && f.more))
}

impl Default for FragTable6 {
    fn default() -> Self {
        FragTable6::new(0x9e37_79b9_7f4a_7c15)
    }
}

impl FragTable6 {
    pub fn new(seed: u64) -> FragTable6 {
        FragTable6 { datagrams: Datagrams::new(SLOTS, seed) }
    }

    /// Whether datagram `ident`'s first fragment is recorded (at `now`).
    pub fn has_first(&mut self, ident: Ident, now: u32) -> bool {
        self.datagrams.has_first(ident, now)
    }

    /// Judges IPv6 fragment `ip` (its `key` as [`super::keys::extract`] built it: a first
    /// fragment's with its ports), at `now` (seconds), a datagram living `timeout` seconds:
    /// a later fragment gets its datagram's protocol and ports, or the reason to drop it.
    pub fn judge(
        &mut self,
        ip: &[u8],
        key: &mut PacketKey,
        now: u32,
        timeout: u32,
    ) -> Result<(), DropReason> {
        let Some(f) = parse(ip) else {
            return Ok(());
        };
        if !matches!(f.proto, proto::TCP | proto::UDP | proto::ICMPV6) {
            return Ok(());
        }
        let rest = f.rest as u32;
        if f.offset == 0 {
            // The header's lengths cover the whole datagram: the ports are read from this
            // fragment's own bytes.
            let l4 = ip.get(f.at..f.at + f.rest).unwrap_or(&[]);
            let ports = first_ports(f.proto, proto::ICMPV6, l4)?;
            (key.proto, key.src_port, key.dst_port) = (f.proto, ports.0, ports.1);
            self.datagrams.first(f.ident(), ports, rest, now, timeout);
            return Ok(());
        }
        if f.proto == proto::TCP && f.offset == 8 {
            return Err(DropReason::FragmentOverlap);
        }
        (key.src_port, key.dst_port) =
            self.datagrams.later(f.ident(), f.offset, rest, f.more, now)?;
        key.proto = f.proto;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fw::packet::Af;

    /// An IPv6 packet 2001:db8::1 -> 2001:db8::2 with a fragment header (`id`, offset in
    /// bytes, M) before `payload` of protocol `p`, behind a destination options header if
    /// `opts`.
    fn frag(id: u32, offset: u16, more: bool, p: u8, payload: &[u8], opts: bool) -> Vec<u8> {
        let mut b = vec![0x60, 0, 0, 0, 0, 0, if opts { DEST_OPTS } else { FRAGMENT }, 64];
        b.extend_from_slice(&0x2001_0db8_u128.wrapping_shl(96).wrapping_add(1).to_be_bytes());
        b.extend_from_slice(&0x2001_0db8_u128.wrapping_shl(96).wrapping_add(2).to_be_bytes());
        if opts {
            b.extend_from_slice(&[FRAGMENT, 0, 1, 4, 0, 0, 0, 0]);
        }
        let word = offset | u16::from(more);
        b.extend_from_slice(&[p, 0]);
        b.extend_from_slice(&word.to_be_bytes());
        b.extend_from_slice(&id.to_be_bytes());
        b.extend_from_slice(payload);
        let len = (b.len() - 40) as u16;
        b[4..6].copy_from_slice(&len.to_be_bytes());
        b
    }

    /// The key [`super::super::keys::extract`] makes of a first fragment (ports read) or a
    /// later one (protocol 44, no ports).
    fn key(p: u8, ports: (u16, u16)) -> PacketKey {
        PacketKey {
            af: Af::Inet6,
            proto: p,
            src: 0x2001_0db8_u128 << 96 | 1,
            dst: 0x2001_0db8_u128 << 96 | 2,
            src_port: ports.0,
            dst_port: ports.1,
            ..PacketKey::ZERO
        }
    }

    #[test]
    fn later_fragments_take_the_first_fragments_protocol_and_ports() {
        let mut t = FragTable6::default();
        let mut udp = vec![0x0f, 0xa0, 0x00, 0x35, 0x0b, 0xb8, 0, 0];
        udp.resize(1232, 0xab);
        for opts in [false, true] {
            let first = frag(9, 0, true, proto::UDP, &udp, opts);
            assert!(is_fragment_v6(&first));
            let mut k = key(proto::UDP, (0, 0));
            t.judge(&first, &mut k, 0, 30).unwrap();
            assert_eq!((k.src_port, k.dst_port), (4000, 53), "the first's own key");
            let mut k = key(FRAGMENT, (0, 0));
            t.judge(&frag(9, 1232, true, proto::UDP, &[0; 1232], opts), &mut k, 1, 30).unwrap();
            assert_eq!((k.proto, k.src_port, k.dst_port), (proto::UDP, 4000, 53));
            let mut k = key(FRAGMENT, (0, 0));
            t.judge(&frag(9, 2464, false, proto::UDP, &[0; 536], opts), &mut k, 1, 30).unwrap();
            assert_eq!((k.proto, k.src_port, k.dst_port), (proto::UDP, 4000, 53));
            // Complete: forgotten.
            let mut k = key(FRAGMENT, (0, 0));
            assert_eq!(
                t.judge(&frag(9, 1232, true, proto::UDP, &[0; 1232], opts), &mut k, 1, 30),
                Err(DropReason::FragmentNoFirst)
            );
        }
    }

    #[test]
    fn adversarial_fragments_are_dropped() {
        let mut t = FragTable6::default();
        let mut k = key(FRAGMENT, (0, 0));
        assert_eq!(
            t.judge(&frag(1, 1232, false, proto::UDP, &[0; 8], false), &mut k, 0, 30),
            Err(DropReason::FragmentNoFirst)
        );
        // A first fragment without the whole TCP header.
        let mut k = key(FRAGMENT, (0, 0));
        assert_eq!(
            t.judge(&frag(2, 0, true, proto::TCP, &[0; 16], false), &mut k, 0, 30),
            Err(DropReason::FragmentTiny)
        );
        // TCP at offset 8 rewrites the flags.
        let mut tcp = vec![0u8; 24];
        tcp[..4].copy_from_slice(&[0, 80, 0, 22]);
        t.judge(&frag(3, 0, true, proto::TCP, &tcp, false), &mut key(proto::TCP, (80, 22)), 0, 30)
            .unwrap();
        assert_eq!(
            t.judge(
                &frag(3, 8, false, proto::TCP, &[0; 16], false),
                &mut key(FRAGMENT, (0, 0)),
                0,
                30
            ),
            Err(DropReason::FragmentOverlap)
        );
        // An atomic fragment (offset 0, no M) is not one; other protocols pass as they are.
        assert!(!is_fragment_v6(&frag(4, 0, false, proto::UDP, &[0; 8], false)));
        assert_eq!(
            t.judge(&frag(5, 1232, false, 47, &[0; 8], false), &mut key(FRAGMENT, (0, 0)), 0, 30),
            Ok(())
        );
        // Cut short: left to the rules.
        assert!(!is_fragment_v6(&[0x60, 0, 0, 0, 0, 8, FRAGMENT, 64]));
    }
}
