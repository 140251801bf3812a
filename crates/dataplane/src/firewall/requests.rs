//! Operators' requests on a worker's state table (`linerate show states`, `kill states`,
//! `flush states`, as pfctl's `-ss`, `-k` and `-F states`).
//!
//! The table belongs to its worker alone (shared-nothing, no lock on the fast path), so
//! the control thread does not read it: it sends each worker a [`StateRequest`] over a
//! channel, and the worker serves it between batches ([`StateRequests::serve`]), walking at most
//! [`SLOTS_PER_POLL`] slots per poll so that a table of millions of states never holds up its
//! traffic for long. When its walk is done the worker sends its [`StateReply`].

use std::net::IpAddr;
use std::sync::mpsc::{Receiver, Sender, TryRecvError};

use fw::state::{StateEnds, StateId};

use super::Firewall;

/// Slots a worker examines per poll while it serves a request: 64 KiB of slots, some tens
/// of microseconds to list them, about a hundred to remove them (docs/performance.md), short
/// against what a receive ring holds.
pub const SLOTS_PER_POLL: usize = 1024;

/// Which states a request is about; every field set must match. `src` and `dst` are the
/// initiator's and the responder's address (pfctl -k's first and second host), `host`
/// either end's, `port` either end's port.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StateFilter {
    pub src: Option<(IpAddr, u8)>,
    pub dst: Option<(IpAddr, u8)>,
    pub host: Option<(IpAddr, u8)>,
    pub port: Option<u16>,
    pub proto: Option<u8>,
}

/// Whether `addr` is inside `prefix/len` (an address of the other family never is).
fn within(addr: IpAddr, (prefix, len): (IpAddr, u8)) -> bool {
    match (addr, prefix) {
        (IpAddr::V4(a), IpAddr::V4(p)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(len.min(32))).unwrap_or(0);
            a.to_bits() & mask == p.to_bits() & mask
        }
        (IpAddr::V6(a), IpAddr::V6(p)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(len.min(128))).unwrap_or(0);
            a.to_bits() & mask == p.to_bits() & mask
        }
        _ => false,
    }
}

impl StateFilter {
    pub fn matches(&self, proto: u8, e: &StateEnds) -> bool {
        let (i, r) = (e.initiator, e.responder);
        self.proto.is_none_or(|p| p == proto)
            && self.src.is_none_or(|s| within(i.addr, s))
            && self.dst.is_none_or(|d| within(r.addr, d))
            && self.host.is_none_or(|h| within(i.addr, h) || within(r.addr, h))
            && self.port.is_none_or(|p| i.port == p || r.port == p)
    }
}

/// What to do with the states a filter selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateOp {
    /// Describe at most `limit` of them (all are counted).
    List { limit: usize },
    /// Remove them.
    Kill,
}

pub struct StateRequest {
    pub op: StateOp,
    pub filter: StateFilter,
    pub reply: Sender<StateReply>,
}

/// One state as a worker describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateRow {
    pub proto: u8,
    pub ends: StateEnds,
    /// The initiator's and the responder's (pseudo-)state, see [`fw::state::state_name`].
    pub states: [u8; 2],
    /// Seconds until it expires.
    pub expires_in: u32,
    /// Index of the rule that created it in the rule set the worker uses (after a reload,
    /// possibly one of the old set: see [`super::Firewall`]).
    pub rule: u32,
}

/// A worker's answer: the states that matched (listed up to the limit), how many there
/// were and how many were removed, and the size of its table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StateReply {
    pub worker: usize,
    pub matched: u64,
    pub removed: u64,
    pub rows: Vec<StateRow>,
    pub in_use: u64,
    pub limit: u64,
}

/// A worker's end of the request channel, and the request it is serving.
pub struct StateRequests {
    worker: usize,
    requests: Receiver<StateRequest>,
    serving: Option<(StateRequest, usize, StateReply)>,
}

impl StateRequests {
    pub fn new(worker: usize, requests: Receiver<StateRequest>) -> StateRequests {
        StateRequests { worker, requests, serving: None }
    }

    /// Between batches: takes a request if none is being served and walks the next stretch
    /// of the table. Returns whether a request is still being served (the worker then does
    /// not sleep).
    #[inline]
    pub fn serve(&mut self, fw: Option<&mut Firewall>) -> bool {
        if self.serving.is_none() {
            match self.requests.try_recv() {
                Ok(req) => {
                    self.serving =
                        Some((req, 0, StateReply { worker: self.worker, ..StateReply::default() }))
                }
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => return false,
            }
        }
        self.step(fw)
    }

    #[cold]
    fn step(&mut self, fw: Option<&mut Firewall>) -> bool {
        let Some((req, cursor, reply)) = self.serving.as_mut() else { return false };
        let done = match fw {
            None => true,
            Some(fw) => walk(fw, req, cursor, reply),
        };
        if done && let Some((req, _, reply)) = self.serving.take() {
            // The requester may have given up waiting: nothing to do then.
            let _ = req.reply.send(reply);
        }
        !done
    }
}

/// Serves `req` over the next [`SLOTS_PER_POLL`] slots from `cursor`; true when the walk is
/// over.
fn walk(fw: &mut Firewall, req: &StateRequest, cursor: &mut usize, reply: &mut StateReply) -> bool {
    let (start, end) = (*cursor, *cursor + SLOTS_PER_POLL);
    let now = fw.now;
    let removed_before = reply.removed;
    let table = &mut fw.states;
    let hits: Vec<(StateId, StateEnds, u8)> = table
        .states_in(start..end)
        .filter_map(|id| {
            let (ends, info) = (table.ends(id)?, table.info(id)?);
            req.filter.matches(info.proto, &ends).then_some((id, ends, info.proto))
        })
        .collect();
    for (id, ends, proto) in hits {
        reply.matched += 1;
        match req.op {
            StateOp::List { limit } if reply.rows.len() < limit => {
                if let Some(info) = table.info(id) {
                    let (states, expires_in) = (
                        [info.initiator_state, info.responder_state],
                        info.expire.saturating_sub(now),
                    );
                    reply.rows.push(StateRow { proto, ends, states, expires_in, rule: info.rule });
                }
            }
            StateOp::List { .. } => {}
            StateOp::Kill => reply.removed += u64::from(table.remove(id)),
        }
    }
    // Before the reply: once the requester hears of it, no killed flow is in the kernel.
    if reply.removed != removed_before {
        fw.slot.void_decisions();
    }
    *cursor = end;
    let over = end >= fw.states.slot_count();
    if over {
        reply.in_use = fw.states.len() as u64;
        reply.limit = fw.states.limit() as u64;
    }
    over
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc::channel;

    use fw::packet::{PacketKey, proto};

    use super::*;
    use crate::firewall::{CompiledRules, RulesSlot};

    fn firewall(states: usize) -> Firewall {
        let rules = CompiledRules::parse(
            &format!("set limit states {states}\npass all\n"),
            std::path::Path::new("t.conf"),
            &|_| None,
        )
        .unwrap();
        Firewall::new(RulesSlot::new(std::sync::Arc::new(rules)), 9)
    }

    fn udp(src: [u8; 4], sport: u16, dst: [u8; 4], dport: u16) -> PacketKey {
        let a = |b: [u8; 4]| u128::from(u32::from_be_bytes(b));
        PacketKey {
            proto: proto::UDP,
            src: a(src),
            dst: a(dst),
            src_port: sport,
            dst_port: dport,
            len: 60,
            ..PacketKey::ZERO
        }
    }

    /// Serves requests until the reply comes, counting the polls.
    fn ask(
        state_requests: &mut StateRequests,
        fw: &mut Firewall,
        op: StateOp,
        filter: StateFilter,
    ) -> (StateReply, usize) {
        let (tx, rx) = channel();
        let (req_tx, req_rx) = channel();
        state_requests.requests = req_rx;
        req_tx.send(StateRequest { op, filter, reply: tx }).unwrap();
        let mut polls = 0;
        loop {
            polls += 1;
            let busy = state_requests.serve(Some(fw));
            if let Ok(r) = rx.try_recv() {
                assert!(!busy);
                return (r, polls);
            }
            assert!(busy, "no reply and not busy");
        }
    }

    #[test]
    fn list_kill_and_flush_in_stretches() {
        let mut fw = firewall(3 * SLOTS_PER_POLL);
        // More states than two stretches (the walk covers the slots ever used).
        let n = 2 * SLOTS_PER_POLL + 100;
        for p in 0..n {
            let sport = 1000 + (p % 60000) as u16;
            fw.insert_state(&udp([10, 0, (p / 60000) as u8, 1], sport, [10, 0, 1, 2], 53), 0)
                .unwrap();
        }
        fw.insert_state(&udp([10, 0, 0, 7], 5000, [10, 0, 1, 2], 123), 0).unwrap();
        let (_, idle) = channel();
        let mut state_requests = StateRequests::new(2, idle);
        assert!(!state_requests.serve(Some(&mut fw)), "no request, nothing to do");

        let (all, polls) =
            ask(&mut state_requests, &mut fw, StateOp::List { limit: 10 }, StateFilter::default());
        assert_eq!(
            (all.worker, all.matched, all.rows.len(), all.in_use),
            (2, n as u64 + 1, 10, n as u64 + 1)
        );
        assert!(polls >= 3, "a table of 3 stretches takes 3 polls: {polls}");

        let one =
            StateFilter { src: Some(("10.0.0.7".parse().unwrap(), 32)), ..StateFilter::default() };
        let (r, _) = ask(&mut state_requests, &mut fw, StateOp::List { limit: 10 }, one);
        assert_eq!(r.matched, 1);
        let row = r.rows[0];
        assert_eq!(
            (row.ends.initiator.port, row.ends.responder.port, row.proto),
            (5000, 123, proto::UDP)
        );
        assert_eq!(row.ends.responder.addr, "10.0.1.2".parse::<IpAddr>().unwrap());

        // The responder's address is not the initiator's: -k 10.0.1.2 kills nothing.
        let wrong_side =
            StateFilter { src: Some(("10.0.1.2".parse().unwrap(), 32)), ..StateFilter::default() };
        assert_eq!(ask(&mut state_requests, &mut fw, StateOp::Kill, wrong_side).0.removed, 0);
        let (k, _) = ask(&mut state_requests, &mut fw, StateOp::Kill, one);
        assert_eq!((k.removed, k.in_use), (1, n as u64));
        let port = StateFilter {
            port: Some(53),
            host: Some(("10.0.0.0".parse().unwrap(), 8)),
            ..StateFilter::default()
        };
        assert_eq!(
            ask(&mut state_requests, &mut fw, StateOp::List { limit: 0 }, port).0.matched,
            n as u64
        );
        let (f, _) = ask(&mut state_requests, &mut fw, StateOp::Kill, StateFilter::default());
        assert_eq!((f.removed, f.in_use), (n as u64, 0));
        fw.state_table().debug_check();
    }

    #[test]
    fn a_worker_without_firewall_answers_empty() {
        let (tx, rx) = channel();
        let (req_tx, req_rx) = channel();
        let mut state_requests = StateRequests::new(0, req_rx);
        req_tx
            .send(StateRequest { op: StateOp::Kill, filter: StateFilter::default(), reply: tx })
            .unwrap();
        assert!(!state_requests.serve(None));
        assert_eq!(rx.try_recv().unwrap(), StateReply::default());
    }

    #[test]
    fn prefixes() {
        let p = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(within(p("10.1.2.3"), (p("10.0.0.0"), 8)));
        assert!(!within(p("11.1.2.3"), (p("10.0.0.0"), 8)));
        assert!(within(p("1.2.3.4"), (p("0.0.0.0"), 0)));
        assert!(within(p("2001:db8::1"), (p("2001:db8::"), 32)));
        assert!(!within(p("2001:db8::1"), (p("10.0.0.0"), 0)), "families differ");
    }
}
