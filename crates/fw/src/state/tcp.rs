//! TCP window tracking, following pf's `pf_tcp_track_full` / `pf_tcp_track_sloppy`
//! (OpenBSD `sys/net/pf.c`), which implements Guido van Rooij's "Real Stateful TCP Packet
//! Filtering in IP Filter" checks. Scrub/synproxy parts of pf are not modelled; `modulate
//! state` is handled by the caller, which hands tracking segments in each end's own
//! sequence space (`lookup.rs`).
//!
//! One [`Peer`] per end of the connection (pf's `struct pf_state_peer`): `src` is the peer that
//! sent the packet being tracked, `dst` the one receiving it.

use super::{TcpSegment, Tmo, tcp_flags::*, tcp_state::*};

/// pf's `PF_WSCALE_FLAG`: the peer sent a window-scale option in its SYN.
pub(super) const WSCALE_FLAG: u8 = 0x80;
/// pf's `PF_WSCALE_MASK`.
pub(super) const WSCALE_MASK: u8 = 0x0f;
/// RFC 7323 maximum shift.
const TCP_MAX_WINSHIFT: u8 = 14;
const TCP_MAXWIN: u32 = 65535;
/// pf's `MAXACKWINDOW`: 0xffff + 1500 (1500 being an arbitrary fudge factor).
const MAXACKWINDOW: i64 = 0xffff + 1500;

/// One end of a tracked connection: 12 bytes (pf: `struct pf_state_peer` without scrub).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Peer {
    /// Highest sequence number sent (`seqlo`), 0 = nothing seen from this end yet.
    pub seqlo: u32,
    /// Highest sequence number the other end's window allows this end to send (`seqhi`).
    pub seqhi: u32,
    /// Largest (unscaled) window advertised by this end.
    pub max_win: u16,
    /// Window scale of this end, `WSCALE_FLAG | shift` when negotiated.
    pub wscale: u8,
    /// TCP state (pf's use of `TCPS_*`) or UDP/other pseudo-state.
    pub state: u8,
}

#[inline]
fn seq_geq(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) >= 0
}

#[inline]
fn seq_gt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

/// pf_get_wscale: the SYN's window-scale option, capped, with the flag bit; 0 without option
/// or on a non-SYN.
#[inline]
fn get_wscale(seg: &TcpSegment) -> u8 {
    if seg.flags & SYN == 0 {
        return 0;
    }
    match seg.wscale {
        Some(w) => w.min(TCP_MAX_WINSHIFT) | WSCALE_FLAG,
        None => 0,
    }
}

/// State creation from the first packet (pf_create_state, TCP part). `src` = initiator.
pub(super) fn init(src: &mut Peer, dst: &mut Peer, seg: &TcpSegment) {
    *src = Peer::default();
    *dst = Peer::default();
    src.seqlo = seg.seq;
    src.seqhi = seg.seq.wrapping_add(seg.payload_len as u32).wrapping_add(1);
    if seg.flags & SYN != 0 {
        src.seqhi = src.seqhi.wrapping_add(1);
        src.wscale = get_wscale(seg);
    }
    src.max_win = seg.win.max(1);
    if src.wscale & WSCALE_MASK != 0 {
        // Remove the scale factor from the initial window.
        let sh = (src.wscale & WSCALE_MASK) as u32;
        let win = src.max_win as u32 + (1u32 << sh);
        src.max_win = ((win - 1) >> sh) as u16;
    }
    if seg.flags & FIN != 0 {
        src.seqhi = src.seqhi.wrapping_add(1);
    }
    dst.seqhi = 1;
    dst.max_win = 1;
    src.state = SYN_SENT;
    dst.state = CLOSED;
}

/// pf's choice of timeout after a packet that updated the state.
#[inline]
pub(super) fn timeout_for(src: &Peer, dst: &Peer) -> Tmo {
    if src.state >= FIN_WAIT_2 && dst.state >= FIN_WAIT_2 {
        Tmo::TcpClosed
    } else if src.state >= CLOSING && dst.state >= CLOSING {
        Tmo::TcpFinWait
    } else if src.state < ESTABLISHED || dst.state < ESTABLISHED {
        Tmo::TcpOpening
    } else if src.state >= CLOSING || dst.state >= CLOSING {
        Tmo::TcpClosing
    } else {
        Tmo::TcpEstablished
    }
}

/// Result of full tracking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Track {
    /// In window: pass and refresh the state's timeout with this kind.
    Pass(Tmo),
    /// Passed by pf's loose second clause (shotgunned SYNs, picked-up connections, spurious
    /// packets right after close): pass without refreshing the timeout.
    PassNoRefresh,
    /// Out of window (pf: PFRES_BADSTATE).
    Drop,
}

/// The window scale shifts that apply to a segment: the sender's (`sws`) and the receiver's
/// (`dws`). RFC 7323 2.2: scaling is in effect only once both ends sent the option, and a
/// SYN's own window is never scaled.
#[derive(Clone, Copy)]
struct Scales {
    sws: u8,
    dws: u8,
}

/// The sequence space a segment occupies (pf's `seq`, `end` and `data_end`): SYN and FIN
/// each take one number (RFC 9293 3.4); `data_end` leaves out the FIN.
#[derive(Clone, Copy)]
struct Span {
    seq: u32,
    end: u32,
    data_end: u32,
}

/// pf_tcp_track_full without scrub/modulation, in pf's order: set up a sender seen for the
/// first time, pick the acknowledgement to check, then the in-window test, pf's loose
/// second clause, or a drop.
pub(super) fn track_full(src: &mut Peer, dst: &mut Peer, seg: &TcpSegment) -> Track {
    let flags = seg.flags;
    let mut win: u16 = seg.win;
    let mut scales = scales(src, dst, flags);
    let mut span = span_of(seg);
    if src.seqlo == 0 {
        if flags & SYN != 0 && dst.wscale & WSCALE_FLAG != 0 {
            win = adopt_window_scale(src, dst, seg, win, &mut scales);
        }
        first_from_sender(src, dst, &span, win, scales.dws);
    }
    let ack = ack_to_check(seg, dst);
    if span.seq == span.end {
        // Ease sequencing restrictions on no-data packets.
        let seq = src.seqlo;
        span = Span { seq, end: seq, data_end: seq };
    }
    if in_window(src, dst, &span, seg, ack, scales) {
        update_windows(src, dst, win, scales.sws, span.end, ack);
        advance_states(src, dst, flags);
        Track::Pass(timeout_for(src, dst))
    } else if in_loose_window(src, dst, &span) {
        // pf: 1) stacks that shotgun SYNs before the peer replies, 2) connections picked up
        // after establishment, 3) funky packets right after close. The TTL is not updated
        // here so that a flood caught by this clause cannot keep the state alive.
        update_windows(src, dst, win, scales.sws, span.end, ack);
        if flags & FIN != 0 && src.state < CLOSING {
            src.state = CLOSING;
        }
        if flags & RST != 0 {
            src.state = TIME_WAIT;
            dst.state = TIME_WAIT;
        }
        Track::PassNoRefresh
    } else {
        if dst.state == SYN_SENT && src.state == SYN_SENT {
            // State mismatch during the handshake (pf also sends a RST here): restart the
            // tracking of this end from its next packet.
            src.seqlo = 0;
            src.seqhi = 1;
            src.max_win = 1;
        }
        Track::Drop
    }
}

#[inline(always)]
fn scales(src: &Peer, dst: &Peer, flags: u8) -> Scales {
    if src.wscale != 0 && dst.wscale != 0 && flags & SYN == 0 {
        Scales { sws: src.wscale & WSCALE_MASK, dws: dst.wscale & WSCALE_MASK }
    } else {
        Scales { sws: 0, dws: 0 }
    }
}

#[inline(always)]
fn span_of(seg: &TcpSegment) -> Span {
    let seq = seg.seq;
    let mut end = seq.wrapping_add(seg.payload_len as u32);
    if seg.flags & SYN != 0 {
        end = end.wrapping_add(1);
    }
    let data_end = end;
    if seg.flags & FIN != 0 {
        end = end.wrapping_add(1);
    }
    Span { seq, end, data_end }
}

/// A SYN (or SYN|ACK) answering a peer that offered window scaling: the sender's option
/// decides whether scaling is on for both (RFC 7323 2.2). Returns the segment's window with
/// the sender's scale removed (pf rounds it up).
#[inline(always)]
fn adopt_window_scale(
    src: &mut Peer,
    dst: &mut Peer,
    seg: &TcpSegment,
    win: u16,
    scales: &mut Scales,
) -> u16 {
    src.wscale = get_wscale(seg);
    if src.wscale & WSCALE_FLAG != 0 {
        // Remove the scale factor from the initial window.
        scales.sws = src.wscale & WSCALE_MASK;
        scales.dws = dst.wscale & WSCALE_MASK;
        ((win as u32 + (1u32 << scales.sws) - 1) >> scales.sws) as u16
    } else {
        // Fix up the other window; in case of a retransmitted SYN|ACK.
        dst.max_win = TCP_MAXWIN.min((dst.max_win as u32) << (dst.wscale & WSCALE_MASK)) as u16;
        dst.wscale = 0;
        win
    }
}

/// The first packet seen from this end: its sequence numbers start here.
#[inline(always)]
fn first_from_sender(src: &mut Peer, dst: &Peer, span: &Span, win: u16, dws: u8) {
    src.seqlo = span.seq;
    if src.state < SYN_SENT {
        src.state = SYN_SENT;
    }
    // May need to slide the window (seqhi may have been set by a picked-up connection).
    let w = ((dst.max_win as u32) << dws).max(1);
    if src.seqhi == 1 || seq_geq(span.end.wrapping_add(w), src.seqhi) {
        src.seqhi = span.end.wrapping_add(w);
    }
    if win > src.max_win {
        src.max_win = win;
    }
}

/// A state synced from the peer box, refusing a packet of a connection that went on since
/// the peer's last update: both ends are picked up from this packet, as pf picks up a
/// connection established before it (`first_from_sender`): the sender's from its sequence
/// numbers, the other end's from what the sender acknowledges and the window it offers.
pub(super) fn pick_up(src: &mut Peer, dst: &mut Peer, seg: &TcpSegment) {
    (src.seqlo, src.seqhi) = (0, 1);
    if seg.flags & ACK != 0 && dst.state >= SYN_SENT {
        dst.seqlo = seg.ack;
        let room = (u32::from(seg.win) << (src.wscale & WSCALE_MASK)).max(1);
        if seq_geq(seg.ack.wrapping_add(room), dst.seqhi) {
            dst.seqhi = seg.ack.wrapping_add(room);
        }
    }
}

/// The acknowledgement number the window checks use: the peer's own `seqlo` (always in
/// window) when the segment carries none that can be trusted.
#[inline(always)]
fn ack_to_check(seg: &TcpSegment, dst: &Peer) -> u32 {
    let flags = seg.flags;
    if flags & ACK == 0 {
        // Let it pass through the ack skew check.
        dst.seqlo
    } else if (seg.ack == 0 && flags & (ACK | RST) == (ACK | RST)) || dst.state < SYN_SENT {
        // Broken stacks do not set ack; many set it in FIN|ACK when the SYN timed out.
        dst.seqlo
    } else {
        seg.ack
    }
}

/// pf's four window checks (van Rooij's), plus the exact sequence match pf requires of a
/// reset (compare RFC 5961 3.2).
#[inline(always)]
fn in_window(
    src: &Peer,
    dst: &Peer,
    span: &Span,
    seg: &TcpSegment,
    ack: u32,
    scales: Scales,
) -> bool {
    let orig_seq = seg.seq;
    let ackskew = dst.seqlo.wrapping_sub(ack) as i32 as i64;
    let dwin = (dst.max_win as u32) << scales.dws;
    seq_geq(src.seqhi, span.data_end)
        // Last octet inside the other's window space.
        && seq_geq(span.seq, src.seqlo.wrapping_sub(dwin))
        // Retransmission: not more than one window back.
        && ackskew >= -MAXACKWINDOW
        // Acking not more than one reassembled fragment backwards.
        && ackskew <= (MAXACKWINDOW << scales.sws)
        // Acking not more than one window forward.
        && (seg.flags & RST == 0
            || orig_seq == src.seqlo
            || orig_seq == src.seqlo.wrapping_add(1)
            || orig_seq.wrapping_add(1) == src.seqlo)
    // Require an exact/+1 sequence match on resets.
}

/// The TCP state machine's step for an in-window segment (RFC 9293 3.3.2, as pf models it).
#[inline(always)]
fn advance_states(src: &mut Peer, dst: &mut Peer, flags: u8) {
    if flags & SYN != 0 && src.state < SYN_SENT {
        src.state = SYN_SENT;
    }
    if flags & FIN != 0 && src.state < CLOSING {
        src.state = CLOSING;
    }
    if flags & ACK != 0 {
        if dst.state == SYN_SENT {
            dst.state = ESTABLISHED;
        } else if dst.state == CLOSING {
            dst.state = FIN_WAIT_2;
        }
    }
    if flags & RST != 0 {
        src.state = TIME_WAIT;
        dst.state = TIME_WAIT;
    }
}

/// pf's second clause: a segment outside the windows that is still within one maximum
/// window of the sender's sequence space, while the connection is not yet synchronised
/// or is closing.
#[inline(always)]
fn in_loose_window(src: &Peer, dst: &Peer, span: &Span) -> bool {
    (dst.state < SYN_SENT || dst.state >= FIN_WAIT_2 || src.state >= FIN_WAIT_2)
        // Within a window forward of the originating packet.
        && seq_geq(src.seqhi.wrapping_add(MAXACKWINDOW as u32), span.data_end)
        // Within a window backward of the originating packet.
        && seq_geq(span.seq, src.seqlo.wrapping_sub(MAXACKWINDOW as u32))
}

#[inline]
fn update_windows(src: &mut Peer, dst: &mut Peer, win: u16, sws: u8, end: u32, ack: u32) {
    // Update the max window.
    if src.max_win < win {
        src.max_win = win;
    }
    // Synchronise sequencing.
    if seq_gt(end, src.seqlo) {
        src.seqlo = end;
    }
    // Slide the window of what the other end can send.
    let w = (win as u32) << sws;
    if seq_geq(ack.wrapping_add(w), dst.seqhi) {
        dst.seqhi = ack.wrapping_add(w.max(1));
    }
}

/// pf_tcp_track_sloppy: flag-driven state transitions only, no window checks.
pub(super) fn track_sloppy(src: &mut Peer, dst: &mut Peer, flags: u8) -> Tmo {
    if flags & SYN != 0 && src.state < SYN_SENT {
        src.state = SYN_SENT;
    }
    if flags & FIN != 0 && src.state < CLOSING {
        src.state = CLOSING;
    }
    if flags & ACK != 0 {
        if dst.state == SYN_SENT {
            dst.state = ESTABLISHED;
        } else if dst.state == CLOSING {
            dst.state = FIN_WAIT_2;
        } else if src.state == SYN_SENT && dst.state < SYN_SENT {
            // Only one half of the connection is seen: an ACK after the initial SYN without
            // any packet from the destination establishes it.
            src.state = ESTABLISHED;
            dst.state = ESTABLISHED;
        } else if src.state == CLOSING && dst.state == ESTABLISHED && dst.seqlo == 0 {
            // Closing of half connections without the full FIN/ACK+ACK exchange.
            dst.state = CLOSING;
        }
    }
    if flags & RST != 0 {
        src.state = TIME_WAIT;
        dst.state = TIME_WAIT;
    }
    timeout_for(src, dst)
}

/// The check pf applies to the TCP header quoted by an ICMP error: the quoted sequence number
/// must lie in the window of the quoted packet's sender (`src`).
pub(super) fn icmp_quoted_seq_ok(src: &Peer, dst: &Peer, seq: u32) -> bool {
    let dws = if src.wscale != 0 && dst.wscale != 0 { dst.wscale & WSCALE_MASK } else { 0 };
    seq_geq(src.seqhi, seq) && seq_geq(seq, src.seqlo.wrapping_sub((dst.max_win as u32) << dws))
}
