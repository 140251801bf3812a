//! Packing to a datagram size: as many messages as fit, the rest in the next datagrams.

use super::fixtures::{CREATOR, KEY, tcp_v4};
use crate::*;

fn inserts(n: u64) -> Vec<Message> {
    (1..=n)
        .map(|counter| {
            let mut r = tcp_v4();
            r.id.counter = counter;
            Message::Insert(r)
        })
        .collect()
}

const H: Header = Header { creator: CREATOR, sequence: 100 };

#[test]
fn as_many_as_fit_then_the_rest() {
    // 160 bytes a message: (1000 - 24) / 160 = 6 per datagram.
    let msgs = inserts(20);
    let first = encode(&msgs, &H, None, 1000).unwrap();
    assert_eq!((first.taken, first.bytes.len()), (6, 24 + 6 * 160));
    let all = encode_all(&msgs, &H, None, 1000).unwrap();
    let counts: Vec<usize> = all.iter().map(|b| decode(b, None).unwrap().messages.len()).collect();
    assert_eq!(counts, [6, 6, 6, 2]);
    let seqs: Vec<u64> = all.iter().map(|b| decode(b, None).unwrap().header.sequence).collect();
    assert_eq!(seqs, [100, 101, 102, 103]);
    let back: Vec<Message> = all.iter().flat_map(|b| decode(b, None).unwrap().messages).collect();
    assert_eq!(back, msgs);
}

#[test]
fn the_tag_takes_its_room() {
    // (1000 - 24 - 32) / 160 = 5.
    let key = Key::new(KEY).unwrap();
    let first = encode(&inserts(20), &H, Some(&key), 1000).unwrap();
    assert_eq!((first.taken, first.bytes.len()), (5, 24 + 5 * 160 + 32));
}

#[test]
fn an_exact_fit_fits() {
    let first = encode(&inserts(3), &H, None, 24 + 2 * 160).unwrap();
    assert_eq!(first.taken, 2);
    assert_eq!(encode(&inserts(3), &H, None, 24 + 2 * 160 - 1).unwrap().taken, 1);
}

#[test]
fn no_message_is_one_empty_datagram() {
    let all = encode_all(&[], &H, None, 1500).unwrap();
    assert_eq!(all.len(), 1);
    let d = decode(&all[0], None).unwrap();
    assert_eq!((d.header, d.messages.len()), (H, 0));
}

#[test]
fn a_message_that_fits_no_datagram_is_an_error() {
    let mut msgs = inserts(4);
    assert_eq!(
        encode(&msgs, &H, None, 100),
        Err(EncodeError::TooLarge { index: 0, len: 160, room: 76 })
    );
    // Its index counts from the first message, whichever datagram it would start.
    let mut big = tcp_v4();
    big.family = Family::V6;
    big.initiator.addr = "2001:db8::10".parse().unwrap();
    big.responder.addr = "2001:db8::20".parse().unwrap();
    big.translation.as_mut().unwrap().addr = "2001:db8::30".parse().unwrap();
    msgs.push(Message::Insert(big));
    let err = EncodeError::TooLarge { index: 4, len: 196, room: 176 };
    assert_eq!(encode_all(&msgs, &H, None, 200), Err(err));
    assert_eq!(encode(&[], &H, None, 23), Err(EncodeError::NoRoom { max_len: 23 }));
    let key = Key::new(KEY).unwrap();
    assert_eq!(encode(&[], &H, Some(&key), 55), Err(EncodeError::NoRoom { max_len: 55 }));
}

#[test]
fn datagrams_stop_at_the_length_field_s_range() {
    // 8-byte messages: 65535 bytes would hold 8188 of them.
    let msgs = vec![Message::Bulk(BulkStatus::Start); 10_000];
    let first = encode(&msgs, &H, None, usize::MAX).unwrap();
    assert_eq!(first.taken, (MAX_DATAGRAM_LEN - HEADER_LEN) / 8);
    assert!(first.bytes.len() <= MAX_DATAGRAM_LEN);
    assert_eq!(decode(&first.bytes, None).unwrap().messages.len(), first.taken);
}
