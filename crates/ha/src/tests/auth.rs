//! Authentication: the right key passes, anything else is refused with its own error.

use super::fixtures::{CREATOR, KEY, tcp_v4};
use crate::*;

fn keyed_datagram(key: &Key) -> Vec<u8> {
    let h = Header { creator: CREATOR, sequence: 7 };
    encode(&[Message::Insert(tcp_v4())], &h, Some(key), 1500).unwrap().bytes
}

#[test]
fn the_right_key_authenticates() {
    let key = Key::new(KEY).unwrap();
    let d = decode(&keyed_datagram(&key), Some(&key)).unwrap();
    assert!(d.authenticated);
    assert_eq!(d.messages, [Message::Insert(tcp_v4())]);
}

#[test]
fn a_wrong_key_is_a_bad_tag() {
    let key = Key::new(KEY).unwrap();
    let other = Key::new(b"another key of the same length!!").unwrap();
    assert_eq!(decode(&keyed_datagram(&key), Some(&other)), Err(DecodeError::BadTag));
}

#[test]
fn every_flipped_bit_is_refused() {
    let key = Key::new(KEY).unwrap();
    let sent = keyed_datagram(&key);
    for bit in 0..sent.len() * 8 {
        let mut bytes = sent.clone();
        bytes[bit / 8] ^= 1 << (bit % 8);
        assert!(decode(&bytes, Some(&key)).is_err(), "bit {bit} flipped and accepted");
    }
}

#[test]
fn a_flipped_bit_in_a_message_or_the_tag_is_a_bad_tag() {
    let key = Key::new(KEY).unwrap();
    let sent = keyed_datagram(&key);
    for at in [HEADER_LEN + 10, sent.len() - 1] {
        let mut bytes = sent.clone();
        bytes[at] ^= 0x10;
        assert_eq!(decode(&bytes, Some(&key)), Err(DecodeError::BadTag), "byte {at}");
    }
}

#[test]
fn tag_and_key_must_both_be_there_or_both_absent() {
    let key = Key::new(KEY).unwrap();
    let h = Header { creator: CREATOR, sequence: 7 };
    let plain = encode(&[], &h, None, 1500).unwrap().bytes;
    assert_eq!(decode(&plain, Some(&key)), Err(DecodeError::MissingTag));
    assert_eq!(decode(&keyed_datagram(&key), None), Err(DecodeError::UnexpectedTag));
    // A tag flag on a datagram too short to hold a tag.
    let mut short = plain.clone();
    short[5] = 0x01;
    assert_eq!(decode(&short, Some(&key)), Err(DecodeError::TooShort { len: HEADER_LEN }));
}

#[test]
fn stripping_the_tag_and_its_flag_is_refused_where_a_key_is_configured() {
    let key = Key::new(KEY).unwrap();
    let mut bytes = keyed_datagram(&key);
    bytes.truncate(bytes.len() - TAG_LEN);
    bytes[5] = 0;
    let len = bytes.len() as u16;
    bytes[8..10].copy_from_slice(&len.to_be_bytes());
    assert_eq!(decode(&bytes, Some(&key)), Err(DecodeError::MissingTag));
    // Without a key, it is an ordinary datagram: a key is what makes a forgery detectable.
    assert!(decode(&bytes, None).is_ok());
}
