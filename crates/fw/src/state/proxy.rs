//! pf's `synproxy state` (pf.c, the `PF_TCPS_PROXY_SRC` / `PF_TCPS_PROXY_DST` states): the
//! router completes a TCP client's handshake itself, and opens the connection to the server
//! only once the client has acknowledged the router's SYN-ACK, so that SYNs from spoofed
//! sources never reach the server. The table decides each handshake step and says what to
//! send ([`ProxyStep`]); the data plane builds and sends the packets.
//!
//! 1. `PROXY_SRC`: the client's SYN created the state; it is answered with a SYN-ACK carrying
//!    the router's initial sequence number R (a keyed hash, as `modulate state`'s) and is not
//!    forwarded. A retransmitted SYN gets the same SYN-ACK again.
//! 2. The client's ACK (`seq` = C+1, `ack` = R+1) becomes the router's SYN to the server,
//!    with the client's initial number C and MSS: `PROXY_DST`. Another such ACK sends the
//!    SYN again (the server's SYN-ACK may have been lost).
//! 3. The server's SYN-ACK (`ack` = C+1, its number S) is answered with the ACK the client
//!    would have sent, and becomes the ACK to the client that opens its window (the router's
//!    SYN-ACK offered none, as pf's): `PROXIED`, both ends established, the server's numbers
//!    shifted by R−S towards the client and its acknowledgements shifted back, as
//!    `modulate state` rewrites (the client's numbers reach the server as they are: the SYN
//!    carried C, where pf draws a second random number).
//!
//! Everything else of the flow during the handshake is dropped (pf's PFRES_SYNPROXY). The
//! handshake keeps no option but the MSS: neither end scales its window or uses timestamps
//! or SACK, as with pf.

use super::{
    Entry, F_INIT_B, StateDropReason, StateId, StateTable, StateVerdict, TcpSegment, Tmo, sub, tcp,
    tcp_flags, tcp_state,
};

/// The client's SYN is answered, its ACK awaited.
pub(super) const PROXY_SRC: u8 = 1;
/// The router's SYN went to the server, its SYN-ACK awaited.
pub(super) const PROXY_DST: u8 = 2;
/// Both handshakes done: `seqdiff` is the responder's offset.
pub(super) const PROXIED: u8 = 3;

/// The phase of a `synproxy state` connection, for inspection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProxyPhase {
    /// Awaiting the client's ACK of the router's SYN-ACK (pf's PROXY_SRC).
    ProxySrc,
    /// Awaiting the server's SYN-ACK (pf's PROXY_DST).
    ProxyDst,
    /// Handed over: an established connection with shifted numbers.
    Proxied,
}

impl ProxyPhase {
    pub(super) fn of(byte: u8) -> Option<ProxyPhase> {
        match byte {
            PROXY_SRC => Some(ProxyPhase::ProxySrc),
            PROXY_DST => Some(ProxyPhase::ProxyDst),
            PROXIED => Some(ProxyPhase::Proxied),
            _ => None,
        }
    }
}

/// A TCP segment the router sends for the proxy: numbers as they go on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProxyReply {
    pub seq: u32,
    pub ack: u32,
    pub win: u16,
}

/// What the data plane sends for a handshake packet the table consumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProxyStep {
    /// Answer the client's SYN, back the way it came: SYN-ACK with `seq` (the router's
    /// number), `ack` (the client's + 1), window 0, and the MSS the data plane reads from
    /// the SYN (it records it with [`StateTable::set_proxy_mss`] for step 2).
    SynAck { id: StateId, seq: u32, ack: u32 },
    /// The client's ACK becomes the router's SYN to the server, forwarded as the ACK would
    /// be: `seq` the client's initial number, `win` its window, `mss` its MSS.
    SynToServer { seq: u32, win: u16, mss: u16 },
    /// The server's SYN-ACK: answered with `to_server` (an ACK, back the way it came), and
    /// itself becomes `to_client` (an ACK with the server's window), forwarded; `to_client`
    /// is in the server's numbers, which the `modulate state` rewrite shifts as it leaves.
    Established { to_server: ProxyReply, to_client: ProxyReply },
}

impl StateTable {
    /// The step the last lookup or insert decided, if it was a `synproxy state` handshake
    /// step (call right after it: the next one replaces it).
    #[inline]
    pub fn take_proxy(&mut self) -> Option<ProxyStep> {
        self.proxy_step.take()
    }

    /// Whether a handshake step is pending (after a pass that kept state).
    pub fn proxy_pending(&self) -> bool {
        self.proxy_step.is_some()
    }

    /// Records the MSS of the client's SYN that created `id` (a proxied state awaiting the
    /// client's ACK), for the SYN the router sends the server.
    pub fn set_proxy_mss(&mut self, id: StateId, mss: u16) {
        if let Some(e) = self.slots.get_mut(id.0 as usize).filter(|e| e.proxy() == PROXY_SRC) {
            e.pseudo = mss.to_be_bytes();
        }
    }

    /// Makes state `id`, just created by a client's SYN and awaiting its ACK, a plain
    /// state (the caller passes the SYN on instead of answering it: a connection to the
    /// router itself).
    pub fn unproxy(&mut self, id: StateId) {
        if let Some(e) = self.slots.get_mut(id.0 as usize).filter(|e| e.proxy() == PROXY_SRC) {
            e.set_proxy(0);
            (e.seqdiff, e.pseudo) = (0, [0; 2]);
            self.counters.synproxy_syn_acks = self.counters.synproxy_syn_acks.saturating_sub(1);
        }
    }

    /// The `synproxy state` phase of state `id`, if it proxies.
    pub fn proxy_phase(&self, id: StateId) -> Option<ProxyPhase> {
        ProxyPhase::of(self.slots.get(id.0 as usize)?.proxy())
    }

    /// A new entry's handshake from the client's bare SYN `seg` (hash `h`): the router's
    /// number drawn, the SYN answered.
    pub(super) fn proxy_start(&mut self, e: &mut Entry, id: usize, h: u64, seg: &TcpSegment) {
        let r = self.router_isn(h);
        e.set_proxy(PROXY_SRC);
        e.seqdiff = r;
        self.counters.synproxy_syn_acks += 1;
        self.proxy_step = Some(ProxyStep::SynAck {
            id: StateId(id as u32),
            seq: r,
            ack: seg.seq.wrapping_add(1),
        });
    }

    /// The router's initial sequence number for a proxied connection: a keyed hash of the
    /// flow (`h`) and a counter, as `modulate state`'s offsets are drawn.
    fn router_isn(&mut self, h: u64) -> u32 {
        self.iss = self.iss.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut x = self.iss ^ h ^ self.mod_key;
        super::flow::splitmix64(&mut x) as u32
    }

    /// A packet of state `id`, still in its handshake (`PROXY_SRC` or `PROXY_DST`), from
    /// the initiator (`from_init`) or the responder: always dropped; a handshake step sets
    /// [`take_proxy`](Self::take_proxy)'s step. Returns the verdict and the timeout to set.
    #[cold]
    #[inline(never)]
    pub(super) fn proxy_track(
        &mut self,
        id: usize,
        from_init: bool,
        seg: Option<&TcpSegment>,
        now: u32,
    ) -> StateVerdict {
        const SAR: u8 = tcp_flags::SYN | tcp_flags::ACK | tcp_flags::RST;
        let drop = StateVerdict::Drop(StateDropReason::Synproxy);
        self.proxy_step = None;
        let e = &mut self.slots[id];
        let [c, s] = &mut self.tcp[id];
        let r = e.seqdiff;
        let step = match (e.proxy(), from_init, seg) {
            // The client's SYN again: the same SYN-ACK.
            (PROXY_SRC, true, Some(g)) if g.flags & SAR == tcp_flags::SYN && g.seq == c.seqlo => {
                self.counters.synproxy_syn_acks += 1;
                ProxyStep::SynAck { id: StateId(id as u32), seq: r, ack: c.seqlo.wrapping_add(1) }
            }
            // The client's ACK of the router's SYN-ACK (in either phase: a repeated ACK
            // repeats the SYN, pf_synproxy).
            (PROXY_SRC | PROXY_DST, true, Some(g))
                if g.flags & SAR == tcp_flags::ACK
                    && g.ack == r.wrapping_add(1)
                    && g.seq == c.seqlo.wrapping_add(1) =>
            {
                e.set_proxy(PROXY_DST);
                c.max_win = g.win.max(1);
                e.tmo = Tmo::TcpOpening as u8;
                e.expire = now.saturating_add(self.secs[Tmo::TcpOpening as usize]);
                self.counters.synproxy_syns += 1;
                let mss = match u16::from_be_bytes(e.pseudo) {
                    0 => DEFAULT_MSS,
                    m => m,
                };
                ProxyStep::SynToServer { seq: c.seqlo, win: g.win, mss }
            }
            // The server's SYN-ACK of the router's SYN.
            (PROXY_DST, false, Some(g))
                if g.flags & SAR == tcp_flags::SYN | tcp_flags::ACK
                    && g.ack == c.seqlo.wrapping_add(1) =>
            {
                s.max_win = g.win.max(1);
                let (cs, ss) = (c.seqlo, g.seq);
                // pf_synproxy: each end's window edge from the other's window, no scaling.
                c.seqhi = cs.wrapping_add(u32::from(s.max_win));
                s.seqhi = ss.wrapping_add(u32::from(c.max_win));
                c.seqlo = cs.wrapping_add(1);
                s.seqlo = ss.wrapping_add(1);
                (c.wscale, s.wscale) = (0, 0);
                (c.state, s.state) = (tcp_state::ESTABLISHED, tcp_state::ESTABLISHED);
                e.set_proxy(PROXIED);
                e.seqdiff = r.wrapping_sub(ss);
                e.tmo = tcp::timeout_for(c, s) as u8;
                e.expire = now.saturating_add(self.secs[e.tmo as usize]);
                // The generated handshake packets never met the out rules: the rule's state
                // covers the flow's passes on both sides (`docs/firewall.md`).
                sub::mirror(e, e.flags & F_INIT_B == 0);
                self.modulated = true;
                self.counters.synproxy_established += 1;
                ProxyStep::Established {
                    to_server: ProxyReply {
                        seq: cs.wrapping_add(1),
                        ack: ss.wrapping_add(1),
                        win: c.max_win,
                    },
                    to_client: ProxyReply {
                        seq: ss.wrapping_add(1),
                        ack: cs.wrapping_add(1),
                        win: s.max_win,
                    },
                }
            }
            _ => {
                self.counters.synproxy_dropped += 1;
                return drop;
            }
        };
        self.proxy_step = Some(step);
        drop
    }
}

/// The MSS of a SYN without the option (RFC 9293 3.7.1: 536 for IPv4; the proxy uses it
/// for both families, below IPv6's 1220).
const DEFAULT_MSS: u16 = 536;
