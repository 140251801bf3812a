//! Messages and their framing. Each message is a 4-byte subheader, then its body:
//!
//! | offset | size | field                                          |
//! |--------|------|------------------------------------------------|
//! | 0      | 1    | type ([`MessageType`])                         |
//! | 1      | 1    | reserved (0)                                   |
//! | 2      | 2    | body length in bytes, after this subheader     |
//!
//! The length lets a receiver skip a type it does not know, as OpenBSD's pfsync skips an
//! action it does not know by its subheader's record length (FreeBSD's cannot, and drops the
//! rest of the packet), and read a known one whose later version appended fields.

use crate::wire::{BodyError, Put, Reader};
use crate::{BulkStatus, CompressedUpdate, FieldError, StateId, StateRecord, UpdateRequest};

/// Bytes of a message's subheader.
pub const SUBHEADER_LEN: usize = 4;

/// The type byte of each message this version knows. 0 is reserved; any other value is a
/// type of a later version, skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum MessageType {
    Insert = 1,
    Update = 2,
    UpdateCompressed = 3,
    Delete = 4,
    Clear = 5,
    UpdateRequest = 6,
    Bulk = 7,
    InsertAck = 8,
}

impl MessageType {
    pub fn from_code(code: u8) -> Option<MessageType> {
        use MessageType::*;
        [Insert, Update, UpdateCompressed, Delete, Clear, UpdateRequest, Bulk, InsertAck]
            .into_iter()
            .find(|t| *t as u8 == code)
    }
}

/// One state change or request, pfsync's actions.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Message {
    /// INS: a new state.
    Insert(StateRecord),
    /// UPD: a state in full: sent when the peer may lack it (a bulk update, an answer to
    /// UPD_REQ, a stale update's correction).
    Update(StateRecord),
    /// UPD_C: a state's tracking and expiry.
    UpdateCompressed(CompressedUpdate),
    /// DEL: the state is gone.
    Delete(StateId),
    /// CLR: every state of this creator is gone.
    Clear { creator: u32 },
    /// UPD_REQ: send this state (or every state) in full.
    UpdateRequest(UpdateRequest),
    /// BUS: a bulk update starts or ends.
    Bulk(BulkStatus),
    /// INS_ACK: the sender installed this state; a box holding the state's first packet
    /// (`defer`) may now send it.
    InsertAck(StateId),
}

impl Message {
    pub fn kind(&self) -> MessageType {
        match self {
            Message::Insert(_) => MessageType::Insert,
            Message::Update(_) => MessageType::Update,
            Message::UpdateCompressed(_) => MessageType::UpdateCompressed,
            Message::Delete(_) => MessageType::Delete,
            Message::Clear { .. } => MessageType::Clear,
            Message::UpdateRequest(_) => MessageType::UpdateRequest,
            Message::Bulk(_) => MessageType::Bulk,
            Message::InsertAck(_) => MessageType::InsertAck,
        }
    }

    /// The checks the receiver runs on each field.
    pub(crate) fn check(&self) -> Result<(), FieldError> {
        match self {
            Message::Insert(r) | Message::Update(r) => r.check(),
            Message::UpdateCompressed(u) => u.check(),
            Message::Delete(id) | Message::InsertAck(id) => id.check(),
            Message::Clear { creator } => crate::control::check_creator(*creator),
            Message::UpdateRequest(q) => q.check(),
            Message::Bulk(_) => Ok(()),
        }
    }

    /// Appends the subheader and body.
    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.put_u8(self.kind() as u8);
        out.put_u8(0);
        out.put_u16(0);
        self.write_body(out);
        // Bodies are at most 192 bytes (a translated IPv6 record): the length always fits.
        let len = u16::try_from(out.len() - start - SUBHEADER_LEN).unwrap_or(u16::MAX);
        out[start + 2..start + SUBHEADER_LEN].copy_from_slice(&len.to_be_bytes());
    }

    fn write_body(&self, out: &mut Vec<u8>) {
        match self {
            Message::Insert(r) | Message::Update(r) => r.write(out),
            Message::UpdateCompressed(u) => u.write(out),
            Message::Delete(id) | Message::InsertAck(id) => id.write(out),
            Message::Clear { creator } => crate::control::write_clear(*creator, out),
            Message::UpdateRequest(q) => q.write(out),
            Message::Bulk(s) => s.write(out),
        }
    }

    /// Reads the body of a message of type `kind`; bytes after its fields are ignored.
    pub(crate) fn read(kind: MessageType, body: &[u8]) -> Result<Message, BodyError> {
        let r = &mut Reader::new(body);
        Ok(match kind {
            MessageType::Insert => Message::Insert(StateRecord::read(r)?),
            MessageType::Update => Message::Update(StateRecord::read(r)?),
            MessageType::UpdateCompressed => Message::UpdateCompressed(CompressedUpdate::read(r)?),
            MessageType::Delete => Message::Delete(StateId::read(r)?),
            MessageType::Clear => Message::Clear { creator: crate::control::read_clear(r)? },
            MessageType::UpdateRequest => Message::UpdateRequest(UpdateRequest::read(r)?),
            MessageType::Bulk => Message::Bulk(BulkStatus::read(r)?),
            MessageType::InsertAck => Message::InsertAck(StateId::read(r)?),
        })
    }
}

/// The next message's type byte and body, or `None` when its subheader or body runs past
/// the end.
pub(crate) fn next_framed<'a>(r: &mut Reader<'a>) -> Option<(u8, &'a [u8])> {
    let kind = r.u8().ok()?;
    let _reserved = r.u8().ok()?;
    let len = r.u16().ok()?;
    Some((kind, r.take(usize::from(len)).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_codes_round_trip_and_zero_is_unknown() {
        for code in 1..=8 {
            assert_eq!(MessageType::from_code(code).map(|t| t as u8), Some(code));
        }
        assert_eq!(MessageType::from_code(0), None);
        assert_eq!(MessageType::from_code(9), None);
    }

    #[test]
    fn framing_reads_what_write_wrote() {
        let mut out = vec![];
        Message::Clear { creator: 7 }.write(&mut out);
        assert_eq!(out, [5, 0, 0, 4, 0, 0, 0, 7]);
        let mut r = Reader::new(&out);
        let (kind, body) = next_framed(&mut r).unwrap();
        let kind = MessageType::from_code(kind).unwrap();
        assert_eq!(Message::read(kind, body), Ok(Message::Clear { creator: 7 }));
        assert_eq!(next_framed(&mut Reader::new(&out[..7])), None);
    }
}
