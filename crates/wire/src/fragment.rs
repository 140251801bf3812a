//! IPv4 fragmentation by a router: RFC 791 section 3.2 ("Fragmentation and Reassembly", the
//! fragmentation procedure) and section 3.1 (option format, the "copied" flag), as RFC 1812
//! section 5.2.6 requires of a router (which fragments but never reassembles).
//!
//! [`fragment_ipv4`] takes a whole received frame and pushes one complete frame per fragment,
//! each with the same link-layer header, so the slow path can hand them straight to a tx port.
//! Fragments are cut in order, each as large as the MTU allows, every data size but the last a
//! multiple of 8 bytes (the offset field counts 8-byte blocks).

use crate::{Error, Ipv4Packet};

/// The smallest MTU of an IPv4 link: "Every internet module must be able to forward a datagram
/// of 68 octets without further fragmentation" (RFC 791 section 3.2), a 60-byte header (the
/// largest) plus 8 bytes of data (the smallest fragment).
pub const MIN_IPV4_MTU: usize = 68;

/// The largest fragment offset in bytes: the 13-bit field's maximum times 8.
const MAX_OFFSET: usize = 0x1fff * 8;

/// Header without options.
const MIN_HEADER: usize = Ipv4Packet::<&[u8]>::MIN_HEADER_LEN;
/// Largest options area (IHL 15: 60-byte header).
const MAX_OPTIONS: usize = 40;

/// Splits the IPv4 packet at `frame[l3_offset..]` into fragments of at most `mtu` bytes (the IP
/// MTU of the outgoing link), pushing one frame per fragment onto `out` in offset order, and
/// returns how many it pushed.
///
/// Each frame is `frame[..l3_offset]` verbatim (Ethernet header with any VLAN tags), an IP
/// header and a slice of the data. The first fragment keeps the whole original header, options
/// included; later ones keep only the options whose copied flag (0x80 of the type octet) is
/// set, padded with End of Option List to a multiple of 4 bytes (RFC 791 3.1). Fragment offsets
/// count from the packet's own offset, so a packet that is already a fragment is split further
/// correctly; MF is set on all but the last fragment, which keeps the packet's own MF. Total
/// length and header checksum are recomputed; identification, TOS, TTL, protocol and addresses
/// are copied. Bytes after the IP total length (Ethernet padding) are not copied, and the
/// frames are not padded to the Ethernet minimum (the NIC does that).
///
/// A packet that already fits in `mtu` is pushed as one frame, unchanged except that padding
/// is dropped (DF is then irrelevant).
///
/// Errors (nothing is pushed):
/// * [`Error::Truncated`], [`Error::BadVersion`], [`Error::BadLength`]: `frame` is shorter than
///   `l3_offset`, or what follows is not a valid IPv4 packet (as [`Ipv4Packet::new_checked`]);
/// * [`Error::BufferTooSmall`]: `mtu` is below [`MIN_IPV4_MTU`] (which also guarantees room
///   for any header plus 8 bytes of data);
/// * [`Error::Malformed`]: the packet needs fragmenting but has DF set. The forwarding path
///   should have checked `dont_frag()` already and sent ICMP "fragmentation needed" with the
///   MTU (RFC 1191 section 4) instead;
/// * [`Error::BadLength`]: an option's length runs past the header or is below 2, or the
///   fragments' offsets would not fit the 13-bit field (the packet claims data beyond the
///   65535-byte datagram limit).
pub fn fragment_ipv4(
    frame: &[u8],
    l3_offset: usize,
    mtu: usize,
    out: &mut Vec<Vec<u8>>,
) -> Result<usize, Error> {
    let (l2, l3) = frame.split_at_checked(l3_offset).ok_or(Error::Truncated)?;
    let ip = Ipv4Packet::new_checked(l3)?;
    if mtu < MIN_IPV4_MTU {
        return Err(Error::BufferTooSmall);
    }
    let total = usize::from(ip.total_len());
    if total <= mtu {
        out.push([l2, &l3[..total]].concat());
        return Ok(1);
    }
    // RFC 791 3.2: "If the Don't Fragment flag (DF) bit is set, then internet fragmentation of
    // this datagram is NOT permitted".
    if ip.dont_frag() {
        return Err(Error::Malformed);
    }
    let header = ip.header_bytes();
    let data = ip.payload();

    // The header of every later fragment: the fixed 20 bytes, then the copied options.
    let mut rest = [0u8; MIN_HEADER + MAX_OPTIONS];
    let rest_len = MIN_HEADER + copied_options(ip.options(), &mut rest[MIN_HEADER..])?;
    rest[..MIN_HEADER].copy_from_slice(&header[..MIN_HEADER]);
    let rest = &rest[..rest_len];

    // Data per fragment: what fits under the MTU, rounded down to whole 8-byte blocks ("NFB"
    // in RFC 791's procedure). mtu >= 68 >= header + 8, so both are at least 8.
    let first_max = (mtu - header.len()) & !7;
    let rest_max = (mtu - rest_len) & !7;
    debug_assert!(first_max >= 8 && rest_max >= first_max);

    // The offset of the last fragment must fit the 13-bit field. `total > mtu`, so the data
    // does not fit in the first fragment and there are at least two.
    let base = usize::from(ip.frag_offset());
    let after_first = data.len() - first_max;
    let last_offset = base + first_max + (after_first - 1) / rest_max * rest_max;
    if last_offset > MAX_OFFSET {
        return Err(Error::BadLength);
    }
    let more = ip.more_frags();

    let pushed = out.len();
    let mut pos = 0;
    while pos < data.len() {
        let (hdr, max) = if pos == 0 { (header, first_max) } else { (rest, rest_max) };
        let n = max.min(data.len() - pos);
        let last = pos + n == data.len();
        let mut f = Vec::with_capacity(l2.len() + hdr.len() + n);
        f.extend_from_slice(l2);
        f.extend_from_slice(hdr);
        f.extend_from_slice(&data[pos..pos + n]);
        let mut p = Ipv4Packet::new_unchecked(&mut f[l2.len()..]);
        p.set_header_len(hdr.len());
        // hdr + n <= mtu < total <= 65535; base + pos <= last_offset <= MAX_OFFSET.
        p.set_total_len((hdr.len() + n) as u16);
        p.set_frag_offset((base + pos) as u16);
        // RFC 791 3.2: the last fragment keeps the original MF ("MF <- OMF"), others set it.
        p.set_more_frags(!last || more);
        p.fill_checksum();
        out.push(f);
        pos += n;
    }
    Ok(out.len() - pushed)
}

/// Copies the options of `opts` whose copied flag is set into `out`, followed by zeros (End of
/// Option List) up to a multiple of 4, and returns the padded length.
///
/// RFC 791 3.1: an option is either a single type octet (End of Option List, 0, which ends the
/// list; No Operation, 1), or type, length (counting type and length octets) and data. Both
/// single-octet options have the copied flag clear and "may be copied, introduced, or deleted
/// on fragmentation": they are dropped.
fn copied_options(opts: &[u8], out: &mut [u8]) -> Result<usize, Error> {
    let mut len = 0;
    let mut i = 0;
    while let Some(&kind) = opts.get(i) {
        match kind {
            0 => break,
            1 => i += 1,
            _ => {
                let olen = usize::from(*opts.get(i + 1).ok_or(Error::BadLength)?);
                let opt = opts.get(i..i + olen).ok_or(Error::BadLength)?;
                if olen < 2 {
                    return Err(Error::BadLength);
                }
                if kind & 0x80 != 0 {
                    out[len..len + olen].copy_from_slice(opt);
                    len += olen;
                }
                i += olen;
            }
        }
    }
    let padded = len.next_multiple_of(4);
    out[len..padded].fill(0);
    Ok(padded)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checksum;
    use proptest::prelude::*;

    // Ethernet (02:00:00:00:00:02 <- 02:00:00:00:00:01, IPv4) and the first 28 bytes of
    // `ping -s 1472 -M dont 198.51.100.1` from 192.0.2.1: IPv4 total length 1500, ident 0x1234,
    // DF clear, TTL 63 (already forwarded once), ICMP echo request id 0x0b5e seq 1. The 1472
    // data bytes follow (see `ping_data`); the ICMP checksum covers them.
    #[rustfmt::skip]
    const PING_HDR: [u8; 42] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08, 0x00, // eth
        0x45, 0x00, 0x05, 0xdc, 0x12, 0x34, 0x00, 0x00, 0x3f, 0x01, 0x77, 0xb7, // ipv4
        0xc0, 0x00, 0x02, 0x01, 0xc6, 0x33, 0x64, 0x01,
        0x08, 0x00, 0x8d, 0x18, 0x0b, 0x5e, 0x00, 0x01, // icmp
    ];

    /// iputils ping's data: a 16-byte struct timeval (here 2024-01-01T00:00:00Z, 0 µs, as
    /// little-endian u64s), then byte i holds i.
    fn ping_data() -> Vec<u8> {
        let mut d: Vec<u8> = (0..1472).map(|i| i as u8).collect();
        d[..8].copy_from_slice(&1_704_067_200u64.to_le_bytes());
        d[8..16].fill(0);
        d
    }

    fn ping_frame() -> Vec<u8> {
        [&PING_HDR[..], &ping_data()].concat()
    }

    // Options of a 40-byte header: NOP; Record Route (7: not copied) with one empty slot;
    // Loose Source Route (0x83: copied) via 192.0.2.254; Router Alert (0x94: copied, RFC 2113);
    // End of Option List.
    #[rustfmt::skip]
    const OPTIONS: [u8; 20] = [
        0x01, // NOP
        0x07, 0x07, 0x04, 0x00, 0x00, 0x00, 0x00, // RR
        0x83, 0x07, 0x04, 0xc0, 0x00, 0x02, 0xfe, // LSRR
        0x94, 0x04, 0x00, 0x00, // RA
        0x00, // EOL
    ];
    /// The copied ones, padded: what every fragment after the first carries.
    const COPIED: [u8; 12] =
        [0x83, 0x07, 0x04, 0xc0, 0x00, 0x02, 0xfe, 0x94, 0x04, 0x00, 0x00, 0x00];

    /// `frame` with `opts` inserted into the IP header (IHL, total length, checksum fixed).
    fn with_options(frame: &[u8], l3: usize, opts: &[u8]) -> Vec<u8> {
        assert!(opts.len().is_multiple_of(4));
        let mut f = [&frame[..l3 + 20], opts, &frame[l3 + 20..]].concat();
        let mut ip = Ipv4Packet::new_unchecked(&mut f[l3..]);
        let tl = ip.total_len() as usize + opts.len();
        ip.set_header_len(20 + opts.len());
        ip.set_total_len(tl as u16);
        ip.fill_checksum();
        f
    }

    /// Checks every fragment (L2 copied, valid header, size, offsets, MF, header contents) and
    /// returns the reassembled data.
    fn check_and_reassemble(orig: &[u8], l3: usize, mtu: usize, frags: &[Vec<u8>]) -> Vec<u8> {
        let o = Ipv4Packet::new_checked(&orig[l3..]).unwrap();
        let later = expected_later_options(o.options());
        let mut data = Vec::new();
        for (k, f) in frags.iter().enumerate() {
            assert_eq!(&f[..l3], &orig[..l3], "fragment {k}: L2 header copied");
            let p = Ipv4Packet::new_checked(&f[l3..]).unwrap();
            assert_eq!(f.len(), l3 + usize::from(p.total_len()), "fragment {k}: no padding");
            assert!(usize::from(p.total_len()) <= mtu, "fragment {k} exceeds the MTU");
            assert!(p.verify_checksum(), "fragment {k}: checksum");
            assert_eq!(
                usize::from(p.frag_offset()),
                usize::from(o.frag_offset()) + data.len(),
                "fragment {k}: offset"
            );
            assert_eq!(p.frag_offset() % 8, 0);
            let last = k + 1 == frags.len();
            if !last {
                assert!(p.payload().len().is_multiple_of(8), "fragment {k}: 8-byte blocks");
            }
            assert_eq!(p.more_frags(), !last || o.more_frags(), "fragment {k}: MF");
            assert!(!p.dont_frag());
            assert_eq!((p.version(), p.dscp_ecn()), (4, o.dscp_ecn()));
            assert_eq!((p.ident(), p.ttl(), p.protocol()), (o.ident(), o.ttl(), o.protocol()));
            assert_eq!((p.src_addr(), p.dst_addr()), (o.src_addr(), o.dst_addr()));
            if k == 0 {
                assert_eq!(p.options(), o.options(), "first fragment keeps every option");
            } else {
                assert_eq!(p.options(), &later[..], "fragment {k}: copied options only");
            }
            data.extend_from_slice(p.payload());
        }
        data
    }

    /// Independent statement of which options later fragments carry.
    fn expected_later_options(opts: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        let mut i = 0;
        while i < opts.len() && opts[i] != 0 {
            if opts[i] == 1 {
                i += 1;
                continue;
            }
            let l = opts[i + 1] as usize;
            if opts[i] >= 0x80 {
                v.extend_from_slice(&opts[i..i + l]);
            }
            i += l;
        }
        while !v.len().is_multiple_of(4) {
            v.push(0);
        }
        v
    }

    #[test]
    fn ping_fixture_is_valid() {
        let f = ping_frame();
        let ip = Ipv4Packet::new_checked(&f[14..]).unwrap();
        assert!(ip.verify_checksum());
        assert_eq!(ip.total_len(), 1500);
        assert_eq!(checksum::checksum(ip.payload()), 0, "ICMP checksum");
    }

    #[test]
    fn ping_1500_at_576_and_1280() {
        let f = ping_frame();
        let payload = &f[34..];
        for (mtu, sizes) in [(576, vec![552, 552, 376]), (1280, vec![1256, 224])] {
            let mut out = Vec::new();
            assert_eq!(fragment_ipv4(&f, 14, mtu, &mut out), Ok(sizes.len()));
            let got: Vec<usize> = out.iter().map(|f| f.len() - 34).collect();
            assert_eq!(got, sizes, "mtu {mtu}");
            let data = check_and_reassemble(&f, 14, mtu, &out);
            assert_eq!(data, payload, "mtu {mtu}");
            assert_eq!(checksum::checksum(&data), 0, "the ICMP message survives");
            let last = Ipv4Packet::new_checked(&out[out.len() - 1][14..]).unwrap();
            assert!(!last.more_frags());
        }
    }

    #[test]
    fn exact_first_fragment_bytes_at_576() {
        let f = ping_frame();
        let mut out = Vec::new();
        fragment_ipv4(&f, 14, 576, &mut out).unwrap();
        // Header of fragment 2: total 572, MF and offset 552/8 = 69 (0x2045), checksum
        // recomputed by hand: 0x4500 + 0x023c + 0x1234 + 0x2045 + 0x3f01 + 0xc000 + 0x0201 +
        // 0xc633 + 0x6401 = 0x2a4eb -> 0xa4ed, complemented 0x5b12.
        assert_eq!(
            &out[1][14..34],
            &[
                0x45, 0x00, 0x02, 0x3c, 0x12, 0x34, 0x20, 0x45, 0x3f, 0x01, 0x5b, 0x12, 0xc0, 0x00,
                0x02, 0x01, 0xc6, 0x33, 0x64, 0x01
            ]
        );
        assert_eq!(&out[1][34..], &f[34 + 552..34 + 1104]);
    }

    #[test]
    fn options_copied_by_flag() {
        let f = with_options(&ping_frame(), 14, &OPTIONS);
        assert_eq!(expected_later_options(&OPTIONS), COPIED);
        for mtu in [68, 576, 1280] {
            let mut out = Vec::new();
            let n = fragment_ipv4(&f, 14, mtu, &mut out).unwrap();
            assert_eq!(n, out.len());
            let first = Ipv4Packet::new_checked(&out[0][14..]).unwrap();
            assert_eq!((first.header_len(), first.options()), (40, &OPTIONS[..]));
            for later in &out[1..] {
                let p = Ipv4Packet::new_checked(&later[14..]).unwrap();
                assert_eq!((p.header_len(), p.options()), (32, &COPIED[..]));
            }
            assert_eq!(check_and_reassemble(&f, 14, mtu, &out), &f[54..]);
        }
        // No copied option at all: later fragments have a bare 20-byte header.
        let rr_only = [0x07, 0x07, 0x04, 0, 0, 0, 0, 0];
        let f = with_options(&ping_frame(), 14, &rr_only);
        let mut out = Vec::new();
        fragment_ipv4(&f, 14, 576, &mut out).unwrap();
        assert_eq!(Ipv4Packet::new_checked(&out[0][14..]).unwrap().header_len(), 28);
        assert_eq!(Ipv4Packet::new_checked(&out[1][14..]).unwrap().header_len(), 20);
        assert_eq!(check_and_reassemble(&f, 14, 576, &out), &f[42..]);
    }

    #[test]
    fn vlan_header_copied_and_padding_dropped() {
        // QinQ-tagged frame (two tags), a 100-byte packet, then 20 bytes of junk.
        let mut f = PING_HDR[..12].to_vec();
        f.extend_from_slice(&[0x88, 0xa8, 0x00, 0x0a, 0x81, 0x00, 0x00, 0x64, 0x08, 0x00]);
        let l3 = f.len();
        let mut ip = PING_HDR[14..34].to_vec();
        ip.extend((0..80).map(|i| i as u8));
        let mut p = Ipv4Packet::new_unchecked(&mut ip[..]);
        p.set_total_len(100);
        p.fill_checksum();
        f.extend_from_slice(&ip);
        f.extend_from_slice(&[0xee; 20]);
        let mut out = Vec::new();
        assert_eq!(fragment_ipv4(&f, l3, 68, &mut out), Ok(2)); // 48 + 32 bytes
        assert_eq!(check_and_reassemble(&f, l3, 68, &out), &ip[20..]);
        assert!(out.iter().all(|o| !o.contains(&0xee)));
        // A packet that fits goes out as it is, without the padding.
        out.clear();
        assert_eq!(fragment_ipv4(&f, l3, 100, &mut out), Ok(1));
        assert_eq!(out[0], &f[..l3 + 100]);
    }

    #[test]
    fn fragments_of_a_fragment() {
        // A middle fragment (offset 2960, MF) and a last one (offset 2960, no MF) of 1480 bytes.
        for mf in [true, false] {
            let mut f = ping_frame();
            let mut p = Ipv4Packet::new_unchecked(&mut f[14..]);
            p.set_frag_offset(2960);
            p.set_more_frags(mf);
            p.fill_checksum();
            let mut out = Vec::new();
            assert_eq!(fragment_ipv4(&f, 14, 576, &mut out), Ok(3));
            let offs: Vec<(u16, bool)> = out
                .iter()
                .map(|o| {
                    let p = Ipv4Packet::new_checked(&o[14..]).unwrap();
                    (p.frag_offset(), p.more_frags())
                })
                .collect();
            assert_eq!(offs, [(2960, true), (3512, true), (4064, mf)]);
            assert_eq!(check_and_reassemble(&f, 14, 576, &out), &f[34..]);
        }
    }

    #[test]
    fn refusals() {
        let f = ping_frame();
        let mut out = Vec::new();
        // DF set.
        let mut df = f.clone();
        let mut p = Ipv4Packet::new_unchecked(&mut df[14..]);
        p.set_dont_frag(true);
        p.fill_checksum();
        assert_eq!(fragment_ipv4(&df, 14, 1280, &mut out), Err(Error::Malformed));
        assert_eq!(fragment_ipv4(&df, 14, 1500, &mut out), Ok(1), "fits: DF is fine");
        out.clear();
        // MTU below 68.
        assert_eq!(fragment_ipv4(&f, 14, 67, &mut out), Err(Error::BufferTooSmall));
        assert_eq!(fragment_ipv4(&f, 14, 0, &mut out), Err(Error::BufferTooSmall));
        // Not IPv4 / truncated.
        let mut v6 = f.clone();
        v6[14] = 0x60;
        assert_eq!(fragment_ipv4(&v6, 14, 576, &mut out), Err(Error::BadVersion));
        assert_eq!(fragment_ipv4(&f[..1000], 14, 576, &mut out), Err(Error::Truncated));
        assert_eq!(fragment_ipv4(&f[..10], 14, 576, &mut out), Err(Error::Truncated));
        assert_eq!(fragment_ipv4(&f, 1600, 576, &mut out), Err(Error::Truncated));
        // An option running past the header; a zero option length.
        let bad = with_options(&f, 14, &[0x83, 0x09, 0x04, 0x00]);
        assert_eq!(fragment_ipv4(&bad, 14, 576, &mut out), Err(Error::BadLength));
        let bad = with_options(&f, 14, &[0x01, 0x94, 0x00, 0x00]);
        assert_eq!(fragment_ipv4(&bad, 14, 576, &mut out), Err(Error::BadLength));
        let bad = with_options(&f, 14, &[0x01, 0x01, 0x01, 0x94]);
        assert_eq!(fragment_ipv4(&bad, 14, 576, &mut out), Err(Error::BadLength));
        // Offsets beyond the 13-bit field.
        let mut far = f.clone();
        let mut p = Ipv4Packet::new_unchecked(&mut far[14..]);
        p.set_frag_offset(65000);
        p.fill_checksum();
        assert_eq!(fragment_ipv4(&far, 14, 576, &mut out), Err(Error::BadLength));
        assert!(out.is_empty(), "nothing pushed on error");
        // The same packet but at the highest offset whose fragments still fit.
        let mut edge = f.clone();
        let mut p = Ipv4Packet::new_unchecked(&mut edge[14..]);
        p.set_frag_offset((MAX_OFFSET - 2 * 552) as u16);
        p.fill_checksum();
        assert_eq!(fragment_ipv4(&edge, 14, 576, &mut out), Ok(3));
    }

    /// A random options area: single-octet and TLV options with random types (copied or not).
    fn options() -> impl Strategy<Value = Vec<u8>> {
        let opt = prop_oneof![
            Just(vec![1u8]),
            (2u8..=255, proptest::collection::vec(any::<u8>(), 0..=6)).prop_map(|(t, d)| {
                let mut o = vec![t, d.len() as u8 + 2];
                o.extend(d);
                o
            }),
        ];
        proptest::collection::vec(opt, 0..6).prop_map(|v| {
            let mut o: Vec<u8> = v.concat();
            o.truncate(40);
            // Truncating may cut a TLV: end the list there with EOL instead.
            let mut i = 0;
            while i < o.len() {
                if o[i] == 1 {
                    i += 1;
                } else if i + 1 < o.len() && i + o[i + 1] as usize <= o.len() {
                    i += o[i + 1] as usize;
                } else {
                    o[i] = 0;
                    break;
                }
            }
            while !o.len().is_multiple_of(4) {
                o.push(0);
            }
            o
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn reassembly_is_exact(
            data_len in 0usize..9000,
            opts in options(),
            l3 in prop_oneof![Just(14usize), Just(18), Just(22), 0usize..40],
            mtu in 68usize..9100,
            pad in 0usize..64,
            mf in any::<bool>(),
            off_blocks in 0usize..8192,
            seed in any::<u8>(),
        ) {
            let hl = 20 + opts.len();
            let total = hl + data_len;
            prop_assume!(total <= 65535);
            // The original's own offset: anywhere its data still ends within 65535 bytes.
            let base = (off_blocks * 8).min((65535 - total) / 8 * 8);
            let mut f: Vec<u8> = (0..l3).map(|i| (i as u8) ^ 0x5a).collect();
            f.extend_from_slice(&PING_HDR[14..34]);
            f.extend_from_slice(&opts);
            f.extend((0..data_len).map(|i| (i as u8).wrapping_mul(7).wrapping_add(seed)));
            f.extend(std::iter::repeat_n(0xee, pad));
            let mut p = Ipv4Packet::new_unchecked(&mut f[l3..]);
            p.set_header_len(hl);
            p.set_total_len(total as u16);
            p.set_frag_offset(base as u16);
            p.set_more_frags(mf);
            p.fill_checksum();

            let mut out = vec![vec![1, 2, 3]]; // pushes append
            let n = fragment_ipv4(&f, l3, mtu, &mut out).unwrap();
            prop_assert_eq!(n, out.len() - 1);
            prop_assert_eq!(n == 1, total <= mtu);
            let data = check_and_reassemble(&f, l3, mtu, &out[1..]);
            prop_assert_eq!(&data[..], &f[l3 + hl..l3 + total]);
            if total > mtu {
                // As few fragments as 8-byte blocks allow.
                let first = (mtu - hl) & !7;
                let rest = (mtu - 20 - expected_later_options(&opts).len()) & !7;
                prop_assert_eq!(n, 1 + (data_len - first).div_ceil(rest));
            }
        }

        #[test]
        fn never_panics(
            frame in proptest::collection::vec(any::<u8>(), 0..2000),
            l3 in 0usize..64,
            mtu in 0usize..2100,
            v4 in any::<bool>(),
        ) {
            let mut frame = frame;
            if v4 && frame.len() > l3 {
                frame[l3] = 0x40 | (frame[l3] & 0x0f);
            }
            let mut out = Vec::new();
            match fragment_ipv4(&frame, l3, mtu, &mut out) {
                Ok(n) => {
                    prop_assert_eq!(n, out.len());
                    for f in &out {
                        let p = Ipv4Packet::new_checked(&f[l3..]).unwrap();
                        prop_assert!(usize::from(p.total_len()) <= mtu);
                        // A packet that fits goes out as it came, checksum included.
                        prop_assert!(n == 1 || p.verify_checksum());
                    }
                }
                Err(_) => prop_assert!(out.is_empty()),
            }
        }
    }
}
