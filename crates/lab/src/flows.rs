//! Flow sets for the packet generator, in pkt-gen's terms: a source range and a destination
//! range of `ADDR[:PORT][-ADDR[:PORT]]`, every source endpoint paired with every destination
//! endpoint (flows = |src| x |dst|). The study's default is 20 sources x 100 destinations =
//! 2000 UDP flows in the 198.18.0.0/15 benchmarking range (RFC 2544 appendix C).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use wire::MacAddr;
use wire::build::{UdpFlow, udp_frame, udp_frame_ip_len};

/// Largest flow set the generator precomputes frames for.
pub const MAX_FLOWS: usize = 1 << 22;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FlowError {
    #[error(
        "bad range {0:?}: expected ADDR[:PORT][-ADDR[:PORT]] (IPv6 with a port as [ADDR]:PORT)"
    )]
    Syntax(String),
    #[error("range {0:?} goes backwards")]
    Backwards(String),
    #[error("range {0:?} mixes IPv4 and IPv6")]
    MixedFamily(String),
    #[error("source and destination ranges are of different address families")]
    FamilyMismatch,
    #[error("{0} flows is more than the {MAX_FLOWS} the generator supports")]
    TooMany(u128),
    #[error("frame: {0}")]
    Frame(String),
}

/// An inclusive range of addresses and of ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndpointRange {
    pub first: IpAddr,
    pub last: IpAddr,
    pub port_first: u16,
    pub port_last: u16,
}

fn addr_u128(a: IpAddr) -> u128 {
    match a {
        IpAddr::V4(v) => u32::from(v).into(),
        IpAddr::V6(v) => v.into(),
    }
}

fn addr_from(v: u128, like: IpAddr) -> IpAddr {
    match like {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::from(v as u32)),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::from(v)),
    }
}

/// `ADDR[:PORT]` or `[V6ADDR][:PORT]` or a bare IPv6 address.
fn endpoint(s: &str, whole: &str) -> Result<(IpAddr, Option<u16>), FlowError> {
    let bad = || FlowError::Syntax(whole.to_owned());
    if let Some(rest) = s.strip_prefix('[') {
        let (addr, tail) = rest.split_once(']').ok_or_else(bad)?;
        let addr: Ipv6Addr = addr.parse().map_err(|_| bad())?;
        let port = match tail.strip_prefix(':') {
            Some(p) => Some(p.parse().map_err(|_| bad())?),
            None if tail.is_empty() => None,
            None => return Err(bad()),
        };
        return Ok((IpAddr::V6(addr), port));
    }
    if let Ok(a) = s.parse::<IpAddr>() {
        return Ok((a, None));
    }
    let (addr, port) = s.rsplit_once(':').ok_or_else(bad)?;
    let addr: Ipv4Addr = addr.parse().map_err(|_| bad())?;
    Ok((IpAddr::V4(addr), Some(port.parse().map_err(|_| bad())?)))
}

impl EndpointRange {
    /// Parses `ADDR[:PORT][-ADDR[:PORT]]`; a missing port defaults to `default_port`, a
    /// missing second port to the first.
    pub fn parse(s: &str, default_port: u16) -> Result<EndpointRange, FlowError> {
        // Split on the '-' that separates two endpoints (IPv6 addresses hold no '-').
        let (a, b) = match s.split_once('-') {
            Some((a, b)) => (a, Some(b)),
            None => (s, None),
        };
        let (first, p1) = endpoint(a, s)?;
        let (last, p2) = match b {
            Some(b) => endpoint(b, s)?,
            None => (first, None),
        };
        if first.is_ipv4() != last.is_ipv4() {
            return Err(FlowError::MixedFamily(s.to_owned()));
        }
        let port_first = p1.unwrap_or(default_port);
        let port_last = p2.unwrap_or(port_first);
        if addr_u128(last) < addr_u128(first) || port_last < port_first {
            return Err(FlowError::Backwards(s.to_owned()));
        }
        Ok(EndpointRange { first, last, port_first, port_last })
    }

    /// Number of (address, port) endpoints.
    pub fn len(&self) -> u128 {
        (addr_u128(self.last) - addr_u128(self.first) + 1)
            * (u128::from(self.port_last - self.port_first) + 1)
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    /// The i-th endpoint: addresses vary fastest, then ports.
    pub fn get(&self, i: u128) -> (IpAddr, u16) {
        let addrs = addr_u128(self.last) - addr_u128(self.first) + 1;
        let addr = addr_from(addr_u128(self.first) + i % addrs, self.first);
        (addr, self.port_first + (i / addrs) as u16)
    }
}

/// Frame sizes to send: one size, or Simple IMIX.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sizes {
    /// Ethernet frame length without FCS.
    Frame(usize),
    /// Simple IMIX: 7 x 40, 4 x 576, 1 x 1500-byte IP packets, interleaved.
    Imix,
}

/// The IP packet lengths of one Simple IMIX cycle, interleaved so bursts stay mixed.
pub const IMIX_CYCLE: [usize; 12] = [40, 576, 40, 40, 576, 40, 1500, 40, 576, 40, 576, 40];

/// Every frame the generator sends, ready to copy: for IMIX, each flow appears with each
/// size of the cycle in turn.
pub struct FrameSet {
    pub frames: Vec<Vec<u8>>,
    pub flows: usize,
}

/// Builds the frames of `src` x `dst` flows.
pub fn frames(
    src: &EndpointRange,
    dst: &EndpointRange,
    sizes: Sizes,
    src_mac: MacAddr,
    dst_mac: MacAddr,
) -> Result<FrameSet, FlowError> {
    if src.first.is_ipv4() != dst.first.is_ipv4() {
        return Err(FlowError::FamilyMismatch);
    }
    let n = src.len() * dst.len();
    if n > MAX_FLOWS as u128 {
        return Err(FlowError::TooMany(n));
    }
    let n = n as usize;
    let per_flow = match sizes {
        Sizes::Frame(_) => 1,
        Sizes::Imix => IMIX_CYCLE.len(),
    };
    let mut out = Vec::with_capacity(n * per_flow);
    let mut buf = vec![0u8; 2048];
    // Interleave flows so consecutive frames belong to different flows (and, with RSS,
    // different queues), as traffic from many hosts would.
    for k in 0..n * per_flow {
        let f = k % n;
        let (s, sp) = src.get((f % src.len() as usize) as u128);
        let (d, dp) = dst.get((f / src.len() as usize) as u128);
        let flow =
            UdpFlow { src_mac, dst_mac, src: s, dst: d, src_port: sp, dst_port: dp, ttl: 64 };
        let len = match sizes {
            Sizes::Frame(l) => udp_frame(&flow, l, &mut buf),
            Sizes::Imix => {
                udp_frame_ip_len(&flow, IMIX_CYCLE[(k / n) % IMIX_CYCLE.len()], &mut buf)
            }
        }
        .map_err(|e| FlowError::Frame(e.to_string()))?;
        out.push(buf[..len].to_vec());
    }
    Ok(FrameSet { frames: out, flows: n })
}

/// Inserts an 802.1Q tag with VLAN id `vid` (PCP 0) after the source MAC: the frame grows
/// by the tag's 4 bytes.
pub fn tag_vlan(frame: &mut Vec<u8>, vid: u16) {
    let [hi, lo] = vid.to_be_bytes();
    frame.splice(12..12, [0x81, 0x00, hi, lo]);
}

/// The flow set in the in-kernel generator's terms ([`io::xdp::livegen::Spec`]): one template
/// and the lists it varies, sending frame for frame what [`frames`] holds, in the same order.
pub struct LiveFlows {
    /// The largest frame of the first flow.
    pub template: Vec<u8>,
    pub sources: Vec<(IpAddr, u16)>,
    pub destinations: Vec<(IpAddr, u16)>,
    pub sizes: Vec<io::xdp::livegen::FrameSize>,
    pub flows: usize,
}

impl LiveFlows {
    pub fn spec(&self) -> io::xdp::livegen::Spec<'_> {
        io::xdp::livegen::Spec {
            template: &self.template,
            sources: &self.sources,
            destinations: &self.destinations,
            sizes: &self.sizes,
        }
    }

    /// Mean frame length over the size cycle (bytes, without FCS).
    pub fn mean_frame_len(&self) -> f64 {
        self.sizes.iter().map(|s| s.frame_len as f64).sum::<f64>() / self.sizes.len() as f64
    }
}

/// Builds the [`LiveFlows`] of `src` x `dst` flows, tagged with `vlan` if given.
pub fn live_flows(
    src: &EndpointRange,
    dst: &EndpointRange,
    sizes: Sizes,
    src_mac: MacAddr,
    dst_mac: MacAddr,
    vlan: Option<u16>,
) -> Result<LiveFlows, FlowError> {
    if src.first.is_ipv4() != dst.first.is_ipv4() {
        return Err(FlowError::FamilyMismatch);
    }
    let n = src.len() * dst.len();
    if n > MAX_FLOWS as u128 {
        return Err(FlowError::TooMany(n));
    }
    let (s, sp) = src.get(0);
    let (d, dp) = dst.get(0);
    let flow = UdpFlow { src_mac, dst_mac, src: s, dst: d, src_port: sp, dst_port: dp, ttl: 64 };
    let lens: Vec<usize> = match sizes {
        Sizes::Frame(_) => vec![0],
        Sizes::Imix => IMIX_CYCLE.to_vec(),
    };
    let mut buf = vec![0u8; 2048];
    let mut frames = Vec::new();
    for ip_len in lens {
        let len = match sizes {
            Sizes::Frame(l) => udp_frame(&flow, l, &mut buf),
            Sizes::Imix => udp_frame_ip_len(&flow, ip_len, &mut buf),
        }
        .map_err(|e| FlowError::Frame(e.to_string()))?;
        let mut frame = buf[..len].to_vec();
        if let Some(vid) = vlan {
            tag_vlan(&mut frame, vid);
        }
        frames.push(frame);
    }
    let l3 = if vlan.is_some() { 18 } else { 14 };
    let ip_len = |f: &[u8]| match f[l3] >> 4 {
        4 => usize::from(u16::from_be_bytes([f[l3 + 2], f[l3 + 3]])),
        _ => 40 + usize::from(u16::from_be_bytes([f[l3 + 4], f[l3 + 5]])),
    };
    let sizes = frames
        .iter()
        .map(|f| io::xdp::livegen::FrameSize { frame_len: f.len(), ip_len: ip_len(f) })
        .collect();
    let template = frames.iter().max_by_key(|f| f.len()).expect("at least one size").clone();
    let list = |r: &EndpointRange| (0..r.len()).map(|i| r.get(i)).collect::<Vec<_>>();
    Ok(LiveFlows {
        template,
        sources: list(src),
        destinations: list(dst),
        sizes,
        flows: n as usize,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ranges() {
        let r = EndpointRange::parse("198.18.10.1:2000-198.18.10.20", 9).unwrap();
        assert_eq!((r.len(), r.port_first, r.port_last), (20, 2000, 2000));
        let r = EndpointRange::parse("198.19.10.1-198.19.10.100", 2000).unwrap();
        assert_eq!(r.len(), 100);
        assert_eq!(r.get(99), ("198.19.10.100".parse().unwrap(), 2000));
        let r = EndpointRange::parse("10.0.0.1:1000-10.0.0.2:1001", 0).unwrap();
        assert_eq!(r.len(), 4);
        assert_eq!(r.get(3), ("10.0.0.2".parse().unwrap(), 1001));
        let r = EndpointRange::parse("[2001:2::1]:53-[2001:2::4]:53", 0).unwrap();
        assert_eq!(r.len(), 4);
        let r = EndpointRange::parse("2001:2::1", 7).unwrap();
        assert_eq!((r.len(), r.port_first), (1, 7));
    }

    #[test]
    fn rejects_bad_ranges() {
        assert!(matches!(
            EndpointRange::parse("198.18.10.20-198.18.10.1", 0),
            Err(FlowError::Backwards(_))
        ));
        assert!(matches!(
            EndpointRange::parse("1.2.3.4-2001::1", 0),
            Err(FlowError::MixedFamily(_))
        ));
        assert!(matches!(EndpointRange::parse("foo", 0), Err(FlowError::Syntax(_))));
        assert!(matches!(EndpointRange::parse("1.2.3.4:99999", 0), Err(FlowError::Syntax(_))));
    }

    #[test]
    fn study_default_is_2000_flows_of_60_bytes() {
        let s = EndpointRange::parse("198.18.10.1-198.18.10.20", 2000).unwrap();
        let d = EndpointRange::parse("198.19.10.1-198.19.10.100", 2000).unwrap();
        let set = frames(
            &s,
            &d,
            Sizes::Frame(60),
            MacAddr([2, 0, 0, 0, 0, 1]),
            MacAddr([2, 0, 0, 0, 0, 2]),
        )
        .unwrap();
        assert_eq!(set.flows, 2000);
        assert!(set.frames.iter().all(|f| f.len() == 60));
        let distinct: std::collections::HashSet<_> = set.frames.iter().collect();
        assert_eq!(distinct.len(), 2000);
    }

    #[test]
    fn imix_has_the_7_4_1_mix() {
        let s = EndpointRange::parse("198.18.10.1", 2000).unwrap();
        let d = EndpointRange::parse("198.19.10.1-198.19.10.2", 2000).unwrap();
        let set = frames(&s, &d, Sizes::Imix, MacAddr([2; 6]), MacAddr([4; 6])).unwrap();
        assert_eq!(set.frames.len(), 24);
        let count = |l: usize| set.frames.iter().filter(|f| f.len() == l).count();
        // 40-byte IP packets pad to the 60-byte minimum frame; others are IP + 14.
        assert_eq!((count(60), count(590), count(1514)), (14, 8, 2));
    }

    /// The in-kernel generator's program, run in test mode (BPF_PROG_RUN; needs root), makes
    /// frame for frame what [`frames`] holds, each run on the previous run's output (what a
    /// recycled page holds).
    #[test]
    fn live_flows_send_what_frames_holds() {
        if !crate::topology::is_root() {
            crate::topology::skip_test("needs root");
            return;
        }
        let v4 = |s: &str| EndpointRange::parse(s, 2000).unwrap();
        let cases = [
            (
                v4("198.18.10.1-198.18.10.20"),
                v4("198.19.10.1-198.19.10.100"),
                Sizes::Frame(60),
                None,
                4000,
            ),
            (
                v4("198.18.10.1:1000-198.18.10.3:1001"),
                v4("198.19.10.1"),
                Sizes::Imix,
                Some(42),
                200,
            ),
            (
                v4("[2001:2::1]:9-[2001:2::2]:9"),
                v4("2001:2:0:20::1-2001:2:0:20::5"),
                Sizes::Frame(100),
                Some(7),
                30,
            ),
            (v4("2001:2::1"), v4("2001:2::2"), Sizes::Imix, None, 30),
        ];
        for (src, dst, sizes, vlan, runs) in cases {
            let (smac, dmac) = (MacAddr([2, 0, 0, 0, 0, 1]), MacAddr([2, 0, 0, 0, 0, 2]));
            let mut want = frames(&src, &dst, sizes, smac, dmac).unwrap().frames;
            if let Some(vid) = vlan {
                want.iter_mut().for_each(|f| tag_vlan(f, vid));
            }
            let live = live_flows(&src, &dst, sizes, smac, dmac, vlan).unwrap();
            let g = io::xdp::livegen::Generator::load(&live.spec()).unwrap();
            let mut prev = live.template.clone();
            for i in 0..runs {
                let (verdict, f) = g.run_on(&prev).unwrap();
                assert!(io::xdp::livegen::Generator::sends(verdict));
                assert_eq!(f, want[i % want.len()], "{src:?} {sizes:?} {vlan:?}: frame {i}");
                prev = f;
            }
        }
    }
}
