//! AF_PACKET ports: a TPACKET_V3 rx ring and a TPACKET_V2 tx ring per interface
//! (kernel doc `networking/packet_mmap.rst`).
//!
//! ```no_run
//! use io::afpacket::{self, PacketConfig};
//! use io::{Batch, FramePool, RxPort, TxPort};
//! let (mut rx, mut tx) = afpacket::open("eth1", &PacketConfig { port: 1, ..Default::default() })?;
//! let mut pool = FramePool::new(4096);
//! let mut batch = Batch::new();
//! rx.rx_burst(&mut pool, &mut batch, 64);
//! tx.tx_burst(&mut pool, &mut batch);
//! # Ok::<(), afpacket::PacketError>(())
//! ```
//!
//! Rx and tx use separate sockets. The rx socket ignores outgoing frames
//! (PACKET_IGNORE_OUTGOING), so a router does not read back what it sends, and can join a
//! fanout group so several workers share an interface, both directions of each flow staying
//! on one worker. The tx socket bypasses the qdisc layer (PACKET_QDISC_BYPASS). Frames are copied
//! between the rings and the [`FramePool`](crate::FramePool), once each way.
//!
//! For the slow path's occasional frames (ARP replies, ICMP errors, fragments, what the host
//! stack sends) there is [`RawSender`]: a plain socket, one `send(2)` per frame, no ring.
//!
//! All `unsafe` is in `sys` (syscalls, the mapping), the two places in `rx`/`tx` that touch
//! ring memory and the `send(2)` in `raw`; the walking arithmetic is in [`ring`], pure and
//! unit-tested.

mod raw;
pub mod ring;
mod rx;
mod rx_offload;
mod sys;
pub mod toeplitz;
mod tx;

use std::io;
use std::os::fd::OwnedFd;

pub use raw::RawSender;
pub use rx::{KernelStats, PacketRx, RxCounters};
pub use tx::{PacketTx, TxErrors};

use ring::{RxGeometry, TxGeometry};
use sys::Mapping;

const ETH_P_ALL: u16 = libc::ETH_P_ALL as u16;
/// linux/if_packet.h: fanout mode "the attached eBPF program chooses", and the option that
/// attaches it.
const PACKET_FANOUT_EBPF: libc::c_uint = 7;
const PACKET_FANOUT_DATA: libc::c_int = 22;
/// Frame size of both rings: a 1514-byte frame plus the ring headers fits.
pub const RING_FRAME_SIZE: u32 = 2048;

/// How to open an interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketConfig {
    /// Join this PACKET_FANOUT group (with defrag) so that several rx sockets on the
    /// interface share its frames, each flow going to one of them, both directions to the
    /// same one. Ids are per namespace.
    pub fanout: Option<u16>,
    /// Spread the fanout group by the Toeplitz hash with the symmetric key (an eBPF program,
    /// [`toeplitz`]) instead of the kernel's flow hash (`PACKET_FANOUT_HASH`, symmetric too:
    /// net/packet/af_packet.c `fanout_demux_hash` uses `__skb_get_hash_symmetric`, which
    /// orders the addresses and ports before hashing and ignores the NIC's hash).
    pub fanout_rss: bool,
    /// Rx ring block size in bytes (multiple of 4096).
    pub rx_block_size: u32,
    /// Rx ring blocks.
    pub rx_blocks: u32,
    /// Hand a block to the reader after this many ms even if not full (`tp_retire_blk_tov`).
    pub rx_timeout_ms: u32,
    /// Tx ring slots (rounded up to a multiple of 32).
    pub tx_frames: u32,
    /// Put the interface in promiscuous mode while the rx socket is open, so frames for the
    /// router's MAC arrive even if the kernel interface has another one.
    pub promiscuous: bool,
    /// Skip frames this host sends on the interface (PACKET_IGNORE_OUTGOING). Keep it on for
    /// a router; a capture tool would turn it off.
    pub ignore_outgoing: bool,
    /// Send straight to the driver, skipping the qdisc (PACKET_QDISC_BYPASS). Frames sent so
    /// are not seen by other packet sockets (tcpdump) on the host.
    pub qdisc_bypass: bool,
    /// Port index stamped on received frames (`FrameDesc::port`).
    pub port: u16,
}

impl Default for PacketConfig {
    /// 64 blocks of 256 KiB (16 MiB, about 100k small frames), 2 ms block timeout,
    /// 4096 tx slots (8 MiB), promiscuous, ignoring outgoing, bypassing the qdisc, port 0.
    fn default() -> Self {
        PacketConfig {
            fanout: None,
            fanout_rss: false,
            rx_block_size: 256 * 1024,
            rx_blocks: 64,
            rx_timeout_ms: 2,
            tx_frames: 4096,
            promiscuous: true,
            ignore_outgoing: true,
            qdisc_bypass: true,
            port: 0,
        }
    }
}

/// Why an interface could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum PacketError {
    #[error("no interface named {0:?} in this network namespace: check `ip link`")]
    NoInterface(String),
    #[error("interface {0} is down: bring it up with `ip link set {0} up`")]
    InterfaceDown(String),
    #[error("AF_PACKET sockets need root or CAP_NET_RAW ({0})")]
    NotPermitted(io::Error),
    #[error("bad AF_PACKET configuration: {0}")]
    Config(String),
    #[error(
        "cannot set up a {bytes}-byte {what} ring: {source} (use fewer or smaller blocks/slots)"
    )]
    Ring { what: &'static str, bytes: usize, source: io::Error },
    #[error(
        "cannot join fanout group {group} on {ifname}: {source} (the id may be taken by a group with another mode or interface)"
    )]
    Fanout { group: u16, ifname: String, source: io::Error },
    #[error("{what} on {ifname}: {source}")]
    Sys { what: &'static str, ifname: String, source: io::Error },
}

/// Interface facts needed by both sides.
struct Iface {
    name: String,
    index: u32,
    mtu: u32,
}

fn sys_err<'a>(what: &'static str, ifname: &'a str) -> impl FnOnce(io::Error) -> PacketError + 'a {
    move |source| PacketError::Sys { what, ifname: ifname.to_owned(), source }
}

/// A fresh packet socket on `ifname`, after checking that the interface exists and is up.
fn socket_on(ifname: &str) -> Result<(OwnedFd, Iface), PacketError> {
    let (fd, ifc, up) = socket_on_any(ifname)?;
    if !up {
        return Err(PacketError::InterfaceDown(ifname.to_owned()));
    }
    Ok((fd, ifc))
}

/// A packet socket for `ifname`, up or not (the third value says which).
fn socket_on_any(ifname: &str) -> Result<(OwnedFd, Iface, bool), PacketError> {
    if ifname.is_empty() || ifname.len() >= libc::IFNAMSIZ {
        return Err(PacketError::NoInterface(ifname.to_owned()));
    }
    let fd = sys::packet_socket(0).map_err(|e| match e.raw_os_error() {
        Some(libc::EPERM | libc::EACCES) => PacketError::NotPermitted(e),
        _ => PacketError::Sys { what: "socket(AF_PACKET)", ifname: ifname.to_owned(), source: e },
    })?;
    let index = sys::ifindex(ifname).ok_or_else(|| PacketError::NoInterface(ifname.to_owned()))?;
    let (flags, mtu) = sys::if_flags_mtu(&fd, ifname).map_err(|e| match e.raw_os_error() {
        Some(libc::ENODEV) => PacketError::NoInterface(ifname.to_owned()),
        _ => PacketError::Sys {
            what: "reading interface flags",
            ifname: ifname.to_owned(),
            source: e,
        },
    })?;
    Ok((fd, Iface { name: ifname.to_owned(), index, mtu }, flags & libc::IFF_UP != 0))
}

/// Opens the interface for receiving only (a counter, a capture).
pub fn open_rx(ifname: &str, cfg: &PacketConfig) -> Result<PacketRx, PacketError> {
    let geo = RxGeometry {
        block_size: cfg.rx_block_size,
        blocks: cfg.rx_blocks,
        frame_size: RING_FRAME_SIZE,
    };
    geo.validate().map_err(PacketError::Config)?;
    let len = geo.ring_len().ok_or_else(|| PacketError::Config("rx ring too large".into()))?;
    let (fd, ifc) = socket_on(ifname)?;
    let name = ifc.name.as_str();
    sys::set_packet_opt(&fd, libc::PACKET_VERSION, &sys::TPACKET_V3)
        .map_err(sys_err("setting TPACKET_V3", name))?;
    // Before the ring: a `virtio_net_hdr` in front of each frame, with the offload state of
    // what this host sent (partial checksum, GSO); see `rx_offload`.
    sys::set_packet_opt(&fd, libc::PACKET_VNET_HDR, &1 as &libc::c_int)
        .map_err(sys_err("setting PACKET_VNET_HDR", name))?;
    let req = libc::tpacket_req3 {
        tp_block_size: geo.block_size,
        tp_block_nr: geo.blocks,
        tp_frame_size: geo.frame_size,
        tp_frame_nr: geo.frame_nr(),
        tp_retire_blk_tov: cfg.rx_timeout_ms.max(1),
        tp_sizeof_priv: 0,
        tp_feature_req_word: 0,
    };
    sys::set_packet_opt(&fd, libc::PACKET_RX_RING, &req).map_err(|source| PacketError::Ring {
        what: "rx",
        bytes: len,
        source,
    })?;
    let ring = Mapping::new(&fd, len).map_err(|source| PacketError::Ring {
        what: "rx",
        bytes: len,
        source,
    })?;
    if cfg.ignore_outgoing {
        sys::set_packet_opt(&fd, libc::PACKET_IGNORE_OUTGOING, &1 as &libc::c_int)
            .map_err(sys_err("setting PACKET_IGNORE_OUTGOING", name))?;
    }
    // Bound only now, with the ring in place: frames start arriving here.
    sys::bind(&fd, ifc.index, ETH_P_ALL).map_err(sys_err("binding the rx socket", name))?;
    if cfg.promiscuous {
        let mreq = libc::packet_mreq {
            mr_ifindex: ifc.index as libc::c_int,
            mr_type: libc::PACKET_MR_PROMISC as u16,
            mr_alen: 0,
            mr_address: [0; 8],
        };
        sys::set_packet_opt(&fd, libc::PACKET_ADD_MEMBERSHIP, &mreq)
            .map_err(sys_err("enabling promiscuous mode", name))?;
    }
    if let Some(group) = cfg.fanout {
        let mode = if cfg.fanout_rss { PACKET_FANOUT_EBPF } else { libc::PACKET_FANOUT_HASH };
        let arg = libc::c_int::from(group)
            | (((mode | libc::PACKET_FANOUT_FLAG_DEFRAG) as libc::c_int) << 16);
        let fanout_err = |source| PacketError::Fanout { group, ifname: name.to_owned(), source };
        sys::set_packet_opt(&fd, libc::PACKET_FANOUT, &arg).map_err(fanout_err)?;
        if cfg.fanout_rss {
            // The group keeps its own reference to the program; this fd can close. The
            // symmetric key sends both directions of a flow to one member (one worker's
            // state table).
            let prog = toeplitz::load(&crate::rss::SYMMETRIC_KEY).map_err(|e| {
                fanout_err(std::io::Error::new(
                    e.source.kind(),
                    format!("loading the Toeplitz fanout program: {}: {}", e.source, e.log),
                ))
            })?;
            let prog_fd: libc::c_int = std::os::fd::AsRawFd::as_raw_fd(&prog);
            sys::set_packet_opt(&fd, PACKET_FANOUT_DATA, &prog_fd).map_err(fanout_err)?;
        }
    }
    Ok(PacketRx::new(fd, ring, geo, cfg.port))
}

/// Opens the interface for sending only (a packet generator).
pub fn open_tx(ifname: &str, cfg: &PacketConfig) -> Result<PacketTx, PacketError> {
    let geo = TxGeometry::new(cfg.tx_frames, RING_FRAME_SIZE).map_err(PacketError::Config)?;
    let len = geo.ring_len();
    let (fd, ifc) = socket_on(ifname)?;
    let name = ifc.name.as_str();
    sys::set_packet_opt(&fd, libc::PACKET_VERSION, &sys::TPACKET_V2)
        .map_err(sys_err("setting TPACKET_V2", name))?;
    if cfg.qdisc_bypass {
        sys::set_packet_opt(&fd, libc::PACKET_QDISC_BYPASS, &1 as &libc::c_int)
            .map_err(sys_err("setting PACKET_QDISC_BYPASS", name))?;
    }
    // Before the ring (the kernel refuses it after): a vnet header per frame, see `ring::vnet_hdr`.
    sys::set_packet_opt(&fd, libc::PACKET_VNET_HDR, &1 as &libc::c_int)
        .map_err(sys_err("setting PACKET_VNET_HDR", name))?;
    let req = libc::tpacket_req {
        tp_block_size: geo.block_size,
        tp_block_nr: geo.blocks(),
        tp_frame_size: geo.frame_size,
        tp_frame_nr: geo.frames,
    };
    sys::set_packet_opt(&fd, libc::PACKET_TX_RING, &req).map_err(|source| PacketError::Ring {
        what: "tx",
        bytes: len,
        source,
    })?;
    let ring = Mapping::new(&fd, len).map_err(|source| PacketError::Ring {
        what: "tx",
        bytes: len,
        source,
    })?;
    // Protocol 0: the socket sends but never receives (no copy of every frame queued to it).
    sys::bind(&fd, ifc.index, 0).map_err(sys_err("binding the tx socket", name))?;
    Ok(PacketTx::new(fd, ring, geo, ifc.mtu))
}

/// Opens the interface for both directions: an rx and a tx port.
pub fn open(ifname: &str, cfg: &PacketConfig) -> Result<(PacketRx, PacketTx), PacketError> {
    Ok((open_rx(ifname, cfg)?, open_tx(ifname, cfg)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send<T: Send>() {}

    #[test]
    fn ports_are_send_and_defaults_are_valid() {
        assert_send::<PacketRx>();
        assert_send::<PacketTx>();
        let cfg = PacketConfig::default();
        RxGeometry {
            block_size: cfg.rx_block_size,
            blocks: cfg.rx_blocks,
            frame_size: RING_FRAME_SIZE,
        }
        .validate()
        .unwrap();
        TxGeometry::new(cfg.tx_frames, RING_FRAME_SIZE).unwrap();
    }

    #[test]
    fn errors_say_what_to_do() {
        let cfg = PacketConfig::default();
        match open_rx("lr-does-not-ex", &cfg) {
            Err(e @ PacketError::NoInterface(_)) => {
                assert!(e.to_string().contains("ip link"), "{e}")
            }
            Err(PacketError::NotPermitted(_)) => {} // not root: that error comes first
            Err(e) => panic!("unexpected error {e}"),
            Ok(_) => panic!("opened a missing interface"),
        }
        assert!(matches!(open_tx("x".repeat(16).as_str(), &cfg), Err(PacketError::NoInterface(_))));
        let bad = PacketConfig { rx_block_size: 1000, ..cfg.clone() };
        assert!(matches!(open_rx("lo", &bad), Err(PacketError::Config(_))));
        let bad = PacketConfig { tx_frames: 0, ..cfg };
        assert!(matches!(open_tx("lo", &bad), Err(PacketError::Config(_))));
    }
}
