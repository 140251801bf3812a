//! UPD_C, pfsync's compressed update: what changes while a connection runs (both peers'
//! tracking, the expiry), without the addresses and counters a full UPD repeats. 52 bytes
//! against 152 or more. A receiver that lacks the state answers with UPD_REQ for its id, as
//! pfsync does.
//!
//! | offset | size | field                                             |
//! |--------|------|---------------------------------------------------|
//! | 0      | 12   | state id                                          |
//! | 12     | 4    | expire in (seconds)                               |
//! | 16     | 1    | timeout class                                     |
//! | 17     | 1    | flags: 0x01 the peers carry TCP tracking          |
//! | 18     | 2    | reserved                                          |
//! | 20     | 16   | initiator's peer                                  |
//! | 36     | 16   | responder's peer                                  |

use crate::wire::{BodyError, Put, Reader};
use crate::{FieldError, Peer, StateId, TimeoutClass};

const TCP_PEERS: u8 = 0x01;

/// A compressed update of state `id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CompressedUpdate {
    pub id: StateId,
    pub expire_in: u32,
    pub timeout: TimeoutClass,
    /// The initiator's and the responder's tracking: both with TCP windows or neither.
    pub peers: [Peer; 2],
}

impl CompressedUpdate {
    pub(crate) fn check(&self) -> Result<(), FieldError> {
        self.id.check()?;
        if self.peers[0].window.is_some() != self.peers[1].window.is_some() {
            return Err(FieldError::TcpWindow);
        }
        self.peers.iter().try_for_each(Peer::check)
    }

    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        self.id.write(out);
        out.put_u32(self.expire_in);
        out.put_u8(self.timeout.code());
        out.put_u8(if self.peers[0].window.is_some() { TCP_PEERS } else { 0 });
        out.put_u16(0);
        self.peers.iter().for_each(|p| p.write(out));
    }

    pub(crate) fn read(r: &mut Reader<'_>) -> Result<CompressedUpdate, BodyError> {
        let id = StateId::read(r)?;
        let expire_in = r.u32()?;
        let timeout = TimeoutClass::from_code(r.u8()?)?;
        let tcp = r.u8()? & TCP_PEERS != 0;
        r.u16()?;
        let peers = [Peer::read(r, tcp)?, Peer::read(r, tcp)?];
        Ok(CompressedUpdate { id, expire_in, timeout, peers })
    }
}
