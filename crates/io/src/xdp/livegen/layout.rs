//! What the generator's program reads, computed in user space: where the headers sit in the
//! template, and the values of its maps. Checksums are one's-complement sums (RFC 1071) of
//! 16-bit words taken in the host's byte order, as the program loads them: the sum of
//! byte-swapped words is the byte-swapped sum (RFC 1071 section 2(B)), so the program stores
//! the result as loaded and the bytes come out in network order. Everything constant per
//! frame size or per endpoint is summed here; the program adds three partial sums and folds.

use std::net::IpAddr;

use super::{FrameSize, LiveGenError, Spec};

/// Bytes of one endpoint's value: address (4 or 16 bytes) at 0, port (network order) at 16,
/// sum of the address's words at 20, that sum plus the port at 24.
pub(super) const ENDPOINT_VALUE: usize = 32;
pub(super) const EP_ADDR: i16 = 0;
pub(super) const EP_PORT: i16 = 16;
pub(super) const EP_ADDR_SUM: i16 = 20;
pub(super) const EP_SUM: i16 = 24;

/// Bytes of one frame size's value: frame length (u32) at 0, the IP length field as sent
/// (IPv4 total length or IPv6 payload length, network order) at 4, the UDP length as sent at
/// 6, the IPv4 header's sum without addresses at 8, the UDP checksum's sum without
/// addresses and ports at 12.
pub(super) const SIZE_VALUE: usize = 16;
pub(super) const SZ_FRAME_LEN: i16 = 0;
pub(super) const SZ_IP_LEN: i16 = 4;
pub(super) const SZ_UDP_LEN: i16 = 6;
pub(super) const SZ_IP_SUM: i16 = 8;
pub(super) const SZ_UDP_SUM: i16 = 12;

/// The one value of the state map: the indices of the next frame's source, destination and
/// size (u32 each), 4 spare bytes, then the number of runs so far (u64).
pub(super) const STATE_VALUE: usize = 24;
pub(super) const ST_RUNS: i16 = 16;

const UDP: u8 = 17;
const UDP_HEADER: usize = 8;

/// Where the headers are in the template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Offset of the IP header (14, or 18 after an 802.1Q tag).
    pub l3: usize,
    pub ipv6: bool,
}

impl Layout {
    /// Offset of the UDP header.
    pub fn l4(&self) -> usize {
        self.l3 + if self.ipv6 { 40 } else { 20 }
    }

    /// First byte after the UDP header: what the program writes lies before it.
    pub fn headers_end(&self) -> usize {
        self.l4() + UDP_HEADER
    }

    /// Checks the template: Ethernet, at most one 802.1Q tag, IPv4 without options or IPv6
    /// without extension headers, UDP, a payload of zeros (a frame grown by
    /// `bpf_xdp_adjust_tail` gets zeros, and the checksums assume them).
    pub fn of(t: &[u8]) -> Result<Layout, LiveGenError> {
        let bad = |what: &str| Err(LiveGenError::Template(what.to_owned()));
        let ethertype = |at: usize| t.get(at..at + 2).map(|b| u16::from_be_bytes([b[0], b[1]]));
        let (l3, et) = match ethertype(12) {
            Some(0x8100) => (18, ethertype(16)),
            et => (14, et),
        };
        let layout = match et {
            Some(0x0800) => Layout { l3, ipv6: false },
            Some(0x86dd) => Layout { l3, ipv6: true },
            _ => return bad("not an IPv4 or IPv6 frame (EtherType, after at most one 802.1Q tag)"),
        };
        if t.len() < layout.headers_end() {
            return bad("shorter than its headers");
        }
        let proto = if layout.ipv6 {
            (t[l3] >> 4 == 6).then_some(t[l3 + 6])
        } else {
            (t[l3] == 0x45).then_some(t[l3 + 9])
        };
        match proto {
            None => bad("an IP header of the wrong version, or IPv4 with options"),
            Some(UDP) if t[layout.headers_end()..].iter().all(|&b| b == 0) => Ok(layout),
            Some(UDP) => bad("the UDP payload must be zeros"),
            Some(_) => bad("not UDP (or an IPv6 extension header)"),
        }
    }
}

/// One's-complement sum of `bytes` (even length) as host-order 16-bit words, not folded.
fn sum(bytes: &[u8]) -> u32 {
    bytes
        .chunks(2)
        .map(|w| u32::from(u16::from_ne_bytes([w[0], w.get(1).copied().unwrap_or(0)])))
        .sum()
}

fn push_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_ne_bytes());
}

/// The values of the sources' or destinations' map.
pub(super) fn endpoints(layout: Layout, list: &[(IpAddr, u16)]) -> Result<Vec<u8>, LiveGenError> {
    let mut out = Vec::with_capacity(list.len() * ENDPOINT_VALUE);
    for &(addr, port) in list {
        let mut a = [0u8; 16];
        let octets = match addr {
            IpAddr::V4(v4) if !layout.ipv6 => &v4.octets()[..],
            IpAddr::V6(v6) if layout.ipv6 => &v6.octets()[..],
            _ => {
                return Err(LiveGenError::Template(format!(
                    "endpoint {addr} is not of the template's address family"
                )));
            }
        };
        a[..octets.len()].copy_from_slice(octets);
        out.extend_from_slice(&a);
        out.extend_from_slice(&port.to_be_bytes());
        out.extend_from_slice(&[0, 0]);
        let addr_sum = sum(octets);
        push_u32(&mut out, addr_sum);
        push_u32(&mut out, addr_sum + sum(&port.to_be_bytes()));
        push_u32(&mut out, 0);
    }
    Ok(out)
}

/// The values of the frame sizes' map.
pub(super) fn sizes(layout: Layout, spec: &Spec) -> Result<Vec<u8>, LiveGenError> {
    let mut out = Vec::with_capacity(spec.sizes.len() * SIZE_VALUE);
    let ip_header = layout.l4() - layout.l3;
    for &FrameSize { frame_len, ip_len } in spec.sizes {
        if ip_len < ip_header + UDP_HEADER
            || frame_len < layout.l3 + ip_len
            || frame_len > spec.template.len()
        {
            return Err(LiveGenError::Template(format!(
                "frame size {frame_len} with {ip_len} bytes of IP does not fit the headers and the {}-byte template",
                spec.template.len()
            )));
        }
        let udp_len = ((ip_len - ip_header) as u16).to_be_bytes();
        let ip_field = if layout.ipv6 { udp_len } else { (ip_len as u16).to_be_bytes() };
        let mut header = [0u8; 20];
        let mut ip_sum = 0;
        if !layout.ipv6 {
            // The header without its checksum and addresses, with this size's total length.
            header.copy_from_slice(&spec.template[layout.l3..layout.l3 + 20]);
            header[2..4].copy_from_slice(&ip_field);
            header[10..].fill(0);
            ip_sum = sum(&header);
        }
        // Pseudo-header protocol and length (RFC 768; RFC 8200 section 8.1), and the UDP
        // length field; the checksum field counts as zero, the payload is zeros.
        let udp_sum = sum(&[0, UDP]) + 2 * sum(&udp_len);
        push_u32(&mut out, frame_len as u32);
        out.extend_from_slice(&ip_field);
        out.extend_from_slice(&udp_len);
        push_u32(&mut out, ip_sum);
        push_u32(&mut out, udp_sum);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(et: [u8; 2], vlan: bool, ip: &[u8], len: usize) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        if vlan {
            f.extend_from_slice(&[0x81, 0x00, 0x00, 0x0a]);
        }
        f.extend_from_slice(&et);
        f.extend_from_slice(ip);
        f.resize(len, 0);
        f
    }

    fn v4_header() -> Vec<u8> {
        let mut h = vec![0u8; 20];
        h[0] = 0x45;
        h[9] = 17;
        h
    }

    #[test]
    fn finds_the_headers() {
        let v4 = v4_header();
        assert_eq!(
            Layout::of(&frame([8, 0], false, &v4, 60)).unwrap(),
            Layout { l3: 14, ipv6: false }
        );
        assert_eq!(
            Layout::of(&frame([8, 0], true, &v4, 64)).unwrap(),
            Layout { l3: 18, ipv6: false }
        );
        let mut v6 = vec![0u8; 40];
        v6[0] = 0x60;
        v6[6] = 17;
        let l = Layout::of(&frame([0x86, 0xdd], false, &v6, 62)).unwrap();
        assert_eq!((l.l3, l.ipv6, l.l4(), l.headers_end()), (14, true, 54, 62));
    }

    #[test]
    fn refuses_what_it_cannot_rewrite() {
        let v4 = v4_header();
        let mut tcp = v4.clone();
        tcp[9] = 6;
        let mut options = v4.clone();
        options[0] = 0x46;
        let mut payload = frame([8, 0], false, &v4, 60);
        payload[50] = 1;
        for (what, f) in [
            ("ARP", frame([8, 6], false, &v4, 60)),
            ("TCP", frame([8, 0], false, &tcp, 60)),
            ("IPv4 options", frame([8, 0], false, &options, 60)),
            ("too short", frame([8, 0], false, &v4, 40)),
            ("payload", payload),
            ("IPv6 ethertype, IPv4 header", frame([0x86, 0xdd], false, &v4, 62)),
            ("empty", Vec::new()),
        ] {
            assert!(Layout::of(&f).is_err(), "{what}");
        }
    }

    #[test]
    fn endpoint_values_hold_the_sums() {
        let l = Layout { l3: 14, ipv6: false };
        let v = endpoints(l, &[("198.18.10.1".parse().unwrap(), 2000)]).unwrap();
        assert_eq!(v.len(), ENDPOINT_VALUE);
        assert_eq!(&v[..4], &[198, 18, 10, 1]);
        assert_eq!(&v[16..18], &2000u16.to_be_bytes());
        let addr_sum = u32::from_ne_bytes(v[20..24].try_into().unwrap());
        assert_eq!(addr_sum, sum(&[198, 18, 10, 1]));
        assert_eq!(
            u32::from_ne_bytes(v[24..28].try_into().unwrap()),
            addr_sum + sum(&2000u16.to_be_bytes())
        );
        assert!(endpoints(l, &[("2001:db8::1".parse().unwrap(), 1)]).is_err(), "family mismatch");
    }

    #[test]
    fn sizes_must_fit_the_template() {
        let t = frame([8, 0], false, &v4_header(), 60);
        let spec = |sizes: &'static [FrameSize]| Spec {
            template: &t,
            sources: &[],
            destinations: &[],
            sizes,
        };
        let l = Layout::of(&t).unwrap();
        assert_eq!(
            sizes(l, &spec(&[FrameSize { frame_len: 60, ip_len: 46 }])).unwrap().len(),
            SIZE_VALUE
        );
        assert!(
            sizes(l, &spec(&[FrameSize { frame_len: 61, ip_len: 46 }])).is_err(),
            "larger than the template"
        );
        assert!(
            sizes(l, &spec(&[FrameSize { frame_len: 60, ip_len: 27 }])).is_err(),
            "no room for UDP"
        );
        assert!(
            sizes(l, &spec(&[FrameSize { frame_len: 50, ip_len: 46 }])).is_err(),
            "IP beyond the frame"
        );
    }
}
