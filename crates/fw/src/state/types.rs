//! What callers of the state table pass in and get back: the TCP fields tracking reads,
//! verdicts, lookup and insert results, options, counters, and pf's state numbers.

use super::Tmo;
use crate::packet::Af;

pub use crate::rules::tcp_flags;

/// TCP peer states as pf uses the BSD `TCPS_*` values.
pub mod tcp_state {
    pub const CLOSED: u8 = 0;
    pub const LISTEN: u8 = 1;
    pub const SYN_SENT: u8 = 2;
    pub const SYN_RECEIVED: u8 = 3;
    pub const ESTABLISHED: u8 = 4;
    pub const CLOSE_WAIT: u8 = 5;
    pub const FIN_WAIT_1: u8 = 6;
    pub const CLOSING: u8 = 7;
    pub const LAST_ACK: u8 = 8;
    pub const FIN_WAIT_2: u8 = 9;
    pub const TIME_WAIT: u8 = 10;
    /// pf's `PF_TCPS_PROXY_SRC`, `PF_TCPS_PROXY_DST`: what inspection reports as the
    /// initiator's state while `synproxy state` completes its handshake (the tracking
    /// itself never holds them).
    pub const PROXY_SRC: u8 = 11;
    pub const PROXY_DST: u8 = 12;
}

/// UDP / other-protocol pseudo-states (pf's `PFUDPS_*` / `PFOTHERS_*`).
pub mod pseudo_state {
    pub const NO_TRAFFIC: u8 = 0;
    pub const SINGLE: u8 = 1;
    pub const MULTIPLE: u8 = 2;
}

/// The TCP header fields tracking needs, extracted by the dataplane for each TCP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TcpSegment {
    /// Sequence number (host order).
    pub seq: u32,
    /// Acknowledgement number (host order; ignored without ACK).
    pub ack: u32,
    /// Window field as on the wire (unscaled).
    pub win: u16,
    /// Flags byte (see [`tcp_flags`]).
    pub flags: u8,
    /// TCP payload bytes (IP total length - IP header - TCP header).
    pub payload_len: u16,
    /// Window-scale option shift, if a SYN carries the option (ignored on non-SYN).
    pub wscale: Option<u8>,
}

/// Index of a state in its table's slot array. Reused after the state is removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StateId(pub u32);

/// Why a packet that matched a state is dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StateDropReason {
    /// TCP sequence/ack outside the tracked windows (pf's PFRES_BADSTATE).
    OutOfWindow,
    /// The packet established a TCP connection beyond its source's `max-src-conn` (pf's
    /// PFRES_SRCLIMIT): the state is removed.
    SrcConn,
    /// ... beyond its source's `max-src-conn-rate`.
    SrcConnRate,
    /// A packet of a `synproxy state` connection during the handshake the router completes
    /// itself (pf's PFRES_SYNPROXY): each end's handshake packets are consumed (the router
    /// answers them, [`ProxyStep`](super::ProxyStep)), anything else dropped.
    Synproxy,
}

/// What to do with a packet that matched a state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateVerdict {
    Pass,
    Drop(StateDropReason),
}

/// Result of [`StateTable::lookup`](super::StateTable::lookup).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateLookup {
    /// The packet belongs to a tracked flow: the rules are skipped.
    Hit {
        id: StateId,
        /// True when the packet goes the same way as the flow's first packet.
        dir_from_initiator: bool,
        verdict: StateVerdict,
    },
    /// No (live) state: evaluate the rules.
    Miss,
}

/// Result of [`StateTable::match_icmp_error`](super::StateTable::match_icmp_error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IcmpErrorMatch {
    /// The error belongs to this tracked flow: it passes under the state.
    Pass(StateId),
    /// It quotes a TCP sequence number outside the flow's window: pf drops it (BADSTATE).
    BadSeq(StateId),
    /// No (live) state: the rules decide.
    Miss,
}

/// Why [`StateTable::insert`](super::StateTable::insert) refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum InsertError {
    /// `len() >= limit()`: the caller drops the packet and counts it.
    #[error("state table full")]
    Full,
    /// A live state for this flow already exists.
    #[error("state exists")]
    Exists(StateId),
}

/// Per-state options from the rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StateOptions {
    /// pf's `sloppy`: no TCP window checks (for asymmetric routing).
    pub sloppy: bool,
    /// pf's `allow-opts`: packets with IP options may pass under the state.
    pub allow_opts: bool,
    /// `if-bound`: the interface the state is bound to; `None` floats.
    pub bound: Option<u16>,
    /// pf's tag of the packets the state passes (0: none).
    pub tag: u8,
    /// pf's `modulate state`: a TCP state created by a bare SYN gets random offsets for both
    /// ends' sequence numbers ([`Modulation`]). No effect on other protocols.
    pub modulate: bool,
    /// pf's `synproxy state`: a TCP state created by a bare SYN completes the client's
    /// handshake in the router before the server sees a SYN (`proxy.rs`). No effect on
    /// other protocols or other packets.
    pub synproxy: bool,
}

/// How a packet of a `modulate state` flow is rewritten (pf's `seqdiff` of each end): each
/// end's sequence numbers are shifted by its own random offset on their way to the other,
/// and its acknowledgements (and SACK blocks) of the other's numbers shifted back. The state
/// tracks both ends in their own, unshifted, sequence spaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Modulation {
    /// Added to the packet's sequence number.
    pub seq_add: u32,
    /// Subtracted from its acknowledgement number and SACK block edges.
    pub ack_sub: u32,
}

/// Counters the worker publishes (plain integers, no atomics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StateCounters {
    /// Entries held (live plus dead not yet reclaimed), = `len()`.
    pub in_use: u64,
    pub inserts: u64,
    /// Inserts refused because the table was full.
    pub insert_full: u64,
    /// Inserts refused because a live state existed.
    pub insert_exists: u64,
    /// Lookups that found a live state (whatever the verdict).
    pub hits: u64,
    pub misses: u64,
    /// Packets dropped by state tracking, by reason.
    pub drop_out_of_window: u64,
    /// Dead entries reclaimed by a lookup/insert finding them.
    pub expired_lookup: u64,
    /// Dead entries reclaimed by the sweep.
    pub expired_sweep: u64,
    /// States removed by a bare SYN on a closed TCP connection (port reuse).
    pub reused_closed: u64,
    /// TCP states synced from the peer box whose connection was picked up again from a
    /// packet their (older) windows refused (`tcp::pick_up`).
    pub picked_up: u64,
    /// States removed by [`StateTable::remove`](super::StateTable::remove).
    pub removed: u64,
    pub icmp_error_hits: u64,
    pub icmp_error_misses: u64,
    /// ICMP errors quoting a TCP sequence number outside the window.
    pub icmp_error_bad_seq: u64,
    /// States refused by their rule's `max` (pf's LCNT_STATES).
    pub rule_max: u64,
    /// States refused by `max-src-states` (pf's LCNT_SRCSTATES).
    pub src_limit_states: u64,
    /// States refused for want of a source node: `max-src-nodes`, `set limit src-nodes`.
    pub src_limit_nodes: u64,
    /// Connections refused (their state removed) by `max-src-conn` (pf's LCNT_SRCCONN).
    pub src_limit_conn: u64,
    /// ... by `max-src-conn-rate` (pf's LCNT_SRCCONNRATE).
    pub src_limit_conn_rate: u64,
    /// Of those, refused by a rule with `overload <table>`: the source was queued for the
    /// table (pf's LCNT_OVERLOAD_TABLE).
    pub src_overload: u64,
    /// States removed by `overload ... flush` (pf's LCNT_OVERLOAD_FLUSH counts flushes).
    pub src_flushed: u64,
    /// `synproxy state`: SYN-ACKs the router answered clients' SYNs with (retransmissions
    /// included).
    pub synproxy_syn_acks: u64,
    /// ... SYNs it sent servers for clients that completed its handshake.
    pub synproxy_syns: u64,
    /// ... connections it handed over, both handshakes done.
    pub synproxy_established: u64,
    /// ... packets dropped during a handshake (neither end's expected handshake packet).
    pub synproxy_dropped: u64,
}

/// Inspection of one state (tests, `pfctl -ss`-like dumps).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateInfo {
    pub rule: u32,
    pub af: Af,
    pub proto: u8,
    /// TCP state (or pseudo-state) of the initiator and the responder.
    pub initiator_state: u8,
    pub responder_state: u8,
    /// Absolute deadline on the caller's clock.
    pub expire: u32,
    pub timeout: Tmo,
    /// The seconds of `timeout` for this state (its rule's own, or the table's).
    pub timeout_secs: u32,
    pub sloppy: bool,
}

/// What a hit of [`StateTable::lookup_v4`](super::StateTable::lookup_v4) tells the data plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowHit {
    pub id: StateId,
    /// The rule that created the state (what per-rule counters need).
    pub rule: u32,
    pub verdict: StateVerdict,
    /// Both of pf's passes over the packet are decided by this state (see `sub.rs`): the
    /// packet passes without rules. Otherwise the caller runs the passes the state does not
    /// cover ([`StateTable::sub_states`](super::StateTable::sub_states)).
    pub settled: bool,
}
