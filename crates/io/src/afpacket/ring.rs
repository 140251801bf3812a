//! Ring arithmetic, free of `unsafe` and syscalls: where blocks, frames and slots lie, and how
//! a reader walks a TPACKET_V3 block (kernel doc `networking/packet_mmap.rst`, "TPACKET_V3").
//!
//! Everything here works on plain byte slices, so it is unit-tested on hand-built blocks.
//! Offsets are those of the kernel's `tpacket_block_desc`, `tpacket3_hdr` and `tpacket2_hdr`
//! (checked against the `libc` definitions in the tests).

use std::ops::Range;

/// Field offsets in a V3 block descriptor (`tpacket_block_desc` with `tpacket_hdr_v1`).
pub mod block {
    pub const BLOCK_STATUS: usize = 8;
    pub const NUM_PKTS: usize = 12;
    pub const OFFSET_TO_FIRST_PKT: usize = 16;
    pub const BLK_LEN: usize = 20;
    /// Size of the descriptor; the kernel puts the first frame after it (aligned).
    pub const DESC_LEN: usize = 48;
}

/// Field offsets in a V3 frame header (`tpacket3_hdr`).
pub mod v3 {
    pub const NEXT_OFFSET: usize = 0;
    pub const SNAPLEN: usize = 12;
    pub const LEN: usize = 16;
    pub const STATUS: usize = 20;
    pub const MAC: usize = 24;
    pub const VLAN_TCI: usize = 32;
    pub const VLAN_TPID: usize = 36;
    pub const HDR_LEN: usize = 48;
}

/// Field offsets in a V2 frame header (`tpacket2_hdr`), the tx ring's slot format.
pub mod v2 {
    pub const STATUS: usize = 0;
    pub const LEN: usize = 4;
    pub const SNAPLEN: usize = 8;
    /// Where the kernel reads a tx frame from: `TPACKET_ALIGN(sizeof(tpacket2_hdr))`
    /// (`TPACKET2_HDRLEN - sizeof(sockaddr_ll)`, without PACKET_TX_HAS_OFF).
    pub const DATA: usize = 32;
}

/// Length of the `virtio_net_hdr` that precedes each tx frame (PACKET_VNET_HDR is on).
pub const VNET_HDR_LEN: usize = 10;

/// The `virtio_net_hdr` put in front of a tx frame of `len` bytes: no offloads, and
/// `hdr_len` = the whole frame, which makes `tpacket_snd` copy the frame into the skb's linear
/// part. Without it the skb points into the ring pages (zero-copy frags), and every forward
/// through veth or the local stack (`skb_orphan_frags_rx`) allocates a page to copy them to.
pub fn vnet_hdr(len: usize) -> [u8; VNET_HDR_LEN] {
    let mut h = [0u8; VNET_HDR_LEN];
    // flags 0, gso_type VIRTIO_NET_HDR_GSO_NONE; hdr_len is little-endian (virtio 1.0).
    h[2..4].copy_from_slice(&(len as u16).to_le_bytes());
    h
}

/// Frame status bits (`TP_STATUS_*`), as in `linux/if_packet.h`.
pub mod status {
    pub const KERNEL: u32 = 0;
    pub const USER: u32 = 1;
    pub const COPY: u32 = 1 << 1;
    pub const LOSING: u32 = 1 << 2;
    /// The frame's TCP/UDP checksum is partial (CHECKSUM_PARTIAL, sent by this host).
    pub const CSUMNOTREADY: u32 = 1 << 3;
    /// A TCP GSO frame (`skb_is_gso`, TCP).
    pub const GSO_TCP: u32 = 1 << 8;
    /// Either: the frame takes the offload branch. A UDP GSO frame has only CSUMNOTREADY.
    pub const OFFLOAD: u32 = CSUMNOTREADY | GSO_TCP;
    pub const VLAN_VALID: u32 = 1 << 4;
    pub const VLAN_TPID_VALID: u32 = 1 << 6;
    pub const AVAILABLE: u32 = 0;
    pub const SEND_REQUEST: u32 = 1;
    pub const SENDING: u32 = 1 << 1;
    pub const WRONG_FORMAT: u32 = 1 << 2;
}

const PAGE: u32 = 4096;
/// `TPACKET_ALIGNMENT`.
pub const ALIGNMENT: u32 = 16;

fn u32_at(buf: &[u8], off: usize) -> Option<u32> {
    let bytes = buf.get(off..off.checked_add(4)?)?;
    Some(u32::from_ne_bytes(bytes.try_into().ok()?))
}

fn u16_at(buf: &[u8], off: usize) -> Option<u16> {
    let bytes = buf.get(off..off.checked_add(2)?)?;
    Some(u16::from_ne_bytes(bytes.try_into().ok()?))
}

/// Shape of a V3 rx ring: `blocks` blocks of `block_size` bytes, back to back in the mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxGeometry {
    pub block_size: u32,
    pub blocks: u32,
    /// Upper bound of one frame (header + data) in a block.
    pub frame_size: u32,
}

impl RxGeometry {
    /// Checks the kernel's constraints (`packet_set_ring`): block size a multiple of the page
    /// size, frame size a multiple of 16 and no larger than a block.
    pub fn validate(&self) -> Result<(), String> {
        if self.block_size == 0 || !self.block_size.is_multiple_of(PAGE) {
            return Err(format!(
                "rx_block_size {} must be a non-zero multiple of {PAGE}",
                self.block_size
            ));
        }
        if self.blocks == 0 {
            return Err("rx_blocks must be at least 1".into());
        }
        if self.frame_size < 128
            || !self.frame_size.is_multiple_of(ALIGNMENT)
            || self.frame_size > self.block_size
        {
            return Err(format!(
                "frame size {} must be a multiple of 16 in 128..=block size",
                self.frame_size
            ));
        }
        if self.ring_len().is_none() {
            return Err("rx ring larger than the address space".into());
        }
        Ok(())
    }

    /// Frames the kernel is told about (`tp_frame_nr`); V3 packs variable-size frames anyway.
    pub fn frame_nr(&self) -> u32 {
        (self.block_size / self.frame_size) * self.blocks
    }

    /// Bytes to map.
    pub fn ring_len(&self) -> Option<usize> {
        (self.block_size as usize).checked_mul(self.blocks as usize)
    }

    /// Byte offset of block `index` in the mapping.
    pub fn block_offset(&self, index: u32) -> usize {
        debug_assert!(index < self.blocks);
        index as usize * self.block_size as usize
    }

    /// The block after `index`, wrapping.
    pub fn next_block(&self, index: u32) -> u32 {
        if index + 1 >= self.blocks { 0 } else { index + 1 }
    }
}

/// Shape of a V2 tx ring: `frames` slots of `frame_size`, packed into blocks of `block_size`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxGeometry {
    pub frame_size: u32,
    pub block_size: u32,
    pub frames: u32,
}

impl TxGeometry {
    /// Block size used for tx rings: 64 KiB (32 slots of 2 KiB).
    pub const BLOCK_SIZE: u32 = 64 * 1024;

    /// A ring of at least `frames` slots (rounded up to whole blocks) of `frame_size` bytes.
    pub fn new(frames: u32, frame_size: u32) -> Result<TxGeometry, String> {
        if frame_size < 128
            || !frame_size.is_multiple_of(ALIGNMENT)
            || frame_size > Self::BLOCK_SIZE
        {
            return Err(format!(
                "tx frame size {frame_size} must be a multiple of 16 in 128..=65536"
            ));
        }
        if frames == 0 || frames > 1 << 20 {
            return Err(format!("tx_frames {frames} must be in 1..=1048576"));
        }
        let per_block = Self::BLOCK_SIZE / frame_size;
        let blocks = frames.div_ceil(per_block);
        Ok(TxGeometry { frame_size, block_size: Self::BLOCK_SIZE, frames: blocks * per_block })
    }

    pub fn frames_per_block(&self) -> u32 {
        self.block_size / self.frame_size
    }

    pub fn blocks(&self) -> u32 {
        self.frames / self.frames_per_block()
    }

    pub fn ring_len(&self) -> usize {
        self.blocks() as usize * self.block_size as usize
    }

    /// Byte offset of slot `index` (frames never straddle blocks).
    pub fn slot_offset(&self, index: u32) -> usize {
        debug_assert!(index < self.frames);
        let per = self.frames_per_block();
        (index / per) as usize * self.block_size as usize
            + (index % per) as usize * self.frame_size as usize
    }

    /// The slot after `index`, wrapping.
    pub fn next_slot(&self, index: u32) -> u32 {
        if index + 1 >= self.frames { 0 } else { index + 1 }
    }

    /// Largest frame a slot holds (after the slot header and the vnet header).
    pub fn max_data(&self) -> usize {
        self.frame_size as usize - v2::DATA - VNET_HDR_LEN
    }
}

/// The block descriptor fields a reader needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockHeader {
    pub status: u32,
    pub num_pkts: u32,
    pub offset_to_first_pkt: u32,
}

impl BlockHeader {
    pub fn parse(block: &[u8]) -> Option<BlockHeader> {
        Some(BlockHeader {
            status: u32_at(block, block::BLOCK_STATUS)?,
            num_pkts: u32_at(block, block::NUM_PKTS)?,
            offset_to_first_pkt: u32_at(block, block::OFFSET_TO_FIRST_PKT)?,
        })
    }
}

/// One frame found in a block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// `tp_status` of the frame.
    pub status: u32,
    /// Where the captured bytes lie in the block.
    pub data: Range<usize>,
    /// Length on the wire (`tp_len`); larger than `data.len()` if the frame was cut.
    pub wire_len: u32,
    /// The 802.1Q tag the NIC stripped (`TP_STATUS_VLAN_VALID`), as (TPID, TCI).
    pub vlan: Option<(u16, u16)>,
}

impl Frame {
    /// True if the kernel cut the frame (longer than a ring frame, or `TP_STATUS_COPY`).
    pub fn truncated(&self) -> bool {
        self.status & status::COPY != 0 || (self.data.len() as u64) < u64::from(self.wire_len)
    }
}

/// What the next step of a block walk found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Frame(Frame),
    /// Every frame of the block has been read: hand it back.
    Done,
    /// A header or `tp_next_offset` pointing outside the block: give up on the block.
    Corrupt,
}

/// Where a reader stands inside a block it owns: frames left and the next frame's offset.
/// Copy it, step the copy, and keep the copy only once the frame is consumed; so a reader that
/// stops mid-block (batch full, pool empty) resumes at the same frame on its next call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockCursor {
    pub remaining: u32,
    pub offset: u32,
}

impl BlockCursor {
    pub fn start(header: &BlockHeader) -> BlockCursor {
        BlockCursor { remaining: header.num_pkts, offset: header.offset_to_first_pkt }
    }

    /// Reads the frame at the cursor and moves past it (via `tp_next_offset`).
    pub fn next(&mut self, block: &[u8]) -> Step {
        if self.remaining == 0 {
            return Step::Done;
        }
        let off = self.offset as usize;
        if off < block::DESC_LEN || off.saturating_add(v3::HDR_LEN) > block.len() {
            return Step::Corrupt;
        }
        let (Some(next), Some(snaplen), Some(len), Some(st), Some(mac)) = (
            u32_at(block, off + v3::NEXT_OFFSET),
            u32_at(block, off + v3::SNAPLEN),
            u32_at(block, off + v3::LEN),
            u32_at(block, off + v3::STATUS),
            u16_at(block, off + v3::MAC),
        ) else {
            return Step::Corrupt;
        };
        let start = off + mac as usize;
        let end = start + snaplen as usize;
        if (mac as usize) < v3::HDR_LEN || end > block.len() {
            return Step::Corrupt;
        }
        let vlan = if st & status::VLAN_VALID != 0 {
            let tci = u32_at(block, off + v3::VLAN_TCI).unwrap_or(0) as u16;
            let tpid = if st & status::VLAN_TPID_VALID != 0 {
                u16_at(block, off + v3::VLAN_TPID).unwrap_or(0)
            } else {
                0
            };
            Some((if tpid == 0 { 0x8100 } else { tpid }, tci))
        } else {
            None
        };
        self.remaining -= 1;
        if self.remaining > 0 {
            if next == 0 {
                // More frames announced but no link to them: the rest of the block is lost.
                self.remaining = 0;
            } else {
                self.offset = self.offset.saturating_add(next);
            }
        }
        Step::Frame(Frame { status: st, data: start..end, wire_len: len, vlan })
    }
}

/// Length of the frame with its stripped 802.1Q tag put back.
pub fn len_with_vlan(frame: &Frame) -> usize {
    frame.data.len() + if frame.vlan.is_some() { 4 } else { 0 }
}

/// Writes `data` into `out` with the 4-byte tag `(tpid, tci)` inserted after the two MAC
/// addresses, as the frame was on the wire. `out` must be `data.len() + 4` long, `data` at
/// least 12 bytes.
pub fn reinsert_vlan(out: &mut [u8], data: &[u8], tpid: u16, tci: u16) {
    debug_assert_eq!(out.len(), data.len() + 4);
    out[..12].copy_from_slice(&data[..12]);
    out[12..14].copy_from_slice(&tpid.to_be_bytes());
    out[14..16].copy_from_slice(&tci.to_be_bytes());
    out[16..].copy_from_slice(&data[12..]);
}

/// Whether a frame can go out on an interface of this MTU: an Ethernet header at least, and
/// no more than MTU + 14 (+ 4 when it carries an 802.1Q/802.1ad tag), as `tpacket_snd` checks;
/// anything else the kernel would mark `TP_STATUS_WRONG_FORMAT`.
pub fn tx_len_ok(frame: &[u8], mtu: usize) -> bool {
    if frame.len() < 14 {
        return false;
    }
    let tagged = matches!(u16::from_be_bytes([frame[12], frame[13]]), 0x8100 | 0x88a8);
    frame.len() <= mtu + 14 + if tagged { 4 } else { 0 }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::mem::offset_of;

    /// Builds a V3 block the way the kernel fills one: descriptor, then frames at 16-aligned
    /// offsets linked by `tp_next_offset`, data `mac` bytes after each header.
    pub fn build_block(size: usize, frames: &[(&[u8], u32)], mac: u16) -> Vec<u8> {
        let mut b = vec![0u8; size];
        let first = 48u32;
        b[block::BLOCK_STATUS..][..4].copy_from_slice(&status::USER.to_ne_bytes());
        b[block::NUM_PKTS..][..4].copy_from_slice(&(frames.len() as u32).to_ne_bytes());
        b[block::OFFSET_TO_FIRST_PKT..][..4].copy_from_slice(&first.to_ne_bytes());
        let mut off = first as usize;
        for (i, (data, st)) in frames.iter().enumerate() {
            let total = (mac as usize + data.len()).next_multiple_of(16);
            let next = if i + 1 == frames.len() { 0 } else { total as u32 };
            b[off + v3::NEXT_OFFSET..][..4].copy_from_slice(&next.to_ne_bytes());
            b[off + v3::SNAPLEN..][..4].copy_from_slice(&(data.len() as u32).to_ne_bytes());
            b[off + v3::LEN..][..4].copy_from_slice(&(data.len() as u32).to_ne_bytes());
            b[off + v3::STATUS..][..4].copy_from_slice(&st.to_ne_bytes());
            b[off + v3::MAC..][..2].copy_from_slice(&mac.to_ne_bytes());
            b[off + mac as usize..][..data.len()].copy_from_slice(data);
            off += total;
        }
        b
    }

    #[test]
    fn offsets_match_the_kernel_structs() {
        let bh = offset_of!(libc::tpacket_block_desc, hdr);
        assert_eq!(bh + offset_of!(libc::tpacket_hdr_v1, block_status), block::BLOCK_STATUS);
        assert_eq!(bh + offset_of!(libc::tpacket_hdr_v1, num_pkts), block::NUM_PKTS);
        assert_eq!(
            bh + offset_of!(libc::tpacket_hdr_v1, offset_to_first_pkt),
            block::OFFSET_TO_FIRST_PKT
        );
        assert_eq!(bh + offset_of!(libc::tpacket_hdr_v1, blk_len), block::BLK_LEN);
        assert_eq!(std::mem::size_of::<libc::tpacket_block_desc>(), block::DESC_LEN);
        assert_eq!(offset_of!(libc::tpacket3_hdr, tp_next_offset), v3::NEXT_OFFSET);
        assert_eq!(offset_of!(libc::tpacket3_hdr, tp_snaplen), v3::SNAPLEN);
        assert_eq!(offset_of!(libc::tpacket3_hdr, tp_len), v3::LEN);
        assert_eq!(offset_of!(libc::tpacket3_hdr, tp_status), v3::STATUS);
        assert_eq!(offset_of!(libc::tpacket3_hdr, tp_mac), v3::MAC);
        let hv1 = offset_of!(libc::tpacket3_hdr, hv1);
        assert_eq!(hv1 + offset_of!(libc::tpacket_hdr_variant1, tp_vlan_tci), v3::VLAN_TCI);
        assert_eq!(hv1 + offset_of!(libc::tpacket_hdr_variant1, tp_vlan_tpid), v3::VLAN_TPID);
        assert_eq!(std::mem::size_of::<libc::tpacket3_hdr>(), v3::HDR_LEN);
        assert_eq!(offset_of!(libc::tpacket2_hdr, tp_status), v2::STATUS);
        assert_eq!(offset_of!(libc::tpacket2_hdr, tp_len), v2::LEN);
        assert_eq!(offset_of!(libc::tpacket2_hdr, tp_snaplen), v2::SNAPLEN);
        assert_eq!(libc::TPACKET2_HDRLEN - std::mem::size_of::<libc::sockaddr_ll>(), v2::DATA);
        assert_eq!(libc::TP_STATUS_USER, status::USER);
        assert_eq!(libc::TP_STATUS_COPY, status::COPY);
        assert_eq!(libc::TP_STATUS_LOSING, status::LOSING);
        assert_eq!(libc::TP_STATUS_SEND_REQUEST, status::SEND_REQUEST);
        assert_eq!(libc::TP_STATUS_WRONG_FORMAT, status::WRONG_FORMAT);
        assert_eq!(libc::TP_STATUS_VLAN_VALID, status::VLAN_VALID);
        assert_eq!(libc::TP_STATUS_VLAN_TPID_VALID, status::VLAN_TPID_VALID);
    }

    #[test]
    fn walks_every_frame_of_a_block_then_done() {
        let f1 = [1u8; 60];
        let f2 = [2u8; 1514];
        let f3 = [3u8; 61];
        let block = build_block(
            8192,
            &[(&f1, status::USER), (&f2, status::USER | status::LOSING), (&f3, status::USER)],
            82,
        );
        let h = BlockHeader::parse(&block).unwrap();
        assert_eq!(h, BlockHeader { status: status::USER, num_pkts: 3, offset_to_first_pkt: 48 });
        let mut c = BlockCursor::start(&h);
        let mut seen = Vec::new();
        loop {
            match c.next(&block) {
                Step::Frame(f) => {
                    assert!(!f.truncated());
                    seen.push((block[f.data.clone()].to_vec(), f.status));
                }
                Step::Done => break,
                Step::Corrupt => panic!("corrupt"),
            }
        }
        assert_eq!(seen, vec![(f1.to_vec(), 1), (f2.to_vec(), 5), (f3.to_vec(), 1)]);
        assert_eq!(c.next(&block), Step::Done, "done stays done");
    }

    #[test]
    fn a_copied_cursor_resumes_mid_block() {
        let frames: Vec<[u8; 64]> = (0..5u8).map(|i| [i; 64]).collect();
        let list: Vec<(&[u8], u32)> = frames.iter().map(|f| (&f[..], status::USER)).collect();
        let block = build_block(4096, &list, 82);
        let mut c = BlockCursor::start(&BlockHeader::parse(&block).unwrap());
        for want in 0..5u8 {
            // Peek without consuming (as when the pool is empty), then consume.
            let mut peek = c;
            let Step::Frame(f) = peek.next(&block) else { panic!() };
            assert_eq!(block[f.data.start], want);
            let Step::Frame(g) = c.next(&block) else { panic!() };
            assert_eq!(f, g);
            assert_eq!(c, peek);
        }
        assert_eq!(c.next(&block), Step::Done);
    }

    #[test]
    fn empty_block_is_done_at_once() {
        let block = build_block(4096, &[], 82);
        let mut c = BlockCursor::start(&BlockHeader::parse(&block).unwrap());
        assert_eq!(c.next(&block), Step::Done);
    }

    #[test]
    fn bad_offsets_are_corrupt_not_panics() {
        let f = [7u8; 100];
        let mut block = build_block(4096, &[(&f, 1), (&f, 1)], 82);
        // First frame's next offset points past the end.
        block[48..52].copy_from_slice(&5000u32.to_ne_bytes());
        let mut c = BlockCursor::start(&BlockHeader::parse(&block).unwrap());
        assert!(matches!(c.next(&block), Step::Frame(_)));
        assert_eq!(c.next(&block), Step::Corrupt);
        // Snaplen running off the block.
        let mut block = build_block(4096, &[(&f, 1)], 82);
        block[48 + v3::SNAPLEN..][..4].copy_from_slice(&4000u32.to_ne_bytes());
        let mut c = BlockCursor::start(&BlockHeader::parse(&block).unwrap());
        assert_eq!(c.next(&block), Step::Corrupt);
        // First-frame offset inside the descriptor.
        let mut c = BlockCursor { remaining: 1, offset: 8 };
        assert_eq!(c.next(&block), Step::Corrupt);
        // Too short to hold a descriptor.
        assert_eq!(BlockHeader::parse(&block[..10]), None);
        // More frames announced than linked: stop after the last linked one.
        let mut block = build_block(4096, &[(&f, 1)], 82);
        block[block::NUM_PKTS..][..4].copy_from_slice(&3u32.to_ne_bytes());
        let mut c = BlockCursor::start(&BlockHeader::parse(&block).unwrap());
        assert!(matches!(c.next(&block), Step::Frame(_)));
        assert_eq!(c.next(&block), Step::Done);
    }

    #[test]
    fn truncation_and_vlan_are_reported() {
        let f = [9u8; 80];
        let mut block = build_block(
            4096,
            &[(&f, status::USER | status::VLAN_VALID | status::VLAN_TPID_VALID)],
            82,
        );
        block[48 + v3::LEN..][..4].copy_from_slice(&9000u32.to_ne_bytes());
        block[48 + v3::VLAN_TCI..][..4].copy_from_slice(&0x0123u32.to_ne_bytes());
        block[48 + v3::VLAN_TPID..][..2].copy_from_slice(&0x88a8u16.to_ne_bytes());
        let mut c = BlockCursor::start(&BlockHeader::parse(&block).unwrap());
        let Step::Frame(fr) = c.next(&block) else { panic!() };
        assert!(fr.truncated());
        assert_eq!(fr.vlan, Some((0x88a8, 0x0123)));
        assert_eq!(len_with_vlan(&fr), 84);
        let mut st = Frame { status: status::COPY, data: 0..10, wire_len: 10, vlan: None };
        assert!(st.truncated());
        st.status = status::USER | status::VLAN_VALID;
        assert!(!st.truncated());
    }

    #[test]
    fn vlan_tag_goes_back_after_the_macs() {
        let data: Vec<u8> = (0..20).collect();
        let mut out = vec![0u8; 24];
        reinsert_vlan(&mut out, &data, 0x8100, 0x0064);
        assert_eq!(&out[..12], &data[..12]);
        assert_eq!(&out[12..16], &[0x81, 0x00, 0x00, 0x64]);
        assert_eq!(&out[16..], &data[12..]);
    }

    #[test]
    fn rx_geometry_validates_and_wraps() {
        let g = RxGeometry { block_size: 1 << 18, blocks: 64, frame_size: 2048 };
        g.validate().unwrap();
        assert_eq!(g.frame_nr(), 128 * 64);
        assert_eq!(g.ring_len(), Some(16 << 20));
        assert_eq!(g.block_offset(3), 3 << 18);
        assert_eq!(g.next_block(62), 63);
        assert_eq!(g.next_block(63), 0);
        assert!(RxGeometry { block_size: 5000, ..g }.validate().is_err());
        assert!(RxGeometry { blocks: 0, ..g }.validate().is_err());
        assert!(RxGeometry { frame_size: 2047, ..g }.validate().is_err());
        assert!(RxGeometry { block_size: 4096, frame_size: 8192, ..g }.validate().is_err());
    }

    #[test]
    fn tx_geometry_rounds_to_blocks_and_wraps() {
        let g = TxGeometry::new(100, 2048).unwrap();
        assert_eq!(g.frames_per_block(), 32);
        assert_eq!(g.frames, 128);
        assert_eq!(g.blocks(), 4);
        assert_eq!(g.ring_len(), 4 * 65536);
        assert_eq!(g.slot_offset(0), 0);
        assert_eq!(g.slot_offset(31), 31 * 2048);
        assert_eq!(g.slot_offset(32), 65536);
        assert_eq!(g.next_slot(126), 127);
        assert_eq!(g.next_slot(127), 0);
        assert_eq!(g.max_data(), 2006);
        // A frame size that does not divide the block leaves a gap at each block's end.
        let g = TxGeometry::new(30, 3072).unwrap();
        assert_eq!(g.frames_per_block(), 21);
        assert_eq!(g.slot_offset(21), 65536);
        assert!(TxGeometry::new(0, 2048).is_err());
        assert!(TxGeometry::new(10, 100).is_err());
    }

    #[test]
    fn vnet_header_asks_for_a_linear_copy() {
        assert_eq!(VNET_HDR_LEN, 10, "sizeof(struct virtio_net_hdr)");
        assert_eq!(vnet_hdr(0x05dc), [0, 0, 0xdc, 0x05, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn tx_length_rules() {
        let mut f = vec![0u8; 1514];
        assert!(tx_len_ok(&f, 1500));
        f.push(0);
        assert!(!tx_len_ok(&f, 1500));
        f[12] = 0x81;
        assert!(tx_len_ok(&f, 1500), "a tagged frame may be 4 bytes longer");
        assert!(!tx_len_ok(&[0u8; 13], 1500));
    }
}
