//! linerate's state synchronisation wire format: the datagrams two linerate boxes exchange so
//! that either can take over the other's connections (issue 43, `docs/ha.md`).
//!
//! The semantics are pfsync's (OpenBSD and FreeBSD `if_pfsync.c`): full inserts and updates,
//! compressed updates carrying only both peers' TCP tracking, deletes, clears, update
//! requests, bulk updates for a peer that joins, and acks for `defer`. The layout is
//! linerate's own and versioned: pfsync's differs between FreeBSD and OpenBSD (and between
//! FreeBSD releases), so copying one of them would buy no interoperability.
//!
//! This crate is only the codec: no sockets, threads, clocks or state table. It turns
//! [`Message`]s into datagrams ([`encode`], [`encode_all`]) and back ([`decode`]),
//! authenticates them with HMAC-SHA256 when a [`Key`] is configured, and gives the receiver
//! its two checks before it touches its table: [`ReplayWindow`] (each sequence number once,
//! IPsec's RFC 4303 3.4.3) and [`merge_peer`] (pfsync's rule: a TCP peer never moves back).
//!
//! Decoding never panics and allocates in proportion to the datagram (at most one message
//! per 4 bytes): the input is whatever arrived on the sync link.
//!
//! Files: `header.rs` (the datagram header), `message.rs` (message framing and types),
//! `record.rs` and `record_wire.rs` (INS / UPD), `peer.rs` (TCP tracking of one end),
//! `compressed.rs` (UPD_C), `control.rs` (DEL, CLR, UPD_REQ, BUS, ACK), `timeout.rs`,
//! `encode.rs`, `decode.rs`, `auth.rs`, `replay.rs`, `merge.rs`, `error.rs`, `wire.rs`.

#![forbid(unsafe_code)]

mod auth;
mod compressed;
mod control;
mod decode;
mod encode;
mod error;
mod header;
mod merge;
mod message;
mod peer;
mod record;
mod record_wire;
mod replay;
mod timeout;
mod wire;

#[cfg(test)]
mod tests;

pub use auth::{Key, MIN_KEY_LEN, TAG_LEN};
pub use compressed::CompressedUpdate;
pub use control::{BulkStatus, StateId, UpdateRequest};
pub use decode::{Datagram, decode};
pub use encode::{Encoded, encode, encode_all};
pub use error::{DecodeError, EncodeError, FieldError, KeyError};
pub use header::{HEADER_LEN, Header, MAGIC, MAX_DATAGRAM_LEN, VERSION};
pub use merge::{Merge, PeerMerges, merge_peer, merge_peers, seq_gt};
pub use message::{Message, MessageType, SUBHEADER_LEN};
pub use peer::{Peer, TcpWindow, tcp_state};
pub use record::{Endpoint, Family, PfState, RuleRef, Side, StateRecord, Translation};
pub use replay::{REPLAY_WINDOW, ReplayWindow, Replayed};
pub use timeout::TimeoutClass;
