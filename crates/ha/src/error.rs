//! What can be wrong with a datagram, a message, a field or a key. The receiver drops a
//! datagram that fails to decode and counts it by its error (issue 43: "bad, stale, replayed
//! or unauthenticated messages are dropped and counted, never a crash").

use crate::{HEADER_LEN, MIN_KEY_LEN};

/// A field of a message whose value this version does not accept. The same checks run on
/// [`encode`](crate::encode) (so that nothing is sent that the peer would reject) and on
/// [`decode`](crate::decode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FieldError {
    /// Creator id 0 is reserved: an all-zero state id in UPD_REQ asks for every state, as in
    /// pfsync.
    #[error("creator id 0 is reserved")]
    ZeroCreator,
    #[error("address family {0} (4 or 6)")]
    Family(u8),
    /// An address of the record is not of the record's family.
    #[error("an address is not of the state's family")]
    FamilyMismatch,
    /// A window-scale shift beyond 14 (RFC 7323 2.3).
    #[error("window scale {0} > 14")]
    WindowScale(u8),
    /// A window-scale byte that is neither 0 (no option) nor flag 0x80 with a shift.
    #[error("window scale byte {0:#04x} without its flag")]
    WindowScaleFlag(u8),
    /// A TCP peer state past TIME_WAIT (the BSD `TCPS_*` numbering).
    #[error("TCP state {0}")]
    TcpState(u8),
    /// A UDP / other-protocol pseudo-state past MULTIPLE (pf's `PFUDPS_*`).
    #[error("pseudo-state {0}")]
    PseudoState(u8),
    /// TCP tracking present on a non-TCP state, absent on a TCP one, or on one peer only.
    #[error("TCP tracking present on a non-TCP state or absent on a TCP one")]
    TcpWindow,
    #[error("timeout class {0}")]
    TimeoutClass(u8),
    /// An interface name that is empty, longer than 15 bytes (Linux's `IFNAMSIZ` less its
    /// NUL), or holds a byte outside printable ASCII, a space or a `/`.
    #[error("interface name")]
    InterfaceName,
    /// A record holding neither of pf's two states: nothing to install.
    #[error("a state record with neither of pf's states")]
    NoPfState,
    #[error("bulk update status {0} (1: start, 2: end)")]
    BulkStatus(u8),
}

/// Why [`decode`](crate::decode) rejected a datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("{len} bytes: shorter than the {HEADER_LEN}-byte header (and its tag)")]
    TooShort { len: usize },
    #[error("bad magic {0:#010x}")]
    BadMagic(u32),
    #[error("unknown version {0}")]
    UnknownVersion(u8),
    /// The header's length is not the datagram's: truncated, or padded by something.
    #[error("header says {declared} bytes, the datagram has {actual}")]
    LengthMismatch { declared: usize, actual: usize },
    /// A key is configured and the datagram carries no tag.
    #[error("no authentication tag, and a key is configured")]
    MissingTag,
    /// The datagram carries a tag and no key is configured: the two boxes' configurations
    /// differ, which should fail in both directions rather than in one.
    #[error("an authentication tag, and no key is configured")]
    UnexpectedTag,
    #[error("bad authentication tag")]
    BadTag,
    /// The sender's creator id is 0 (reserved).
    #[error("sender creator id 0")]
    ZeroCreator,
    /// More messages declared than the datagram has room for (each takes at least its
    /// subheader).
    #[error("{count} messages declared, room for {max}")]
    TooManyMessages { count: u16, max: usize },
    /// Message `index`'s subheader or body runs past the end of the datagram.
    #[error("message {index} runs past the end of the datagram")]
    MessageOverrun { index: u16 },
    /// Bytes left after the declared messages.
    #[error("{len} bytes after the last message")]
    TrailingBytes { len: usize },
    /// Message `index` of a known type is shorter than that type's fields.
    #[error("message {index} (type {kind}) is too short for its fields")]
    ShortMessage { index: u16, kind: u8 },
    #[error("message {index}: {error}")]
    Field { index: u16, error: FieldError },
}

/// Why [`encode`](crate::encode) refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// Message `index` would be rejected by the receiver.
    #[error("message {index}: {error}")]
    Field { index: usize, error: FieldError },
    /// Message `index` (`len` bytes with its subheader) does not fit the `room` bytes an
    /// empty datagram of the given length has for messages.
    #[error("message {index} ({len} bytes) does not fit the {room} bytes a datagram has")]
    TooLarge { index: usize, len: usize, room: usize },
    /// `max_len` has no room for the header (and tag).
    #[error("a datagram of {max_len} bytes has no room for the header")]
    NoRoom { max_len: usize },
    #[error("sender creator id 0 is reserved")]
    ZeroCreator,
}

/// Why [`Key::new`](crate::Key::new) refused a secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("key of {len} bytes: at least {MIN_KEY_LEN} are needed")]
    TooShort { len: usize },
}
