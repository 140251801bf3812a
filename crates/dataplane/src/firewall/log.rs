//! pf's `log`: copies of the packets that rules with `log` decide (and, with `log (all)`, of
//! every packet their states pass), handed by each worker to a logger thread.
//!
//! A worker never blocks and never allocates for a log record: the pass that decides a packet
//! notes a [`LogHit`]; the filter stage, which has the frame, then copies up to the snap
//! length of its IP packet, with the rule, action, reason, direction and interface, into the
//! next slot of the worker's bounded ring ([`io::spsc`]). A full ring drops the record and
//! counts it; a token bucket limits the records per second. The logger thread (in the
//! `linerate` crate) drains the rings into a pflog capture file and to `linerate log`.
//!
//! Each rule has a stable id for the log, the same after a reload that keeps the rule: its
//! ridentifier, else its label, else a hash of its text ([`stable_id`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use fw::packet::Dir;
use fw::passes::{Count, Drop};
use fw::rules::{Action, LogMode, Rule, RuleSet};
use fw::state::{StateDropReason, StateVerdict};
use io::pflog::Reason;
use io::ratelimit::TokenBucket;
use io::spsc::{Consumer, Producer};

use super::Firewall;

/// Largest snap length: bytes of the IP packet a record holds.
pub const LOG_SNAP_MAX: usize = 256;
/// Default snap length (pflogd's default is 160 bytes of packet; 128 covers IPv6 + TCP with
/// options and the start of the payload).
pub const DEFAULT_LOG_SNAP: usize = 128;
/// Bytes of a stable rule id, NUL-padded (pflog's `ruleset` field).
pub const ID_LEN: usize = io::pflog::NAME_LEN;

/// One logged packet.
#[derive(Clone, Copy)]
pub struct LogRecord {
    /// Wall-clock time, nanoseconds since 1970.
    pub ts_ns: u64,
    /// The rule's index in its set (0-based, as `pfctl -vvsr` numbers rules `@N`).
    pub rule: u32,
    /// The rule's stable id ([`stable_id`]), NUL-padded.
    pub id: [u8; ID_LEN],
    pub action: Action,
    pub reason: Reason,
    pub dir: Dir,
    pub v6: bool,
    /// Logical port (interface or VLAN sub-interface) of the pass: in or out.
    pub iface: u16,
    /// Length of the IP packet.
    pub orig_len: u16,
    /// Bytes of it in `data`.
    pub len: u16,
    pub data: [u8; LOG_SNAP_MAX],
}

impl Default for LogRecord {
    fn default() -> Self {
        LogRecord {
            ts_ns: 0,
            rule: 0,
            id: [0; ID_LEN],
            action: Action::Pass,
            reason: Reason::Match,
            dir: Dir::In,
            v6: false,
            iface: 0,
            orig_len: 0,
            len: 0,
            data: [0; LOG_SNAP_MAX],
        }
    }
}

impl LogRecord {
    pub fn packet(&self) -> &[u8] {
        &self.data[..usize::from(self.len).min(LOG_SNAP_MAX)]
    }

    /// The stable id as text.
    pub fn id(&self) -> &str {
        let end = self.id.iter().position(|&b| b == 0).unwrap_or(ID_LEN);
        std::str::from_utf8(&self.id[..end]).unwrap_or("?")
    }

    /// The pflog header of this record, on interface `ifname`.
    pub fn pflog_header(&self, ifname: &str) -> io::pflog::Header {
        io::pflog::Header {
            af: if self.v6 { io::pflog::AF_INET6 } else { io::pflog::AF_INET },
            action: if self.action == Action::Pass {
                io::pflog::ACTION_PASS
            } else {
                io::pflog::ACTION_BLOCK
            },
            reason: self.reason as u8,
            ifname: ifname.to_owned(),
            ruleset: self.id().to_owned(),
            rulenr: self.rule,
            subrulenr: 0,
            dir: if self.dir == Dir::In { io::pflog::DIR_IN } else { io::pflog::DIR_OUT },
        }
    }
}

/// What the pass that decided a packet leaves for the filter stage to log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LogHit {
    pub rule: u32,
    pub action: Action,
    pub reason: Reason,
    pub dir: Dir,
}

impl LogHit {
    /// The hit of rule `rule` for a pass that ended in `r`.
    pub fn of(rule: usize, r: Result<(), Drop>, dir: Dir) -> LogHit {
        let (action, reason) = match r {
            Ok(()) => (Action::Pass, Reason::Match),
            Err(Drop::Blocked) => (Action::Block, Reason::Match),
            Err(Drop::IpOptions) => (Action::Block, Reason::IpOption),
            Err(Drop::StateLimit | Drop::RuleMax) => (Action::Block, Reason::StateLimit),
            Err(Drop::SrcStates | Drop::SrcNodes) => (Action::Block, Reason::SrcLimit),
            Err(Drop::Synproxy) => (Action::Block, Reason::Synproxy),
        };
        LogHit { rule: rule as u32, action, reason, dir }
    }
}

/// Counters of one worker's log, readable from any thread.
#[derive(Default)]
pub struct LogStats {
    /// Records put in the ring.
    pub logged: AtomicU64,
    /// Records not made: over the rate limit.
    pub rate_limited: AtomicU64,
}

/// The worker's end of its log.
pub struct LogSink {
    ring: Producer<LogRecord>,
    snap: usize,
    limit: TokenBucket,
    stats: Arc<LogStats>,
    /// The clock, read at the batch's first logged packet (0: not yet): one read per batch,
    /// so a flood the rate limit refuses costs a token check per packet, not a clock read.
    batch_ts: u64,
    /// The rate limit refused a record of this batch: it refuses the rest (the clock of the
    /// batch does not move, so no token comes back) without asking.
    batch_refused: bool,
}

/// A worker's log ring: the sink for its firewall, and the logger's end with its counters.
pub struct LogRing {
    pub consumer: Consumer<LogRecord>,
    pub stats: Arc<LogStats>,
}

/// A ring of `capacity` records of at most `snap` bytes, at most `per_second` records a
/// second (bursts of a tenth of that, at least 1).
pub fn log_ring(capacity: usize, snap: usize, per_second: u64) -> (LogSink, LogRing) {
    let (ring, consumer) = io::spsc::ring(capacity);
    let stats = Arc::new(LogStats::default());
    let limit = TokenBucket::new(per_second, (per_second / 10).max(1));
    let sink = LogSink {
        ring,
        snap: snap.clamp(1, LOG_SNAP_MAX),
        limit,
        stats: Arc::clone(&stats),
        batch_ts: 0,
        batch_refused: false,
    };
    (sink, LogRing { consumer, stats })
}

fn bump(a: &AtomicU64) {
    a.store(a.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

impl LogSink {
    /// A new batch: its records get a new time stamp.
    #[inline(always)]
    pub(crate) fn new_batch(&mut self) {
        (self.batch_ts, self.batch_refused) = (0, false);
    }

    /// Copies `ip` (the IP packet) under `hit` on port `iface`, if the rate limit allows;
    /// `id` is the rule's stable id. Records of one batch share its time stamp.
    pub(crate) fn push(&mut self, hit: LogHit, id: [u8; ID_LEN], ip: &[u8], iface: u16) {
        if self.batch_ts == 0 {
            self.batch_ts =
                SystemTime::now().duration_since(UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64);
        }
        let ts_ns = self.batch_ts;
        if self.batch_refused || !self.limit.allow(ts_ns) {
            self.batch_refused = true;
            return bump(&self.stats.rate_limited);
        }
        let snap = self.snap.min(ip.len());
        let pushed = self.ring.push_with(|r| {
            (r.ts_ns, r.rule, r.id, r.iface) = (ts_ns, hit.rule, id, iface);
            (r.action, r.reason, r.dir) = (hit.action, hit.reason, hit.dir);
            r.v6 = ip.first().is_some_and(|b| b >> 4 == 6);
            r.orig_len = ip.len().min(usize::from(u16::MAX)) as u16;
            r.len = snap as u16;
            r.data[..snap].copy_from_slice(&ip[..snap]);
        });
        if pushed {
            bump(&self.stats.logged);
        }
    }
}

/// What a rule set logs: per rule its stable id (if it has `log`), and whether any rule
/// logs every packet of its states (the quick loop, which does not log, is then off).
#[derive(Debug, Clone, Default)]
pub struct LogRules {
    pub ids: Vec<Option<[u8; ID_LEN]>>,
    pub any: bool,
    pub all: bool,
}

impl LogRules {
    pub fn of(rs: &RuleSet) -> LogRules {
        let ids: Vec<_> =
            rs.rules.iter().map(|r| (r.log != LogMode::None).then(|| stable_id(r))).collect();
        LogRules {
            any: ids.iter().any(Option::is_some),
            all: rs.rules.iter().any(|r| r.log == LogMode::All),
            ids,
        }
    }

    /// Whether rule `i` logs packets its states pass (`log (all)`).
    pub fn logs_all(&self, rs: &RuleSet, i: usize) -> bool {
        self.all && rs.rules.get(i).is_some_and(|r| r.log == LogMode::All)
    }
}

/// A rule's id in the log, the same across reloads while the rule is unchanged: its
/// `ridentifier` in decimal (pfSense's log names rules by it), else its label (cut to 15
/// bytes), else 8 hex digits of a hash (FNV-1a) of its parsed form, which leaves out its
/// line number (moving a rule keeps its id; editing it changes it).
pub fn stable_id(rule: &Rule) -> [u8; ID_LEN] {
    let mut id = [0u8; ID_LEN];
    let text = match (&rule.label, rule.ridentifier) {
        (_, Some(n)) => n.to_string(),
        (Some(l), None) if !l.is_empty() => l.clone(),
        _ => {
            let norm = format!("{:?}", Rule { line: 0, ..rule.clone() });
            let h = crate::fnv::fnv1a(crate::fnv::FNV_OFFSET, norm.as_bytes());
            format!("{:08x}", (h ^ (h >> 32)) as u32)
        }
    };
    let b = text.as_bytes();
    let n = b.len().min(ID_LEN - 1);
    id[..n].copy_from_slice(&b[..n]);
    id
}

/// The firewall's side of the log: the passes note what to log, the filter stage emits it.
impl Firewall {
    /// Sends the records of logged packets to `sink` (before the worker runs).
    pub fn set_log(&mut self, sink: LogSink) {
        self.log = Some(sink);
    }

    /// Whether the packet just filtered is to be logged ([`emit_log`](Self::emit_log)).
    #[inline(always)]
    pub(crate) fn has_log_hit(&self) -> bool {
        self.log_hit.is_some()
    }

    /// Logs the packet just filtered, its IP packet at `l3` of `frame`, on logical port
    /// `iface`, as its pass noted.
    #[cold]
    #[inline(never)]
    pub(crate) fn emit_log(&mut self, frame: &[u8], l3: usize, iface: u16) {
        let (Some(hit), Some(sink)) = (self.log_hit.take(), &mut self.log) else { return };
        let Some(Some(id)) = self.cur.rules.log.ids.get(hit.rule as usize) else { return };
        sink.push(hit, *id, frame.get(l3..).unwrap_or_default(), iface);
    }

    /// Notes a packet the rules decided (`c`) with outcome `r` for the log, if its rule logs.
    #[inline(always)]
    pub(super) fn log_decided(&mut self, c: Count, r: Result<(), Drop>, dir: Dir) {
        if self.cur.rules.log.any
            && c.by_rules
            && let Some(i) = c.rule
        {
            self.log_rule(i, LogHit::of(i, r, dir), false);
        }
    }

    /// Notes a packet a state of rule `i` passed (or `dropped`: outside its TCP window), if
    /// the rule logs all. After a reload a state's rule index names the rule at that index
    /// in the new set.
    #[inline(always)]
    pub(super) fn log_state(&mut self, i: usize, verdict: StateVerdict) {
        if self.cur.rules.log.all {
            let (action, reason) = match verdict {
                StateVerdict::Pass => (Action::Pass, io::pflog::Reason::Match),
                StateVerdict::Drop(StateDropReason::OutOfWindow) => {
                    (Action::Block, io::pflog::Reason::StateMismatch)
                }
                StateVerdict::Drop(StateDropReason::SrcConn | StateDropReason::SrcConnRate) => {
                    (Action::Block, io::pflog::Reason::SrcLimit)
                }
                StateVerdict::Drop(StateDropReason::Synproxy) => {
                    (Action::Block, io::pflog::Reason::Synproxy)
                }
            };
            self.log_rule(i, LogHit { rule: i as u32, action, reason, dir: Dir::In }, true);
        }
    }

    #[cold]
    #[inline(never)]
    fn log_rule(&mut self, i: usize, hit: LogHit, state: bool) {
        let rules = &self.cur.rules;
        let logs = if state {
            rules.log.logs_all(&rules.rules, i)
        } else {
            rules.log.ids.get(i).is_some_and(Option::is_some)
        };
        if logs {
            self.log_hit = Some(hit);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn rules(text: &str) -> RuleSet {
        fw::rules::parse(text, Path::new("r.conf"), &|n| (n == "em0").then_some(0)).unwrap()
    }

    #[test]
    fn ids_are_labels_or_hashes_that_survive_moves() {
        let a =
            rules("pass all\nblock in log proto tcp to port 22\npass log all label \"web-in\"\n");
        let b = rules("# moved\n\nblock in log proto tcp to port 22\n");
        let la = LogRules::of(&a);
        assert_eq!((la.any, la.all), (true, false));
        assert_eq!(la.ids[0], None);
        let id = la.ids[1].unwrap();
        assert_eq!(id, LogRules::of(&b).ids[0].unwrap(), "same rule, other line: same id");
        let text = std::str::from_utf8(&id[..8]).unwrap();
        assert!(text.chars().all(|c| c.is_ascii_hexdigit()) && id[8] == 0, "{id:?}");
        assert_eq!(&la.ids[2].unwrap()[..7], b"web-in\0");
        let c = rules("block in log proto tcp to port 23\n");
        assert_ne!(LogRules::of(&c).ids[0].unwrap(), id, "another rule, another id");
        let all = rules("pass in log (all) all\n");
        assert!(LogRules::of(&all).logs_all(&all, 0));
        let rid =
            rules("block in log all ridentifier 1000000103 label \"Default deny rule IPv4\"\n");
        assert_eq!(
            &LogRules::of(&rid).ids[0].unwrap()[..11],
            b"1000000103\0",
            "the ridentifier before the label"
        );
    }

    #[test]
    fn ring_cuts_to_the_snap_length_and_counts() {
        let (mut sink, mut ring) = log_ring(2, 20, 1_000_000);
        let hit = LogHit::of(3, Err(Drop::Blocked), Dir::In);
        let mut ip = vec![0x45u8; 60];
        ip[59] = 9;
        for _ in 0..3 {
            sink.push(hit, *b"ssh-in\0\0\0\0\0\0\0\0\0\0", &ip, 1);
        }
        assert_eq!(ring.stats.logged.load(Ordering::Relaxed), 2);
        assert_eq!(ring.consumer.dropped(), 1, "the third found the ring full");
        assert!(ring.consumer.pop_with(|r| {
            assert_eq!(
                (r.rule, r.id(), r.action, r.reason, r.iface),
                (3, "ssh-in", Action::Block, Reason::Match, 1)
            );
            assert_eq!((r.len, r.orig_len, r.v6), (20, 60, false));
            let h = r.pflog_header("lrlog-a");
            assert_eq!(
                (h.action_name(), h.dir_name(), h.rulenr, h.ruleset.as_str()),
                ("block", "in", 3, "ssh-in")
            );
        }));
    }

    #[test]
    fn rate_limit_counts_what_it_refuses() {
        let (mut sink, ring) = log_ring(64, 128, 10);
        let hit = LogHit::of(0, Ok(()), Dir::Out);
        for _ in 0..5 {
            sink.push(hit, [0; ID_LEN], &[0x60; 40], 0);
        }
        // A burst of 1 (a tenth of 10 a second), then nothing within the same instant.
        assert_eq!(ring.stats.logged.load(Ordering::Relaxed), 1);
        assert_eq!(ring.stats.rate_limited.load(Ordering::Relaxed), 4);
        // The next batch, a tenth of a second later: a token came back.
        std::thread::sleep(std::time::Duration::from_millis(150));
        sink.new_batch();
        sink.push(hit, [0; ID_LEN], &[0x60; 40], 0);
        sink.push(hit, [0; ID_LEN], &[0x60; 40], 0);
        assert_eq!(ring.stats.logged.load(Ordering::Relaxed), 2);
        assert_eq!(ring.stats.rate_limited.load(Ordering::Relaxed), 5);
    }
}
