//! A neighbour cache: the reachability state machine of RFC 4861 7.3.2 (IPv6 Neighbor
//! Unreachability Detection), used for ARP too, as Linux does.
//!
//! The table does no I/O and reads no clock: every method takes `now` (nanoseconds of any
//! monotonic clock) and reports what must happen as [`Action`]s pushed onto a caller's `Vec`
//! (send an ARP request / Neighbor Solicitation, send the packets that waited for an address,
//! drop them). Packets waiting for resolution are the caller's handles `P` (frame descriptors,
//! ids), at most [`Config::queue_len`] per address; entries are at most
//! [`Config::max_entries`]. Nothing grows without bound.
//!
//! States and transitions (RFC 4861 7.3.2 and 7.3.3; DELAY is folded into PROBE, which starts
//! as soon as a STALE entry is used):
//!
//! * no entry --packet to send--> INCOMPLETE (request sent, packet queued)
//! * INCOMPLETE --no answer after `retrans` --> request again, up to `max_probes` requests;
//!   after the last one and `retrans` more: FAILED (queued packets handed back as failed)
//! * INCOMPLETE --answer--> REACHABLE (queued packets handed back with the MAC)
//! * REACHABLE --`reachable` time without confirmation--> STALE
//! * STALE --packet to send--> PROBE (packet sent with the cached MAC, unicast request)
//! * STALE --[`NeighbourTable::probe_stale`] (periodic, for a fast path that does not report
//!   use)--> PROBE (unicast request)
//! * PROBE --no answer after `max_probes` unicast requests--> FAILED
//! * REACHABLE/STALE/PROBE --solicited answer or upper-layer confirmation--> REACHABLE
//! * any but PERMANENT --unsolicited announcement of a new MAC--> STALE with that MAC
//! * FAILED --packet to send--> INCOMPLETE again
//! * PERMANENT (static entries, Linux's NUD_PERMANENT) never changes or ages.

use core::net::IpAddr;
use std::collections::HashMap;

use wire::MacAddr;

const SECOND: u64 = 1_000_000_000;

/// Timers and bounds (RFC 4861 section 10 defaults: RETRANS_TIMER 1 s,
/// MAX_MULTICAST_SOLICIT 3, MAX_UNICAST_SOLICIT 3, REACHABLE_TIME 30 s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Interval between requests, ns.
    pub retrans_ns: u64,
    /// Requests sent before giving up (INCOMPLETE: broadcast/multicast; PROBE: unicast).
    pub max_probes: u32,
    /// How long a confirmation keeps an entry REACHABLE, ns.
    pub reachable_ns: u64,
    /// Packets queued per INCOMPLETE entry (Linux's `unres_qlen` is in bytes; 8 packets
    /// here); when full the oldest is dropped.
    pub queue_len: usize,
    /// Entries in the table; a packet to a new address beyond it is dropped.
    pub max_entries: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            retrans_ns: SECOND,
            max_probes: 3,
            reachable_ns: 30 * SECOND,
            queue_len: 8,
            max_entries: 4096,
        }
    }
}

/// The reachability state of an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    /// Resolution in progress: requests sent, no answer yet, packets queued.
    Incomplete,
    /// Confirmed recently.
    Reachable,
    /// Address known but not confirmed recently; used as is until traffic needs it.
    Stale,
    /// Used while stale: unicast requests sent to confirm it.
    Probe,
    /// Resolution or probing got no answer.
    Failed,
    /// A static entry: never ages, never overridden.
    Permanent,
}

/// What the caller must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action<P> {
    /// Send an ARP request / Neighbor Solicitation for the address: broadcast / to the
    /// solicited-node group if the MAC is `None`, unicast to it otherwise (PROBE).
    SendRequest(IpAddr, Option<MacAddr>),
    /// The address resolved: send the packets that waited for it (oldest first) to the MAC.
    Resolved(IpAddr, MacAddr, Vec<P>),
    /// Resolution failed: drop the packets that waited (and report unreachable, RFC 1812
    /// 4.3.3.1 / RFC 4443 3.1 code 3).
    Failed(IpAddr, Vec<P>),
}

/// The outcome of [`NeighbourTable::send`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Send<P> {
    /// Send the packet to this MAC now.
    Now(MacAddr, P),
    /// The packet waits for resolution.
    Queued,
    /// This packet must be dropped: the oldest queued one when the queue was full (the new one
    /// took its place), or the new one when the table is full.
    Dropped(P),
}

#[derive(Debug)]
struct Entry<P> {
    state: State,
    mac: Option<MacAddr>,
    /// Requests sent in the current INCOMPLETE or PROBE round.
    probes: u32,
    /// INCOMPLETE/PROBE: when the next request (or failure) is due; REACHABLE: when it
    /// becomes STALE.
    deadline: u64,
    queue: Vec<P>,
}

/// The neighbour cache of one interface (or of a router: keys are full addresses).
#[derive(Debug)]
pub struct NeighbourTable<P> {
    cfg: Config,
    entries: HashMap<IpAddr, Entry<P>>,
    queue_overflows: u64,
    table_full_drops: u64,
}

impl<P> Default for NeighbourTable<P> {
    fn default() -> Self {
        Self::new(Config::default())
    }
}

impl<P> NeighbourTable<P> {
    /// An empty table.
    pub fn new(cfg: Config) -> Self {
        NeighbourTable {
            cfg: Config {
                queue_len: cfg.queue_len.max(1),
                max_probes: cfg.max_probes.max(1),
                ..cfg
            },
            entries: HashMap::new(),
            queue_overflows: 0,
            table_full_drops: 0,
        }
    }

    /// The timers and bounds in use (after [`new`](Self::new) raised `queue_len` and
    /// `max_probes` to at least 1).
    pub fn config(&self) -> Config {
        self.cfg
    }

    /// The state and MAC of `ip`'s entry, if there is one.
    pub fn get(&self, ip: IpAddr) -> Option<(State, Option<MacAddr>)> {
        self.entries.get(&ip).map(|e| (e.state, e.mac))
    }

    /// Every entry as (address, state, MAC, packets queued), in no particular order (for
    /// `show neighbours`). A REACHABLE entry past its deadline is reported STALE, as
    /// [`send`](Self::send) would see it, only after the next [`tick`](Self::tick).
    pub fn entries(&self) -> impl Iterator<Item = (IpAddr, State, Option<MacAddr>, usize)> + '_ {
        self.entries
            .iter()
            .map(|(&ip, e)| (ip, e.state, e.mac, e.queue.len()))
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// No entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Packets dropped because an INCOMPLETE entry's queue was full.
    pub fn queue_overflows(&self) -> u64 {
        self.queue_overflows
    }

    /// Packets dropped because the table was full.
    pub fn table_full_drops(&self) -> u64 {
        self.table_full_drops
    }

    /// Adds (or replaces with) a static entry, which never ages and ignores announcements.
    /// Packets waiting on an INCOMPLETE entry for `ip` are handed back as resolved.
    pub fn add_static(&mut self, ip: IpAddr, mac: MacAddr, out: &mut Vec<Action<P>>) {
        let e = Entry {
            state: State::Permanent,
            mac: Some(mac),
            probes: 0,
            deadline: 0,
            queue: Vec::new(),
        };
        if let Some(old) = self.entries.insert(ip, e)
            && !old.queue.is_empty()
        {
            out.push(Action::Resolved(ip, mac, old.queue));
        }
    }

    /// Removes `ip`'s entry; packets still queued on it are handed back as failed.
    pub fn remove(&mut self, ip: IpAddr, out: &mut Vec<Action<P>>) {
        if let Some(e) = self.entries.remove(&ip)
            && !e.queue.is_empty()
        {
            out.push(Action::Failed(ip, e.queue));
        }
    }

    /// Makes room in a full table by removing one FAILED entry, or else one STALE entry (both
    /// hold no packets; Linux's forced garbage collection does the same). O(entries), only
    /// when the table is full.
    fn evict_one(&mut self) -> bool {
        let pick = |want: State| {
            self.entries
                .iter()
                .find(|(_, e)| e.state == want)
                .map(|(&ip, _)| ip)
        };
        match pick(State::Failed).or_else(|| pick(State::Stale)) {
            Some(ip) => self.entries.remove(&ip).is_some(),
            None => false,
        }
    }

    /// The forwarding path has packet `pkt` for next hop `ip` at `now`.
    pub fn send(&mut self, ip: IpAddr, pkt: P, now: u64, out: &mut Vec<Action<P>>) -> Send<P> {
        let cfg = self.cfg;
        let full = self.entries.len() >= cfg.max_entries
            && !self.entries.contains_key(&ip)
            && !self.evict_one();
        let Some(e) = self.entries.get_mut(&ip) else {
            if full {
                self.table_full_drops += 1;
                return Send::Dropped(pkt);
            }
            let mut queue = Vec::with_capacity(cfg.queue_len);
            queue.push(pkt);
            let e = Entry {
                state: State::Incomplete,
                mac: None,
                probes: 1,
                deadline: now.saturating_add(cfg.retrans_ns),
                queue,
            };
            self.entries.insert(ip, e);
            out.push(Action::SendRequest(ip, None));
            return Send::Queued;
        };
        if e.state == State::Reachable && now >= e.deadline {
            e.state = State::Stale;
        }
        match (e.state, e.mac) {
            (State::Reachable | State::Probe | State::Permanent, Some(mac)) => Send::Now(mac, pkt),
            (State::Stale, Some(mac)) => {
                e.state = State::Probe;
                e.probes = 1;
                e.deadline = now.saturating_add(cfg.retrans_ns);
                out.push(Action::SendRequest(ip, Some(mac)));
                Send::Now(mac, pkt)
            }
            (State::Failed, _) => {
                e.state = State::Incomplete;
                e.mac = None;
                e.probes = 1;
                e.deadline = now.saturating_add(cfg.retrans_ns);
                e.queue.push(pkt);
                out.push(Action::SendRequest(ip, None));
                Send::Queued
            }
            _ => {
                // INCOMPLETE (the only state without a MAC besides FAILED).
                e.queue.push(pkt);
                if e.queue.len() > cfg.queue_len {
                    self.queue_overflows += 1;
                    return Send::Dropped(e.queue.remove(0));
                }
                Send::Queued
            }
        }
    }

    /// A solicited answer arrived: an ARP reply, or a Neighbor Advertisement with the
    /// Solicited flag (RFC 4861 7.2.5). The entry becomes REACHABLE with `mac`; an
    /// INCOMPLETE entry hands back its queue. Answers for addresses without an entry are
    /// ignored (no entry is created from an unsolicited reply), as are static entries.
    pub fn confirm(&mut self, ip: IpAddr, mac: MacAddr, now: u64, out: &mut Vec<Action<P>>) {
        let reachable = self.cfg.reachable_ns;
        let Some(e) = self.entries.get_mut(&ip) else {
            return;
        };
        if e.state == State::Permanent {
            return;
        }
        e.state = State::Reachable;
        e.mac = Some(mac);
        e.probes = 0;
        e.deadline = now.saturating_add(reachable);
        if !e.queue.is_empty() {
            out.push(Action::Resolved(ip, mac, core::mem::take(&mut e.queue)));
        }
    }

    /// An unsolicited announcement of `ip` at `mac`: the sender of an ARP request, the source
    /// link-layer option of a Neighbor Solicitation, an unsolicited Advertisement with the
    /// Override flag (RFC 4861 7.2.3, 7.2.6; RFC 826). Creates a STALE entry if there is none
    /// (and room); an INCOMPLETE one becomes STALE and hands back its queue; a different MAC
    /// replaces the cached one and makes the entry STALE; the same MAC changes nothing.
    pub fn learn(&mut self, ip: IpAddr, mac: MacAddr, out: &mut Vec<Action<P>>) {
        let full = self.entries.len() >= self.cfg.max_entries
            && !self.entries.contains_key(&ip)
            && !self.evict_one();
        let Some(e) = self.entries.get_mut(&ip) else {
            if !full {
                let e = Entry {
                    state: State::Stale,
                    mac: Some(mac),
                    probes: 0,
                    deadline: 0,
                    queue: Vec::new(),
                };
                self.entries.insert(ip, e);
            }
            return;
        };
        if e.state == State::Permanent || e.mac == Some(mac) {
            return;
        }
        e.state = State::Stale;
        e.mac = Some(mac);
        e.probes = 0;
        if !e.queue.is_empty() {
            out.push(Action::Resolved(ip, mac, core::mem::take(&mut e.queue)));
        }
    }

    /// Upper-layer evidence that `ip` is reachable (RFC 4861 7.3.1, e.g. traffic in both
    /// directions): an entry with a MAC becomes REACHABLE for another `reachable` period.
    pub fn refresh(&mut self, ip: IpAddr, now: u64) {
        let reachable = self.cfg.reachable_ns;
        if let Some(e) = self.entries.get_mut(&ip)
            && e.mac.is_some()
            && matches!(e.state, State::Reachable | State::Stale | State::Probe)
        {
            e.state = State::Reachable;
            e.probes = 0;
            e.deadline = now.saturating_add(reachable);
        }
    }

    /// Starts probing every STALE entry: each moves to PROBE (first unicast request now, the
    /// next ones and finally FAILED through [`tick`](Self::tick)) and an
    /// [`Action::SendRequest`] to its cached MAC is pushed.
    ///
    /// This is RFC 4861 7.3.3's "entry is used while STALE" for a router whose fast path
    /// never reports using an entry (it forwards with a copy of the MAC): call it every
    /// `reachable` period, so that entries in use are confirmed and entries for neighbours
    /// that went away fail (with an [`Action::Failed`], to withdraw what depends on them) at
    /// most 2 * `reachable` + `max_probes` * `retrans` after their last confirmation. It
    /// probes unused entries too: a neighbour that answers stays REACHABLE, one that does not
    /// ends FAILED and is the first to be evicted when the table fills. A REACHABLE entry past
    /// its deadline counts as STALE (as in [`send`](Self::send)); INCOMPLETE, PROBE, FAILED
    /// and PERMANENT entries are left alone.
    pub fn probe_stale(&mut self, now: u64, out: &mut Vec<Action<P>>) {
        let retrans = self.cfg.retrans_ns;
        for (&ip, e) in &mut self.entries {
            if e.state == State::Reachable && now >= e.deadline {
                e.state = State::Stale;
            }
            if let (State::Stale, Some(mac)) = (e.state, e.mac) {
                e.state = State::Probe;
                e.probes = 1;
                e.deadline = now.saturating_add(retrans);
                out.push(Action::SendRequest(ip, Some(mac)));
            }
        }
    }

    /// Runs the timers due at `now`: retransmits requests, fails entries whose requests got no
    /// answer, ages REACHABLE entries to STALE. Call it every `retrans` or more often.
    ///
    /// Every entry that fails pushes an [`Action::Failed`], with an empty packet list when
    /// nothing was queued (always so for a PROBE entry), so the caller can withdraw routes
    /// through the neighbour.
    pub fn tick(&mut self, now: u64, out: &mut Vec<Action<P>>) {
        let cfg = self.cfg;
        for (&ip, e) in &mut self.entries {
            match e.state {
                State::Reachable if now >= e.deadline => e.state = State::Stale,
                State::Incomplete | State::Probe if now >= e.deadline => {
                    if e.probes < cfg.max_probes {
                        e.probes += 1;
                        e.deadline = now.saturating_add(cfg.retrans_ns);
                        let unicast = if e.state == State::Probe { e.mac } else { None };
                        out.push(Action::SendRequest(ip, unicast));
                    } else {
                        e.state = State::Failed;
                        e.mac = None;
                        out.push(Action::Failed(ip, core::mem::take(&mut e.queue)));
                    }
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::{Ipv4Addr, Ipv6Addr};

    const S: u64 = SECOND;
    const MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
    const MAC2: MacAddr = MacAddr([2, 0, 0, 0, 0, 2]);

    fn ip(last: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, last))
    }

    fn table() -> NeighbourTable<u32> {
        NeighbourTable::default()
    }

    /// Runs `tick` at `now` and returns its actions.
    fn tick(t: &mut NeighbourTable<u32>, now: u64) -> Vec<Action<u32>> {
        let mut out = Vec::new();
        t.tick(now, &mut out);
        out
    }

    fn state(t: &NeighbourTable<u32>, a: IpAddr) -> State {
        t.get(a).unwrap().0
    }

    #[test]
    fn defaults_are_rfc4861() {
        let c = Config::default();
        assert_eq!((c.retrans_ns, c.max_probes, c.reachable_ns), (S, 3, 30 * S));
        assert_eq!(c.queue_len, 8);
    }

    #[test]
    fn first_packet_starts_resolution_and_answer_releases_queue() {
        let mut t = table();
        let mut out = Vec::new();
        assert_eq!(t.send(ip(1), 10, 0, &mut out), Send::Queued);
        assert_eq!(out, vec![Action::SendRequest(ip(1), None)]);
        assert_eq!(t.get(ip(1)), Some((State::Incomplete, None)));
        out.clear();
        assert_eq!(t.send(ip(1), 11, S / 2, &mut out), Send::Queued);
        assert!(
            out.is_empty(),
            "no second request before the retransmit timer"
        );
        t.confirm(ip(1), MAC, S / 2, &mut out);
        assert_eq!(out, vec![Action::Resolved(ip(1), MAC, vec![10, 11])]);
        assert_eq!(t.get(ip(1)), Some((State::Reachable, Some(MAC))));
        out.clear();
        assert_eq!(t.send(ip(1), 12, S, &mut out), Send::Now(MAC, 12));
        assert!(out.is_empty());
        assert!(tick(&mut t, 10 * S).is_empty());
    }

    #[test]
    fn queue_is_bounded_oldest_dropped() {
        let mut t = table();
        let mut out = Vec::new();
        for id in 0..8 {
            assert_eq!(t.send(ip(1), id, 0, &mut out), Send::Queued);
        }
        assert_eq!(t.send(ip(1), 8, 0, &mut out), Send::Dropped(0));
        assert_eq!(t.send(ip(1), 9, 0, &mut out), Send::Dropped(1));
        assert_eq!(t.queue_overflows(), 2);
        assert_eq!(out.len(), 1, "one request for the whole burst");
        out.clear();
        t.confirm(ip(1), MAC, 0, &mut out);
        assert_eq!(out, vec![Action::Resolved(ip(1), MAC, (2..10).collect())]);
    }

    #[test]
    fn incomplete_retransmits_three_times_then_fails() {
        let mut t = table();
        let mut out = Vec::new();
        t.send(ip(1), 7, 0, &mut out);
        assert!(tick(&mut t, S - 1).is_empty());
        assert_eq!(tick(&mut t, S), vec![Action::SendRequest(ip(1), None)]);
        assert!(tick(&mut t, S + S / 2).is_empty());
        assert_eq!(tick(&mut t, 2 * S), vec![Action::SendRequest(ip(1), None)]);
        assert_eq!(state(&t, ip(1)), State::Incomplete);
        assert_eq!(tick(&mut t, 3 * S), vec![Action::Failed(ip(1), vec![7])]);
        assert_eq!(t.get(ip(1)), Some((State::Failed, None)));
        assert!(tick(&mut t, 100 * S).is_empty());
    }

    #[test]
    fn failed_entry_restarts_resolution_on_traffic() {
        let mut t = table();
        let mut out = Vec::new();
        t.send(ip(1), 1, 0, &mut out);
        for s in 1..=3 {
            tick(&mut t, s * S);
        }
        assert_eq!(state(&t, ip(1)), State::Failed);
        out.clear();
        assert_eq!(t.send(ip(1), 2, 10 * S, &mut out), Send::Queued);
        assert_eq!(out, vec![Action::SendRequest(ip(1), None)]);
        assert_eq!(state(&t, ip(1)), State::Incomplete);
        assert_eq!(tick(&mut t, 11 * S), vec![Action::SendRequest(ip(1), None)]);
    }

    #[test]
    fn reachable_ages_to_stale() {
        let mut t = table();
        let mut out = Vec::new();
        t.send(ip(1), 1, 0, &mut out);
        t.confirm(ip(1), MAC, S, &mut out);
        assert!(tick(&mut t, 31 * S - 1).is_empty());
        assert_eq!(state(&t, ip(1)), State::Reachable);
        assert!(tick(&mut t, 31 * S).is_empty());
        assert_eq!(t.get(ip(1)), Some((State::Stale, Some(MAC))));
        // Lazily too: a send after expiry but before any tick sees STALE (and probes).
        t.confirm(ip(1), MAC, 40 * S, &mut out);
        out.clear();
        assert_eq!(t.send(ip(1), 2, 70 * S, &mut out), Send::Now(MAC, 2));
        assert_eq!(out, vec![Action::SendRequest(ip(1), Some(MAC))]);
        assert_eq!(state(&t, ip(1)), State::Probe);
    }

    #[test]
    fn stale_use_probes_unicast_then_fails() {
        let mut t = table();
        let mut out = Vec::new();
        t.learn(ip(1), MAC, &mut out);
        assert_eq!(t.get(ip(1)), Some((State::Stale, Some(MAC))));
        assert_eq!(t.send(ip(1), 1, 0, &mut out), Send::Now(MAC, 1));
        assert_eq!(out, vec![Action::SendRequest(ip(1), Some(MAC))]);
        out.clear();
        // Packets keep flowing with the cached MAC while probing.
        assert_eq!(t.send(ip(1), 2, S / 2, &mut out), Send::Now(MAC, 2));
        assert!(out.is_empty());
        assert_eq!(tick(&mut t, S), vec![Action::SendRequest(ip(1), Some(MAC))]);
        assert_eq!(
            tick(&mut t, 2 * S),
            vec![Action::SendRequest(ip(1), Some(MAC))]
        );
        assert_eq!(tick(&mut t, 3 * S), vec![Action::Failed(ip(1), vec![])]);
        assert_eq!(t.get(ip(1)), Some((State::Failed, None)));
    }

    #[test]
    fn probe_answered_becomes_reachable() {
        let mut t = table();
        let mut out = Vec::new();
        t.learn(ip(1), MAC, &mut out);
        t.send(ip(1), 1, 0, &mut out);
        out.clear();
        t.confirm(ip(1), MAC, S / 2, &mut out);
        assert!(out.is_empty(), "nothing was queued");
        assert_eq!(t.get(ip(1)), Some((State::Reachable, Some(MAC))));
        assert!(tick(&mut t, 5 * S).is_empty(), "no more probes");
    }

    #[test]
    fn refresh_on_traffic() {
        let mut t = table();
        let mut out = Vec::new();
        t.learn(ip(1), MAC, &mut out);
        t.refresh(ip(1), 100 * S);
        assert_eq!(state(&t, ip(1)), State::Reachable);
        // Refreshed again before expiry: the 30 s restart.
        t.refresh(ip(1), 120 * S);
        tick(&mut t, 149 * S);
        assert_eq!(state(&t, ip(1)), State::Reachable);
        tick(&mut t, 150 * S);
        assert_eq!(state(&t, ip(1)), State::Stale);
        // A probing entry is confirmed by it too; an incomplete one is not (no MAC).
        t.send(ip(1), 1, 151 * S, &mut out);
        assert_eq!(state(&t, ip(1)), State::Probe);
        t.refresh(ip(1), 151 * S);
        assert_eq!(state(&t, ip(1)), State::Reachable);
        t.send(ip(2), 2, 0, &mut out);
        t.refresh(ip(2), 0);
        assert_eq!(state(&t, ip(2)), State::Incomplete);
        t.refresh(ip(3), 0); // unknown: nothing happens
        assert!(t.get(ip(3)).is_none());
    }

    #[test]
    fn learn_transitions() {
        let mut t = table();
        let mut out = Vec::new();
        // INCOMPLETE + announcement: STALE with the MAC, queue released.
        t.send(ip(1), 5, 0, &mut out);
        out.clear();
        t.learn(ip(1), MAC, &mut out);
        assert_eq!(out, vec![Action::Resolved(ip(1), MAC, vec![5])]);
        assert_eq!(t.get(ip(1)), Some((State::Stale, Some(MAC))));
        assert!(
            tick(&mut t, 10 * S).is_empty(),
            "no retransmits once resolved"
        );
        // REACHABLE + same MAC: unchanged; + new MAC: STALE with the new MAC.
        out.clear();
        t.confirm(ip(1), MAC, 10 * S, &mut out);
        t.learn(ip(1), MAC, &mut out);
        assert_eq!(t.get(ip(1)), Some((State::Reachable, Some(MAC))));
        t.learn(ip(1), MAC2, &mut out);
        assert_eq!(t.get(ip(1)), Some((State::Stale, Some(MAC2))));
        assert!(out.is_empty());
        // FAILED + announcement: STALE.
        t.send(ip(2), 1, 0, &mut out);
        for s in 1..=3 {
            tick(&mut t, s * S);
        }
        assert_eq!(state(&t, ip(2)), State::Failed);
        t.learn(ip(2), MAC, &mut out);
        assert_eq!(t.get(ip(2)), Some((State::Stale, Some(MAC))));
    }

    #[test]
    fn unsolicited_confirm_creates_nothing() {
        let mut t = table();
        let mut out = Vec::new();
        t.confirm(ip(9), MAC, 0, &mut out);
        assert!(t.is_empty() && out.is_empty());
    }

    #[test]
    fn static_entries_never_age_or_change() {
        let mut t = table();
        let mut out = Vec::new();
        t.send(ip(1), 3, 0, &mut out);
        out.clear();
        t.add_static(ip(1), MAC, &mut out);
        assert_eq!(out, vec![Action::Resolved(ip(1), MAC, vec![3])]);
        out.clear();
        assert!(tick(&mut t, u64::MAX / 2).is_empty());
        t.learn(ip(1), MAC2, &mut out);
        t.confirm(ip(1), MAC2, 0, &mut out);
        t.refresh(ip(1), 0);
        assert_eq!(t.get(ip(1)), Some((State::Permanent, Some(MAC))));
        assert_eq!(t.send(ip(1), 4, u64::MAX / 2, &mut out), Send::Now(MAC, 4));
        assert!(out.is_empty());
    }

    #[test]
    fn table_is_bounded() {
        let mut t = NeighbourTable::new(Config {
            max_entries: 2,
            ..Config::default()
        });
        let mut out = Vec::new();
        assert_eq!(t.send(ip(1), 1, 0, &mut out), Send::Queued);
        t.learn(ip(2), MAC, &mut out);
        t.confirm(ip(2), MAC, 0, &mut out); // reachable: not evictable
        assert_eq!(t.send(ip(3), 3, 0, &mut out), Send::Dropped(3));
        t.learn(ip(4), MAC, &mut out);
        assert_eq!((t.len(), t.table_full_drops()), (2, 1));
        // Existing entries still work.
        assert_eq!(t.send(ip(2), 2, 0, &mut out), Send::Now(MAC, 2));
        t.remove(ip(1), &mut out);
        assert_eq!(out.last(), Some(&Action::Failed(ip(1), vec![1])));
        assert_eq!(t.send(ip(3), 3, 0, &mut out), Send::Queued);
    }

    #[test]
    fn full_table_evicts_failed_then_stale_entries() {
        let mut t = NeighbourTable::new(Config {
            max_entries: 2,
            ..Config::default()
        });
        let mut out = Vec::new();
        t.send(ip(1), 1, 0, &mut out);
        t.learn(ip(2), MAC, &mut out);
        for s in 1..=3 {
            tick(&mut t, s * S);
        }
        assert_eq!(state(&t, ip(1)), State::Failed);
        // The failed entry makes room first ...
        assert_eq!(t.send(ip(3), 3, 4 * S, &mut out), Send::Queued);
        assert!(t.get(ip(1)).is_none() && t.get(ip(2)).is_some());
        // ... then the stale one; the incomplete one (holding packets) is never evicted.
        t.learn(ip(4), MAC2, &mut out);
        assert!(t.get(ip(2)).is_none());
        assert_eq!(t.get(ip(4)), Some((State::Stale, Some(MAC2))));
        t.confirm(ip(4), MAC2, 4 * S, &mut out);
        assert_eq!(t.send(ip(5), 5, 4 * S, &mut out), Send::Dropped(5));
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn probe_stale_probes_only_stale_entries_and_an_answer_makes_them_reachable() {
        let mut t = table();
        let mut out = Vec::new();
        t.learn(ip(1), MAC, &mut out); // STALE
        t.learn(ip(2), MAC2, &mut out);
        t.confirm(ip(2), MAC2, 0, &mut out); // REACHABLE until 30 s
        t.send(ip(3), 3, 0, &mut out); // INCOMPLETE
        t.add_static(ip(4), MAC, &mut out); // PERMANENT
        out.clear();
        t.probe_stale(10 * S, &mut out);
        assert_eq!(out, vec![Action::SendRequest(ip(1), Some(MAC))]);
        assert_eq!(t.get(ip(1)), Some((State::Probe, Some(MAC))));
        assert_eq!(state(&t, ip(2)), State::Reachable);
        assert_eq!(state(&t, ip(3)), State::Incomplete);
        assert_eq!(state(&t, ip(4)), State::Permanent);
        // Probing again before an answer changes nothing: the entry is PROBE, not STALE.
        out.clear();
        t.probe_stale(10 * S, &mut out);
        assert!(out.is_empty());
        // Answered: REACHABLE, no more requests.
        t.confirm(ip(1), MAC, 10 * S + S / 2, &mut out);
        assert!(out.is_empty(), "nothing was queued");
        assert_eq!(t.get(ip(1)), Some((State::Reachable, Some(MAC))));
        assert!(!tick(&mut t, 12 * S).contains(&Action::SendRequest(ip(1), Some(MAC))));
        // One reachable period later both expired entries (aged by tick or not) are probed.
        t.confirm(ip(3), MAC2, 12 * S, &mut out);
        out.clear();
        tick(&mut t, 40 * S + S / 2); // ip(1) STALE; ip(2) too
        t.probe_stale(40 * S + S / 2, &mut out); // ip(3)'s deadline (42 s) not reached
        out.sort_by_key(|a| format!("{a:?}"));
        assert_eq!(
            out,
            vec![
                Action::SendRequest(ip(1), Some(MAC)),
                Action::SendRequest(ip(2), Some(MAC2))
            ]
        );
        out.clear();
        t.probe_stale(42 * S, &mut out); // REACHABLE past its deadline, before any tick
        assert_eq!(out, vec![Action::SendRequest(ip(3), Some(MAC2))]);
        assert_eq!(state(&t, ip(3)), State::Probe);
    }

    #[test]
    fn probe_stale_unanswered_fails_with_an_action() {
        let mut t = table();
        let mut out = Vec::new();
        t.learn(ip(1), MAC, &mut out);
        t.probe_stale(100 * S, &mut out);
        assert_eq!(out, vec![Action::SendRequest(ip(1), Some(MAC))]);
        assert!(tick(&mut t, 101 * S - 1).is_empty());
        assert_eq!(
            tick(&mut t, 101 * S),
            vec![Action::SendRequest(ip(1), Some(MAC))]
        );
        assert_eq!(
            tick(&mut t, 102 * S),
            vec![Action::SendRequest(ip(1), Some(MAC))]
        );
        // Three unicast requests unanswered: FAILED, reported even though nothing waited.
        assert_eq!(tick(&mut t, 103 * S), vec![Action::Failed(ip(1), vec![])]);
        assert_eq!(t.get(ip(1)), Some((State::Failed, None)));
        assert!(tick(&mut t, 200 * S).is_empty(), "reported once");
        out.clear();
        t.probe_stale(200 * S, &mut out);
        assert!(out.is_empty(), "a FAILED entry has no MAC to probe");
    }

    #[test]
    fn entries_lists_state_mac_and_queue() {
        let mut t = table();
        let mut out = Vec::new();
        assert_eq!(t.entries().count(), 0);
        t.send(ip(1), 1, 0, &mut out);
        t.send(ip(1), 2, 0, &mut out);
        t.learn(ip(2), MAC, &mut out);
        t.add_static(ip(3), MAC2, &mut out);
        let mut got: Vec<_> = t.entries().collect();
        got.sort_by_key(|e| e.0);
        assert_eq!(
            got,
            vec![
                (ip(1), State::Incomplete, None, 2),
                (ip(2), State::Stale, Some(MAC), 0),
                (ip(3), State::Permanent, Some(MAC2), 0),
            ]
        );
        t.confirm(ip(1), MAC2, 0, &mut out);
        assert!(
            t.entries()
                .any(|e| e == (ip(1), State::Reachable, Some(MAC2), 0))
        );
    }

    #[test]
    fn config_reports_what_is_in_use() {
        let cfg = Config {
            retrans_ns: 2 * S,
            reachable_ns: 60 * S,
            max_entries: 10,
            ..Config::default()
        };
        assert_eq!(NeighbourTable::<u32>::new(cfg).config(), cfg);
        assert_eq!(NeighbourTable::<u32>::default().config(), Config::default());
        let floored = NeighbourTable::<u32>::new(Config {
            queue_len: 0,
            max_probes: 0,
            ..cfg
        })
        .config();
        assert_eq!((floored.queue_len, floored.max_probes), (1, 1));
    }

    #[test]
    fn ipv6_keys_and_config_floors() {
        let mut t: NeighbourTable<u32> = NeighbourTable::new(Config {
            queue_len: 0,
            max_probes: 0,
            ..Config::default()
        });
        let a = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1));
        let mut out = Vec::new();
        assert_eq!(t.send(a, 1, 0, &mut out), Send::Queued);
        assert_eq!(t.send(a, 2, 0, &mut out), Send::Dropped(1)); // queue_len raised to 1
        assert_eq!(tick(&mut t, S), vec![Action::Failed(a, vec![2])]); // one request only
        t.remove(a, &mut out);
        assert!(t.is_empty());
    }
}
