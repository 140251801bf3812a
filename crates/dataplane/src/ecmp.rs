//! Equal-cost multipath: which of a route's next hops a packet takes.
//!
//! Every packet of a flow must take the same path (reordering hurts TCP, RFC 2991 section 2),
//! so the choice is a hash of the flow's identity, as in RFC 2992's hash-threshold method:
//! source and destination address, protocol, and the TCP/UDP/SCTP ports of unfragmented
//! IPv4 packets and IPv6 packets whose first header is the transport (IPv6 adds the flow
//! label, RFC 6438). IPv4 fragments hash without ports, so all pieces of a datagram go
//! the same way.
//!
//! It is not the RSS Toeplitz hash that spreads flows over workers: with the same hash, every
//! flow of a worker would take the same path out of two (the hash modulo 2 would pick both the
//! worker and the path). The seed differs per process, so routers in a chain do not polarise.

/// IP protocol numbers whose first 4 payload bytes are source and destination port.
fn has_ports(proto: u8) -> bool {
    matches!(proto, 6 | 17 | 132 | 136) // TCP, UDP, SCTP, UDP-Lite
}

#[inline(always)]
fn mix(h: u64, word: u64) -> u64 {
    (h ^ word).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29)
}

/// MurmurHash3's 64-bit finaliser: every input bit affects every output bit.
#[inline(always)]
fn finish(mut h: u64) -> u32 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    h as u32
}

fn word(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8).map_or(0, |w| u64::from_be_bytes(w.try_into().expect("8 bytes")))
}

fn ports(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 4).map_or(0, |w| u64::from(u32::from_be_bytes(w.try_into().expect("4 bytes"))))
}

/// The flow hash of the IP packet `ip` (its header already validated by the classify pass;
/// a short packet hashes what it has, never panics).
pub fn flow_hash(ip: &[u8], v4: bool, seed: u64) -> u32 {
    if v4 {
        let Some(h) = ip.get(..20) else { return finish(seed) };
        let addrs = u64::from_be_bytes(h[12..20].try_into().expect("8 bytes"));
        let proto = h[9];
        let fragment = u16::from_be_bytes([h[6], h[7]]) & 0x3fff != 0;
        let l4 =
            if has_ports(proto) && !fragment { ports(ip, usize::from(h[0] & 0x0f) * 4) } else { 0 };
        finish(mix(mix(mix(seed, addrs), u64::from(proto)), l4))
    } else {
        let Some(h) = ip.get(..40) else { return finish(seed) };
        let label = u64::from(u32::from_be_bytes([0, h[1] & 0x0f, h[2], h[3]]));
        let proto = h[6];
        let l4 = if has_ports(proto) { ports(ip, 40) } else { 0 };
        let mut x = seed;
        for at in [8, 16, 24, 32] {
            x = mix(x, word(h, at));
        }
        finish(mix(mix(x, u64::from(proto) << 32 | label), l4))
    }
}

/// Which of `paths` next hops a flow of hash `hash` takes: `hash * paths / 2^32` (no division;
/// contiguous hash ranges per path, RFC 2992's hash-threshold).
#[inline(always)]
pub fn pick(hash: u32, paths: u16) -> usize {
    ((u64::from(hash) * u64::from(paths)) >> 32) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn v4_udp(src: u32, dst: u32, sport: u16, dport: u16, frag: u16) -> Vec<u8> {
        let mut p = vec![0u8; 28];
        p[0] = 0x45;
        p[6..8].copy_from_slice(&frag.to_be_bytes());
        p[8] = 64;
        p[9] = 17;
        p[12..16].copy_from_slice(&src.to_be_bytes());
        p[16..20].copy_from_slice(&dst.to_be_bytes());
        p[20..22].copy_from_slice(&sport.to_be_bytes());
        p[22..24].copy_from_slice(&dport.to_be_bytes());
        p
    }

    fn v6_tcp(src: u128, dst: u128, sport: u16, dport: u16) -> Vec<u8> {
        let mut p = vec![0u8; 60];
        p[0] = 0x60;
        p[6] = 6;
        p[7] = 64;
        p[8..24].copy_from_slice(&src.to_be_bytes());
        p[24..40].copy_from_slice(&dst.to_be_bytes());
        p[40..42].copy_from_slice(&sport.to_be_bytes());
        p[42..44].copy_from_slice(&dport.to_be_bytes());
        p
    }

    #[test]
    fn flows_spread_roughly_evenly() {
        for paths in [2u16, 3, 4, 8, 16] {
            let mut v4 = vec![0u32; paths as usize];
            let mut v6 = vec![0u32; paths as usize];
            let flows = 20_000u32;
            for i in 0..flows {
                let p = v4_udp(
                    0xc612_0000 + (i % 200),
                    0x0a00_0001 + (i / 200),
                    1024 + i as u16,
                    53,
                    0,
                );
                v4[pick(flow_hash(&p, true, 7), paths)] += 1;
                let p = v6_tcp(
                    0x2001_0db8 << 96 | u128::from(i),
                    0x2001_0db8_0001 << 80,
                    40_000 + (i % 1000) as u16,
                    443,
                );
                v6[pick(flow_hash(&p, false, 7), paths)] += 1;
            }
            let fair = flows / u32::from(paths);
            for n in v4.iter().chain(&v6) {
                // Within 10% of a fair share (a binomial's deviation here is about 1-3%).
                assert!(n.abs_diff(fair) * 10 < fair, "{paths} paths: {v4:?} {v6:?}");
            }
        }
    }

    #[test]
    fn fragments_hash_without_ports() {
        let first = v4_udp(1, 2, 1000, 2000, 0x2000); // MF set
        let later = v4_udp(1, 2, 0xdead, 0xbeef, 0x0010); // offset 16: bytes of payload, not ports
        assert_eq!(flow_hash(&first, true, 1), flow_hash(&later, true, 1));
        assert_ne!(
            flow_hash(&v4_udp(1, 2, 1000, 2000, 0), true, 1),
            flow_hash(&v4_udp(1, 2, 1001, 2000, 0), true, 1)
        );
    }

    #[test]
    fn short_packets_do_not_panic() {
        for n in 0..64 {
            let p = vec![0x45u8; n];
            let _ = flow_hash(&p, true, 3);
            let _ = flow_hash(&p, false, 3);
        }
    }

    proptest! {
        /// Same flow, same path, whatever else differs (TTL, payload, IP id, length).
        #[test]
        fn a_flow_sticks_to_its_path(src: u32, dst: u32, sport: u16, dport: u16, ttl: u8, id: u16, payload: Vec<u8>, paths in 1u16..=16) {
            let a = v4_udp(src, dst, sport, dport, 0);
            let mut b = a.clone();
            b[8] = ttl;
            b[4..6].copy_from_slice(&id.to_be_bytes());
            b.extend_from_slice(&payload);
            let pa = pick(flow_hash(&a, true, 42), paths);
            prop_assert_eq!(pa, pick(flow_hash(&b, true, 42), paths));
            prop_assert!(pa < usize::from(paths));
        }

        #[test]
        fn pick_is_in_range(hash: u32, paths in 1u16..=16) {
            prop_assert!(pick(hash, paths) < usize::from(paths));
        }
    }
}
