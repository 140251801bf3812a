//! A neighbour cache: the reachability state machine of RFC 4861 7.3.2 (IPv6 Neighbor
//! Unreachability Detection), used for ARP too, as Linux does.
//!
//! The table does no I/O and reads no clock: every method takes `now` (nanoseconds of any
//! monotonic clock) where timers matter, and reports what must happen as [`Action`]s pushed
//! onto a caller's `Vec` (send an ARP request / Neighbor Solicitation, send the packets that
//! waited for an address, drop them, forget what depended on an entry). Packets waiting for
//! resolution are the caller's handles `P` (frame descriptors, ids), at most
//! [`Config::queue_len`] per address; entries are at most [`Config::max_entries`]. Nothing
//! grows without bound.
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
//!
//! When the table is full, a new address takes the place of the least recently used FAILED
//! entry, else INCOMPLETE, else STALE one ([`Action::Evicted`]): a scan of a large prefix
//! recycles its own incomplete entries, and never displaces a REACHABLE, PROBE or PERMANENT
//! one. Which entry that is costs O(log n): evictable entries are kept ordered in an index.

use core::net::IpAddr;
use std::collections::{BTreeMap, HashMap};

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
    /// Entries in the table (`router.max_neighbours`); static entries count but are always
    /// added.
    pub max_entries: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            retrans_ns: SECOND,
            max_probes: 3,
            reachable_ns: 30 * SECOND,
            queue_len: 8,
            max_entries: 65_536,
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

impl State {
    /// Eviction rank (lower goes first); `None`: never evicted.
    fn rank(self) -> Option<u8> {
        match self {
            State::Failed => Some(0),
            State::Incomplete => Some(1),
            State::Stale => Some(2),
            _ => None,
        }
    }
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
    /// 4.3.3.1 / RFC 4443 3.1 code 3), and withdraw what depends on the neighbour.
    Failed(IpAddr, Vec<P>),
    /// The entry was removed to make room for another: drop its packets and forget
    /// everything that depends on it (host route, next-hop id).
    Evicted(IpAddr, Vec<P>),
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

/// What [`NeighbourTable::advert`] did with a Neighbor Advertisement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advert {
    /// No entry for the target: discarded (RFC 4861 7.2.5, first paragraph).
    NoEntry,
    /// The entry is static, or the advertisement may not change it (no target link-layer
    /// address for an INCOMPLETE entry; a different one without the Override flag).
    Ignored,
    /// The entry was updated.
    Updated,
}

#[derive(Debug)]
struct Entry<P> {
    state: State,
    mac: Option<MacAddr>,
    /// The logical port it is reached on.
    port: u16,
    /// Requests sent in the current INCOMPLETE or PROBE round.
    probes: u32,
    /// INCOMPLETE/PROBE: when the next request (or failure) is due; REACHABLE: when it
    /// becomes STALE.
    deadline: u64,
    queue: Vec<P>,
    /// Last use (a counter, not a time); with the eviction rank, the entry's key in
    /// `NeighbourTable::evictable` while it has a rank.
    used: u64,
    key: Option<(u8, u64)>,
}

/// The neighbour cache of one router (keys are full addresses; each entry names its port).
#[derive(Debug)]
pub struct NeighbourTable<P> {
    cfg: Config,
    entries: HashMap<IpAddr, Entry<P>>,
    /// FAILED, INCOMPLETE and STALE entries by (rank, last use): the eviction order.
    evictable: BTreeMap<(u8, u64), IpAddr>,
    clock: u64,
    queue_overflows: u64,
    table_full: u64,
    evictions: u64,
}

impl<P> Default for NeighbourTable<P> {
    fn default() -> Self {
        Self::new(Config::default())
    }
}

/// Brings `e`'s place in the eviction index up to date after a change of state (and, with
/// `touch`, records a use).
fn settle<P>(
    index: &mut BTreeMap<(u8, u64), IpAddr>,
    clock: &mut u64,
    ip: IpAddr,
    e: &mut Entry<P>,
    touch: bool,
) {
    if touch {
        *clock += 1;
        e.used = *clock;
    }
    let key = e.state.rank().map(|r| (r, e.used));
    if key != e.key {
        if let Some(old) = e.key {
            index.remove(&old);
        }
        if let Some(k) = key {
            index.insert(k, ip);
        }
        e.key = key;
    }
}

impl<P> NeighbourTable<P> {
    /// An empty table.
    pub fn new(cfg: Config) -> Self {
        NeighbourTable {
            cfg: Config {
                queue_len: cfg.queue_len.max(1),
                max_probes: cfg.max_probes.max(1),
                max_entries: cfg.max_entries.max(1),
                ..cfg
            },
            entries: HashMap::new(),
            evictable: BTreeMap::new(),
            clock: 0,
            queue_overflows: 0,
            table_full: 0,
            evictions: 0,
        }
    }

    /// The timers and bounds in use (after [`new`](Self::new) raised `queue_len`,
    /// `max_probes` and `max_entries` to at least 1).
    pub fn config(&self) -> Config {
        self.cfg
    }

    /// The state and MAC of `ip`'s entry, if there is one.
    pub fn get(&self, ip: IpAddr) -> Option<(State, Option<MacAddr>)> {
        self.entries.get(&ip).map(|e| (e.state, e.mac))
    }

    /// The port of `ip`'s entry, if there is one.
    pub fn port(&self, ip: IpAddr) -> Option<u16> {
        self.entries.get(&ip).map(|e| e.port)
    }

    /// Every entry as (address, state, MAC, port, packets queued), in no particular order (for
    /// `show neighbours`). A REACHABLE entry past its deadline is reported STALE, as
    /// [`send`](Self::send) would see it, only after the next [`tick`](Self::tick).
    pub fn entries(
        &self,
    ) -> impl Iterator<Item = (IpAddr, State, Option<MacAddr>, u16, usize)> + '_ {
        self.entries.iter().map(|(&ip, e)| (ip, e.state, e.mac, e.port, e.queue.len()))
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

    /// New addresses refused because the table was full and no entry could be evicted (a
    /// packet dropped, or an announcement not recorded).
    pub fn table_full(&self) -> u64 {
        self.table_full
    }

    /// Entries removed to make room for new ones.
    pub fn evictions(&self) -> u64 {
        self.evictions
    }

    fn new_entry(
        &mut self,
        ip: IpAddr,
        state: State,
        mac: Option<MacAddr>,
        port: u16,
    ) -> &mut Entry<P> {
        let e = Entry {
            state,
            mac,
            port,
            probes: 0,
            deadline: 0,
            queue: Vec::new(),
            used: 0,
            key: None,
        };
        let e = self.entries.entry(ip).insert_entry(e).into_mut();
        settle(&mut self.evictable, &mut self.clock, ip, e, true);
        e
    }

    /// Adds (or replaces with) a static entry on `port`, which never ages and ignores
    /// announcements. Packets waiting on an INCOMPLETE entry for `ip` are handed back as
    /// resolved.
    pub fn add_static(&mut self, ip: IpAddr, port: u16, mac: MacAddr, out: &mut Vec<Action<P>>) {
        self.remove_quietly(ip, |q| out.push(Action::Resolved(ip, mac, q)));
        self.new_entry(ip, State::Permanent, Some(mac), port);
    }

    /// Removes `ip`'s entry; packets still queued on it are handed back as failed.
    pub fn remove(&mut self, ip: IpAddr, out: &mut Vec<Action<P>>) {
        if self.entries.contains_key(&ip) {
            self.remove_quietly(ip, |q| out.push(Action::Failed(ip, q)));
        }
    }

    /// Removes `ip`'s entry, handing a non-empty queue to `queued`.
    fn remove_quietly(&mut self, ip: IpAddr, queued: impl FnOnce(Vec<P>)) {
        if let Some(e) = self.entries.remove(&ip) {
            if let Some(k) = e.key {
                self.evictable.remove(&k);
            }
            if !e.queue.is_empty() {
                queued(e.queue);
            }
        }
    }

    /// Makes room for a new address when the table is full: evicts the least recently used
    /// FAILED, else INCOMPLETE, else STALE entry. Returns whether there is room.
    fn make_room(&mut self, out: &mut Vec<Action<P>>) -> bool {
        if self.entries.len() < self.cfg.max_entries {
            return true;
        }
        let Some((_, ip)) = self.evictable.pop_first() else {
            self.table_full += 1;
            return false;
        };
        if let Some(e) = self.entries.remove(&ip) {
            self.evictions += 1;
            out.push(Action::Evicted(ip, e.queue));
        }
        true
    }

    /// The forwarding path has packet `pkt` for next hop `ip` on `port` at `now`. An
    /// existing entry on another port moves to `port` (the route's port is the authority).
    pub fn send(
        &mut self,
        ip: IpAddr,
        port: u16,
        pkt: P,
        now: u64,
        out: &mut Vec<Action<P>>,
    ) -> Send<P> {
        let cfg = self.cfg;
        if !self.entries.contains_key(&ip) {
            if !self.make_room(out) {
                return Send::Dropped(pkt);
            }
            let e = self.new_entry(ip, State::Incomplete, None, port);
            e.probes = 1;
            e.deadline = now.saturating_add(cfg.retrans_ns);
            e.queue.reserve_exact(cfg.queue_len);
            e.queue.push(pkt);
            out.push(Action::SendRequest(ip, None));
            return Send::Queued;
        }
        let Some(e) = self.entries.get_mut(&ip) else { return Send::Dropped(pkt) };
        if e.state != State::Permanent {
            e.port = port;
        }
        if e.state == State::Reachable && now >= e.deadline {
            e.state = State::Stale;
        }
        let res = match (e.state, e.mac) {
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
                    Send::Dropped(e.queue.remove(0))
                } else {
                    Send::Queued
                }
            }
        };
        settle(&mut self.evictable, &mut self.clock, ip, e, true);
        res
    }

    /// Marks `e` REACHABLE with `mac` until `now` + `reachable`, handing back its queue.
    fn reach(e: &mut Entry<P>, ip: IpAddr, mac: MacAddr, deadline: u64, out: &mut Vec<Action<P>>) {
        e.state = State::Reachable;
        e.mac = Some(mac);
        e.probes = 0;
        e.deadline = deadline;
        if !e.queue.is_empty() {
            out.push(Action::Resolved(ip, mac, core::mem::take(&mut e.queue)));
        }
    }

    /// A solicited answer arrived: an ARP reply (RFC 826 has no override rule: the reply's
    /// address is taken). The entry becomes REACHABLE with `mac`; an INCOMPLETE entry hands
    /// back its queue. Answers for addresses without an entry are ignored (no entry is
    /// created from an unsolicited reply), as are static entries. Returns whether an entry
    /// took it.
    pub fn confirm(
        &mut self,
        ip: IpAddr,
        mac: MacAddr,
        now: u64,
        out: &mut Vec<Action<P>>,
    ) -> bool {
        let deadline = now.saturating_add(self.cfg.reachable_ns);
        let Some(e) = self.entries.get_mut(&ip) else { return false };
        if e.state == State::Permanent {
            return false;
        }
        Self::reach(e, ip, mac, deadline, out);
        settle(&mut self.evictable, &mut self.clock, ip, e, true);
        true
    }

    /// A Neighbor Advertisement for `ip` with target link-layer address `tlla` and the
    /// Solicited and Override flags, handled as RFC 4861 7.2.5 says: it never creates an
    /// entry; an INCOMPLETE (or FAILED) one takes `tlla` (REACHABLE if solicited, else STALE)
    /// and hands back its queue, and without `tlla` the advertisement is ignored; otherwise a
    /// different `tlla` without Override only turns a REACHABLE entry STALE, and with Override
    /// (or the same or no `tlla`) the address is recorded, REACHABLE if solicited, STALE if
    /// it changed.
    pub fn advert(
        &mut self,
        ip: IpAddr,
        tlla: Option<MacAddr>,
        solicited: bool,
        override_flag: bool,
        now: u64,
        out: &mut Vec<Action<P>>,
    ) -> Advert {
        let deadline = now.saturating_add(self.cfg.reachable_ns);
        let Some(e) = self.entries.get_mut(&ip) else { return Advert::NoEntry };
        let res = match (e.state, e.mac, tlla) {
            (State::Permanent, ..) | (State::Incomplete | State::Failed, _, None) => {
                Advert::Ignored
            }
            (State::Incomplete | State::Failed, _, Some(mac)) | (_, None, Some(mac)) => {
                if solicited {
                    Self::reach(e, ip, mac, deadline, out);
                } else {
                    Self::announce(e, ip, mac, out);
                }
                Advert::Updated
            }
            (_, Some(old), Some(new)) if new != old && !override_flag => {
                if e.state == State::Reachable {
                    e.state = State::Stale;
                }
                Advert::Ignored
            }
            (_, Some(old), new) => {
                let mac = new.unwrap_or(old);
                if solicited {
                    Self::reach(e, ip, mac, deadline, out);
                } else if mac != old {
                    Self::announce(e, ip, mac, out);
                }
                Advert::Updated
            }
            (_, None, None) => Advert::Ignored,
        };
        let touch = res == Advert::Updated;
        settle(&mut self.evictable, &mut self.clock, ip, e, touch);
        res
    }

    /// Records `mac` for `e` as STALE, handing back its queue.
    fn announce(e: &mut Entry<P>, ip: IpAddr, mac: MacAddr, out: &mut Vec<Action<P>>) {
        e.state = State::Stale;
        e.mac = Some(mac);
        e.probes = 0;
        if !e.queue.is_empty() {
            out.push(Action::Resolved(ip, mac, core::mem::take(&mut e.queue)));
        }
    }

    /// An announcement of `ip` at `mac` on `port` that may create an entry: the sender of an
    /// ARP request for the router (RFC 826), the source link-layer option of a Neighbor
    /// Solicitation (RFC 4861 7.2.3). Creates a STALE entry if there is none (and room); an
    /// INCOMPLETE one becomes STALE and hands back its queue; a different MAC replaces the
    /// cached one and makes the entry STALE; the same MAC changes nothing. Returns whether an
    /// entry holds `ip` afterwards.
    pub fn learn(&mut self, ip: IpAddr, port: u16, mac: MacAddr, out: &mut Vec<Action<P>>) -> bool {
        if !self.entries.contains_key(&ip) {
            if !self.make_room(out) {
                return false;
            }
            self.new_entry(ip, State::Stale, Some(mac), port);
            return true;
        }
        self.update(ip, port, mac, out);
        true
    }

    /// Like [`learn`](Self::learn) but never creates an entry (RFC 826's merge for an ARP
    /// packet not addressed to the router). Returns whether an entry took it.
    pub fn update(
        &mut self,
        ip: IpAddr,
        port: u16,
        mac: MacAddr,
        out: &mut Vec<Action<P>>,
    ) -> bool {
        let Some(e) = self.entries.get_mut(&ip) else { return false };
        if e.state == State::Permanent {
            return true;
        }
        if e.mac != Some(mac) {
            e.port = port;
            Self::announce(e, ip, mac, out);
        }
        settle(&mut self.evictable, &mut self.clock, ip, e, true);
        true
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
            settle(&mut self.evictable, &mut self.clock, ip, e, true);
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
            settle(&mut self.evictable, &mut self.clock, ip, e, false);
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
                _ => continue,
            }
            settle(&mut self.evictable, &mut self.clock, ip, e, false);
        }
    }
}

#[cfg(test)]
#[path = "neighbour_tests.rs"]
mod tests;
