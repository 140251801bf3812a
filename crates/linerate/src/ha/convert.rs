//! A state as the table exports it ([`StateSnapshot`]) and as the sync link carries it
//! ([`ha::StateRecord`]), both ways.
//!
//! Ids: the wire names a state by `(creator, counter)`, as pfsync does; linerate's tables know
//! a state by its flow. The counter is a hash of the flow (protocol and both ends), so the
//! sender needs no map, and the receiver keeps one from counters to flows for the DEL
//! messages (`super::link`). NAT translations travel as the record's `translation`
//! (`dataplane::firewall::sync::NatSnapshot`: `nat` and `rdr` of TCP and UDP over IPv4 and
//! IPv6).
//! Not carried yet: packet and byte counts.

use std::collections::BTreeMap;
use std::net::IpAddr;

use dataplane::firewall::sync::NatSnapshot;
use dataplane::fnv::{FNV_OFFSET, fnv1a};
use fw::state::{Endpoint, PeerSnapshot, StateEnds, StateSnapshot, SubState, Tmo};
use ha::{
    Family, PfState, RuleRef, Side, StateId, StateRecord, TcpWindow, TimeoutClass, Translation,
};

/// pf's `PF_WSCALE_FLAG` and `PF_WSCALE_MASK`: how the table holds a window-scale option.
const WSCALE_FLAG: u8 = 0x80;
const WSCALE_MASK: u8 = 0x0f;
const TCP: u8 = 6;

/// Interface names both ways: ours by the firewall's interface index, and the peer's names
/// that differ from ours (`[ha] interfaces`).
#[derive(Debug, Clone, Default)]
pub struct Names {
    pub ours: Vec<String>,
    pub peer_to_ours: BTreeMap<String, String>,
}

impl Names {
    fn name_of(&self, index: u16) -> Option<String> {
        self.ours.get(usize::from(index)).cloned()
    }

    /// Our index of the peer's interface `name`.
    fn index_of(&self, name: &str) -> Option<u16> {
        let ours = self.peer_to_ours.get(name).map_or(name, String::as_str);
        self.ours.iter().position(|n| n == ours).and_then(|i| u16::try_from(i).ok())
    }
}

/// Why a peer's record was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Bound to an interface this box does not have (add it to `[ha] interfaces`).
    UnknownInterface,
    /// A tag number or sequence offset this table cannot hold (`modulate state`).
    Unrepresentable,
}

/// The wire id of a flow's state created by `creator`: the flow hashed (FNV-1a, 64 bits).
pub fn id_of(creator: u32, proto: u8, ends: &StateEnds) -> StateId {
    let mut h = fnv1a(FNV_OFFSET, &[proto]);
    for e in [ends.initiator, ends.responder] {
        h = match e.addr {
            IpAddr::V4(a) => fnv1a(h, &a.octets()),
            IpAddr::V6(a) => fnv1a(h, &a.octets()),
        };
        h = fnv1a(h, &e.port.to_be_bytes());
    }
    StateId { creator, counter: h }
}

/// The record of a state this box holds.
pub fn record_of(
    s: &StateSnapshot,
    nat: Option<&NatSnapshot>,
    creator: u32,
    digest: u64,
    names: &Names,
) -> StateRecord {
    let family = if s.ends.initiator.addr.is_ipv4() { Family::V4 } else { Family::V6 };
    let pf_state = |sub: &Option<SubState>| {
        sub.map(|sub| PfState {
            interface: sub.bound.and_then(|b| names.name_of(b)),
            allow_opts: sub.allow_opts,
            tag: u16::from(sub.tag),
        })
    };
    StateRecord {
        id: id_of(creator, s.proto, &s.ends),
        family,
        proto: s.proto,
        initiator: endpoint(s.ends.initiator),
        responder: endpoint(s.ends.responder),
        translation: nat.map(|t| Translation {
            side: if t.responder { Side::Responder } else { Side::Initiator },
            addr: t.addr,
            port: t.port,
        }),
        rule: RuleRef { digest, index: s.rule },
        from_initiator: pf_state(&s.pf_states[0]),
        from_responder: pf_state(&s.pf_states[1]),
        peers: s.peers.map(|p| peer_of(p, s.proto)),
        expire_in: s.expires_in,
        timeout: class_of(s.timeout),
        sloppy: s.sloppy,
        packets: [0; 2],
        bytes: [0; 2],
    }
}

/// The translation of a peer's record as the NAT tables hold one: of the state's family
/// (NAT44, NAT66); another (a peer's NAT64) is not one these tables hold.
pub fn nat_of(r: &StateRecord) -> Option<NatSnapshot> {
    let t = r.translation.as_ref()?;
    let same =
        matches!((r.family, t.addr), (Family::V4, IpAddr::V4(_)) | (Family::V6, IpAddr::V6(_)));
    same.then_some(NatSnapshot { responder: t.side == Side::Responder, addr: t.addr, port: t.port })
}

/// The snapshot to import for a peer's record. Its rule index is kept only where the two
/// rule sets are the same (`digest`), as pfsync compares its rule sets' checksums.
pub fn snapshot_of(r: &StateRecord, digest: u64, names: &Names) -> Result<StateSnapshot, Refused> {
    let sub = |p: &Option<PfState>| -> Result<Option<SubState>, Refused> {
        let Some(p) = p else { return Ok(None) };
        let bound = match &p.interface {
            Some(name) => Some(names.index_of(name).ok_or(Refused::UnknownInterface)?),
            None => None,
        };
        let tag = u8::try_from(p.tag).map_err(|_| Refused::Unrepresentable)?;
        Ok(Some(SubState { bound, allow_opts: p.allow_opts, tag }))
    };
    let [a, b] = r.peers;
    Ok(StateSnapshot {
        proto: r.proto,
        ends: StateEnds { initiator: end_of(r.initiator), responder: end_of(r.responder) },
        rule: if r.rule.digest == digest { r.rule.index } else { u32::MAX },
        timeout: tmo_of(r.timeout),
        expires_in: r.expire_in,
        sloppy: r.sloppy,
        peers: [snapshot_peer(a)?, snapshot_peer(b)?],
        pf_states: [sub(&r.from_initiator)?, sub(&r.from_responder)?],
    })
}

fn endpoint(e: Endpoint) -> ha::Endpoint {
    ha::Endpoint { addr: e.addr, port: e.port }
}

fn end_of(e: ha::Endpoint) -> Endpoint {
    Endpoint { addr: e.addr, port: e.port }
}

fn peer_of(p: PeerSnapshot, proto: u8) -> ha::Peer {
    let window = (proto == TCP).then(|| TcpWindow {
        seqlo: p.seqlo,
        seqhi: p.seqhi,
        seqdiff: 0,
        max_win: p.max_win,
        wscale: (p.wscale & WSCALE_FLAG != 0).then_some(p.wscale & WSCALE_MASK),
    });
    ha::Peer { state: p.state, window }
}

fn snapshot_peer(p: ha::Peer) -> Result<PeerSnapshot, Refused> {
    let w = p.window.unwrap_or_default();
    if w.seqdiff != 0 {
        return Err(Refused::Unrepresentable);
    }
    Ok(PeerSnapshot {
        seqlo: w.seqlo,
        seqhi: w.seqhi,
        max_win: w.max_win,
        wscale: w.wscale.map_or(0, |s| (s & WSCALE_MASK) | WSCALE_FLAG),
        state: p.state,
    })
}

/// The two enums list pf's classes in pf's order.
const CLASSES: [(Tmo, TimeoutClass); 14] = [
    (Tmo::TcpFirst, TimeoutClass::TcpFirst),
    (Tmo::TcpOpening, TimeoutClass::TcpOpening),
    (Tmo::TcpEstablished, TimeoutClass::TcpEstablished),
    (Tmo::TcpClosing, TimeoutClass::TcpClosing),
    (Tmo::TcpFinWait, TimeoutClass::TcpFinWait),
    (Tmo::TcpClosed, TimeoutClass::TcpClosed),
    (Tmo::UdpFirst, TimeoutClass::UdpFirst),
    (Tmo::UdpSingle, TimeoutClass::UdpSingle),
    (Tmo::UdpMultiple, TimeoutClass::UdpMultiple),
    (Tmo::IcmpFirst, TimeoutClass::IcmpFirst),
    (Tmo::IcmpError, TimeoutClass::IcmpError),
    (Tmo::OtherFirst, TimeoutClass::OtherFirst),
    (Tmo::OtherSingle, TimeoutClass::OtherSingle),
    (Tmo::OtherMultiple, TimeoutClass::OtherMultiple),
];

fn class_of(t: Tmo) -> TimeoutClass {
    CLASSES.iter().find(|(a, _)| *a == t).map_or(TimeoutClass::OtherMultiple, |(_, c)| *c)
}

fn tmo_of(c: TimeoutClass) -> Tmo {
    CLASSES.iter().find(|(_, b)| *b == c).map_or(Tmo::OtherMultiple, |(t, _)| *t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(proto: u8, bound: Option<u16>) -> StateSnapshot {
        let end = |a: &str, port| Endpoint { addr: a.parse().unwrap(), port };
        let tcp =
            PeerSnapshot { seqlo: 1000, seqhi: 66535, max_win: 65535, wscale: 0x87, state: 4 };
        let peers = if proto == TCP {
            [tcp, PeerSnapshot { wscale: 0, ..tcp }]
        } else {
            [PeerSnapshot { state: 2, ..PeerSnapshot::default() }; 2]
        };
        StateSnapshot {
            proto,
            ends: StateEnds {
                initiator: end("198.18.0.2", 41000),
                responder: end("198.19.0.2", 9000),
            },
            rule: 3,
            timeout: if proto == TCP { Tmo::TcpEstablished } else { Tmo::UdpMultiple },
            expires_in: 55,
            sloppy: false,
            peers,
            pf_states: [Some(SubState { bound, allow_opts: true, tag: 7 }), None],
        }
    }

    fn names() -> Names {
        Names {
            ours: vec!["lrd0".into(), "lrd1".into()],
            peer_to_ours: [("eth1".to_owned(), "lrd1".to_owned())].into(),
        }
    }

    #[test]
    fn a_state_comes_back_as_it_left() {
        for (proto, bound) in [(TCP, None), (17, Some(1)), (TCP, Some(0))] {
            let s = snapshot(proto, bound);
            let r = record_of(&s, None, 9, 42, &names());
            assert_eq!(snapshot_of(&r, 42, &names()), Ok(s));
            assert_eq!(nat_of(&r), None);
            // Another rule set: the state comes without its rule.
            assert_eq!(snapshot_of(&r, 43, &names()).unwrap().rule, u32::MAX);
        }
    }

    #[test]
    fn a_translation_comes_back_as_it_left() {
        for responder in [false, true] {
            let t = NatSnapshot {
                responder,
                addr: std::net::Ipv4Addr::new(203, 0, 113, 5).into(),
                port: 61000,
            };
            let r = record_of(&snapshot(17, None), Some(&t), 9, 42, &names());
            assert_eq!(nat_of(&r), Some(t));
        }
    }

    #[test]
    fn the_peers_interface_names_map_to_ours() {
        let mut r = record_of(&snapshot(17, Some(0)), None, 9, 42, &names());
        r.from_initiator.as_mut().unwrap().interface = Some("eth1".into());
        assert_eq!(snapshot_of(&r, 42, &names()).unwrap().pf_states[0].unwrap().bound, Some(1));
        r.from_initiator.as_mut().unwrap().interface = Some("eth9".into());
        assert_eq!(snapshot_of(&r, 42, &names()), Err(Refused::UnknownInterface));
    }

    #[test]
    fn ids_are_the_flows() {
        let (a, b) = (snapshot(17, None), snapshot(TCP, None));
        assert_eq!(id_of(1, a.proto, &a.ends), id_of(1, a.proto, &a.ends));
        assert_ne!(id_of(1, a.proto, &a.ends).counter, id_of(1, b.proto, &b.ends).counter);
        assert_eq!(CLASSES.len(), TimeoutClass::ALL.len());
        assert!(CLASSES.iter().all(|(t, c)| tmo_of(*c) == *t && class_of(*t) == *c));
    }
}
