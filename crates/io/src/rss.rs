//! Receive Side Scaling: the Toeplitz hash NICs compute over a packet's addresses and ports to
//! pick a receive queue, and the indirection table that maps the hash to a queue.
//!
//! The algorithm is Microsoft's ("RSS hashing functions", NDIS `NdisHashFunctionToeplitz`): for
//! every input bit from the most significant bit of the first byte on, if the bit is set the
//! result is XORed with the leftmost 32 bits of the key, then the key is shifted left by one bit.
//! The input is the concatenation, in packet order, of source address, destination address and
//! (for the 4-tuple types) source port and destination port, all in network byte order
//! ("RSS hashing types": `NDIS_HASH_IPV4`, `NDIS_HASH_TCP_IPV4`, `NDIS_HASH_IPV6`,
//! `NDIS_HASH_TCP_IPV6`). Intel's 82599 datasheet (7.1.2.8) and Linux (`ethtool -X`,
//! `Documentation/networking/scaling.rst`) use the same definition.
//!
//! [`Toeplitz`] precomputes, for every input byte position, the 256 possible contributions of
//! that byte, so hashing costs one table read and one XOR per input byte (36 reads for the
//! largest input, an IPv6 4-tuple) instead of a loop over bits.
//!
//! The standard key [`MICROSOFT_KEY`] is not symmetric: A->B and B->A hash differently, so
//! the two directions of a flow land on different queues. A key whose bits repeat every 16
//! positions makes the hash invariant under swapping source and destination (both addresses
//! start at a multiple of 16 bits apart, as do the ports): [`SYMMETRIC_KEY`] is 0x6d5a repeated
//! (Woo and Park, "Scalable TCP Session Monitoring with Symmetric Receive-side Scaling", 2012).

use std::net::{Ipv4Addr, Ipv6Addr};

/// Length of an RSS key (NDIS and most NICs: 40 bytes, 320 bits).
pub const KEY_LEN: usize = 40;
/// Longest input a 40-byte key can hash: every input bit needs 32 key bits from its position.
pub const MAX_INPUT_LEN: usize = KEY_LEN - 4;

/// The key of Microsoft's "Verifying the RSS Hash Calculation" and the default of many NIC
/// drivers (ixgbe, i40e, DPDK's testpmd).
pub const MICROSOFT_KEY: [u8; KEY_LEN] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
    0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
    0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
];

/// 0x6d5a repeated 20 times: a symmetric key (hash(A->B) == hash(B->A)), at the cost of a
/// hash with only 16 distinct key windows.
pub const SYMMETRIC_KEY: [u8; KEY_LEN] = {
    let mut k = [0u8; KEY_LEN];
    let mut i = 0;
    while i < KEY_LEN {
        k[i] = 0x6d;
        k[i + 1] = 0x5a;
        i += 2;
    }
    k
};

/// The Toeplitz hash of `input` bit by bit, exactly as Microsoft's pseudocode: the reference
/// the table-driven [`Toeplitz`] is tested against. `input` may be at most
/// `key.len() - 4` bytes (panics otherwise).
pub fn toeplitz_reference(key: &[u8], input: &[u8]) -> u32 {
    assert!(input.len() + 4 <= key.len(), "input longer than the key allows");
    let mut result = 0u32;
    // The leftmost 32 bits of the (shifted) key, refilled one bit at a time from the rest.
    let mut window = u32::from_be_bytes([key[0], key[1], key[2], key[3]]);
    for (i, byte) in input.iter().enumerate() {
        for bit in (0..8).rev() {
            if byte >> bit & 1 == 1 {
                result ^= window;
            }
            let next = key[i + 4] >> bit & 1;
            window = window << 1 | u32::from(next);
        }
    }
    result
}

/// A Toeplitz hasher for one key: 36 x 256 precomputed 32-bit contributions (36 KiB).
pub struct Toeplitz {
    table: Box<[[u32; 256]; MAX_INPUT_LEN]>,
}

impl Toeplitz {
    /// Precomputes the tables for `key`: entry `[i][b]` is the XOR of the 32-bit key windows
    /// starting at bits `8i + j` for every bit `j` (counted from the most significant) set in `b`.
    pub fn new(key: &[u8; KEY_LEN]) -> Toeplitz {
        let mut table = Box::new([[0u32; 256]; MAX_INPUT_LEN]);
        for (i, row) in table.iter_mut().enumerate() {
            // 64 key bits from byte i, zero-padded past the end of the key (windows of inputs
            // up to MAX_INPUT_LEN bytes only ever reach key byte i + 4).
            let mut b = [0u8; 8];
            let avail = (KEY_LEN - i).min(8);
            b[..avail].copy_from_slice(&key[i..i + avail]);
            let bits = u64::from_be_bytes(b);
            // windows[j] = key bits 8i + j .. 8i + j + 32.
            let windows: [u32; 8] = std::array::from_fn(|j| (bits >> (32 - j)) as u32);
            for (b, slot) in row.iter_mut().enumerate() {
                let mut h = 0;
                for (j, w) in windows.iter().enumerate() {
                    if b & (0x80 >> j) != 0 {
                        h ^= w;
                    }
                }
                *slot = h;
            }
        }
        Toeplitz { table }
    }

    /// The hash of `input` (at most [`MAX_INPUT_LEN`] bytes; longer input panics).
    #[inline]
    pub fn hash(&self, input: &[u8]) -> u32 {
        self.hash_fields(&[input])
    }

    /// The hash of the concatenation of `parts`, as the NDIS hash types list their fields
    /// (at most [`MAX_INPUT_LEN`] bytes in all).
    #[inline]
    fn hash_fields(&self, parts: &[&[u8]]) -> u32 {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        assert!(len <= MAX_INPUT_LEN, "RSS input longer than {MAX_INPUT_LEN} bytes");
        parts
            .iter()
            .flat_map(|p| p.iter())
            .zip(self.table.iter())
            .fold(0, |h, (&b, row)| h ^ row[usize::from(b)])
    }

    /// `NDIS_HASH_IPV4`: source and destination address.
    #[inline]
    pub fn ipv4(&self, src: Ipv4Addr, dst: Ipv4Addr) -> u32 {
        self.hash_fields(&[&src.octets(), &dst.octets()])
    }

    /// `NDIS_HASH_TCP_IPV4` (and `UDP_IPV4`): source, destination address, source, destination port.
    #[inline]
    pub fn ipv4_ports(&self, src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16) -> u32 {
        self.hash_fields(&[
            &src.octets(),
            &dst.octets(),
            &sport.to_be_bytes(),
            &dport.to_be_bytes(),
        ])
    }

    /// `NDIS_HASH_IPV6`: source and destination address.
    #[inline]
    pub fn ipv6(&self, src: Ipv6Addr, dst: Ipv6Addr) -> u32 {
        self.hash_fields(&[&src.octets(), &dst.octets()])
    }

    /// `NDIS_HASH_TCP_IPV6` (and `UDP_IPV6`): addresses, then source and destination port.
    #[inline]
    pub fn ipv6_ports(&self, src: Ipv6Addr, dst: Ipv6Addr, sport: u16, dport: u16) -> u32 {
        self.hash_fields(&[
            &src.octets(),
            &dst.octets(),
            &sport.to_be_bytes(),
            &dport.to_be_bytes(),
        ])
    }

    /// The hash a NIC would give an Ethernet frame (untagged): the 4-tuple for unfragmented
    /// IPv4 TCP/UDP and for IPv6 TCP/UDP without extension headers, the address pair for any
    /// other IP packet, `None` for non-IP or truncated frames.
    pub fn hash_frame(&self, frame: &[u8]) -> Option<u32> {
        let ethertype = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
        let ip = frame.get(14..)?;
        let is_l4 = |proto: u8| proto == 6 || proto == 17;
        match ethertype {
            0x0800 => {
                let h = ip.get(..20)?;
                let (src, dst) = (addr4(&h[12..16]), addr4(&h[16..20]));
                let ihl = usize::from(h[0] & 0x0f) * 4;
                let fragment = u16::from_be_bytes([h[6], h[7]]) & 0x3fff != 0;
                match ip.get(ihl..ihl + 4) {
                    Some(p) if is_l4(h[9]) && !fragment => {
                        Some(self.ipv4_ports(src, dst, port(&p[..2]), port(&p[2..])))
                    }
                    _ => Some(self.ipv4(src, dst)),
                }
            }
            0x86dd => {
                let h = ip.get(..40)?;
                let src = Ipv6Addr::from(<[u8; 16]>::try_from(&h[8..24]).ok()?);
                let dst = Ipv6Addr::from(<[u8; 16]>::try_from(&h[24..40]).ok()?);
                match ip.get(40..44) {
                    Some(p) if is_l4(h[6]) => {
                        Some(self.ipv6_ports(src, dst, port(&p[..2]), port(&p[2..])))
                    }
                    _ => Some(self.ipv6(src, dst)),
                }
            }
            _ => None,
        }
    }
}

fn addr4(b: &[u8]) -> Ipv4Addr {
    Ipv4Addr::new(b[0], b[1], b[2], b[3])
}

fn port(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

/// Entries of the default indirection table (ixgbe and i40e VFs have 128; Linux fills any
/// size with `ethtool_rxfh_indir_default`, entry `i` = queue `i % n`).
pub const DEFAULT_TABLE_LEN: usize = 128;

/// The queue a NIC with the default indirection table ([`DEFAULT_TABLE_LEN`] entries filled
/// round robin) gives `hash`: `table[hash & (len - 1)]`, i.e. `(hash & 127) % n_queues`.
/// `n_queues` 0 is treated as 1.
#[inline]
pub fn queue_for(hash: u32, n_queues: u16) -> u16 {
    let index = hash as usize & (DEFAULT_TABLE_LEN - 1);
    (index % usize::from(n_queues.max(1))) as u16
}

/// An RSS indirection table (redirection table, RETA): a power-of-two number of queue numbers,
/// indexed by the low bits of the hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndirectionTable {
    entries: Vec<u16>,
}

impl IndirectionTable {
    /// `len` entries (rounded up to a power of two, at least 1) filled round robin over
    /// `n_queues` queues (0 is treated as 1).
    pub fn round_robin(len: usize, n_queues: u16) -> IndirectionTable {
        let len = len.max(1).next_power_of_two();
        let n = n_queues.max(1);
        IndirectionTable { entries: (0..len).map(|i| (i % usize::from(n)) as u16).collect() }
    }

    /// The entries, to inspect or rewrite (e.g. to take a queue out of service).
    pub fn entries_mut(&mut self) -> &mut [u16] {
        &mut self.entries
    }

    /// The queue for `hash`.
    #[inline]
    pub fn queue(&self, hash: u32) -> u16 {
        self.entries[hash as usize & (self.entries.len() - 1)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Microsoft's "Verifying the RSS Hash Calculation" IPv4 table (also 82599 datasheet
    /// 7.1.2.8.3): source, source port, destination, destination port, IPv4 hash, TCP/IPv4 hash.
    const V4: [(&str, u16, &str, u16, u32, u32); 5] = [
        ("66.9.149.187", 2794, "161.142.100.80", 1766, 0x323e8fc2, 0x51ccc178),
        ("199.92.111.2", 14230, "65.69.140.83", 4739, 0xd718262a, 0xc626b0ea),
        ("24.19.198.95", 12898, "12.22.207.184", 38024, 0xd2d0a5de, 0x5c2b394a),
        ("38.27.205.30", 48228, "209.142.163.6", 2217, 0x82989176, 0xafc7327f),
        ("153.39.163.191", 44251, "202.188.127.2", 1303, 0x5d1809c5, 0x10e828a2),
    ];

    /// The same document's IPv6 table.
    const V6: [(&str, u16, &str, u16, u32, u32); 3] = [
        ("3ffe:2501:200:1fff::7", 2794, "3ffe:2501:200:3::1", 1766, 0x2cc18cd5, 0x40207d3d),
        ("3ffe:501:8::260:97ff:fe40:efab", 14230, "ff02::1", 4739, 0x0f0c461c, 0xdde51bbf),
        (
            "3ffe:1900:4545:3:200:f8ff:fe21:67cf",
            44251,
            "fe80::200:f8ff:fe21:67cf",
            38024,
            0x4b61e985,
            0x02d1feef,
        ),
    ];

    #[test]
    fn microsoft_ipv4_vectors() {
        let t = Toeplitz::new(&MICROSOFT_KEY);
        for (s, sp, d, dp, h2, h4) in V4 {
            let (s, d): (Ipv4Addr, Ipv4Addr) = (s.parse().unwrap(), d.parse().unwrap());
            assert_eq!(t.ipv4(s, d), h2, "{s} -> {d}");
            assert_eq!(t.ipv4_ports(s, d, sp, dp), h4, "{s}:{sp} -> {d}:{dp}");
            let mut input = [s.octets(), d.octets()].concat();
            assert_eq!(toeplitz_reference(&MICROSOFT_KEY, &input), h2);
            input.extend_from_slice(&sp.to_be_bytes());
            input.extend_from_slice(&dp.to_be_bytes());
            assert_eq!(toeplitz_reference(&MICROSOFT_KEY, &input), h4);
        }
    }

    #[test]
    fn microsoft_ipv6_vectors() {
        let t = Toeplitz::new(&MICROSOFT_KEY);
        for (s, sp, d, dp, h2, h4) in V6 {
            let (s, d): (Ipv6Addr, Ipv6Addr) = (s.parse().unwrap(), d.parse().unwrap());
            assert_eq!(t.ipv6(s, d), h2, "{s} -> {d}");
            assert_eq!(t.ipv6_ports(s, d, sp, dp), h4, "{s}.{sp} -> {d}.{dp}");
            let mut input = [s.octets(), d.octets()].concat();
            assert_eq!(toeplitz_reference(&MICROSOFT_KEY, &input), h2);
            input.extend_from_slice(&sp.to_be_bytes());
            input.extend_from_slice(&dp.to_be_bytes());
            assert_eq!(toeplitz_reference(&MICROSOFT_KEY, &input), h4);
        }
    }

    #[test]
    fn table_matches_reference_on_every_length() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for key in [MICROSOFT_KEY, SYMMETRIC_KEY, std::array::from_fn(|_| next() as u8)] {
            let t = Toeplitz::new(&key);
            for len in 0..=MAX_INPUT_LEN {
                for _ in 0..50 {
                    let input: Vec<u8> = (0..len).map(|_| next() as u8).collect();
                    assert_eq!(t.hash(&input), toeplitz_reference(&key, &input), "len {len}");
                }
            }
            assert_eq!(
                t.hash(&[0xff; MAX_INPUT_LEN]),
                toeplitz_reference(&key, &[0xff; MAX_INPUT_LEN])
            );
        }
    }

    #[test]
    #[should_panic(expected = "longer")]
    fn input_too_long_panics() {
        Toeplitz::new(&MICROSOFT_KEY).hash(&[0; MAX_INPUT_LEN + 1]);
    }

    #[test]
    fn standard_key_is_not_symmetric_symmetric_key_is() {
        let ms = Toeplitz::new(&MICROSOFT_KEY);
        let sym = Toeplitz::new(&SYMMETRIC_KEY);
        assert_eq!(&SYMMETRIC_KEY[..4], &[0x6d, 0x5a, 0x6d, 0x5a]);
        assert!(SYMMETRIC_KEY.chunks(2).all(|c| c == [0x6d, 0x5a]));
        for (s, sp, d, dp, _, _) in V4 {
            let (s, d): (Ipv4Addr, Ipv4Addr) = (s.parse().unwrap(), d.parse().unwrap());
            assert_ne!(ms.ipv4_ports(s, d, sp, dp), ms.ipv4_ports(d, s, dp, sp));
            assert_ne!(ms.ipv4(s, d), ms.ipv4(d, s));
            assert_eq!(sym.ipv4_ports(s, d, sp, dp), sym.ipv4_ports(d, s, dp, sp));
            assert_eq!(sym.ipv4(s, d), sym.ipv4(d, s));
        }
        for (s, sp, d, dp, _, _) in V6 {
            let (s, d): (Ipv6Addr, Ipv6Addr) = (s.parse().unwrap(), d.parse().unwrap());
            assert_ne!(ms.ipv6_ports(s, d, sp, dp), ms.ipv6_ports(d, s, dp, sp));
            assert_eq!(sym.ipv6_ports(s, d, sp, dp), sym.ipv6_ports(d, s, dp, sp));
            assert_eq!(sym.ipv6(s, d), sym.ipv6(d, s));
        }
    }

    #[test]
    fn queues_round_robin() {
        assert_eq!(queue_for(0x51ccc178, 4), (0x78 % 4) as u16);
        assert_eq!(queue_for(0x51ccc178, 3), (0x78 % 3) as u16);
        assert_eq!(queue_for(0xffff_ffff, 1), 0);
        assert_eq!(queue_for(5, 0), 0);
        let t = IndirectionTable::round_robin(DEFAULT_TABLE_LEN, 3);
        for h in [0u32, 1, 2, 3, 127, 128, 0x51ccc178, 0xdeadbeef] {
            assert_eq!(t.queue(h), queue_for(h, 3));
        }
        // Every queue gets a share of the table.
        let mut t = IndirectionTable::round_robin(100, 4);
        assert_eq!(t.entries_mut().len(), 128);
        assert_eq!(t.entries_mut().iter().filter(|&&q| q == 3).count(), 32);
        t.entries_mut()[5] = 0;
        assert_eq!(t.queue(5 + 128), 0);
        assert_eq!(IndirectionTable::round_robin(0, 0).queue(0xffff), 0);
    }

    #[test]
    fn frames_hash_like_a_nic() {
        let t = Toeplitz::new(&MICROSOFT_KEY);
        // IPv4/TCP 66.9.149.187:2794 -> 161.142.100.80:1766 (flags, checksum irrelevant).
        let mut f = vec![0u8; 14 + 20 + 20];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[23] = 6;
        f[26..30].copy_from_slice(&[66, 9, 149, 187]);
        f[30..34].copy_from_slice(&[161, 142, 100, 80]);
        f[34..36].copy_from_slice(&2794u16.to_be_bytes());
        f[36..38].copy_from_slice(&1766u16.to_be_bytes());
        assert_eq!(t.hash_frame(&f), Some(0x51ccc178));
        f[23] = 17; // UDP hashes the same way
        assert_eq!(t.hash_frame(&f), Some(0x51ccc178));
        f[23] = 1; // ICMP: addresses only
        assert_eq!(t.hash_frame(&f), Some(0x323e8fc2));
        f[23] = 6;
        f[20] = 0x20; // MF: a fragment has no trustworthy ports
        assert_eq!(t.hash_frame(&f), Some(0x323e8fc2));
        f[20] = 0x40; // DF alone is not a fragment
        assert_eq!(t.hash_frame(&f), Some(0x51ccc178));
        assert_eq!(t.hash_frame(&f[..14 + 20]), Some(0x323e8fc2));
        assert_eq!(t.hash_frame(&f[..30]), None);
        f[12] = 0x08;
        f[13] = 0x06;
        assert_eq!(t.hash_frame(&f), None);

        let mut f = vec![0u8; 14 + 40 + 8];
        f[12..14].copy_from_slice(&[0x86, 0xdd]);
        f[14] = 0x60;
        f[20] = 17;
        let s: Ipv6Addr = "3ffe:2501:200:1fff::7".parse().unwrap();
        let d: Ipv6Addr = "3ffe:2501:200:3::1".parse().unwrap();
        f[22..38].copy_from_slice(&s.octets());
        f[38..54].copy_from_slice(&d.octets());
        f[54..56].copy_from_slice(&2794u16.to_be_bytes());
        f[56..58].copy_from_slice(&1766u16.to_be_bytes());
        assert_eq!(t.hash_frame(&f), Some(0x40207d3d));
        f[20] = 58;
        assert_eq!(t.hash_frame(&f), Some(0x2cc18cd5));
    }
}
