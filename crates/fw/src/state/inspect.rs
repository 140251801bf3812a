//! Reading states out of a table for operators (`pfctl -ss`, `-k`, `-F states`): walking the
//! slot array a bounded stretch at a time, and a state's endpoints as addresses and ports
//! (removal is [`StateTable::remove`]).
//! Off the fast path: the data plane calls this between batches, when asked.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::{Entry, F_INIT_B, F_USED, StateId, StateTable, flow::FlowKey, pseudo_state, tcp_state};
use crate::packet::{Af, proto};

/// One end of a state: address and port (for ICMP, pf's mapping: the query's identifier on
/// the querier's side, its type on the other; 0 for protocols without ports).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endpoint {
    pub addr: IpAddr,
    pub port: u16,
}

/// Who opened the flow and who answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateEnds {
    pub initiator: Endpoint,
    pub responder: Endpoint,
}

impl FlowKey {
    /// Endpoints A and B of the key (see `flow.rs` for the layout).
    fn endpoints(&self) -> (Endpoint, Endpoint) {
        let w = &self.w;
        if self.is_v6() {
            let addr = |lo: u64, hi: u64| {
                IpAddr::V6(Ipv6Addr::from_bits(u128::from(hi) << 64 | u128::from(lo)))
            };
            let a = Endpoint { addr: addr(w[0], w[1]), port: w[4] as u16 };
            let b = Endpoint { addr: addr(w[2], w[3]), port: (w[4] >> 16) as u16 };
            (a, b)
        } else {
            // An IPv4 endpoint is its header bytes read as little-endian integers.
            let end = |x: u64| Endpoint {
                addr: IpAddr::V4(Ipv4Addr::from(((x >> 16) as u32).to_le_bytes())),
                port: u16::from_be_bytes((x as u16).to_le_bytes()),
            };
            (end(w[0]), end(w[1]))
        }
    }
}

impl StateTable {
    /// Slots ever used (ids range over `0..slot_count()`, the array's high-water mark): what
    /// a walk with [`states_in`](Self::states_in) covers.
    pub fn slot_count(&self) -> usize {
        self.slots.len()
    }

    /// The states (live, or dead and not yet reclaimed) among slots `ids` (cut to the slot
    /// array): a walk over a large table takes it a stretch at a time.
    pub fn states_in(&self, ids: std::ops::Range<usize>) -> impl Iterator<Item = StateId> + '_ {
        let end = ids.end.min(self.slots.len());
        let start = ids.start.min(end);
        self.slots[start..end]
            .iter()
            .enumerate()
            .filter(|(_, e): &(usize, &Entry)| e.flags & F_USED != 0)
            .map(move |(i, _)| StateId((start + i) as u32))
    }

    /// The initiator's and the responder's endpoints of state `id`.
    pub fn ends(&self, id: StateId) -> Option<StateEnds> {
        let e = self.slots.get(id.0 as usize).filter(|e| e.flags & F_USED != 0)?;
        let (a, b) = e.key.endpoints();
        let (initiator, responder) = if e.flags & F_INIT_B != 0 { (b, a) } else { (a, b) };
        Some(StateEnds { initiator, responder })
    }
}

impl StateTable {
    /// `overload ... flush`: removes, among slots `ids`, the states that `af`/`addr` opened
    /// (its initiator), of rule `rule` only if given. Returns how many.
    pub fn flush_source(
        &mut self,
        ids: std::ops::Range<usize>,
        af: Af,
        addr: u128,
        rule: Option<u32>,
    ) -> usize {
        let want = match af {
            Af::Inet => IpAddr::V4(Ipv4Addr::from_bits(addr as u32)),
            Af::Inet6 => IpAddr::V6(Ipv6Addr::from_bits(addr)),
        };
        let gone: Vec<StateId> = self
            .states_in(ids)
            .filter(|&id| {
                rule.is_none_or(|r| self.rule_of(id) == Some(r))
                    && self.ends(id).is_some_and(|e| e.initiator.addr == want)
            })
            .collect();
        for &id in &gone {
            self.journal_removed(id.0 as usize);
            let pos = self.position_of(id.0 as usize);
            self.remove_at(pos, id.0 as usize);
        }
        self.counters.src_flushed += gone.len() as u64;
        gone.len()
    }
}

/// A state's per-end state as pfctl prints it: TCP's `ESTABLISHED`, `FIN_WAIT_2`, ...; UDP's
/// and other protocols' `SINGLE`, `MULTIPLE`, `NO_TRAFFIC`.
pub fn state_name(protocol: u8, state: u8) -> &'static str {
    use tcp_state::*;
    if protocol == proto::TCP {
        match state {
            CLOSED => "CLOSED",
            LISTEN => "LISTEN",
            SYN_SENT => "SYN_SENT",
            SYN_RECEIVED => "SYN_RCVD",
            ESTABLISHED => "ESTABLISHED",
            CLOSE_WAIT => "CLOSE_WAIT",
            FIN_WAIT_1 => "FIN_WAIT_1",
            CLOSING => "CLOSING",
            LAST_ACK => "LAST_ACK",
            FIN_WAIT_2 => "FIN_WAIT_2",
            TIME_WAIT => "TIME_WAIT",
            PROXY_SRC => "PROXY:SRC",
            PROXY_DST => "PROXY:DST",
            _ => "UNKNOWN",
        }
    } else {
        match state {
            pseudo_state::NO_TRAFFIC => "NO_TRAFFIC",
            pseudo_state::SINGLE => "SINGLE",
            pseudo_state::MULTIPLE => "MULTIPLE",
            _ => "UNKNOWN",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{Af, PacketKey};
    use crate::state::Timeouts;

    fn udp(src: &str, sport: u16, dst: &str, dport: u16) -> PacketKey {
        let bits = |a: &str| match a.parse::<IpAddr>().unwrap() {
            IpAddr::V4(v) => u128::from(v.to_bits()),
            IpAddr::V6(v) => v.to_bits(),
        };
        let af = if src.contains(':') { Af::Inet6 } else { Af::Inet };
        PacketKey {
            af,
            proto: proto::UDP,
            src: bits(src),
            dst: bits(dst),
            src_port: sport,
            dst_port: dport,
            len: 60,
            ..PacketKey::ZERO
        }
    }

    #[test]
    fn ends_name_initiator_and_responder_whatever_the_key_order() {
        let mut t = StateTable::new(16, Timeouts::default(), 7);
        // Initiators on either side of the canonical order, IPv4 and IPv6.
        let keys = [
            udp("198.18.0.2", 40000, "198.19.0.2", 53),
            udp("198.19.0.9", 53, "198.18.0.2", 1234),
            udp("2001:db8:b::2", 5000, "2001:db8:a::2", 6000),
        ];
        for k in &keys {
            t.insert(k, 3, 0, None).unwrap();
        }
        let mut found: Vec<(String, String)> = t
            .states_in(0..t.slot_count())
            .map(|id| {
                let e = t.ends(id).unwrap();
                assert_eq!(t.info(id).unwrap().rule, 3);
                (
                    format!("{}:{}", e.initiator.addr, e.initiator.port),
                    format!("{}:{}", e.responder.addr, e.responder.port),
                )
            })
            .collect();
        found.sort();
        let mut want: Vec<(String, String)> = keys
            .iter()
            .map(|k| {
                let a = |x: u128| {
                    if k.af == Af::Inet {
                        IpAddr::V4(Ipv4Addr::from_bits(x as u32))
                    } else {
                        IpAddr::V6(Ipv6Addr::from_bits(x))
                    }
                };
                (format!("{}:{}", a(k.src), k.src_port), format!("{}:{}", a(k.dst), k.dst_port))
            })
            .collect();
        want.sort();
        assert_eq!(found, want);
    }

    #[test]
    fn walk_in_stretches_then_remove() {
        let mut t = StateTable::new(64, Timeouts::default(), 1);
        for p in 0..40 {
            t.insert(&udp("10.0.0.1", 1000 + p, "10.0.0.2", 53), 0, 0, None).unwrap();
        }
        let n = t.slot_count();
        let in_stretches: usize = (0..n).step_by(7).map(|s| t.states_in(s..s + 7).count()).sum();
        assert_eq!(in_stretches, 40);
        assert_eq!(t.states_in(n + 5..n + 10).count(), 0);
        let ids: Vec<StateId> = t.states_in(0..n).collect();
        assert!(ids.into_iter().all(|id| t.remove(id)));
        assert_eq!((t.len(), t.counters().removed), (0, 40));
        t.debug_check();
    }

    #[test]
    fn names() {
        assert_eq!(state_name(proto::TCP, tcp_state::ESTABLISHED), "ESTABLISHED");
        assert_eq!(state_name(proto::UDP, pseudo_state::MULTIPLE), "MULTIPLE");
    }
}
