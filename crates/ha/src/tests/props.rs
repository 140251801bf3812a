//! Properties: what is encoded decodes to itself; no input makes the decoder panic; with a
//! key, no change to a datagram survives; the replay window matches a set of numbers seen.

use std::collections::HashSet;

use proptest::collection::vec;
use proptest::prelude::*;

use super::strategies::{header, message};
use crate::*;

fn key() -> Key {
    Key::new(b"a property test's key, 32 bytes!").unwrap()
}

/// A datagram's worth of messages: fits 9000 bytes without a tag.
fn messages() -> impl Strategy<Value = Vec<Message>> {
    vec(message(), 0..40)
}

/// Byte edits: (position, xor mask) pairs, then a cut or an extension.
fn edits() -> impl Strategy<Value = (Vec<(usize, u8)>, Option<usize>, Vec<u8>)> {
    let flips = vec((any::<usize>(), 1..=u8::MAX), 0..8);
    (flips, proptest::option::of(any::<usize>()), vec(any::<u8>(), 0..4))
}

fn apply(bytes: &mut Vec<u8>, (flips, cut, tail): &(Vec<(usize, u8)>, Option<usize>, Vec<u8>)) {
    for &(at, mask) in flips {
        let at = at % bytes.len();
        bytes[at] ^= mask;
    }
    if let Some(cut) = cut {
        bytes.truncate(cut % (bytes.len() + 1));
    }
    bytes.extend_from_slice(tail);
}

/// A decoded datagram's messages encode again, and decode to the same (decoding
/// canonicalises: skipped types, ignored bytes and reserved bits are gone).
fn reencodes(d: &Datagram) {
    let again = encode(&d.messages, &d.header, None, MAX_DATAGRAM_LEN).unwrap();
    assert_eq!(again.taken, d.messages.len());
    assert_eq!(decode(&again.bytes, None).unwrap().messages, d.messages);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn decode_inverts_encode_across_datagrams(
        msgs in messages(),
        first in header(),
        keyed in any::<bool>(),
        max_len in 256usize..9000,
    ) {
        let key = key();
        let key = keyed.then_some(&key);
        let datagrams = encode_all(&msgs, &first, key, max_len).unwrap();
        let mut got = vec![];
        for (i, bytes) in datagrams.iter().enumerate() {
            prop_assert!(bytes.len() <= max_len);
            let d = decode(bytes, key).unwrap();
            prop_assert_eq!(d.header.creator, first.creator);
            prop_assert_eq!(d.header.sequence, first.sequence.wrapping_add(i as u64));
            prop_assert_eq!(d.authenticated, keyed);
            got.extend(d.messages);
        }
        prop_assert_eq!(got, msgs);
    }

    #[test]
    fn decode_never_panics_on_arbitrary_bytes(bytes in vec(any::<u8>(), 0..600)) {
        let _ = decode(&bytes, None);
        let _ = decode(&bytes, Some(&key()));
    }

    /// Garbage behind a valid header, so that message parsing is reached, not only the header.
    #[test]
    fn decode_never_panics_on_arbitrary_messages(
        body in vec(any::<u8>(), 0..600),
        count in any::<u16>(),
    ) {
        let mut bytes = valid_header(count, body.len());
        bytes.extend_from_slice(&body);
        if let Ok(d) = decode(&bytes, None) {
            prop_assert!(d.messages.len() + usize::from(d.skipped) == usize::from(count));
            reencodes(&d);
        }
    }

    #[test]
    fn decode_never_panics_on_mutated_datagrams(
        msgs in vec(message(), 1..6),
        h in header(),
        edits in edits(),
    ) {
        let mut bytes = encode(&msgs, &h, None, 9000).unwrap().bytes;
        apply(&mut bytes, &edits);
        if let Ok(d) = decode(&bytes, None) {
            reencodes(&d);
        }
    }

    #[test]
    fn with_a_key_every_change_is_refused(
        msgs in vec(message(), 0..6),
        h in header(),
        edits in edits(),
    ) {
        let key = key();
        let sent = encode(&msgs, &h, Some(&key), 9000).unwrap().bytes;
        let mut bytes = sent.clone();
        apply(&mut bytes, &edits);
        let got = decode(&bytes, Some(&key));
        if bytes == sent {
            prop_assert!(got.is_ok());
        } else {
            prop_assert!(got.is_err(), "{:?}", edits);
        }
    }

    #[test]
    fn the_replay_window_accepts_each_recent_number_once(
        seqs in vec(prop_oneof![0u64..200, any::<u64>()], 1..300),
    ) {
        let mut window = ReplayWindow::new();
        let mut seen = HashSet::new();
        let mut highest: Option<u64> = None;
        for seq in seqs {
            let recent = highest.is_none_or(|h| seq > h || h - seq < REPLAY_WINDOW);
            let want = recent && !seen.contains(&seq);
            prop_assert_eq!(window.accept(seq).is_ok(), want, "{}", seq);
            if want {
                seen.insert(seq);
                highest = highest.max(Some(seq));
            }
        }
    }
}

/// A header for `count` messages in `body_len` bytes, length field right.
fn valid_header(count: u16, body_len: usize) -> Vec<u8> {
    let h = Header { creator: 1, sequence: 0 };
    let mut bytes = encode(&[], &h, None, HEADER_LEN).unwrap().bytes;
    let len = (HEADER_LEN + body_len) as u16;
    bytes[6..8].copy_from_slice(&count.to_be_bytes());
    bytes[8..10].copy_from_slice(&len.to_be_bytes());
    bytes
}
