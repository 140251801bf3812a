//! Which worker a peer's state goes to: the one whose queue the flow's packets reach on this
//! box, so that the state is where the flow's next packet is looked up, and in no other
//! worker's table (issue 43: "steered by linerate's own hash, whatever worker sent them").
//!
//! Known when every interface spreads flows by linerate's own hash (AF_PACKET fanout by the
//! symmetric Toeplitz program, `io::afpacket::toeplitz`: both directions of a flow on one
//! worker), for TCP and UDP, by the flow as it arrives: its ends, or for an `rdr` the address
//! the initiator asked for. Otherwise (AF_XDP, where the NIC's RSS picks the queue; the
//! kernel's own fanout hash; ICMP and other protocols, whose hash this side does not mirror)
//! the state goes to every worker, as one worker cannot tell which would see the flow.

use std::net::IpAddr;

use dataplane::firewall::sync::NatSnapshot;
use fw::state::StateEnds;
use io::rss::{SYMMETRIC_KEY, Toeplitz, queue_for};

/// How peer states are spread over the workers.
pub struct Owners {
    workers: usize,
    /// The hash that spreads flows, when it is linerate's own.
    hash: Option<Toeplitz>,
}

impl Owners {
    /// `workers` workers, their flows spread by linerate's Toeplitz hash (`steered`) or not
    /// (0 workers: not known, every worker takes every state).
    pub fn new(workers: usize, steered: bool) -> Owners {
        Owners { workers, hash: (steered && workers > 1).then(|| Toeplitz::new(&SYMMETRIC_KEY)) }
    }

    /// The worker that owns the flow of a state (`proto`, `ends`, translated by `nat`);
    /// `None`: every worker must have it.
    pub fn of(&self, proto: u8, ends: &StateEnds, nat: Option<&NatSnapshot>) -> Option<usize> {
        if self.workers == 1 {
            return Some(0);
        }
        let hash = self.hash.as_ref()?;
        if !matches!(proto, 6 | 17) {
            return None;
        }
        let (i, mut r) = (ends.initiator, ends.responder);
        if let Some(t) = nat.filter(|t| t.responder) {
            (r.addr, r.port) = (t.addr, t.port);
        }
        let h = match (i.addr, r.addr) {
            (IpAddr::V4(a), IpAddr::V4(b)) => hash.ipv4_ports(a, b, i.port, r.port),
            (IpAddr::V6(a), IpAddr::V6(b)) => hash.ipv6_ports(a, b, i.port, r.port),
            _ => return None,
        };
        Some(usize::from(queue_for(h, self.workers as u16)))
    }
}

#[cfg(test)]
mod tests {
    use fw::state::Endpoint;

    use super::*;

    fn ends(a: &str, ap: u16, b: &str, bp: u16) -> StateEnds {
        let end = |addr: &str, port| Endpoint { addr: addr.parse().unwrap(), port };
        StateEnds { initiator: end(a, ap), responder: end(b, bp) }
    }

    /// The owner is the worker the fanout program sends the flow's frames to, whichever way.
    #[test]
    fn the_owner_is_the_worker_of_the_flows_frames() {
        let owners = Owners::new(4, true);
        let t = Toeplitz::new(&SYMMETRIC_KEY);
        let mut seen = [false; 4];
        for port in 40000..40064u16 {
            let e = ends("198.18.0.2", port, "198.19.0.2", 9000);
            let w = owners.of(17, &e, None).unwrap();
            let (a, b) = ("198.18.0.2".parse().unwrap(), "198.19.0.2".parse().unwrap());
            assert_eq!(w, usize::from(queue_for(t.ipv4_ports(b, a, 9000, port), 4)), "replies too");
            seen[w] = true;
        }
        assert_eq!(seen, [true; 4], "flows spread over every worker");
        assert_eq!(owners.of(1, &ends("198.18.0.2", 7, "198.19.0.2", 0), None), None, "ICMP");
        assert_eq!(Owners::new(4, false).of(17, &ends("::1", 1, "::2", 2), None), None);
        assert_eq!(Owners::new(1, false).of(1, &ends("::1", 1, "::2", 2), None), Some(0));
    }
}
