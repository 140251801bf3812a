//! The firewall bench: a generated rule set ([`bench_rules`]), compiled for the worker, and
//! states and translations of other flows created before measuring.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use dataplane::firewall::{CompiledRules, Firewall, RuleStat, RulesSlot};
use fw::packet::{Af, Dir, PacketKey};

use crate::{BenchError, BenchWorker};

/// The generated rule set of a firewall bench (see [`bench_rules`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BenchFirewall {
    /// Rules that never match the bench's traffic, before the final pass.
    pub rules: usize,
    /// A `block in quick from <t>` rule whose table holds this many prefixes, none covering
    /// the bench's sources.
    pub table_size: Option<usize>,
    /// The final rule keeps state, and this many states of other flows are created first.
    pub states: Option<usize>,
    /// The `rules` are a realistic generated set ([`fw::testgen`]) instead of uniform host
    /// rules: its rules that would match the bench's flows are left out, so the traffic is
    /// decided by the final pass after the classifier has looked at all of them. Only the
    /// first [`REALISTIC_MISSED_FLOWS`] flows are left undecided this way: with more (a flood
    /// of 1M flows) some packets are decided by the realistic rules (see the drop counts).
    pub realistic: bool,
    /// `nat` on the output port (every flow translated to 192.0.2.1, ports 1024:65535; IPv6
    /// flows to 2001:db8:ffff::1, NAT66), and
    /// this many translations of other flows are created first.
    pub nat: Option<usize>,
    /// The final rule has `log`, at most this many records a second (0: no limit); a thread
    /// drains the log ring every millisecond, as the logger does every 10 ms.
    pub log: Option<u64>,
}

/// Flows whose packets no realistic rule matches (see [`BenchFirewall::realistic`]): of
/// 1M flows spread over a route table most generated rules match some, and the rule
/// sets would be other sets.
pub const REALISTIC_MISSED_FLOWS: usize = 2000;

/// Firewall figures of a bench run.
#[derive(Debug, Clone)]
pub struct BenchFirewallResult {
    pub rules: usize,
    pub compile: Duration,
    pub classifier_bytes: usize,
    pub state_limit: usize,
    pub state_table_bytes: usize,
    /// States created before measuring.
    pub prefilled_states: usize,
    pub prefill: Duration,
    /// State-table counters at the end (warm-up and every run included).
    pub state_counters: Vec<(&'static str, u64)>,
    /// The verdict cache's counters at the end (all zero unless the tree engine compiled the
    /// rules).
    pub verdict_cache: fw::classifier::CacheCounters,
    /// Rules (and the default) that counted packets or states, warm-up included.
    pub matched: Vec<RuleStat>,
    /// NAT translations prefilled, in use at the end, and the table's bytes.
    pub nat_prefilled: usize,
    pub nat_sessions: usize,
    pub nat_table_bytes: usize,
    /// With `log`: records logged, refused by the rate limit, dropped for a full ring.
    pub log: Option<Arc<[AtomicU64; 3]>>,
}

/// The rule text of a firewall bench: `rules` distinct TCP rules the bench's UDP traffic never
/// matches (or, with `realistic`, that many generated rules none of `keys` matches),
/// optionally a table rule whose prefixes (in 11.0.0.0/8) do not cover the bench's sources
/// (198.18.10.0/24, 2001:2:0:10::/64), then a final `pass all`, keeping state when `states`
/// is given (with a state limit holding the prefilled states and the bench's flows).
pub fn bench_rules(f: &BenchFirewall, keys: &[PacketKey]) -> String {
    use std::fmt::Write;
    let flows = keys.len();
    let mut t = String::new();
    if f.states.is_some() || f.nat.is_some() {
        let k = f.states.unwrap_or(0).max(f.nat.unwrap_or(0));
        let _ = writeln!(t, "set limit states {}", (k + flows + 1024).min(fw::state::MAX_LIMIT));
        // The table is nearly full: pf's adaptive scaling, on by default from 60% of the
        // limit, would cut the timeouts to a third and expire the prefilled states while
        // the bench runs. It measures the lookups, so it turns the scaling off.
        t.push_str("set timeout { adaptive.start 0, adaptive.end 0 }\n");
    }
    if f.nat.is_some() {
        t.push_str("nat on mem1 from any to any -> 192.0.2.1 port 1024:65535\n");
        // IPv6 flows (`--ipv6`): NAT66 to one address, as pf's `nat ... inet6`.
        if keys.first().is_some_and(|k| k.af == fw::packet::Af::Inet6) {
            t.push_str("nat on mem1 inet6 from any to any -> 2001:db8:ffff::1 port 1024:65535\n");
        }
    }
    if let Some(m) = f.table_size {
        t.push_str("table <t> const {");
        for i in 0..m.min(1 << 20) {
            let _ = write!(t, " {}/28", Ipv4Addr::from(0x0b00_0000u32 + (i as u32) * 16));
        }
        t.push_str(" }\nblock in quick from <t>\n");
    }
    if f.realistic {
        t.push_str(&realistic_rules(f.rules, &keys[..keys.len().min(REALISTIC_MISSED_FLOWS)]));
    } else {
        for i in 0..f.rules {
            let _ = writeln!(
                t,
                "block in quick proto tcp from 10.{}.{}.{} to 10.200.0.1 port 22",
                (i >> 16) & 255,
                (i >> 8) & 255,
                i & 255
            );
        }
    }
    let log = if f.log.is_some() { "log " } else { "" };
    let _ =
        writeln!(t, "pass {log}all {}", if f.states.is_some() { "keep state" } else { "no state" });
    t
}

/// `n` rules of a generated realistic set (tables included) that match none of `keys`, in
/// on port 0 or out on port 1 (the bench's interfaces are the generator's first two).
fn realistic_rules(n: usize, keys: &[PacketKey]) -> String {
    let passes: Vec<PacketKey> = keys
        .iter()
        .flat_map(|k| {
            [
                PacketKey { dir: Dir::In, iface: 0, ..*k },
                PacketKey { dir: Dir::Out, iface: 1, ..*k },
            ]
        })
        .collect();
    let mut generated = 2 * n + 16;
    loop {
        let text = fw::testgen::ruleset(1, generated);
        let rs =
            fw::rules::parse(&text, std::path::Path::new("gen.conf"), &fw::testgen::iface_index)
                .expect("generated rules parse");
        let free = unmatched(&rs, &passes);
        // A line may expand into several rules (lists of interfaces): kept only if none
        // of them matches.
        let hit: std::collections::HashSet<usize> = rs
            .rules
            .iter()
            .enumerate()
            .filter(|(i, _)| free.binary_search(i).is_err())
            .map(|(_, r)| r.line)
            .collect();
        let mut keep = std::collections::HashSet::new();
        for line in free.iter().map(|&i| rs.rules[i].line).filter(|l| !hit.contains(l)) {
            if keep.len() == n {
                break;
            }
            keep.insert(line);
        }
        if keep.len() == n {
            let mut out = String::new();
            for (i, line) in text.lines().enumerate() {
                if line.starts_with("table") || keep.contains(&(i + 1)) {
                    out.push_str(line);
                    out.push('\n');
                }
            }
            return out;
        }
        generated *= 2;
    }
}

/// The indices, in order, of the rules of `rs` that match none of `keys` (the reference's
/// [`fw::reference::rule_matches`], every rule against every key, the rules split over the
/// CPUs). The keys carry no tag and a rule that matches none of them tags none, so each rule
/// is judged alone, with no compile per round of removals (docs/performance.md, "The
/// in-memory bench on the 16-CPU machine").
fn unmatched(rs: &fw::rules::RuleSet, keys: &[PacketKey]) -> Vec<usize> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = rs.rules.len().div_ceil(threads).max(1);
    let free = |i: usize| keys.iter().all(|k| !fw::reference::rule_matches(rs, &rs.rules[i], k));
    std::thread::scope(|s| {
        let parts: Vec<_> = (0..rs.rules.len())
            .step_by(chunk)
            .map(|from| {
                s.spawn(move || {
                    (from..(from + chunk).min(rs.rules.len()))
                        .filter(|&i| free(i))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        parts.into_iter().flat_map(|p| p.join().expect("rule check thread")).collect()
    })
}

/// The firewall's view of the bench's frames (Ethernet, optionally 802.1Q, IPv4 or IPv6, UDP).
fn frame_keys(frames: &[Vec<u8>]) -> Vec<PacketKey> {
    frames
        .iter()
        .filter_map(|f| {
            let mut at = 12;
            if f.get(at..at + 2)? == [0x81, 0x00] {
                at += 4;
            }
            let ethertype = f.get(at..at + 2)?;
            let ip = at + 2;
            let (af, src, dst, l4) = if ethertype == [0x08, 0x00] {
                let a = |o: usize| {
                    f.get(ip + o..ip + o + 4)
                        .map(|b| u128::from(u32::from_be_bytes(b.try_into().expect("4 bytes"))))
                };
                (Af::Inet, a(12)?, a(16)?, ip + usize::from(f.get(ip)? & 0x0f) * 4)
            } else {
                let a = |o: usize| {
                    f.get(ip + o..ip + o + 16)
                        .map(|b| u128::from_be_bytes(b.try_into().expect("16 bytes")))
                };
                (Af::Inet6, a(8)?, a(24)?, ip + 40)
            };
            let port =
                |o: usize| f.get(l4 + o..l4 + o + 2).map(|b| u16::from_be_bytes([b[0], b[1]]));
            Some(PacketKey {
                af,
                src,
                dst,
                proto: fw::packet::proto::UDP,
                src_port: port(0)?,
                dst_port: port(2)?,
                len: 46,
                ..PacketKey::ZERO
            })
        })
        .collect()
}

/// Compiles the bench's rules, gives the worker its firewall and prefills the state table.
pub(crate) fn setup_firewall(
    worker: &mut BenchWorker,
    f: &BenchFirewall,
    frames: &[Vec<u8>],
) -> Result<BenchFirewallResult, BenchError> {
    if f.table_size.is_some_and(|m| m > 1 << 20) || f.rules > 1 << 24 {
        return Err(BenchError::Invalid("at most 2^24 rules and 2^20 table entries".into()));
    }
    let text = bench_rules(f, &frame_keys(frames));
    let t0 = Instant::now();
    // The bench's ports (mem0, mem1) and the generated sets' interfaces (lr-g0.., the same indices).
    let iface = |n: &str| if n == "mem1" { Some(1) } else { fw::testgen::iface_index(n) };
    let rules = CompiledRules::parse(&text, std::path::Path::new("bench.conf"), &iface)
        .map_err(|e| BenchError::Invalid(e.to_string()))?;
    let compile = t0.elapsed();
    let (n, classifier_bytes) = (rules.rule_count(), rules.classifier_bytes());
    let mut firewall = Firewall::new(RulesSlot::new(Arc::new(rules)), 1);
    let log = f.log.map(|rate| drain_log(&mut firewall, rate));
    worker.set_firewall(firewall);
    let fw = worker.firewall_mut().expect("just set");
    let t1 = Instant::now();
    let k = f.states.unwrap_or(0);
    for i in 0..k {
        // UDP flows 172.16.0.0/12 port i -> 203.0.113.1:9, distinct for i < 2^36.
        let key = PacketKey {
            af: Af::Inet,
            dir: Dir::In,
            iface: 0,
            proto: fw::packet::proto::UDP,
            src: u128::from(0xac10_0000u32 + (i >> 16) as u32),
            dst: u128::from(u32::from(Ipv4Addr::new(203, 0, 113, 1))),
            src_port: i as u16,
            dst_port: 9,
            tcp_flags: 0,
            len: 46,
            icmp_id: 0,
            ip_opts: false,
            route: 0,
            tag: 0,
        };
        fw.insert_state(&key, n - 1)
            .map_err(|e| BenchError::Invalid(format!("prefilling state {i}: {e}")))?;
    }
    let nat_prefilled = f.nat.unwrap_or(0);
    prefill_nat(worker, nat_prefilled)?;
    let fw = worker.firewall_mut().expect("just set");
    Ok(BenchFirewallResult {
        rules: n,
        compile,
        classifier_bytes,
        state_limit: fw.state_table().limit(),
        state_table_bytes: fw.state_table().memory_bytes(),
        prefilled_states: k,
        prefill: t1.elapsed(),
        state_counters: Vec::new(),
        verdict_cache: fw::classifier::CacheCounters::default(),
        matched: Vec::new(),
        nat_prefilled,
        nat_sessions: 0,
        nat_table_bytes: 0,
        log,
    })
}

/// Creates `k` translations of other flows (UDP 172.16.0.0/12 -> 100.64.0.0/10 port 9, each
/// to 192.0.2.1 and a port of its own towards its destination), as `nat` would have.
fn prefill_nat(worker: &mut BenchWorker, k: usize) -> Result<(), BenchError> {
    use fw::nat::table::{NatKey, Session};
    let Some(table) = worker.nat_table_mut() else { return Ok(()) };
    table.set_limit(usize::MAX);
    table.reserve(k);
    let ext = u32::from(Ipv4Addr::new(192, 0, 2, 1));
    for i in 0..k {
        let (src, dst) = (0xac10_0000u32 + (i >> 16) as u32, 0x6440_0000u32 + (i >> 16) as u32);
        let (sport, port) = (i as u16, 1024 + (i % 64000) as u16);
        let out_key = NatKey { src, dst, sport, dport: 9, proto: fw::packet::proto::UDP };
        let in_key =
            NatKey { src: dst, dst: ext, sport: 9, dport: port, proto: fw::packet::proto::UDP };
        let s = Session {
            iface: 1,
            kind: fw::nat::NatKind::Nat,
            pass: false,
            out_key,
            out_to: (ext, port),
            in_key,
            in_to: (src, sport),
            last: 0,
            phase: Default::default(),
        };
        table
            .insert(s)
            .map_err(|e| BenchError::Invalid(format!("prefilling translation {i}: {e:?}")))?;
    }
    Ok(())
}

/// Gives `fw` a log ring of `rate` records a second (0: no limit) and a thread that drains
/// it every millisecond until the firewall is gone; the counters it keeps: logged, refused
/// by the rate limit, dropped for a full ring.
fn drain_log(fw: &mut Firewall, rate: u64) -> Arc<[AtomicU64; 3]> {
    use std::sync::atomic::Ordering::Relaxed;
    let (sink, mut ring) = dataplane::firewall::log::log_ring(
        1024,
        dataplane::firewall::log::DEFAULT_LOG_SNAP,
        if rate == 0 { u64::MAX / 4 } else { rate },
    );
    fw.set_log(sink);
    let counts: Arc<[AtomicU64; 3]> = Arc::new(Default::default());
    let c = Arc::clone(&counts);
    std::thread::spawn(move || {
        loop {
            while ring.consumer.pop_with(|r| {
                std::hint::black_box(r.len);
            }) {}
            c[0].store(ring.stats.logged.load(Relaxed), Relaxed);
            c[1].store(ring.stats.rate_limited.load(Relaxed), Relaxed);
            c[2].store(ring.consumer.dropped(), Relaxed);
            if !ring.consumer.has_producer() {
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    counts
}
