//! The Internet checksum (RFC 1071) and its incremental update (RFC 1624).
//!
//! [`sum`] returns a *partial* ones'-complement sum reduced to at most
//! `0xffff` but not complemented, so partial sums (pseudo-header + header +
//! data) can simply be added as `u32` and finished with [`fold`] and `!`.

use core::net::{Ipv4Addr, Ipv6Addr};

/// Ones'-complement sum of `data` taken as big-endian 16-bit words (an odd
/// trailing byte is padded with zero, RFC 1071 section 4.1). The result is
/// reduced to `0..=0xffff`, not complemented.
///
/// Works 8 bytes at a time: ones'-complement addition is associative and
/// commutative and `2^16 - 1` divides `2^32 - 1`, so summing 32-bit halves into
/// a 64-bit accumulator and folding at the end is exact (RFC 1071 section 2(B),
/// "parallel summation").
#[inline]
pub fn sum(data: &[u8]) -> u32 {
    let mut acc: u64 = 0;
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_be_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        acc += (w >> 32) + (w & 0xffff_ffff);
    }
    let mut pairs = chunks.remainder().chunks_exact(2);
    for p in &mut pairs {
        acc += u64::from(u16::from_be_bytes([p[0], p[1]]));
    }
    if let [last] = pairs.remainder() {
        acc += u64::from(*last) << 8;
    }
    u32::from(fold(acc))
}

/// [`sum`] of a 20-byte IPv4 header without options: five 32-bit words, no loop. Every
/// forwarded IPv4 packet is verified with it (RFC 1812 section 5.2.2).
#[inline(always)]
pub fn sum20(h: &[u8; 20]) -> u32 {
    let w = |i: usize| u64::from(u32::from_be_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]));
    u32::from(fold(w(0) + w(4) + w(8) + w(12) + w(16)))
}

/// Fold a wide ones'-complement accumulator down to 16 bits (end-around carry).
#[inline]
pub fn fold(mut sum: u64) -> u16 {
    sum = (sum & 0xffff_ffff) + (sum >> 32);
    sum = (sum & 0xffff_ffff) + (sum >> 32);
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    sum as u16
}

/// The Internet checksum of `data`: `!fold(sum(data))`.
#[inline]
pub fn checksum(data: &[u8]) -> u16 {
    !fold(u64::from(sum(data)))
}

/// Partial sum of the IPv4 pseudo-header used by TCP and UDP
/// (RFC 9293 section 3.1, RFC 768): source, destination, zero, protocol,
/// upper-layer length.
#[inline]
pub fn pseudo_header_v4(src: &Ipv4Addr, dst: &Ipv4Addr, proto: u8, len: u32) -> u32 {
    let s = u32::from(*src);
    let d = u32::from(*dst);
    let acc = u64::from(s >> 16)
        + u64::from(s & 0xffff)
        + u64::from(d >> 16)
        + u64::from(d & 0xffff)
        + u64::from(proto)
        + u64::from(len >> 16)
        + u64::from(len & 0xffff);
    u32::from(fold(acc))
}

/// Partial sum of the IPv6 pseudo-header (RFC 8200 section 8.1): source,
/// destination, 32-bit upper-layer length, 24 zero bits, next header.
#[inline]
pub fn pseudo_header_v6(src: &Ipv6Addr, dst: &Ipv6Addr, next_header: u8, len: u32) -> u32 {
    let s = u64::from(sum(&src.octets())) + u64::from(sum(&dst.octets()));
    u32::from(fold(s + u64::from(len >> 16) + u64::from(len & 0xffff) + u64::from(next_header)))
}

/// Incrementally update a checksum after one 16-bit word changed from
/// `old_word` to `new_word`: RFC 1624 section 3, eqn. 3,
/// `HC' = ~(~HC + ~m + m')`.
#[inline]
pub fn update16(old_checksum: u16, old_word: u16, new_word: u16) -> u16 {
    let acc = u64::from(!old_checksum) + u64::from(!old_word) + u64::from(new_word);
    !fold(acc)
}

/// RFC 1624 eqn. 3 for a 32-bit field (e.g. an IPv4 address rewrite): both
/// 16-bit halves are replaced.
#[inline]
pub fn update32(old_checksum: u16, old: u32, new: u32) -> u16 {
    let acc = u64::from(!old_checksum)
        + u64::from(!(old >> 16) as u16)
        + u64::from(!(old as u16))
        + u64::from(new >> 16)
        + u64::from(new & 0xffff);
    !fold(acc)
}

#[cfg(test)]
mod tests {

    #[test]
    fn sum20_equals_sum_on_random_headers() {
        let mut x: u64 = 0x1234_5678_9abc_def0;
        for _ in 0..100_000 {
            let mut h = [0u8; 20];
            for b in &mut h {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *b = x as u8;
            }
            assert_eq!(sum20(&h), sum(&h));
        }
        assert_eq!(sum20(&[0xff; 20]), sum(&[0xff; 20]));
        assert_eq!(sum20(&[0; 20]), sum(&[0; 20]));
    }
    use super::*;
    use proptest::prelude::*;

    fn naive(data: &[u8]) -> u16 {
        let mut s: u32 = 0;
        for (i, b) in data.iter().enumerate() {
            s += if i % 2 == 0 { u32::from(*b) << 8 } else { u32::from(*b) };
            while s > 0xffff {
                s = (s & 0xffff) + (s >> 16);
            }
        }
        !(s as u16)
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 section 3: bytes 00 01 f2 03 f4 f5 f6 f7 sum to ddf2.
        let d = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(sum(&d), 0xddf2);
        assert_eq!(checksum(&d), !0xddf2);
        // Odd length: same bytes plus a trailing 0x01 padded to 0x0100.
        let d9 = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7, 0x01];
        assert_eq!(sum(&d9), 0xdef2);
    }

    #[test]
    fn ipv4_header_example() {
        // The classic IPv4 header 45 00 00 3c 1c 46 40 00 40 06 .. .. ac 10 0a 63
        // ac 10 0a 0c has checksum b1e6.
        let mut h = [
            0x45, 0x00, 0x00, 0x3c, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x06, 0x00, 0x00, 0xac, 0x10,
            0x0a, 0x63, 0xac, 0x10, 0x0a, 0x0c,
        ];
        assert_eq!(checksum(&h), 0xb1e6);
        h[10] = 0xb1;
        h[11] = 0xe6;
        assert_eq!(checksum(&h), 0);
    }

    #[test]
    fn edge_cases() {
        assert_eq!(sum(&[]), 0);
        assert_eq!(checksum(&[]), 0xffff);
        assert_eq!(fold(0xffff_ffff_ffff_ffff), 0xffff);
        assert_eq!(fold(0x1_0000), 1);
        assert_eq!(sum(&[0xff; 4096]), 0xffff);
    }

    #[test]
    fn update32_matches_recompute() {
        let mut h = [
            0x45, 0x00, 0x00, 0x3c, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x06, 0xb1, 0xe6, 0xac, 0x10,
            0x0a, 0x63, 0xac, 0x10, 0x0a, 0x0c,
        ];
        let c = update32(0xb1e6, 0xac100a63, 0xc0a80001);
        h[12..16].copy_from_slice(&[0xc0, 0xa8, 0x00, 0x01]);
        h[10] = 0;
        h[11] = 0;
        assert_eq!(c, checksum(&h));
    }

    proptest! {
        #[test]
        fn matches_naive(data in proptest::collection::vec(any::<u8>(), 0..2000)) {
            prop_assert_eq!(checksum(&data), naive(&data));
        }

        #[test]
        fn partial_sums_add(a in proptest::collection::vec(any::<u8>(), 0..100).prop_map(|mut v| { if v.len() % 2 == 1 { v.pop(); } v }),
                            b in proptest::collection::vec(any::<u8>(), 0..100)) {
            let whole: Vec<u8> = a.iter().chain(b.iter()).copied().collect();
            prop_assert_eq!(!fold(u64::from(sum(&a) + sum(&b))), checksum(&whole));
        }

        #[test]
        fn update16_matches_recompute(mut data in proptest::collection::vec(any::<u8>(), 4..64), idx in 0usize..30, new in any::<u16>()) {
            // Word 0 holds the checksum; make the data non-zero as real headers are.
            data[2] |= 1;
            let len = data.len() & !1;
            let data = &mut data[..len];
            data[0] = 0;
            data[1] = 0;
            let c = checksum(data);
            data[..2].copy_from_slice(&c.to_be_bytes());
            let w = 1 + idx % (len / 2 - 1);
            let old = u16::from_be_bytes([data[2 * w], data[2 * w + 1]]);
            data[2 * w..2 * w + 2].copy_from_slice(&new.to_be_bytes());
            let inc = update16(c, old, new);
            data[0] = 0;
            data[1] = 0;
            // Equal as ones'-complement values (0x0000 == 0xffff only if all data is zero).
            let full = checksum(data);
            prop_assert!(inc == full || (inc == 0xffff && full == 0) || (inc == 0 && full == 0xffff));
        }
    }
}
