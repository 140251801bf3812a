//! Packing messages into datagrams no longer than the sync link allows. The caller passes
//! `max_len`, the bytes a datagram may take on its link (the link's MTU less the IP and UDP
//! headers): a bulk update sized for a larger MTU than the path's is what broke
//! opnsense/core#4540.

use crate::auth::TAG_LEN;
use crate::header::{self, HEADER_LEN, Header, MAX_DATAGRAM_LEN};
use crate::{EncodeError, Key, Message};

/// One datagram and how many of the messages given it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoded {
    pub bytes: Vec<u8>,
    /// The messages `bytes` holds, from the first: the caller sends the rest in a datagram
    /// of the next sequence number.
    pub taken: usize,
}

/// Packs as many of `messages` as fit `max_len` bytes (at most [`MAX_DATAGRAM_LEN`]), in
/// order, into one datagram with `header`, tagged when a key is given. An empty list gives a
/// datagram of no message. Each message is checked as the receiver will check it; one that
/// would be refused is an error, not sent.
pub fn encode(
    messages: &[Message],
    header: &Header,
    key: Option<&Key>,
    max_len: usize,
) -> Result<Encoded, EncodeError> {
    if header.creator == 0 {
        return Err(EncodeError::ZeroCreator);
    }
    let max_len = max_len.min(MAX_DATAGRAM_LEN);
    let tag_len = if key.is_some() { TAG_LEN } else { 0 };
    let room = max_len.checked_sub(HEADER_LEN + tag_len).ok_or(EncodeError::NoRoom { max_len })?;
    let mut out = Vec::with_capacity(HEADER_LEN + tag_len + room.min(1500));
    header.write(&mut out, key.is_some());
    let taken = pack(messages, &mut out, HEADER_LEN + room)?;
    let len = out.len() + tag_len;
    // `pack` kept `len` within `max_len` and the count within `u16::MAX`.
    let (count, len16) = (taken as u16, len as u16);
    header::finish(&mut out, count, len16);
    if let Some(key) = key {
        let tag = key.tag(&out);
        out.extend_from_slice(&tag);
    }
    Ok(Encoded { bytes: out, taken })
}

/// Appends messages while `out` stays within `limit` bytes; returns how many. The first
/// message not fitting an empty datagram is an error: it would never fit.
fn pack(messages: &[Message], out: &mut Vec<u8>, limit: usize) -> Result<usize, EncodeError> {
    let empty = out.len();
    for (index, m) in messages.iter().enumerate() {
        m.check().map_err(|error| EncodeError::Field { index, error })?;
        let mark = out.len();
        m.write(out);
        // Past the limit, or one more than the count field holds: it goes in the next one.
        if out.len() > limit || index == usize::from(u16::MAX) {
            let len = out.len() - mark;
            out.truncate(mark);
            if mark == empty {
                return Err(EncodeError::TooLarge { index, len, room: limit - empty });
            }
            return Ok(index);
        }
    }
    Ok(messages.len())
}

/// Packs all of `messages` into as many datagrams as they need, numbered from
/// `header.sequence` up (wrapping, which a sender starting from its clock never reaches).
pub fn encode_all(
    messages: &[Message],
    header: &Header,
    key: Option<&Key>,
    max_len: usize,
) -> Result<Vec<Vec<u8>>, EncodeError> {
    let mut datagrams = vec![];
    let mut done = 0;
    let mut sequence = header.sequence;
    loop {
        let next = Header { creator: header.creator, sequence };
        let encoded =
            encode(&messages[done..], &next, key, max_len).map_err(|e| offset_index(e, done))?;
        datagrams.push(encoded.bytes);
        done += encoded.taken;
        sequence = sequence.wrapping_add(1);
        if done == messages.len() {
            return Ok(datagrams);
        }
    }
}

/// `e` with its message index counted from the start of the whole list.
fn offset_index(e: EncodeError, offset: usize) -> EncodeError {
    match e {
        EncodeError::Field { index, error } => EncodeError::Field { index: index + offset, error },
        EncodeError::TooLarge { index, len, room } => {
            EncodeError::TooLarge { index: index + offset, len, room }
        }
        other => other,
    }
}
