//! A flow's identity as the state table keys it, and the keyed hash of that key.
//!
//! The key is canonical: the two endpoints `(address, port)` are ordered (A <= B), so both
//! directions of a flow give the same key, and [`Flow::from_a`] says which end sent the packet.
//! Its layout is chosen for the data plane's fast path, which builds IPv4 keys straight from
//! the frame ([`Flow::v4`]) and hashes them with one multiplication:
//!
//! | word | IPv4                                   | IPv6                                   |
//! |------|----------------------------------------|----------------------------------------|
//! | 0    | `A.addr << 16 \| A.port \| proto << 48` | A.addr, low 64 bits                    |
//! | 1    | `B.addr << 16 \| B.port`                | A.addr, high 64 bits                   |
//! | 2, 3 | 0                                      | B.addr, low and high 64 bits           |
//! | 4    | `4 << 40`                              | `A.port \| B.port << 16 \| proto << 32 \| 6 << 40` |
//!
//! An IPv4 endpoint's address and port are its header bytes read as little-endian integers
//! (on x86 and ARM a plain load, no byte swap: [`FlowV4::from_wire`]). Packed as
//! `addr << 16 | port`, one integer comparison orders two endpoints, which canonicalises an
//! IPv4 key: the order is arbitrary, but the same for both directions of a flow.

use crate::packet::{Af, PacketKey, proto};

/// Canonical flow key: 40 bytes (see the module documentation for the layout).
#[derive(Debug, Clone, Copy, Eq, Default)]
pub(super) struct FlowKey {
    pub(super) w: [u64; 5],
}

impl PartialEq for FlowKey {
    /// Branch-free, in registers: the derived comparison of the array called `bcmp`.
    #[inline(always)]
    fn eq(&self, o: &FlowKey) -> bool {
        let (a, b) = (&self.w, &o.w);
        ((a[0] ^ b[0]) | (a[1] ^ b[1]) | (a[2] ^ b[2]) | (a[3] ^ b[3]) | (a[4] ^ b[4])) == 0
    }
}

const PROTO_SHIFT: u32 = 32;
const AF_SHIFT: u32 = 40;
/// Word 4 of every IPv4 key: a constant, so that comparing a key with a [`FlowV4`] takes one
/// load and one comparison for it.
const V4_TAIL: u64 = 4 << AF_SHIFT;

impl FlowKey {
    #[inline]
    pub(super) fn proto(&self) -> u8 {
        if self.is_v6() { (self.w[4] >> PROTO_SHIFT) as u8 } else { (self.w[0] >> 48) as u8 }
    }

    #[inline]
    pub(super) fn is_v6(&self) -> bool {
        (self.w[4] >> AF_SHIFT) as u8 == 6
    }

    /// Both ends are the same address and port: one pf state of the flow serves both
    /// orientations (`sub.rs`).
    pub(super) fn symmetric(&self) -> bool {
        let w = &self.w;
        if self.is_v6() {
            w[0] == w[2] && w[1] == w[3] && w[4] & 0xffff == (w[4] >> 16) & 0xffff
        } else {
            w[0] & ((1 << 48) - 1) == w[1]
        }
    }

    pub(super) fn af(&self) -> Af {
        if self.is_v6() { Af::Inet6 } else { Af::Inet }
    }
}

/// A packet's flow: its canonical key and which end of the key sent the packet. Build it with
/// [`Flow::v4`] (the data plane's fast path, from the header fields) or [`Flow::of`] (from a
/// [`PacketKey`]); both give the same value for the same packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Flow {
    pub(super) key: FlowKey,
    /// The packet's source is endpoint A of the key.
    pub(super) from_a: bool,
}

impl Flow {
    /// The flow of an IPv4 packet from its header fields: `sport`/`dport` are the TCP/UDP
    /// ports, or for ICMP the type and code (as in [`PacketKey`]; the ICMP identifier is
    /// taken as 0: [`Flow::of`] has it), 0 for other protocols.
    #[inline]
    pub fn v4(proto_: u8, src: u32, sport: u16, dst: u32, dport: u16) -> Flow {
        Flow::v4_id(proto_, src, sport, dst, dport, 0)
    }

    #[inline]
    fn v4_id(proto_: u8, src: u32, sport: u16, dst: u32, dport: u16, icmp_id: u16) -> Flow {
        let (sport, dport) = key_ports(proto_, sport, dport, icmp_id);
        FlowV4::from_wire(
            proto_,
            src.to_be_bytes(),
            sport.to_be_bytes(),
            dst.to_be_bytes(),
            dport.to_be_bytes(),
        )
        .flow()
    }

    /// The flow of an IPv6 packet (ports as in [`Flow::v4`]).
    #[inline]
    pub fn v6(proto_: u8, src: u128, sport: u16, dst: u128, dport: u16) -> Flow {
        Flow::v6_id(proto_, src, sport, dst, dport, 0)
    }

    #[inline]
    fn v6_id(proto_: u8, src: u128, sport: u16, dst: u128, dport: u16, icmp_id: u16) -> Flow {
        let (sport, dport) = key_ports(proto_, sport, dport, icmp_id);
        Flow::v6_key(proto_, src, sport, dst, dport)
    }

    /// An IPv6 flow of the key's own ports (ICMP's mapped already).
    #[inline]
    fn v6_key(proto_: u8, src: u128, sport: u16, dst: u128, dport: u16) -> Flow {
        let from_a = (src, sport) <= (dst, dport);
        let ((a, pa), (b, pb)) =
            if from_a { ((src, sport), (dst, dport)) } else { ((dst, dport), (src, sport)) };
        let tail =
            u64::from(pa) | u64::from(pb) << 16 | u64::from(proto_) << PROTO_SHIFT | 6 << AF_SHIFT;
        Flow {
            key: FlowKey { w: [a as u64, (a >> 64) as u64, b as u64, (b >> 64) as u64, tail] },
            from_a,
        }
    }

    /// The flow of a packet key (IPv4 keys hold the address in the low 32 bits).
    #[inline]
    pub fn of(k: &PacketKey) -> Flow {
        match k.af {
            Af::Inet => {
                Flow::v4_id(k.proto, k.src as u32, k.src_port, k.dst as u32, k.dst_port, k.icmp_id)
            }
            Af::Inet6 => Flow::v6_id(k.proto, k.src, k.src_port, k.dst, k.dst_port, k.icmp_id),
        }
    }

    /// The flow of a state's ends as [`StateTable::ends`](super::StateTable::ends) gives
    /// them (the key's own ports: for ICMP, pf's mapping already), the initiator as the
    /// packet's source; `None` when the two ends are of different address families.
    pub fn of_ends(proto_: u8, ends: &super::StateEnds) -> Option<Flow> {
        use std::net::IpAddr;
        let (i, r) = (ends.initiator, ends.responder);
        match (i.addr, r.addr) {
            (IpAddr::V4(s), IpAddr::V4(d)) => Some(
                FlowV4::from_wire(
                    proto_,
                    s.octets(),
                    i.port.to_be_bytes(),
                    d.octets(),
                    r.port.to_be_bytes(),
                )
                .flow(),
            ),
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                Some(Flow::v6_key(proto_, s.to_bits(), i.port, d.to_bits(), r.port))
            }
            _ => None,
        }
    }

    /// Whether the packet's source is the lower endpoint of the canonical key (the two
    /// directions of a flow differ exactly in this).
    pub fn from_a(&self) -> bool {
        self.from_a
    }

    pub fn proto(&self) -> u8 {
        self.key.proto()
    }
}

/// An IPv4 packet's flow in the two words of its key that vary (see the module documentation):
/// what the data plane builds straight from the frame for the batched state lookup
/// ([`super::StateTable::lookup_v4`]). `flow()` is the same flow as a [`Flow`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FlowV4 {
    /// Key word 0: endpoint A and the protocol (bits 48..56).
    a: u64,
    /// Key word 1: endpoint B.
    b: u64,
    from_a: bool,
}

impl FlowV4 {
    /// As [`Flow::v4`].
    #[inline(always)]
    pub fn new(proto_: u8, src: u32, sport: u16, dst: u32, dport: u16) -> FlowV4 {
        let (sport, dport) = key_ports(proto_, sport, dport, 0);
        FlowV4::from_wire(
            proto_,
            src.to_be_bytes(),
            sport.to_be_bytes(),
            dst.to_be_bytes(),
            dport.to_be_bytes(),
        )
    }

    /// The flow of a TCP or UDP packet from its header's bytes as they are on the wire
    /// (addresses, then ports): [`FlowV4::new`] of the same fields, without converting them
    /// from network byte order (not for ICMP, whose key maps the type first).
    #[inline(always)]
    pub fn from_wire(
        proto_: u8,
        src: [u8; 4],
        sport: [u8; 2],
        dst: [u8; 4],
        dport: [u8; 2],
    ) -> FlowV4 {
        let endpoint = |addr: [u8; 4], port: [u8; 2]| {
            u64::from(u32::from_le_bytes(addr)) << 16 | u64::from(u16::from_le_bytes(port))
        };
        let (s, d) = (endpoint(src, sport), endpoint(dst, dport));
        let from_a = s <= d;
        let (a, b) = if from_a { (s, d) } else { (d, s) };
        FlowV4 { a: a | u64::from(proto_) << 48, b, from_a }
    }

    #[inline(always)]
    pub fn proto(&self) -> u8 {
        (self.a >> 48) as u8
    }

    #[inline(always)]
    pub fn from_a(&self) -> bool {
        self.from_a
    }

    pub fn flow(&self) -> Flow {
        Flow { key: FlowKey { w: [self.a, self.b, 0, 0, V4_TAIL] }, from_a: self.from_a }
    }
}

impl FlowKey {
    /// Whether this is `f`'s key: three words, since an IPv4 key's words 2 and 3 are 0 and
    /// word 4 tells the family.
    #[inline(always)]
    pub(super) fn is(&self, f: &FlowV4) -> bool {
        ((self.w[0] ^ f.a) | (self.w[1] ^ f.b) | (self.w[4] ^ V4_TAIL)) == 0
    }
}

#[inline]
fn is_icmp(p: u8) -> bool {
    p == proto::ICMP || p == proto::ICMPV6
}

/// The two port fields of the key (`sport`, `dport` as in [`PacketKey`]; `icmp_id` the ICMP
/// query identifier). ICMP keys follow pf (`pf_icmp_mapping`): a query is keyed as if sent
/// from port `id` to port `type`, its reply as if sent from port `type` (of the query) to
/// port `id`. So a reply shares its query's state, and a query in the other direction, or
/// with another identifier, does not.
#[inline]
fn key_ports(p: u8, sport: u16, dport: u16, icmp_id: u16) -> (u16, u16) {
    if !is_icmp(p) {
        return (sport, dport);
    }
    match icmp_query(p, sport) {
        (query, false) => (icmp_id, query),
        (query, true) => (query, icmp_id),
    }
}

/// The ports of `k` as the state table keys its flow (ICMP: pf's query/reply mapping, see
/// `key_ports`), source first.
pub fn flow_ports(k: &PacketKey) -> (u16, u16) {
    key_ports(k.proto, k.src_port, k.dst_port, k.icmp_id)
}

/// An ICMP type as pf maps it: the type of the query it belongs to, and whether it is the
/// reply. Types that are neither queries nor replies stand for themselves, as queries.
#[inline]
fn icmp_query(p: u8, t: u16) -> (u16, bool) {
    if p == proto::ICMP {
        match t {
            0 => (8, true),   // echo reply -> echo request
            14 => (13, true), // timestamp reply
            16 => (15, true), // information reply
            18 => (17, true), // address mask reply
            9 => (10, true),  // router advertisement -> solicitation
            _ => (t, false),
        }
    } else {
        match t {
            129 => (128, true), // echo reply -> echo request
            131 => (130, true), // multicast listener report -> query
            134 => (133, true), // router advertisement -> solicitation
            136 => (135, true), // neighbour advertisement -> solicitation
            _ => (t, false),
        }
    }
}

/// True for ICMP(v6) types that are errors quoting another packet (the dataplane should call
/// [`super::StateTable::lookup_icmp_error`] with the quoted header for those).
pub fn is_icmp_error(proto_: u8, icmp_type: u16) -> bool {
    if proto_ == proto::ICMP {
        matches!(icmp_type, 3 | 4 | 5 | 11 | 12)
    } else if proto_ == proto::ICMPV6 {
        matches!(icmp_type, 1..=4)
    } else {
        false
    }
}

/// A keyed folded-multiply hash (as in wyhash/foldhash): key words are xored with secret words
/// expanded (splitmix64) from the table's seed and combined by 64x64->128-bit multiplications
/// folded to 64 bits. An IPv4 key is two words, so it costs one multiplication; IPv6 three.
/// Not a PRF like SipHash, but without the secret an attacker cannot aim flows at one bucket.
#[derive(Clone, Copy)]
pub(super) struct FlowHasher {
    secret: [u64; 6],
}

#[inline]
fn fold_mul(a: u64, b: u64) -> u64 {
    let p = u128::from(a).wrapping_mul(u128::from(b));
    (p as u64) ^ ((p >> 64) as u64)
}

pub(super) fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl FlowHasher {
    pub(super) fn new(seed: u64) -> FlowHasher {
        let mut s = seed;
        // Odd secrets: a multiplication by an odd number loses no bits.
        FlowHasher { secret: std::array::from_fn(|_| splitmix64(&mut s) | 1) }
    }

    /// The hash of `f.flow()`'s key, from the two words it needs.
    #[inline(always)]
    pub(super) fn hash_v4(&self, f: &FlowV4) -> u64 {
        fold_mul(f.a ^ self.secret[0], f.b ^ self.secret[1])
    }

    #[inline]
    pub(super) fn hash(&self, k: &FlowKey) -> u64 {
        let s = &self.secret;
        let w = &k.w;
        // IPv4: words 0 and 1 hold the whole identity (word 4 is a constant).
        let h1 = fold_mul(w[0] ^ s[0], w[1] ^ s[1]);
        if !k.is_v6() {
            return h1;
        }
        let h2 = fold_mul(w[2] ^ s[2], w[3] ^ s[3]);
        fold_mul(h1 ^ w[4] ^ s[4], h2 ^ s[5])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Dir;

    fn key(af: Af, p: u8, src: u128, sp: u16, dst: u128, dp: u16) -> PacketKey {
        PacketKey {
            af,
            dir: Dir::In,
            iface: 0,
            proto: p,
            src,
            dst,
            src_port: sp,
            dst_port: dp,
            tcp_flags: 0,
            len: 0,
            icmp_id: 0,
            ip_opts: false,
            route: 0,
            tag: 0,
        }
    }

    #[test]
    fn both_directions_share_a_key() {
        for af in [Af::Inet, Af::Inet6] {
            let k = key(af, proto::UDP, 10, 1000, 5, 53);
            let r = PacketKey { dir: Dir::Out, iface: 3, ..key(af, proto::UDP, 5, 53, 10, 1000) };
            let (a, b) = (Flow::of(&k), Flow::of(&r));
            assert_eq!(a.key, b.key);
            assert_ne!(a.from_a, b.from_a);
            let e = key(af, proto::ICMP, 10, 8, 5, 0);
            let er = key(af, proto::ICMP, 5, 0, 10, 0);
            assert_eq!(Flow::of(&e).key, Flow::of(&er).key);
            assert_eq!((Flow::of(&k).key.af(), Flow::of(&k).proto()), (af, proto::UDP));
        }
    }

    #[test]
    fn ipv4_endpoints_order_as_address_then_port() {
        // Same address: the port decides; different addresses: the address does (as their
        // bytes read little-endian compare: these differ in their last byte).
        assert!(Flow::v4(6, 7, 1, 7, 2).from_a);
        assert!(!Flow::v4(6, 7, 2, 7, 1).from_a);
        assert!(Flow::v4(6, 7, 65535, 8, 0).from_a);
        // Families and protocols never share a key.
        let v4 = Flow::v4(17, 1, 2, 3, 4).key;
        assert_ne!(v4, Flow::v6(17, 1, 2, 3, 4).key);
        assert_ne!(v4, Flow::v4(6, 1, 2, 3, 4).key);
    }

    #[test]
    fn v4_flow_is_the_flow() {
        let h = FlowHasher::new(5);
        for (p, s, sp, d, dp) in
            [(17, 1, 2, 3, 4), (6, 9, 80, 3, 40000), (1, 7, 0, 7, 0), (47, u32::MAX, 0, 0, 0)]
        {
            let f4 = FlowV4::new(p, s, sp, d, dp);
            let f = Flow::v4(p, s, sp, d, dp);
            assert_eq!(f4.flow(), f);
            assert_eq!((f4.proto(), f4.from_a()), (p, f.from_a));
            assert_eq!(h.hash_v4(&f4), h.hash(&f.key));
            assert!(f.key.is(&f4));
            assert!(!Flow::v6(p, s.into(), sp, d.into(), dp).key.is(&f4));
            assert!(!Flow::v4(p ^ 1, s, sp, d, dp).key.is(&f4));
        }
    }

    #[test]
    fn hash_is_seeded() {
        let k = Flow::v4(17, 1, 2, 3, 4).key;
        assert_ne!(FlowHasher::new(1).hash(&k), FlowHasher::new(2).hash(&k));
        let k6 = Flow::v6(17, 1, 2, 3, 4).key;
        assert_ne!(FlowHasher::new(1).hash(&k6), FlowHasher::new(2).hash(&k6));
    }
}
