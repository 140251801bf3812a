//! Arbitrary valid messages: every field over its whole range where the receiver accepts any
//! value, and over exactly the accepted values where it checks them.

use std::net::IpAddr;

use proptest::option;
use proptest::prelude::*;

use crate::*;

pub(super) fn creator() -> impl Strategy<Value = u32> {
    1..=u32::MAX
}

pub(super) fn state_id() -> impl Strategy<Value = StateId> {
    (creator(), any::<u64>()).prop_map(|(creator, counter)| StateId { creator, counter })
}

fn family() -> impl Strategy<Value = Family> {
    prop_oneof![Just(Family::V4), Just(Family::V6)]
}

fn addr(family: Family) -> BoxedStrategy<IpAddr> {
    match family {
        Family::V4 => any::<[u8; 4]>().prop_map(IpAddr::from).boxed(),
        Family::V6 => any::<[u8; 16]>().prop_map(IpAddr::from).boxed(),
    }
}

fn endpoint(family: Family) -> impl Strategy<Value = Endpoint> {
    (addr(family), any::<u16>()).prop_map(|(addr, port)| Endpoint { addr, port })
}

fn translation(family: Family) -> impl Strategy<Value = Translation> {
    let side = prop_oneof![Just(Side::Initiator), Just(Side::Responder)];
    (side, addr(family), any::<u16>()).prop_map(|(side, addr, port)| Translation {
        side,
        addr,
        port,
    })
}

/// 1 to 15 bytes of printable ASCII without `/` ('!'..='.' and '0'..='~').
fn interface() -> impl Strategy<Value = String> {
    "[!-.0-~]{1,15}"
}

fn pf_state() -> impl Strategy<Value = PfState> {
    (option::of(interface()), any::<bool>(), any::<u16>())
        .prop_map(|(interface, allow_opts, tag)| PfState { interface, allow_opts, tag })
}

/// At least one of the two.
fn pf_states() -> impl Strategy<Value = (Option<PfState>, Option<PfState>)> {
    prop_oneof![
        (pf_state(), option::of(pf_state())).prop_map(|(a, b)| (Some(a), b)),
        pf_state().prop_map(|b| (None, Some(b))),
    ]
}

fn tcp_window() -> impl Strategy<Value = TcpWindow> {
    (any::<[u32; 3]>(), any::<u16>(), option::of(0u8..=14)).prop_map(
        |([seqlo, seqhi, seqdiff], max_win, wscale)| TcpWindow {
            seqlo,
            seqhi,
            seqdiff,
            max_win,
            wscale,
        },
    )
}

pub(super) fn peer(tcp: bool) -> BoxedStrategy<Peer> {
    if tcp {
        (0..=tcp_state::TIME_WAIT, tcp_window())
            .prop_map(|(state, w)| Peer { state, window: Some(w) })
            .boxed()
    } else {
        (0u8..=2).prop_map(|state| Peer { state, window: None }).boxed()
    }
}

fn timeout() -> impl Strategy<Value = TimeoutClass> {
    proptest::sample::select(TimeoutClass::ALL.to_vec())
}

fn proto() -> impl Strategy<Value = u8> {
    prop_oneof![Just(6u8), Just(17), Just(1), Just(58), any::<u8>()]
}

pub(super) fn record() -> impl Strategy<Value = StateRecord> {
    (family(), proto()).prop_flat_map(|(family, proto)| {
        let ends = (endpoint(family), endpoint(family), option::of(translation(family)));
        let tcp = proto == 6;
        let tracking = ([peer(tcp), peer(tcp)], any::<u32>(), timeout(), any::<bool>());
        let rule =
            (any::<u64>(), any::<u32>()).prop_map(|(digest, index)| RuleRef { digest, index });
        let counts = (any::<[u64; 2]>(), any::<[u64; 2]>());
        (state_id(), ends, rule, pf_states(), tracking, counts).prop_map(
            move |(id, (initiator, responder, translation), rule, pf, track, (packets, bytes))| {
                let (peers, expire_in, timeout, sloppy) = track;
                StateRecord {
                    id,
                    family,
                    proto,
                    initiator,
                    responder,
                    translation,
                    rule,
                    from_initiator: pf.0,
                    from_responder: pf.1,
                    peers,
                    expire_in,
                    timeout,
                    sloppy,
                    packets,
                    bytes,
                }
            },
        )
    })
}

fn compressed() -> impl Strategy<Value = CompressedUpdate> {
    (state_id(), any::<u32>(), timeout(), any::<bool>()).prop_flat_map(
        |(id, expire_in, timeout, tcp)| {
            [peer(tcp), peer(tcp)].prop_map(move |peers| CompressedUpdate {
                id,
                expire_in,
                timeout,
                peers,
            })
        },
    )
}

pub(super) fn message() -> impl Strategy<Value = Message> {
    let request = prop_oneof![Just(UpdateRequest::All), state_id().prop_map(UpdateRequest::One)];
    let bulk = prop_oneof![Just(BulkStatus::Start), Just(BulkStatus::End)];
    prop_oneof![
        record().prop_map(Message::Insert),
        record().prop_map(Message::Update),
        compressed().prop_map(Message::UpdateCompressed),
        state_id().prop_map(Message::Delete),
        creator().prop_map(|creator| Message::Clear { creator }),
        request.prop_map(Message::UpdateRequest),
        bulk.prop_map(Message::Bulk),
        state_id().prop_map(Message::InsertAck),
    ]
}

pub(super) fn header() -> impl Strategy<Value = Header> {
    (creator(), any::<u64>()).prop_map(|(creator, sequence)| Header { creator, sequence })
}
