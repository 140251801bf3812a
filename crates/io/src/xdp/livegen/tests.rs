//! The generator's program run by BPF_PROG_RUN in test mode (no interface; needs root) on
//! real frames built by the `wire` crate, each output checked with wire's checked views and
//! against the frame wire builds for the same flow and size.

use std::collections::HashSet;
use std::net::IpAddr;

use wire::build::{UdpFlow, udp_frame_ip_len};
use wire::{EtherType, EthernetFrame, Ipv4Packet, Ipv6Packet, MacAddr, UdpPacket, parse_l2};

use super::*;

const SRC_MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
const DST_MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 2]);
const IMIX: [usize; 3] = [40, 576, 1500];

fn endpoints(first: &str, n: u128, port: u16, ports: u16) -> Vec<(IpAddr, u16)> {
    let mut out = Vec::new();
    for p in 0..ports {
        for i in 0..n {
            let addr = match first.parse::<IpAddr>().unwrap() {
                IpAddr::V4(a) => IpAddr::V4((u32::from(a) + i as u32).into()),
                IpAddr::V6(a) => IpAddr::V6((u128::from(a) + i).into()),
            };
            out.push((addr, port + p));
        }
    }
    out
}

/// The frame wire builds for this flow, IP length and VLAN: what the program must make.
fn expected(src: (IpAddr, u16), dst: (IpAddr, u16), ip_len: usize, vlan: Option<u16>) -> Vec<u8> {
    let flow = UdpFlow {
        src_mac: SRC_MAC,
        dst_mac: DST_MAC,
        src: src.0,
        dst: dst.0,
        src_port: src.1,
        dst_port: dst.1,
        ttl: 64,
    };
    let mut buf = vec![0u8; 2048];
    let len = udp_frame_ip_len(&flow, ip_len, &mut buf).unwrap();
    buf.truncate(len);
    if let Some(vid) = vlan {
        let [hi, lo] = vid.to_be_bytes();
        buf.splice(12..12, [0x81, 0x00, hi, lo]);
    }
    buf
}

/// Checks `f` with wire's checked views: a UDP frame with both checksums right (a UDP
/// checksum is required, even over IPv4). Returns its 5-tuple without the protocol.
fn check_valid(f: &[u8]) -> (IpAddr, u16, IpAddr, u16) {
    let l2 = parse_l2(f).unwrap();
    EthernetFrame::new_checked(f).unwrap();
    let ip = &f[l2.l3_offset..];
    match l2.ethertype {
        EtherType::Ipv4 => {
            let p = Ipv4Packet::new_checked(ip).unwrap();
            assert!(p.verify_checksum(), "IPv4 header checksum");
            let u = UdpPacket::new_checked(p.payload()).unwrap();
            assert!(
                u.checksum() != 0 && u.verify_checksum_v4(&p.src_addr(), &p.dst_addr()),
                "UDP checksum"
            );
            (p.src_addr().into(), u.src_port(), p.dst_addr().into(), u.dst_port())
        }
        EtherType::Ipv6 => {
            let p = Ipv6Packet::new_checked(ip).unwrap();
            let u = UdpPacket::new_checked(p.payload()).unwrap();
            assert!(u.verify_checksum_v6(&p.src_addr(), &p.dst_addr()), "UDP checksum");
            (p.src_addr().into(), u.src_port(), p.dst_addr().into(), u.dst_port())
        }
        other => panic!("EtherType {other:?}"),
    }
}

struct Case {
    sources: Vec<(IpAddr, u16)>,
    destinations: Vec<(IpAddr, u16)>,
    ip_lens: Vec<usize>,
    vlan: Option<u16>,
}

impl Case {
    fn frame(&self, i: usize) -> Vec<u8> {
        let (s, d) = (self.sources.len(), self.destinations.len());
        expected(
            self.sources[i % s],
            self.destinations[(i / s) % d],
            self.ip_lens[(i / (s * d)) % self.ip_lens.len()],
            self.vlan,
        )
    }

    fn generator(&self) -> Generator {
        let frames: Vec<Vec<u8>> = (0..self.ip_lens.len())
            .map(|k| self.frame(k * self.sources.len() * self.destinations.len()))
            .collect();
        let template = frames.iter().max_by_key(|f| f.len()).unwrap().clone();
        let l3 = if self.vlan.is_some() { 18 } else { 14 };
        // wire raises an IP length to the least that holds the headers.
        let least = if self.sources[0].0.is_ipv4() { 28 } else { 48 };
        let sizes: Vec<FrameSize> = frames
            .iter()
            .zip(&self.ip_lens)
            .map(|(f, &ip)| FrameSize { frame_len: f.len(), ip_len: ip.max(least) })
            .collect();
        assert!(sizes.iter().all(|s| s.frame_len >= l3 + s.ip_len));
        let spec = Spec {
            template: &template,
            sources: &self.sources,
            destinations: &self.destinations,
            sizes: &sizes,
        };
        Generator::load(&spec).expect("generator loads")
    }

    /// Runs the program `n` times, each on what `input` gives for the previous output (a
    /// recycled page holds the frame last sent from it), and checks every frame.
    fn run(&self, n: usize, mut input: impl FnMut(&[u8], usize) -> Vec<u8>) -> Vec<Vec<u8>> {
        self.run_on_pages(n, |prev, i| (program::META, input(prev, i)))
    }

    /// [`run`](Self::run) with the page's metadata from `input` too.
    fn run_on_pages(
        &self,
        n: usize,
        mut input: impl FnMut(&[u8], usize) -> ([u8; 4], Vec<u8>),
    ) -> Vec<Vec<u8>> {
        let g = self.generator();
        let mut prev = g.template().to_vec();
        let mut out = Vec::new();
        for i in 0..n {
            let (meta, frame) = input(&prev, i);
            let (verdict, f) = g.run_on_page(meta, &frame).unwrap();
            assert!(Generator::sends(verdict), "run {i}: verdict {verdict}");
            check_valid(&f);
            assert_eq!(f, self.frame(i), "run {i}");
            prev = f.clone();
            out.push(f);
        }
        assert_eq!(g.runs().unwrap(), n as u64, "the run counter");
        out
    }
}

fn v4_case(ip_lens: Vec<usize>, vlan: Option<u16>) -> Case {
    Case {
        sources: endpoints("198.18.10.1", 20, 2000, 1),
        destinations: endpoints("198.19.10.1", 100, 2000, 1),
        ip_lens,
        vlan,
    }
}

fn root() -> bool {
    let root = crate::netdev::is_root();
    if !root {
        crate::netdev::skip_test("needs root");
    }
    root
}

#[test]
fn ipv4_frames_cycle_through_every_flow() {
    if !root() {
        return;
    }
    let case = v4_case(vec![46], None);
    let frames = case.run(4100, |prev, _| prev.to_vec());
    let flows: HashSet<_> = frames.iter().map(|f| check_valid(f)).collect();
    assert_eq!(flows.len(), 2000, "20 x 100 flows");
    assert!(frames.iter().all(|f| f.len() == 60));
    assert_eq!(frames[0], frames[2000], "the cycle starts again");
    assert_ne!(frames[0], frames[1]);
}

#[test]
fn ipv6_with_a_vlan_tag_and_several_ports() {
    if !root() {
        return;
    }
    let case = Case {
        sources: endpoints("2001:2:0:10::1", 3, 1000, 2),
        destinations: endpoints("2001:2:0:20::fffe", 4, 53, 1),
        ip_lens: vec![48],
        vlan: Some(10),
    };
    let frames = case.run(60, |prev, _| prev.to_vec());
    assert!(frames.iter().all(|f| f.len() == 66 && f[12..16] == [0x81, 0x00, 0x00, 0x0a]));
    // Destinations cross from ...:fffe to ...:1:1, the carry the table takes care of.
    let flows: HashSet<_> = frames.iter().map(|f| check_valid(f)).collect();
    assert_eq!(flows.len(), 24);
}

#[test]
fn imix_sizes_grow_and_shrink_the_frame() {
    if !root() {
        return;
    }
    let case = Case {
        sources: endpoints("198.18.10.1", 2, 2000, 1),
        destinations: endpoints("198.19.10.1", 3, 2000, 1),
        ip_lens: IMIX.to_vec(),
        vlan: None,
    };
    // Half the runs on the previous frame (a recycled page, shorter or longer than the
    // next), half on the template (a fresh page).
    let template = case.generator().template().to_vec();
    let frames = case.run(40, |prev, i| if i % 2 == 0 { prev.to_vec() } else { template.clone() });
    let lens: Vec<usize> = frames.iter().map(Vec::len).step_by(6).collect();
    assert_eq!(&lens[..6], &[60, 590, 1514, 60, 590, 1514]);
}

#[test]
fn garbage_in_the_headers_and_the_metadata_is_overwritten() {
    if !root() {
        return;
    }
    let case = v4_case(vec![46, 100], Some(7));
    let mut x = 0x9e37_79b9u32;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x
    };
    // Every byte from the Ethernet header to the UDP header's end scrambled, and the
    // metadata: the program writes all of the headers and trusts none of the metadata.
    case.run_on_pages(300, |prev, _| {
        let mut f = prev.to_vec();
        for b in &mut f[..18 + 28] {
            *b = next() as u8;
        }
        (next().to_ne_bytes(), f)
    });
}

/// What a forwarding kernel leaves in the page of a frame it received from the generator
/// (the skb shares the page): its output MACs, TTL 63 with the checksum updated (RFC 1624),
/// and the 2 bytes before the frame zeroed by its cached 16-byte link-layer header.
#[test]
fn a_frame_forwarded_in_place_comes_back_as_the_template() {
    if !root() {
        return;
    }
    let case = v4_case(vec![46], None);
    let frames = case.run_on_pages(50, |prev, _| {
        let mut f = prev.to_vec();
        f[..12].copy_from_slice(&[2, 0, 0, 0, 3, 1, 2, 0, 0, 0, 2, 1]);
        f[14 + 8] -= 1;
        let sum = u16::from_be_bytes([f[24], f[25]]);
        let (s, carry) = sum.overflowing_add(0x0100);
        f[24..26].copy_from_slice(&(s + u16::from(carry)).to_be_bytes());
        ([program::META[0], program::META[1], 0, 0], f)
    });
    assert!(frames.iter().all(|f| f[14 + 8] == 64 && f[..6] == DST_MAC.0 && f[6..12] == SRC_MAC.0));
}

/// Attached to an interface, the program must leave what the interface receives alone: only
/// the generator's runs carry its metadata.
#[test]
fn received_frames_pass_untouched() {
    if !root() {
        return;
    }
    let case = v4_case(vec![46], None);
    let g = case.generator();
    for frame in [case.frame(5), vec![0u8; 14], vec![0xff; 1514]] {
        let (verdict, out) = g.run_on_received(&frame).unwrap();
        assert!(Generator::passes(verdict), "verdict {verdict}");
        assert_eq!(out, frame);
    }
    assert_eq!(g.runs().unwrap(), 0, "no run made a frame");
}

#[test]
fn a_bad_spec_is_refused_before_loading() {
    let case = v4_case(vec![46], None);
    let t = case.frame(0);
    let v6 = endpoints("2001:db8::1", 1, 1, 1);
    let sizes = [FrameSize { frame_len: 60, ip_len: 46 }];
    let spec = |sources: &[(IpAddr, u16)], sizes: &[FrameSize]| {
        Generator::load(&Spec { template: &t, sources, destinations: &case.destinations, sizes })
            .err()
            .map(|e| e.to_string())
    };
    assert!(spec(&v6, &sizes).unwrap().contains("family"));
    assert!(spec(&[], &sizes).unwrap().contains("0 sources"));
    assert!(spec(&case.sources, &[]).unwrap().contains("0 sizes"));
}

#[test]
fn only_a_want_of_memory_is_worth_another_call() {
    let err = |code| LiveGenError::Sys {
        what: "sending".into(),
        source: std::io::Error::from_raw_os_error(code),
    };
    assert!(err(libc::ENOSPC).is_transient());
    assert!(err(libc::ENOMEM).is_transient());
    assert!(!err(libc::EPERM).is_transient());
    assert!(!LiveGenError::NoInterface("lrx".into()).is_transient());
}
