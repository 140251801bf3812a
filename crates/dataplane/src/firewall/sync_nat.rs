//! The NAT translations of synchronised states (issue 43): a translated flow's state travels
//! with what the box rewrote, so that after a takeover the peer translates its packets, the
//! replies above all, as this box did. pf keeps the translation in the state (its two keys);
//! linerate keeps it in the worker's NAT table ([`fw::nat::table`]), looked up here by the
//! state's flow.
//!
//! Carried: `nat` and `rdr` translations of TCP and UDP, over IPv4 (the NAT table's) and
//! IPv6 (NAT66's, [`fw::nat::six`]). `binat` needs none: its mapping is the rule's, the same
//! on both boxes. Not carried: ICMP query translations (their keys use the query identifier
//! on both sides), and `af-to`'s (the state and its translation are of two families).

use std::net::IpAddr;

use fw::nat::NatKind;
use fw::nat::six::{Key6, Nat6Table, Session6};
use fw::nat::table::{NatKey, NatTable, Phase, Session};
use fw::state::StateSnapshot;

/// What the box rewrote of a state's flow: the initiator's source (`nat`) or the responder's
/// address as the initiator asked for it (`rdr`), and to what (of the state's family).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NatSnapshot {
    /// The responder's end (`rdr`); else the initiator's (`nat`).
    pub responder: bool,
    pub addr: IpAddr,
    pub port: u16,
}

/// A worker's translation tables, IPv4's and NAT66's.
pub struct NatTables<'a> {
    pub v4: &'a mut NatTable,
    pub v6: &'a mut Nat6Table,
}

/// The flow of `s` as its initiator sends it, if the IPv4 table can hold it (TCP or UDP).
fn forward_key(s: &StateSnapshot) -> Option<NatKey> {
    let (IpAddr::V4(i), IpAddr::V4(r)) = (s.ends.initiator.addr, s.ends.responder.addr) else {
        return None;
    };
    matches!(s.proto, 6 | 17).then_some(NatKey {
        src: i.to_bits(),
        dst: r.to_bits(),
        sport: s.ends.initiator.port,
        dport: s.ends.responder.port,
        proto: s.proto,
    })
}

/// [`forward_key`] for an IPv6 state (NAT66's table).
fn forward_key6(s: &StateSnapshot) -> Option<Key6> {
    let (IpAddr::V6(i), IpAddr::V6(r)) = (s.ends.initiator.addr, s.ends.responder.addr) else {
        return None;
    };
    matches!(s.proto, 6 | 17).then_some(Key6 {
        src: i.to_bits(),
        dst: r.to_bits(),
        sport: s.ends.initiator.port,
        dport: s.ends.responder.port,
        proto: s.proto,
    })
}

/// The translation the tables hold for the flow of `s`: a `nat` session whose out key is
/// the flow as the initiator sent it, or an `rdr` one whose out key is the responder's reply.
pub(super) fn translation_of(
    v4: &NatTable,
    v6: &Nat6Table,
    s: &StateSnapshot,
) -> Option<NatSnapshot> {
    let snap = |responder, addr, port| NatSnapshot { responder, addr, port };
    if let Some(fwd) = forward_key6(s) {
        let to = |n: &Session6| (IpAddr::V6(n.out_to.0.into()), n.out_to.1);
        if let Some((a, p)) = v6.peek_out(&fwd).filter(|n| n.kind == NatKind::Nat).map(to) {
            return Some(snap(false, a, p));
        }
        let rdr = v6.peek_out(&fwd.reversed()).filter(|n| n.kind == NatKind::Rdr);
        return rdr.map(to).map(|(a, p)| snap(true, a, p));
    }
    let fwd = forward_key(s)?;
    let to = |n: &Session| (IpAddr::V4(std::net::Ipv4Addr::from_bits(n.out_to.0)), n.out_to.1);
    if let Some((a, p)) = v4.peek_out(&fwd).filter(|n| n.kind == NatKind::Nat).map(to) {
        return Some(snap(false, a, p));
    }
    v4.peek_out(&fwd.reversed())
        .filter(|n| n.kind == NatKind::Rdr)
        .map(to)
        .map(|(a, p)| snap(true, a, p))
}

/// The phase of a peer's state's translation: the responder has answered, both directions
/// seen.
fn phase_of(s: &StateSnapshot) -> Phase {
    if s.peers[1].state != 0 { Phase::Established } else { Phase::First }
}

/// The session a peer's state `s` translated by `t` needs here, on `iface` (the interface
/// toward the responder for `nat`, toward the initiator for `rdr`), as its last packet were
/// now. Its keys as `NatStage` makes them: see `source_session` and `redirect` in `nat.rs`.
pub(super) fn session_of(
    s: &StateSnapshot,
    t: &NatSnapshot,
    iface: u16,
    now: u32,
) -> Option<Session> {
    let fwd = forward_key(s)?;
    let IpAddr::V4(addr) = t.addr else { return None };
    let to = (addr.to_bits(), t.port);
    let (kind, out_key, out_to, in_key, in_to) = if t.responder {
        // rdr: the client asked for `to`; the state holds the server it was sent to.
        let in_key = NatKey { dst: to.0, dport: to.1, ..fwd };
        (NatKind::Rdr, fwd.reversed(), to, in_key, (fwd.dst, fwd.dport))
    } else {
        // nat: the reply comes back to `to`.
        let in_key =
            NatKey { src: fwd.dst, dst: to.0, sport: fwd.dport, dport: to.1, proto: fwd.proto };
        (NatKind::Nat, fwd, to, in_key, (fwd.src, fwd.sport))
    };
    let phase = phase_of(s);
    Some(Session { iface, kind, pass: false, out_key, out_to, in_key, in_to, last: now, phase })
}

/// [`session_of`] for an IPv6 state: NAT66's session (see `source_session` and `redirect` in
/// `nat6.rs`).
pub(super) fn session6_of(
    s: &StateSnapshot,
    t: &NatSnapshot,
    iface: u16,
    now: u32,
) -> Option<Session6> {
    let fwd = forward_key6(s)?;
    let IpAddr::V6(addr) = t.addr else { return None };
    let to = (addr.to_bits(), t.port);
    let (kind, out_key, out_to, in_key, in_to) = if t.responder {
        let in_key = Key6 { dst: to.0, dport: to.1, ..fwd };
        (NatKind::Rdr, fwd.reversed(), to, in_key, (fwd.dst, fwd.dport))
    } else {
        let in_key =
            Key6 { src: fwd.dst, dst: to.0, sport: fwd.dport, dport: to.1, proto: fwd.proto };
        (NatKind::Nat, fwd, to, in_key, (fwd.src, fwd.sport))
    };
    let phase = phase_of(s);
    Some(Session6 { iface, kind, pass: false, out_key, out_to, in_key, in_to, last: now, phase })
}

#[cfg(test)]
mod tests {
    use fw::state::{Endpoint, PeerSnapshot, StateEnds, Tmo};

    use super::*;

    fn a(s: &str) -> u32 {
        s.parse::<std::net::Ipv4Addr>().unwrap().to_bits()
    }

    /// A UDP state `initiator` -> `responder`, answered.
    fn state(initiator: (&str, u16), responder: (&str, u16)) -> StateSnapshot {
        let end = |(addr, port): (&str, u16)| Endpoint { addr: addr.parse().unwrap(), port };
        StateSnapshot {
            proto: 17,
            ends: StateEnds { initiator: end(initiator), responder: end(responder) },
            rule: 1,
            timeout: Tmo::UdpMultiple,
            expires_in: 60,
            sloppy: false,
            peers: [PeerSnapshot { state: 2, ..PeerSnapshot::default() }; 2],
            pf_states: [None, None],
        }
    }

    /// `nat`: lan 10.0.0.2:5000 -> 192.0.2.9:53 leaves as 203.0.113.1:61000, as `NatStage`
    /// makes it; the peer's copy of the translation is the same session.
    #[test]
    fn a_nat_translation_travels_with_its_state() {
        let out_key =
            NatKey { src: a("10.0.0.2"), dst: a("192.0.2.9"), sport: 5000, dport: 53, proto: 17 };
        let ours = Session {
            iface: 1,
            kind: NatKind::Nat,
            pass: false,
            out_key,
            out_to: (a("203.0.113.1"), 61000),
            in_key: NatKey {
                src: a("192.0.2.9"),
                dst: a("203.0.113.1"),
                sport: 53,
                dport: 61000,
                proto: 17,
            },
            in_to: (a("10.0.0.2"), 5000),
            last: 5,
            phase: Phase::Established,
        };
        let mut table = NatTable::new(16, 1);
        table.insert(ours).unwrap();
        let s = state(("10.0.0.2", 5000), ("192.0.2.9", 53));
        let t = translation_of(&table, &Nat6Table::new(4), &s).unwrap();
        assert_eq!(
            t,
            NatSnapshot { responder: false, addr: "203.0.113.1".parse().unwrap(), port: 61000 }
        );
        assert_eq!(session_of(&s, &t, 1, 5), Some(ours));
        assert_eq!(
            translation_of(
                &table,
                &Nat6Table::new(4),
                &state(("10.0.0.3", 5000), ("192.0.2.9", 53))
            ),
            None
        );
    }

    /// `rdr`: a client's 198.51.100.7:40000 -> 203.0.113.1:80 goes to 10.0.0.5:8080; the
    /// state holds the flow as redirected.
    #[test]
    fn an_rdr_translation_travels_with_its_state() {
        let in_key = NatKey {
            src: a("198.51.100.7"),
            dst: a("203.0.113.1"),
            sport: 40000,
            dport: 80,
            proto: 17,
        };
        let ours = Session {
            iface: 1,
            kind: NatKind::Rdr,
            pass: false,
            out_key: NatKey {
                src: a("10.0.0.5"),
                dst: a("198.51.100.7"),
                sport: 8080,
                dport: 40000,
                proto: 17,
            },
            out_to: (a("203.0.113.1"), 80),
            in_key,
            in_to: (a("10.0.0.5"), 8080),
            last: 9,
            phase: Phase::Established,
        };
        let mut table = NatTable::new(16, 1);
        table.insert(ours).unwrap();
        let s = state(("198.51.100.7", 40000), ("10.0.0.5", 8080));
        let t = translation_of(&table, &Nat6Table::new(4), &s).unwrap();
        assert_eq!(
            t,
            NatSnapshot { responder: true, addr: "203.0.113.1".parse().unwrap(), port: 80 }
        );
        assert_eq!(session_of(&s, &t, 1, 9), Some(ours));
        // Imported again: refreshed, not added twice.
        assert_eq!(table.import(Session { last: 20, ..ours }), Ok(false));
        assert_eq!(table.len(), 1);
    }

    /// NAT66: a `nat` translation of an IPv6 flow travels as its IPv4 kind does, into and
    /// out of NAT66's table.
    #[test]
    fn an_ipv6_translation_travels_with_its_state() {
        let v6 = |s: &str| s.parse::<std::net::Ipv6Addr>().unwrap().to_bits();
        let out_key = Key6 {
            src: v6("fd00::2"),
            dst: v6("2001:db8:9::1"),
            sport: 5000,
            dport: 53,
            proto: 17,
        };
        let ours = Session6 {
            iface: 1,
            kind: NatKind::Nat,
            pass: false,
            out_key,
            out_to: (v6("2001:db8:2::1"), 61000),
            in_key: Key6 {
                src: v6("2001:db8:9::1"),
                dst: v6("2001:db8:2::1"),
                sport: 53,
                dport: 61000,
                proto: 17,
            },
            in_to: (v6("fd00::2"), 5000),
            last: 5,
            phase: Phase::Established,
        };
        let mut six = Nat6Table::new(16);
        six.insert(ours).unwrap();
        let s = state(("fd00::2", 5000), ("2001:db8:9::1", 53));
        let t = translation_of(&NatTable::new(4, 1), &six, &s).unwrap();
        assert_eq!(
            t,
            NatSnapshot { responder: false, addr: "2001:db8:2::1".parse().unwrap(), port: 61000 }
        );
        assert_eq!(session6_of(&s, &t, 1, 5), Some(ours));
        assert_eq!(session_of(&s, &t, 1, 5), None, "not the IPv4 table's");
        let mut peer = Nat6Table::new(16);
        assert_eq!(peer.import(session6_of(&s, &t, 1, 5).unwrap()), Ok(true));
        assert_eq!(
            peer.import(Session6 { last: 9, ..ours }),
            Ok(false),
            "refreshed, not added twice"
        );
        assert_eq!(peer.len(), 1);
    }
}
