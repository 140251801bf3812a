//! The bench's pipeline before it runs: two in-memory ports (and their VLAN sub-interfaces),
//! the FIB filled from a synthetic table or a route file, and one frame per flow (or a
//! capture's frames).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;

use dataplane::fib::{DEFAULT_NEXT_HOPS, FibControl, PortInfo};
use wire::MacAddr;
use wire::build::{UdpFlow, udp_frame, udp_frame_vlan};

use crate::synth::{self, Rng};
use crate::{BenchConfig, BenchError, RX_MAC, RouteSource, TX_MAC};

const SENDER_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0xaa]);
/// Distinct gateways the synthetic table's routes point to.
const SYNTH_GATEWAYS: usize = 1024;
/// VLAN ids of the `vlan` bench's input and output sub-interfaces.
const IN_VLAN: u16 = 10;
const OUT_VLAN: u16 = 20;

/// The prepared pipeline of one bench.
pub(crate) struct Prepared {
    pub ctl: FibControl,
    pub ports: Vec<PortInfo>,
    pub frames: Vec<Vec<u8>>,
    /// Routes installed.
    pub routes: usize,
}

/// The routes of a bench and one destination per flow, each inside one of them.
struct Table {
    routes: usize,
    dsts: Vec<IpAddr>,
}

fn gateway(i: usize, ipv6: bool) -> (IpAddr, MacAddr) {
    let mac = MacAddr([0x02, 0, 0, 0x01, (i >> 8) as u8, i as u8]);
    let ip = if ipv6 {
        IpAddr::V6(Ipv6Addr::new(0x2001, 2, 0, 0x20, 0, 0, 0, i as u16 + 2))
    } else {
        IpAddr::V4(Ipv4Addr::from(u32::from(Ipv4Addr::new(198, 19, 0, 2)) + i as u32))
    };
    (ip, mac)
}

pub(crate) fn prepare(cfg: &BenchConfig) -> Result<Prepared, BenchError> {
    let mut ports = vec![PortInfo::new("mem0", RX_MAC, 0), PortInfo::new("mem1", TX_MAC, 1)];
    if cfg.vlan {
        ports.push(PortInfo { vlan: Some(IN_VLAN), ..PortInfo::new("mem0.10", RX_MAC, 0) });
        ports.push(PortInfo { vlan: Some(OUT_VLAN), ..PortInfo::new("mem1.20", TX_MAC, 1) });
    }
    // Routes leave on mem1, or its sub-interface.
    let out: u16 = if cfg.vlan { 3 } else { 1 };
    let mut ctl = FibControl::new(DEFAULT_NEXT_HOPS);
    let mut rng = Rng::new(cfg.seed ^ 0x5eed);
    let table = match &cfg.routes {
        RouteSource::Synthetic(n) => synthetic_routes(cfg, *n, &mut ctl, out, &mut rng)?,
        RouteSource::File(path) => file_routes(cfg, path, &mut ctl, out, &mut rng)?,
    };
    let (frames, ports) = match &cfg.pcap {
        Some(path) => pcap_frames(path, ports)?,
        None => (flow_frames(cfg, &table.dsts)?, ports),
    };
    Ok(Prepared { ctl, ports, frames, routes: table.routes })
}

/// A synthetic table of `n` prefixes over [`SYNTH_GATEWAYS`] resolved gateways, and one
/// destination per flow, each inside a randomly chosen prefix.
fn synthetic_routes(
    cfg: &BenchConfig,
    n: usize,
    ctl: &mut FibControl,
    out: u16,
    rng: &mut Rng,
) -> Result<Table, BenchError> {
    for g in 0..SYNTH_GATEWAYS {
        let (ip, mac) = gateway(g, cfg.ipv6);
        ctl.set_neighbour(ip, out, mac)?;
    }
    let mut dsts = Vec::with_capacity(cfg.flows);
    if cfg.ipv6 {
        let table = synth::v6_prefixes(n, cfg.seed);
        for (i, &(p, l)) in table.iter().enumerate() {
            let (gw, _) = gateway(i % SYNTH_GATEWAYS, true);
            ctl.add_route(IpAddr::V6(Ipv6Addr::from(p)), l, gw, out)?;
        }
        for _ in 0..cfg.flows {
            let (p, l) = table[rng.below(table.len() as u64) as usize];
            dsts.push(IpAddr::V6(Ipv6Addr::from(synth::v6_inside(p, l, rng))));
        }
    } else {
        let table = synth::v4_prefixes(n, cfg.seed);
        for (i, &(p, l)) in table.iter().enumerate() {
            let (gw, _) = gateway(i % SYNTH_GATEWAYS, false);
            ctl.add_route(IpAddr::V4(Ipv4Addr::from(p)), l, gw, out)?;
        }
        for _ in 0..cfg.flows {
            let (p, l) = table[rng.below(table.len() as u64) as usize];
            dsts.push(IpAddr::V4(Ipv4Addr::from(synth::v4_inside(p, l, rng))));
        }
    }
    Ok(Table { routes: n, dsts })
}

/// The routes of a route file, each gateway resolved to a MAC of its own, and one
/// destination per flow inside a randomly chosen route of the bench's address family.
fn file_routes(
    cfg: &BenchConfig,
    path: &Path,
    ctl: &mut FibControl,
    out: u16,
    rng: &mut Rng,
) -> Result<Table, BenchError> {
    let table = config::routefile::load(path)?;
    let mut gateways = std::collections::HashMap::new();
    for r in &table {
        // The bench has one output port: `dev` names nothing it could use.
        let Some(next_hop) = r.next_hop else {
            return Err(BenchError::Invalid(format!(
                "{}:{}: directly connected routes (`dev` without a next hop) are not supported by bench",
                path.display(),
                r.line
            )));
        };
        let next = gateways.len();
        let g = *gateways.entry(next_hop).or_insert(next);
        let mac = MacAddr([0x02, 0, 0, 0x01, (g >> 8) as u8, g as u8]);
        ctl.set_neighbour(next_hop, out, mac)?;
        ctl.add_route(r.prefix.addr, r.prefix.len, next_hop, out)?;
    }
    let family: Vec<_> = table.iter().filter(|r| r.prefix.addr.is_ipv6() == cfg.ipv6).collect();
    if family.is_empty() && cfg.pcap.is_none() {
        let fam = if cfg.ipv6 { "IPv6" } else { "IPv4" };
        return Err(BenchError::Invalid(format!(
            "{}: no {fam} routes to send flows to",
            path.display()
        )));
    }
    let mut dsts = Vec::new();
    for _ in 0..cfg.flows.min(if family.is_empty() { 0 } else { usize::MAX }) {
        let r = family[rng.below(family.len() as u64) as usize];
        dsts.push(match r.prefix.addr {
            IpAddr::V4(a) => {
                IpAddr::V4(Ipv4Addr::from(synth::v4_inside(a.into(), r.prefix.len, rng)))
            }
            IpAddr::V6(a) => {
                IpAddr::V6(Ipv6Addr::from(synth::v6_inside(a.into(), r.prefix.len, rng)))
            }
        });
    }
    Ok(Table { routes: table.len(), dsts })
}

/// Frames from a capture; the input port takes the first unicast destination MAC found so
/// that the capture's frames are addressed to it.
fn pcap_frames(
    path: &Path,
    mut ports: Vec<PortInfo>,
) -> Result<(Vec<Vec<u8>>, Vec<PortInfo>), BenchError> {
    let frames: Vec<Vec<u8>> = io::pcap::read_file(path)?.into_iter().map(|r| r.data).collect();
    if frames.is_empty() {
        return Err(BenchError::Invalid(format!("{}: capture holds no frames", path.display())));
    }
    if let Some(mac) = frames
        .iter()
        .filter(|f| f.len() >= 6)
        .map(|f| MacAddr(f[..6].try_into().unwrap()))
        .find(|m| !m.is_multicast())
    {
        ports[0].mac = mac;
    }
    Ok((frames, ports))
}

fn flow_frames(cfg: &BenchConfig, dsts: &[IpAddr]) -> Result<Vec<Vec<u8>>, BenchError> {
    let min = if cfg.ipv6 { 62 } else { 60 };
    if cfg.frame_size < min || cfg.frame_size > 1514 {
        return Err(BenchError::Invalid(format!(
            "frame size {} out of range: {min}..=1514 bytes (Ethernet frame without FCS)",
            cfg.frame_size
        )));
    }
    let mut frames = Vec::with_capacity(dsts.len());
    for (i, &dst) in dsts.iter().enumerate() {
        let (src, src_port) = synth::flow_source(i, cfg.ipv6);
        let flow = UdpFlow {
            src_mac: SENDER_MAC,
            dst_mac: RX_MAC,
            src,
            dst,
            src_port,
            dst_port: 2000,
            ttl: 64,
        };
        let mut buf = vec![0u8; 2048];
        let built = if cfg.vlan {
            udp_frame_vlan(&flow, IN_VLAN, cfg.frame_size + 4, &mut buf)
        } else {
            udp_frame(&flow, cfg.frame_size, &mut buf)
        };
        let len = built.map_err(|e| BenchError::Invalid(format!("building flow {i}: {e}")))?;
        buf.truncate(len);
        frames.push(buf);
    }
    Ok(frames)
}
