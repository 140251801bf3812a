//! The receive side's rare branch: frames the kernel flags TP_STATUS_CSUMNOTREADY or
//! TP_STATUS_GSO_TCP, sent by this host with their checksum partial or as one GSO frame of
//! many segments (see [`crate::offload`]). The rx socket has PACKET_VNET_HDR on, so the
//! kernel writes a `virtio_net_hdr` just before each frame's data (`tpacket_rcv`), and a
//! TPACKET_V3 block holds a frame of up to its own size (`max_frame_len`), so 64 KiB GSO
//! frames arrive whole.

use super::ring::{self, Frame};
use super::rx::RxCounters;
use crate::batch::Batch;
use crate::offload::{self, GsoPlan, VNET_HDR_LEN, VnetHdr};
use crate::pool::{FrameDesc, FramePool, MAX_FRAME_LEN};
use crate::port::RxDrops;

/// What [`take`] did with one ring frame.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Took {
    /// Frames appended to the batch, and their bytes.
    pub frames: usize,
    pub bytes: u64,
    /// False if it stopped for want of batch room or pool frames: the ring frame stays where
    /// it is and the next call goes on from segment `state.done`.
    pub finished: bool,
}

/// Where [`take`] and the port's counters stand.
#[derive(Debug, Default)]
pub(super) struct OffloadState {
    /// Segments of the frame at the cursor already handed over.
    pub done: usize,
    pub drops: RxDrops,
}

/// Copies a ring frame into `desc`, putting back the VLAN tag the kernel stripped.
pub(super) fn copy_in(
    pool: &mut FramePool,
    desc: &mut FrameDesc,
    data: &[u8],
    vlan: Option<(u16, u16)>,
) {
    match vlan {
        None => pool.write(desc, data),
        Some((tpid, tci)) => {
            desc.len = (data.len() + 4) as u16;
            ring::reinsert_vlan(pool.frame_mut(*desc), data, tpid, tci);
        }
    }
}

/// The `virtio_net_hdr` in front of a frame whose `tpacket3_hdr` is at `hdr_off`.
fn vnet_hdr(blk: &[u8], frame: &Frame, hdr_off: usize) -> Option<VnetHdr> {
    let start = frame.data.start.checked_sub(VNET_HDR_LEN)?;
    if start < hdr_off + ring::v3::HDR_LEN {
        return None;
    }
    Some(VnetHdr::parse(blk.get(start..frame.data.start)?.first_chunk()?))
}

/// Hands over the frame (or, for a GSO frame, its segments from `state.done` on, at most
/// `room`) with its checksum complete; drops what cannot be made right, counted.
#[allow(clippy::too_many_arguments)]
pub(super) fn take(
    blk: &[u8],
    frame: &Frame,
    hdr_off: usize,
    state: &mut OffloadState,
    counters: &mut RxCounters,
    pool: &mut FramePool,
    batch: &mut Batch,
    room: usize,
    port: u16,
) -> Took {
    let dropped = Took { finished: true, ..Took::default() };
    let Some(h) = vnet_hdr(blk, frame, hdr_off) else {
        state.drops.offload_malformed += 1;
        return dropped;
    };
    let data = &blk[frame.data.clone()];
    if frame.truncated()
        || data.len() < 14
        || (!h.is_gso() && ring::len_with_vlan(frame) > MAX_FRAME_LEN)
    {
        counters.truncated += 1;
        state.drops.count_unusable(data.len());
        return dropped;
    }
    if !h.is_gso() {
        let Some(mut desc) = pool.alloc() else {
            counters.pool_empty += 1;
            return Took::default();
        };
        copy_in(pool, &mut desc, data, frame.vlan);
        // csum_start counts from the frame as captured, without the stripped tag.
        let tag = if frame.vlan.is_some() && h.csum_start >= 12 { 4 } else { 0 };
        if h.needs_csum()
            && let Err(e) = offload::complete_at(
                pool.frame_mut(desc),
                usize::from(h.csum_start) + tag,
                usize::from(h.csum_offset),
            )
        {
            pool.free(desc);
            state.drops.count(e);
            return dropped;
        }
        desc.port = port;
        batch.push(desc);
        return Took { frames: 1, bytes: u64::from(desc.len), finished: true };
    }
    let plan = match GsoPlan::new(data, &h, frame.vlan, MAX_FRAME_LEN) {
        Ok(p) => p,
        Err(e) => {
            state.drops.count(e);
            return dropped;
        }
    };
    segment(&plan, data, state, counters, pool, batch, room, port)
}

/// Writes the plan's segments from `state.done` on into pool frames.
#[allow(clippy::too_many_arguments)]
fn segment(
    plan: &GsoPlan,
    data: &[u8],
    state: &mut OffloadState,
    counters: &mut RxCounters,
    pool: &mut FramePool,
    batch: &mut Batch,
    room: usize,
    port: u16,
) -> Took {
    let mut took = Took::default();
    while state.done < plan.segments() {
        if took.frames == room {
            return took;
        }
        let Some(mut desc) = pool.alloc() else {
            counters.pool_empty += 1;
            return took;
        };
        desc.len = plan.segment_len(state.done) as u16;
        desc.port = port;
        if let Err(e) = plan.write(data, state.done, pool.frame_mut(desc)) {
            // Not expected: the plan was checked against this very frame.
            pool.free(desc);
            state.drops.count(e);
            break;
        }
        batch.push(desc);
        took.frames += 1;
        took.bytes += u64::from(desc.len);
        state.done += 1;
    }
    state.done = 0;
    took.finished = true;
    took
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::afpacket::ring::{BlockCursor, BlockHeader, Step, status, tests::build_block};
    use crate::offload::tests::{SYN, SYN_VNET, TSO_VNET, hex, tso_fin_frame};
    use wire::{Ipv4Packet, TcpPacket};

    /// A block holding `data` with the vnet header `vnet` in front of it, as `tpacket_rcv`
    /// writes it, and the frame the cursor finds.
    fn one_frame(data: &[u8], st: u32, vnet: &str) -> (Vec<u8>, Frame) {
        let mut blk = build_block(1 << 16, &[(data, st)], 82);
        blk[48 + 82 - VNET_HDR_LEN..48 + 82].copy_from_slice(&hex(vnet));
        let Step::Frame(f) = BlockCursor::start(&BlockHeader::parse(&blk).unwrap()).next(&blk)
        else {
            panic!()
        };
        (blk, f)
    }

    fn tcp_ok(frame: &[u8]) -> bool {
        let ip = Ipv4Packet::new_checked(&frame[14..]).unwrap();
        ip.verify_checksum()
            && TcpPacket::new_checked(&frame[34..])
                .unwrap()
                .verify_checksum_v4(&ip.src_addr(), &ip.dst_addr())
    }

    fn take_all(
        blk: &[u8],
        f: &Frame,
        st: &mut OffloadState,
        pool: &mut FramePool,
        batch: &mut Batch,
        room: usize,
    ) -> Took {
        take(blk, f, 48, st, &mut RxCounters::default(), pool, batch, room, 3)
    }

    #[test]
    fn a_partial_syn_with_a_stripped_tag_is_completed() {
        let (blk, mut f) = one_frame(
            &hex(SYN),
            status::USER | status::CSUMNOTREADY | status::VLAN_VALID,
            SYN_VNET,
        );
        f.vlan = Some((0x8100, 7));
        let (mut pool, mut batch, mut st) =
            (FramePool::new(8), Batch::new(), OffloadState::default());
        let took = take_all(&blk, &f, &mut st, &mut pool, &mut batch, 64);
        assert_eq!((took.frames, took.finished), (1, true));
        let desc = batch.as_slice()[0];
        assert_eq!(desc.port, 3);
        let out = pool.frame(desc);
        assert_eq!(&out[12..16], &[0x81, 0, 0, 7]);
        let untagged: Vec<u8> = out[..12].iter().chain(&out[16..]).copied().collect();
        assert!(tcp_ok(&untagged));
        assert!(st.drops.is_empty());
    }

    #[test]
    fn a_gso_frame_is_cut_across_calls_when_the_batch_is_short() {
        let (blk, f) = one_frame(
            &tso_fin_frame(),
            status::USER | status::CSUMNOTREADY | status::GSO_TCP,
            TSO_VNET,
        );
        let (mut pool, mut batch, mut st) =
            (FramePool::new(8), Batch::new(), OffloadState::default());
        let first = take_all(&blk, &f, &mut st, &mut pool, &mut batch, 2);
        assert_eq!((first.frames, first.finished, st.done), (2, false, 2));
        let rest = take_all(&blk, &f, &mut st, &mut pool, &mut batch, 64);
        assert_eq!((rest.frames, rest.finished, st.done), (1, true, 0));
        let lens: Vec<u16> = batch.as_slice().iter().map(|d| d.len).collect();
        assert_eq!(lens, [1514, 1514, 166]);
        assert!(batch.as_slice().iter().all(|&d| tcp_ok(pool.frame(d))));
        // An empty pool: nothing taken, the frame stays for later.
        let mut empty = FramePool::new(1);
        let _hold = empty.alloc();
        let stalled =
            take_all(&blk, &f, &mut OffloadState::default(), &mut empty, &mut Batch::new(), 64);
        assert_eq!((stalled.frames, stalled.finished), (0, false));
    }

    #[test]
    fn bad_metadata_is_dropped_and_counted() {
        let (mut pool, mut batch, mut st) =
            (FramePool::new(8), Batch::new(), OffloadState::default());
        // UFO (gso_type 3): unsupported.
        let (blk, f) = one_frame(
            &tso_fin_frame(),
            status::USER | status::CSUMNOTREADY,
            "01034200a80522001000",
        );
        assert!(take_all(&blk, &f, &mut st, &mut pool, &mut batch, 64).finished);
        // A checksum offset past the frame: malformed.
        let (blk, f) =
            one_frame(&hex(SYN), status::USER | status::CSUMNOTREADY, "01000000000022000001");
        assert!(take_all(&blk, &f, &mut st, &mut pool, &mut batch, 64).finished);
        // No room for a vnet header between the frame header and the data: malformed.
        let blk = build_block(4096, &[(&hex(SYN), status::USER | status::CSUMNOTREADY)], 48);
        let Step::Frame(f) = BlockCursor::start(&BlockHeader::parse(&blk).unwrap()).next(&blk)
        else {
            panic!()
        };
        assert!(take_all(&blk, &f, &mut st, &mut pool, &mut batch, 64).finished);
        assert_eq!(
            st.drops,
            RxDrops { offload_malformed: 2, gso_unsupported: 1, ..RxDrops::default() }
        );
        assert!(batch.is_empty());
        assert_eq!(pool.available(), 8, "every frame back in the pool");
    }
}
