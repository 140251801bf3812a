//! Each way a datagram is refused, reached from the IPv4 fixture by one edit; and what is
//! not refused: unknown types, longer bodies, reserved bits.

use super::fixtures::{TCP_V4, tcp_v4};
use crate::*;

/// Where the fixture's record starts: header, then the INS subheader.
const REC: usize = HEADER_LEN + SUBHEADER_LEN;

fn edited(edit: impl FnOnce(&mut Vec<u8>)) -> Result<Datagram, DecodeError> {
    let mut bytes = TCP_V4.to_vec();
    edit(&mut bytes);
    decode(&bytes, None)
}

fn set_u16(bytes: &mut [u8], at: usize, v: u16) {
    bytes[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

fn field(error: FieldError) -> Result<Datagram, DecodeError> {
    Err(DecodeError::Field { index: 0, error })
}

#[test]
fn header_errors() {
    assert_eq!(decode(&[], None), Err(DecodeError::TooShort { len: 0 }));
    assert_eq!(decode(&TCP_V4[..10], None), Err(DecodeError::TooShort { len: 10 }));
    assert_eq!(edited(|b| b[3] = b'B'), Err(DecodeError::BadMagic(0x4c52_4842)));
    assert_eq!(edited(|b| b[4] = 0), Err(DecodeError::UnknownVersion(0)));
    let cut = DecodeError::LengthMismatch { declared: 184, actual: 183 };
    assert_eq!(edited(|b| b.truncate(183)), Err(cut));
    assert_eq!(edited(|b| b[12..16].fill(0)), Err(DecodeError::ZeroCreator));
}

#[test]
fn framing_errors() {
    let many = DecodeError::TooManyMessages { count: 1000, max: 40 };
    assert_eq!(edited(|b| set_u16(b, 6, 1000)), Err(many));
    assert_eq!(edited(|b| set_u16(b, 6, 2)), Err(DecodeError::MessageOverrun { index: 1 }));
    let trailing = |b: &mut Vec<u8>| {
        b.extend_from_slice(&[0; 4]);
        set_u16(b, 8, 188);
    };
    assert_eq!(edited(trailing), Err(DecodeError::TrailingBytes { len: 4 }));
    let short = |b: &mut Vec<u8>| set_u16(b, HEADER_LEN + 2, 150);
    assert_eq!(edited(short), Err(DecodeError::ShortMessage { index: 0, kind: 1 }));
    // A body running past the end.
    let overrun = |b: &mut Vec<u8>| set_u16(b, HEADER_LEN + 2, 157);
    assert_eq!(edited(overrun), Err(DecodeError::MessageOverrun { index: 0 }));
}

#[test]
fn field_errors() {
    assert_eq!(edited(|b| b[REC..REC + 4].fill(0)), field(FieldError::ZeroCreator));
    assert_eq!(edited(|b| b[REC + 12] = 5), field(FieldError::Family(5)));
    assert_eq!(edited(|b| b[REC + 14] = 14), field(FieldError::TimeoutClass(14)));
    assert_eq!(edited(|b| b[REC + 40 + 14] = 0x8f), field(FieldError::WindowScale(15)));
    assert_eq!(edited(|b| b[REC + 40 + 14] = 0x07), field(FieldError::WindowScaleFlag(7)));
    assert_eq!(edited(|b| b[REC + 56 + 15] = 11), field(FieldError::TcpState(11)));
    // The same peers read as UDP's: ESTABLISHED (4) is no pseudo-state.
    assert_eq!(edited(|b| b[REC + 13] = 17), field(FieldError::PseudoState(4)));
    assert_eq!(edited(|b| b[REC + 124 + 4] = b' '), field(FieldError::InterfaceName));
    let neither = |b: &mut Vec<u8>| {
        b[REC + 104] = 0;
        b[REC + 124] = 0;
    };
    assert_eq!(edited(neither), field(FieldError::NoPfState));
}

#[test]
fn unknown_types_are_skipped_and_counted() {
    let d = edited(|b| b[HEADER_LEN] = 0x42).unwrap();
    assert_eq!((d.messages.len(), d.skipped), (0, 1));
    let d = edited(|b| b[HEADER_LEN] = 0).unwrap();
    assert_eq!((d.messages.len(), d.skipped), (0, 1));
}

#[test]
fn a_longer_body_of_a_known_type_is_read_and_its_tail_ignored() {
    let longer = |b: &mut Vec<u8>| {
        b.extend_from_slice(&[0xee; 8]);
        set_u16(b, 8, 192);
        set_u16(b, HEADER_LEN + 2, 164);
    };
    assert_eq!(edited(longer).unwrap().messages, [Message::Insert(tcp_v4())]);
}

#[test]
fn reserved_bits_and_bytes_are_ignored() {
    let reserved = |b: &mut Vec<u8>| {
        b[5] |= 0x80;
        b[10] = 0xff;
        b[HEADER_LEN + 1] = 0xff;
        b[REC + 15] |= 0xf0;
        b[REC + 38] = 0xff;
        b[REC + 104 + 1] = 0xff;
    };
    assert_eq!(edited(reserved).unwrap().messages, [Message::Insert(tcp_v4())]);
}

#[test]
fn encode_refuses_what_decode_would() {
    let h = Header { creator: 1, sequence: 0 };
    let mut bad = tcp_v4();
    bad.peers[1].window.as_mut().unwrap().wscale = Some(15);
    let msgs = [Message::Delete(bad.id), Message::Update(bad.clone())];
    let err = EncodeError::Field { index: 1, error: FieldError::WindowScale(15) };
    assert_eq!(encode(&msgs, &h, None, 1500), Err(err));
    bad = tcp_v4();
    bad.responder.addr = "2001:db8::1".parse().unwrap();
    let err = EncodeError::Field { index: 0, error: FieldError::FamilyMismatch };
    assert_eq!(encode(&[Message::Insert(bad)], &h, None, 1500), Err(err));
    bad = tcp_v4();
    bad.proto = 17;
    let err = EncodeError::Field { index: 0, error: FieldError::TcpWindow };
    assert_eq!(encode(&[Message::Insert(bad)], &h, None, 1500), Err(err));
    bad = tcp_v4();
    bad.from_responder.as_mut().unwrap().interface = Some("a-very-long-name0".into());
    let err = EncodeError::Field { index: 0, error: FieldError::InterfaceName };
    assert_eq!(encode(&[Message::Insert(bad)], &h, None, 1500), Err(err));
    let zero = Header { creator: 0, sequence: 0 };
    assert_eq!(encode(&[], &zero, None, 1500), Err(EncodeError::ZeroCreator));
    let clear = [Message::Clear { creator: 0 }];
    let err = EncodeError::Field { index: 0, error: FieldError::ZeroCreator };
    assert_eq!(encode(&clear, &h, None, 1500), Err(err));
}
