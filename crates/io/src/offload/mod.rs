//! Frames from senders on the same host, with their offloads still pending.
//!
//! A sender on this host (a container, a VM, a namespace behind veth or tap) leaves two jobs
//! to "the NIC" (kernel docs `networking/checksum-offloads.rst`, `segmentation-offloads.rst`):
//! the TCP/UDP checksum, sent partial (CHECKSUM_PARTIAL: the field holds only the folded
//! pseudo-header sum, the rest is to be summed from `csum_start` on), and with TSO/GSO the
//! cutting of one frame of up to 64 KiB into segments of `gso_size` payload bytes. veth hands
//! both on as they are, so a router that forwards in userspace must do what the NIC would,
//! where it receives the frame:
//!
//! * AF_PACKET with PACKET_VNET_HDR on the rx socket says so: TP_STATUS_CSUMNOTREADY in the
//!   frame's status and a [`VnetHdr`] in front of it. [`complete_at`] finishes the checksum,
//!   [`GsoPlan`] cuts a GSO frame into ordinary frames.
//! * AF_XDP says nothing: [`complete_if_partial`] finishes a TCP/UDP checksum whose field
//!   equals the folded pseudo-header sum (see there why that is safe).
//!
//! Everything here works on plain byte slices and never panics, whatever the bytes.

mod csum;
mod gso;
#[cfg(test)]
pub(crate) mod tests;

pub use csum::{complete_at, complete_if_partial};
pub use gso::GsoPlan;

/// Length of `struct virtio_net_hdr` (without `num_buffers`).
pub const VNET_HDR_LEN: usize = 10;

/// `virtio_net_hdr.flags` (include/uapi/linux/virtio_net.h).
pub mod flags {
    /// The checksum at `csum_start + csum_offset` is partial.
    pub const NEEDS_CSUM: u8 = 1;
}

/// `virtio_net_hdr.gso_type` values.
pub mod gso_type {
    pub const NONE: u8 = 0;
    pub const TCPV4: u8 = 1;
    /// UDP fragmentation offload (UFO), gone from Linux senders since 4.14.
    pub const UDP: u8 = 3;
    pub const TCPV6: u8 = 4;
    /// UDP segmentation (UDP_SEGMENT): each segment its own datagram.
    pub const UDP_L4: u8 = 5;
    /// Flag: the sender set ECN's CWR on the first segment only.
    pub const ECN: u8 = 0x80;
}

/// The `virtio_net_hdr` the kernel puts in front of a frame (little-endian fields, as
/// `vio_le()` on the little-endian hosts linerate runs on).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VnetHdr {
    pub flags: u8,
    pub gso_type: u8,
    pub hdr_len: u16,
    pub gso_size: u16,
    pub csum_start: u16,
    pub csum_offset: u16,
}

impl VnetHdr {
    pub fn parse(b: &[u8; VNET_HDR_LEN]) -> VnetHdr {
        let le = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        VnetHdr {
            flags: b[0],
            gso_type: b[1],
            hdr_len: le(2),
            gso_size: le(4),
            csum_start: le(6),
            csum_offset: le(8),
        }
    }

    pub fn needs_csum(&self) -> bool {
        self.flags & flags::NEEDS_CSUM != 0
    }

    pub fn is_gso(&self) -> bool {
        self.gso_type != gso_type::NONE
    }
}

/// Why a frame with offloads pending was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OffloadError {
    /// The metadata does not fit the frame (checksum position outside it, GSO type against
    /// the headers, zero `gso_size`, lengths that disagree).
    #[error("offload metadata that does not match the frame")]
    Malformed,
    /// A GSO frame linerate does not cut: not TCP or UDP_L4, IPv6 extension headers, or
    /// datagrams larger than a frame buffer.
    #[error("a GSO frame linerate does not segment")]
    Unsupported,
}

/// Where the network header starts and which ethertype it has, skipping up to two
/// 802.1Q/802.1ad tags still in the frame.
fn l3_start(frame: &[u8]) -> Option<(usize, u16)> {
    let mut off = 12;
    for _ in 0..3 {
        let et = u16::from_be_bytes(*frame.get(off..off + 2)?.first_chunk()?);
        if et != 0x8100 && et != 0x88a8 {
            return Some((off + 2, et));
        }
        off += 4;
    }
    None
}

const ETH_IPV4: u16 = 0x0800;
const ETH_IPV6: u16 = 0x86dd;
const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;
