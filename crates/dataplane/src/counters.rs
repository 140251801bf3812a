//! Why packets did not go out, and where the others went: one counter per named reason.
//!
//! As VPP's error counters: every packet that leaves the forwarding path other than through a
//! tx port is counted under exactly one [`DropReason`], so that rx = forwarded + local +
//! the sum of the drops, always. The worker counts in plain integers while it handles a batch
//! and publishes them to [`WorkerCounters`] (atomics, one writer) after each batch, so a
//! reader on another thread sees figures at most one batch old without slowing the worker.

use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! drop_reasons {
    ($($variant:ident => $name:literal, $doc:literal;)*) => {
        /// A reason a packet was not forwarded.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum DropReason { $(#[doc = $doc] $variant,)* }

        impl DropReason {
            /// Every reason, in counter order.
            pub const ALL: &'static [DropReason] = &[$(DropReason::$variant,)*];
            /// Stable snake_case name used in output, JSON and metrics.
            pub fn name(self) -> &'static str {
                match self { $(DropReason::$variant => $name,)* }
            }
        }
    };
}

drop_reasons! {
    Truncated => "truncated", "Frame shorter than the headers it announces.";
    UnknownEthertype => "unknown_ethertype", "Neither IPv4, IPv6 nor ARP.";
    UnknownVlan => "unknown_vlan", "802.1Q tag with no sub-interface configured for it.";
    NotForUs => "not_for_us", "Unicast frame to another station's MAC address.";
    BadVersion => "bad_version", "IP version field does not match the ethertype (RFC 1812 5.2.2).";
    BadLength => "bad_length", "IP header or total length inconsistent (RFC 1812 5.2.2).";
    BadChecksum => "bad_checksum", "IPv4 header checksum wrong (RFC 1812 5.2.2).";
    MartianSource => "martian_source", "Source that must never be forwarded (RFC 1812 5.3.7).";
    MartianDestination => "martian_destination", "Destination that must never be forwarded.";
    TtlExpired => "ttl_expired", "TTL or hop limit would reach zero (RFC 1812 5.3.1).";
    NoRoute => "no_route", "No FIB entry covers the destination.";
    NoNeighbour => "no_neighbour", "Next hop's link-layer address unknown.";
    TxError => "tx_error", "Output port could not take the frame.";
    FilterBlocked => "filter_blocked", "Blocked by a firewall rule (in or out).";
    StateOutOfWindow => "state_out_of_window", "TCP segment outside its state's windows (pf's BADSTATE).";
    StateLimit => "state_limit", "A keep-state rule passed it but the state table is full.";
}

/// Number of drop reasons.
pub const DROP_REASONS: usize = DropReason::ALL.len();

/// Counters of one worker as plain integers: what the fast path increments.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub rx: u64,
    pub forwarded: u64,
    /// Packets for the router itself (and ARP/NDP, broadcast, multicast): the "local" exit.
    pub local: u64,
    pub drops: [u64; DROP_REASONS],
}

impl Counts {
    #[inline(always)]
    pub fn drop(&mut self, reason: DropReason) {
        self.drops[reason as usize] += 1;
    }

    pub fn dropped(&self) -> u64 {
        self.drops.iter().sum()
    }

    /// (reason, count) for every reason.
    pub fn drops_by_reason(&self) -> impl Iterator<Item = (DropReason, u64)> + '_ {
        DropReason::ALL.iter().map(|&r| (r, self.drops[r as usize]))
    }

    /// Element-wise difference, for rates and per-run figures.
    pub fn since(&self, earlier: &Counts) -> Counts {
        let mut out = Counts {
            rx: self.rx - earlier.rx,
            forwarded: self.forwarded - earlier.forwarded,
            local: self.local - earlier.local,
            drops: [0; DROP_REASONS],
        };
        for (i, d) in out.drops.iter_mut().enumerate() {
            *d = self.drops[i] - earlier.drops[i];
        }
        out
    }

    /// Element-wise sum (to total several workers).
    pub fn add(&mut self, other: &Counts) {
        self.rx += other.rx;
        self.forwarded += other.forwarded;
        self.local += other.local;
        for (d, o) in self.drops.iter_mut().zip(other.drops.iter()) {
            *d += o;
        }
    }
}

/// A worker's counters as published for other threads.
#[derive(Debug, Default)]
pub struct WorkerCounters {
    rx: AtomicU64,
    forwarded: AtomicU64,
    local: AtomicU64,
    drops: [AtomicU64; DROP_REASONS],
}

impl WorkerCounters {
    /// Publishes the worker's running totals. Only the owning worker calls this: a plain
    /// store per counter, no read-modify-write.
    pub fn publish(&self, c: &Counts) {
        self.rx.store(c.rx, Ordering::Relaxed);
        self.forwarded.store(c.forwarded, Ordering::Relaxed);
        self.local.store(c.local, Ordering::Relaxed);
        for (a, &v) in self.drops.iter().zip(c.drops.iter()) {
            a.store(v, Ordering::Relaxed);
        }
    }

    /// A copy of the last published totals.
    pub fn snapshot(&self) -> Counts {
        let mut drops = [0; DROP_REASONS];
        for (d, a) in drops.iter_mut().zip(self.drops.iter()) {
            *d = a.load(Ordering::Relaxed);
        }
        Counts {
            rx: self.rx.load(Ordering::Relaxed),
            forwarded: self.forwarded.load(Ordering::Relaxed),
            local: self.local.load(Ordering::Relaxed),
            drops,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_snake_case() {
        let mut names: Vec<_> = DropReason::ALL.iter().map(|r| r.name()).collect();
        assert!(names.iter().all(|n| n.chars().all(|c| c.is_ascii_lowercase() || c == '_')));
        names.sort();
        names.dedup();
        assert_eq!(names.len(), DROP_REASONS);
    }

    #[test]
    fn publish_snapshot_and_since() {
        let shared = WorkerCounters::default();
        let mut c = Counts { rx: 10, forwarded: 7, local: 1, ..Default::default() };
        c.drop(DropReason::NoRoute);
        c.drop(DropReason::NoRoute);
        shared.publish(&c);
        let snap = shared.snapshot();
        assert_eq!(snap, c);
        assert_eq!(snap.dropped(), 2);
        let later = Counts { rx: 15, forwarded: 12, ..snap };
        assert_eq!(later.since(&snap).forwarded, 5);
    }
}
