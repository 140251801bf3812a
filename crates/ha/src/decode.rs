//! Reading a datagram off the sync link. The checks run cheapest first and the tag before
//! any message is read, so that an unauthenticated datagram costs one HMAC and is never
//! parsed further.

use crate::auth::TAG_LEN;
use crate::header::{self, HEADER_LEN, Header};
use crate::message::{MessageType, SUBHEADER_LEN, next_framed};
use crate::wire::{BodyError, Reader};
use crate::{DecodeError, Key, Message};

/// A datagram as received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Datagram {
    pub header: Header,
    /// The messages of types this version knows, in order.
    pub messages: Vec<Message>,
    /// Messages of types this version does not know, skipped (OpenBSD's pfsync skips them
    /// likewise): worth a counter, since a peer running a later version sends them.
    pub skipped: u16,
    /// Whether a tag was verified (only with a key).
    pub authenticated: bool,
}

/// Decodes `bytes`, one whole datagram. With a key, a datagram without a valid tag is
/// refused; without one, a datagram with a tag is refused too (the boxes' configs differ).
/// Never panics. Allocates in proportion to the input: a `Vec` of at most one message per 4
/// bytes, and the interface names of the records (15 bytes at most each).
pub fn decode(bytes: &[u8], key: Option<&Key>) -> Result<Datagram, DecodeError> {
    let parsed = header::parse(bytes)?;
    let body_end = authenticate(bytes, parsed.tagged, key)?;
    let body = bytes.get(HEADER_LEN..body_end).unwrap_or_default();
    let (messages, skipped) = read_messages(body, parsed.count)?;
    let authenticated = parsed.tagged;
    Ok(Datagram { header: parsed.header, messages, skipped, authenticated })
}

/// Checks the tag against the key; returns where the messages end (where the tag starts).
fn authenticate(bytes: &[u8], tagged: bool, key: Option<&Key>) -> Result<usize, DecodeError> {
    match (tagged, key) {
        (false, None) => Ok(bytes.len()),
        (false, Some(_)) => Err(DecodeError::MissingTag),
        (true, None) => Err(DecodeError::UnexpectedTag),
        (true, Some(key)) => {
            // `header::parse` checked that a tagged datagram holds the header and a tag.
            let end = bytes.len().saturating_sub(TAG_LEN);
            let (signed, tag) = bytes.split_at(end);
            if key.verify(signed, tag) { Ok(end) } else { Err(DecodeError::BadTag) }
        }
    }
}

/// Reads `count` messages filling `body` exactly.
fn read_messages(body: &[u8], count: u16) -> Result<(Vec<Message>, u16), DecodeError> {
    let max = body.len() / SUBHEADER_LEN;
    if usize::from(count) > max {
        return Err(DecodeError::TooManyMessages { count, max });
    }
    let mut messages = Vec::with_capacity(usize::from(count));
    let mut skipped = 0;
    let r = &mut Reader::new(body);
    for index in 0..count {
        let (kind, bytes) = next_framed(r).ok_or(DecodeError::MessageOverrun { index })?;
        let Some(kind) = MessageType::from_code(kind) else {
            skipped += 1;
            continue;
        };
        messages.push(Message::read(kind, bytes).map_err(|e| body_error(e, index, kind))?);
    }
    match r.remaining() {
        0 => Ok((messages, skipped)),
        len => Err(DecodeError::TrailingBytes { len }),
    }
}

fn body_error(e: BodyError, index: u16, kind: MessageType) -> DecodeError {
    match e {
        BodyError::Short => DecodeError::ShortMessage { index, kind: kind as u8 },
        BodyError::Field(error) => DecodeError::Field { index, error },
    }
}
