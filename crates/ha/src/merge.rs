//! What a receiver does with an update of a TCP state it holds: pfsync's rule that a peer
//! never moves backwards (`pfsync_upd_tcp`). A copy behind ours (an update delayed or
//! reordered on the link, or one from a box that saw fewer of the flow's packets) would roll
//! the window back and drop the connection's next segments as out of window
//! (opnsense/src#327: a stale copy applied anyway stalled transfers). pfsync keeps its own
//! copy, counts the update as stale, and answers with its copy so that the sender catches up.
//!
//! Ordering: a peer's TCP state never decreases, and its `seqlo` (the highest sequence number
//! it sent) never moves back, compared modulo 2^32 (RFC 9293 3.4) once the peer has sent its
//! SYN (before, `seqlo` means nothing: pfsync's guard on the responder). pfsync tests the
//! responder so, and the initiator on `seqlo` only when the states are equal; linerate tests
//! both ends alike. With that test two copies can each be behind the other (theirs ahead in
//! state, ours in `seqlo`: each box saw part of the flow), and two pfsync boxes would each
//! find the other's copy stale and answer with their own, again and again. Here the receiver
//! keeps the join of both and answers with it; the sender finds the join newer than its copy
//! and takes it, so the two converge in one exchange.

use crate::{Peer, TcpWindow, tcp_state};

/// Whether `a` is after `b` in sequence space (modulo 2^32, RFC 9293 3.4; pf's `SEQ_GT`).
pub fn seq_gt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

/// What to do with their copy of one peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Merge {
    /// Theirs is as new as ours or newer: replace ours with it.
    Take,
    /// Theirs is behind ours: keep ours, count a stale update, answer with our state.
    Stale,
    /// Each is ahead in something: keep this peer, newer than both, and answer with it.
    Join(Peer),
}

/// Merges their copy of a peer into ours. Peers without TCP tracking are always taken, as
/// pfsync takes UDP and other states' updates as they come.
pub fn merge_peer(ours: &Peer, theirs: &Peer) -> Merge {
    let (Some(our), Some(their)) = (&ours.window, &theirs.window) else { return Merge::Take };
    // `seqlo` means something once the peer sent its SYN.
    let sent = ours.state >= tcp_state::SYN_SENT;
    let behind = theirs.state < ours.state || (sent && seq_gt(our.seqlo, their.seqlo));
    let ahead = theirs.state > ours.state || (sent && seq_gt(their.seqlo, our.seqlo));
    match (behind, ahead) {
        (false, _) => Merge::Take,
        (true, false) => Merge::Stale,
        (true, true) => Merge::Join(join(ours, our, theirs, their)),
    }
}

/// A peer at the later state, with each window edge at the later of the two, so that neither
/// copy's traffic falls outside it.
fn join(ours: &Peer, our: &TcpWindow, theirs: &Peer, their: &TcpWindow) -> Peer {
    let later = |a: u32, b: u32| if seq_gt(b, a) { b } else { a };
    let window = TcpWindow {
        seqlo: later(our.seqlo, their.seqlo),
        seqhi: later(our.seqhi, their.seqhi),
        max_win: our.max_win.max(their.max_win),
        ..*our
    };
    Peer { state: ours.state.max(theirs.state), window: Some(window) }
}

/// The merge of both peers of an update (INS, UPD or UPD_C), initiator's first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerMerges(pub [Merge; 2]);

/// Merges both peers.
pub fn merge_peers(ours: &[Peer; 2], theirs: &[Peer; 2]) -> PeerMerges {
    PeerMerges([merge_peer(&ours[0], &theirs[0]), merge_peer(&ours[1], &theirs[1])])
}

impl PeerMerges {
    /// Some peer was not simply taken: count a stale update and send ours (pfsync's
    /// `pfsyncs_stale` and the update it schedules).
    pub fn stale(&self) -> bool {
        self.0.iter().any(|m| *m != Merge::Take)
    }

    /// Whether the update's expiry and timeout class apply: unless both peers were stale, as
    /// in pfsync (`sync < 2`).
    pub fn refreshes_expiry(&self) -> bool {
        !self.0.iter().all(|m| *m == Merge::Stale)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp_state::*;

    fn peer(state: u8, seqlo: u32, seqhi: u32) -> Peer {
        let window = TcpWindow { seqlo, seqhi, max_win: 1000, ..Default::default() };
        Peer { state, window: Some(window) }
    }

    #[test]
    fn sequence_comparison_wraps() {
        assert!(seq_gt(1, 0));
        assert!(seq_gt(0, u32::MAX));
        assert!(seq_gt(5, u32::MAX - 5));
        assert!(!seq_gt(u32::MAX, 0));
        assert!(!seq_gt(7, 7));
    }

    #[test]
    fn newer_or_equal_is_taken_older_is_stale() {
        let ours = peer(ESTABLISHED, 5000, 9000);
        assert_eq!(merge_peer(&ours, &peer(ESTABLISHED, 6000, 9500)), Merge::Take);
        assert_eq!(merge_peer(&ours, &ours), Merge::Take);
        assert_eq!(merge_peer(&ours, &peer(FIN_WAIT_1, 6000, 9500)), Merge::Take);
        assert_eq!(merge_peer(&ours, &peer(ESTABLISHED, 4000, 9500)), Merge::Stale);
        assert_eq!(merge_peer(&ours, &peer(SYN_SENT, 4000, 9000)), Merge::Stale);
        assert_eq!(merge_peer(&ours, &peer(SYN_SENT, 5000, 9000)), Merge::Stale);
        // Across the wrap: 10 is after u32::MAX - 10.
        let ours = peer(ESTABLISHED, u32::MAX - 10, 100);
        assert_eq!(merge_peer(&ours, &peer(ESTABLISHED, 10, 200)), Merge::Take);
        assert_eq!(merge_peer(&peer(ESTABLISHED, 10, 200), &ours), Merge::Stale);
    }

    #[test]
    fn seqlo_is_not_compared_before_the_peer_sent_anything() {
        let ours = peer(CLOSED, 5000, 0);
        assert_eq!(merge_peer(&ours, &peer(CLOSED, 10, 0)), Merge::Take);
        assert_eq!(merge_peer(&ours, &peer(SYN_SENT, 10, 0)), Merge::Take);
    }

    #[test]
    fn disagreeing_copies_join_and_the_join_is_taken_back() {
        let ours = peer(ESTABLISHED, 8000, 9000);
        let theirs = peer(FIN_WAIT_1, 7000, 12000);
        let Merge::Join(joined) = merge_peer(&ours, &theirs) else { panic!("no join") };
        assert_eq!(joined, peer(FIN_WAIT_1, 8000, 12000));
        // The sender receives the join in our answer: newer than both, it takes it.
        assert_eq!(merge_peer(&theirs, &joined), Merge::Take);
        assert_eq!(merge_peer(&ours, &joined), Merge::Take);
    }

    #[test]
    fn both_stale_keeps_the_expiry_one_stale_refreshes_it() {
        let ours = [peer(ESTABLISHED, 5000, 9000), peer(ESTABLISHED, 100, 200)];
        let both = merge_peers(&ours, &[peer(ESTABLISHED, 1, 1), peer(ESTABLISHED, 1, 1)]);
        assert!(both.stale() && !both.refreshes_expiry());
        let one = merge_peers(&ours, &[peer(ESTABLISHED, 1, 1), peer(ESTABLISHED, 150, 300)]);
        assert!(one.stale() && one.refreshes_expiry());
        let none = merge_peers(&ours, &ours);
        assert!(!none.stale() && none.refreshes_expiry());
    }

    #[test]
    fn peers_without_tracking_are_always_taken() {
        let udp = |state| Peer { state, window: None };
        assert_eq!(merge_peer(&udp(2), &udp(1)), Merge::Take);
    }
}
