//! The small messages: a state's id (DEL, INS_ACK, UPD_REQ), a creator (CLR), and a bulk
//! update's start and end (BUS).
//!
//! | message | body                                                       | bytes |
//! |---------|------------------------------------------------------------|-------|
//! | DEL     | state id: creator u32, counter u64                         | 12    |
//! | CLR     | creator u32                                                | 4     |
//! | UPD_REQ | state id; all zero: every state (a bulk update request)    | 12    |
//! | BUS     | status u8 (1 start, 2 end), 3 bytes reserved               | 4     |
//! | ACK     | state id                                                   | 12    |

use crate::FieldError;
use crate::wire::{BodyError, Put, Reader};

/// A state's name across the boxes, as pfsync's `(creatorid, id)`: the box that created it
/// and that box's counter. It never changes while the state lives, whichever box holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StateId {
    /// The creating box's id (non-zero; 0 is reserved for "every state").
    pub creator: u32,
    /// That box's count of states created (never reused while the box runs).
    pub counter: u64,
}

impl StateId {
    pub(crate) fn check(&self) -> Result<(), FieldError> {
        check_creator(self.creator)
    }

    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        out.put_u32(self.creator);
        out.put_u64(self.counter);
    }

    /// Reads an id without checking it (UPD_REQ gives the all-zero one a meaning).
    fn read_raw(r: &mut Reader<'_>) -> Result<StateId, BodyError> {
        Ok(StateId { creator: r.u32()?, counter: r.u64()? })
    }

    pub(crate) fn read(r: &mut Reader<'_>) -> Result<StateId, BodyError> {
        let id = Self::read_raw(r)?;
        id.check()?;
        Ok(id)
    }
}

pub(crate) fn check_creator(creator: u32) -> Result<(), FieldError> {
    if creator == 0 { Err(FieldError::ZeroCreator) } else { Ok(()) }
}

/// UPD_REQ: what the sender wants sent again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UpdateRequest {
    /// One state, by id: pfsync asks so when a compressed update names a state it lacks.
    One(StateId),
    /// Every state: a box that joins asks for a bulk update (pfsync sends id and creator 0).
    All,
}

impl UpdateRequest {
    pub(crate) fn check(&self) -> Result<(), FieldError> {
        match self {
            UpdateRequest::One(id) => id.check(),
            UpdateRequest::All => Ok(()),
        }
    }

    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        match self {
            UpdateRequest::One(id) => id.write(out),
            UpdateRequest::All => StateId { creator: 0, counter: 0 }.write(out),
        }
    }

    pub(crate) fn read(r: &mut Reader<'_>) -> Result<UpdateRequest, BodyError> {
        match StateId::read_raw(r)? {
            StateId { creator: 0, counter: 0 } => Ok(UpdateRequest::All),
            id => {
                id.check()?;
                Ok(UpdateRequest::One(id))
            }
        }
    }
}

/// BUS: the sender begins or has finished a bulk update (every state it holds, in answer to
/// [`UpdateRequest::All`]). The receiver keeps its role demoted between the two (pfsync
/// demotes CARP while a bulk update is pending), so an incomplete table never becomes master.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BulkStatus {
    Start,
    End,
}

impl BulkStatus {
    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        out.put_u8(match self {
            BulkStatus::Start => 1,
            BulkStatus::End => 2,
        });
        out.extend_from_slice(&[0; 3]);
    }

    pub(crate) fn read(r: &mut Reader<'_>) -> Result<BulkStatus, BodyError> {
        let status = r.u8()?;
        r.take(3)?;
        match status {
            1 => Ok(BulkStatus::Start),
            2 => Ok(BulkStatus::End),
            s => Err(FieldError::BulkStatus(s).into()),
        }
    }
}

/// CLR's body: the creator whose states are all removed (pfsync's `pfctl -F states` on a
/// peer).
pub(crate) fn write_clear(creator: u32, out: &mut Vec<u8>) {
    out.put_u32(creator);
}

pub(crate) fn read_clear(r: &mut Reader<'_>) -> Result<u32, BodyError> {
    let creator = r.u32()?;
    check_creator(creator)?;
    Ok(creator)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes of a state id on the wire.
    const STATE_ID_LEN: usize = 12;

    #[test]
    fn the_all_zero_id_asks_for_everything_and_is_no_state() {
        let zero = [0u8; STATE_ID_LEN];
        assert_eq!(UpdateRequest::read(&mut Reader::new(&zero)), Ok(UpdateRequest::All));
        let err = Err(BodyError::Field(FieldError::ZeroCreator));
        assert_eq!(StateId::read(&mut Reader::new(&zero)), err);
        let mut half = zero;
        half[11] = 1;
        assert_eq!(UpdateRequest::read(&mut Reader::new(&half)), err.map(UpdateRequest::One));
    }

    #[test]
    fn bulk_status_is_one_or_two() {
        assert_eq!(BulkStatus::read(&mut Reader::new(&[2, 0, 0, 0])), Ok(BulkStatus::End));
        let bad = BulkStatus::read(&mut Reader::new(&[3, 0, 0, 0]));
        assert_eq!(bad, Err(BodyError::Field(FieldError::BulkStatus(3))));
        assert_eq!(BulkStatus::read(&mut Reader::new(&[1, 0])), Err(BodyError::Short));
    }
}
