//! One end of a state as the firewall tracks it: its TCP window and state, or its pseudo-state
//! for UDP and other protocols. Sent in full records (INS / UPD) and in compressed updates
//! (UPD_C), 16 bytes each:
//!
//! | offset | size | field                                              |
//! |--------|------|----------------------------------------------------|
//! | 0      | 4    | seqlo                                              |
//! | 4      | 4    | seqhi                                              |
//! | 8      | 4    | seqdiff (`modulate state`'s offset, 0 without)     |
//! | 12     | 2    | max_win (unscaled)                                 |
//! | 14     | 1    | window scale: 0x80 \| shift, or 0 without the option |
//! | 15     | 1    | TCP state, or pseudo-state                         |
//!
//! The first 15 bytes are zero for a peer without TCP tracking (and ignored on receipt).

use crate::FieldError;
use crate::wire::{BodyError, Put, Reader};

/// The flag of a window-scale byte whose end sent the option, as pf's `PF_WSCALE_FLAG`.
const WSCALE_FLAG: u8 = 0x80;
/// The largest shift RFC 7323 2.3 allows.
const WSCALE_MAX: u8 = 14;
/// pf's `PFUDPS_MULTIPLE` / `PFOTHERS_MULTIPLE`: the last pseudo-state.
const PSEUDO_MAX: u8 = 2;

/// TCP peer states, as pf numbers them (the BSD `TCPS_*` values).
pub mod tcp_state {
    pub const CLOSED: u8 = 0;
    pub const LISTEN: u8 = 1;
    pub const SYN_SENT: u8 = 2;
    pub const SYN_RECEIVED: u8 = 3;
    pub const ESTABLISHED: u8 = 4;
    pub const CLOSE_WAIT: u8 = 5;
    pub const FIN_WAIT_1: u8 = 6;
    pub const CLOSING: u8 = 7;
    pub const LAST_ACK: u8 = 8;
    pub const FIN_WAIT_2: u8 = 9;
    pub const TIME_WAIT: u8 = 10;
}

/// pf's window tracking of one TCP end (`struct pf_state_peer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TcpWindow {
    /// The highest sequence number this end has sent (the window's lower edge).
    pub seqlo: u32,
    /// The highest sequence number the other end's window lets it send.
    pub seqhi: u32,
    /// `modulate state`: what is added to this end's sequence numbers on their way to the
    /// other (pf's `seqdiff`); 0 without modulation. Sent for each end, as pf does, since the
    /// sender may derive one from a secret the receiver lacks.
    pub seqdiff: u32,
    /// The largest window this end advertised, unscaled.
    pub max_win: u16,
    /// The window-scale shift of its SYN's option (RFC 7323), `None` without the option.
    pub wscale: Option<u8>,
}

/// One end of a state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Peer {
    /// A [`tcp_state`] with tracking, else pf's pseudo-state (0 no traffic, 1 single,
    /// 2 multiple).
    pub state: u8,
    /// TCP tracking: present exactly for TCP states.
    pub window: Option<TcpWindow>,
}

impl Peer {
    /// The receiver's checks: a known state, a scale of at most 14.
    pub(crate) fn check(&self) -> Result<(), FieldError> {
        match &self.window {
            Some(w) => {
                if self.state > tcp_state::TIME_WAIT {
                    return Err(FieldError::TcpState(self.state));
                }
                match w.wscale {
                    Some(s) if s > WSCALE_MAX => Err(FieldError::WindowScale(s)),
                    _ => Ok(()),
                }
            }
            None if self.state > PSEUDO_MAX => Err(FieldError::PseudoState(self.state)),
            None => Ok(()),
        }
    }

    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        let w = self.window.unwrap_or_default();
        out.put_u32(w.seqlo);
        out.put_u32(w.seqhi);
        out.put_u32(w.seqdiff);
        out.put_u16(w.max_win);
        out.put_u8(w.wscale.map_or(0, |s| WSCALE_FLAG | s));
        out.put_u8(self.state);
    }

    /// Reads a peer; `tcp` says whether it carries TCP tracking (the state's protocol or the
    /// compressed update's flag decides).
    pub(crate) fn read(r: &mut Reader<'_>, tcp: bool) -> Result<Peer, BodyError> {
        let (seqlo, seqhi, seqdiff, max_win) = (r.u32()?, r.u32()?, r.u32()?, r.u16()?);
        let (scale, state) = (r.u8()?, r.u8()?);
        let window = if tcp {
            Some(TcpWindow { seqlo, seqhi, seqdiff, max_win, wscale: wscale(scale)? })
        } else {
            None
        };
        let peer = Peer { state, window };
        peer.check()?;
        Ok(peer)
    }
}

/// The shift of a window-scale byte; its range is checked with the rest of the peer.
fn wscale(byte: u8) -> Result<Option<u8>, FieldError> {
    match byte {
        0 => Ok(None),
        b if b & WSCALE_FLAG != 0 => Ok(Some(b & !WSCALE_FLAG)),
        b => Err(FieldError::WindowScaleFlag(b)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes of a peer on the wire.
    const PEER_LEN: usize = 16;

    fn read(bytes: &[u8], tcp: bool) -> Result<Peer, BodyError> {
        Peer::read(&mut Reader::new(bytes), tcp)
    }

    #[test]
    fn window_scale_byte_is_flag_and_shift() {
        assert_eq!(wscale(0), Ok(None));
        assert_eq!(wscale(0x80), Ok(Some(0)));
        assert_eq!(wscale(0x8e), Ok(Some(14)));
        assert_eq!(wscale(0x07), Err(FieldError::WindowScaleFlag(0x07)));
        let mut b = [0u8; PEER_LEN];
        b[14] = 0x8f;
        assert_eq!(read(&b, true), Err(BodyError::Field(FieldError::WindowScale(15))));
    }

    #[test]
    fn states_past_the_last_are_refused() {
        let mut b = [0u8; PEER_LEN];
        b[15] = tcp_state::TIME_WAIT + 1;
        assert_eq!(read(&b, true), Err(BodyError::Field(FieldError::TcpState(11))));
        b[15] = 3;
        assert_eq!(read(&b, false), Err(BodyError::Field(FieldError::PseudoState(3))));
        assert_eq!(read(&b[..15], false), Err(BodyError::Short));
    }

    #[test]
    fn a_peer_without_tracking_ignores_the_window_bytes() {
        let b = [0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x99, 2];
        assert_eq!(read(&b, false), Ok(Peer { state: 2, window: None }));
    }
}
