//! What `linerate run` prints when it stops: per-interface counters, drop reasons, the slow
//! path's and the firewall's counters, the log's losses. The report is built in memory and
//! written at once, so a closed stdout does not stop the clean-up.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use dataplane::Counts;
use dataplane::firewall::FirewallStats;
use dataplane::punt::{PuntClass, PuntDrop};
use io::{PortStats, RxPort, TxPort};

use super::workers::RunWorker;
use crate::router_state::RouterState;

/// How the run went, as the stopped threads left it.
pub(super) struct Run<'a> {
    pub physical: &'a [config::Interface],
    /// Each physical interface's backend.
    pub kinds: &'a [String],
    pub workers: &'a [RunWorker],
    pub elapsed: Duration,
    /// Each worker's firewall counters (none without a `[firewall]`).
    pub fw_stats: &'a [Arc<FirewallStats>],
    /// Frames the slow path could not send or hand to a TAP.
    pub send_errors: u64,
}

/// Prints the report. (Writing to a String cannot fail.)
pub(super) fn print(run: &Run, state: &RouterState) {
    let mut report = String::new();
    print_ports(&mut report, run);
    print_slow_path(&mut report, run, state);
    for stats in run.fw_stats {
        print_firewall(&mut report, stats);
    }
    print_log(&mut report, state);
    for iface in run.physical {
        if let Some(n) = io::xdp::unsteered_drops(&iface.name) {
            let _ = writeln!(
                report,
                "{}: dropped in the kernel for want of a socket (fail-closed) {n}",
                iface.name
            );
        }
    }
    if let Err(e) = crate::output::print(&report) {
        eprintln!("linerate: {e:#}");
    }
}

/// Each interface's packets and drops summed over the workers, then the workers' counters.
fn print_ports(out: &mut String, run: &Run) {
    let _ = writeln!(
        out,
        "linerate ran {:.1} s with {} worker(s)",
        run.elapsed.as_secs_f64(),
        run.workers.len()
    );
    let _ = writeln!(
        out,
        "{:<16} {:>12} {:>10} {:>12} {:>10}  backend",
        "interface", "rx_packets", "rx_drops", "tx_packets", "tx_drops"
    );
    for (i, iface) in run.physical.iter().enumerate() {
        let (mut r, mut t) = (PortStats::default(), PortStats::default());
        for w in run.workers {
            let (wr, wt) = (w.rx[i].stats(), w.tx[i].stats());
            r.rx_packets += wr.rx_packets;
            r.rx_dropped += wr.rx_dropped;
            t.tx_packets += wt.tx_packets;
            t.tx_dropped += wt.tx_dropped;
        }
        let _ = writeln!(
            out,
            "{:<16} {:>12} {:>10} {:>12} {:>10}  {}",
            iface.name, r.rx_packets, r.rx_dropped, t.tx_packets, t.tx_dropped, run.kinds[i]
        );
    }
    let mut c = Counts::default();
    for w in run.workers {
        c.add(&w.counts());
    }
    let _ = writeln!(
        out,
        "packets: rx {} forwarded {} local {} slow_path {} dropped {}",
        c.rx,
        c.forwarded,
        c.local,
        c.slow_path,
        c.dropped()
    );
    for (reason, n) in c.drops_by_reason().filter(|&(_, n)| n > 0) {
        let _ = writeln!(out, "  drop {:<20} {n}", reason.name());
    }
}

/// The slow path's counters and the punts the workers dropped. The neighbour table's lines
/// go straight to stdout, ahead of the report.
fn print_slow_path(out: &mut String, run: &Run, state: &RouterState) {
    let sp = state.slow.lock().unwrap_or_else(|e| e.into_inner());
    let s = sp.stats;
    let _ = writeln!(
        out,
        "slow path: arp replies {} requests {}, nd adverts {} solicits {}, router adverts {} solicits {}, echo replies {}, icmp errors {} (suppressed {}; block return unreachables {}), block return resets {} (suppressed {}), resolved {} failed {}, to host {} from host {}, dropped: local {} redirects {} router adverts {} waiting {} invalid {}, send errors {}",
        s.arp_replies,
        s.arp_requests,
        s.nd_adverts,
        s.nd_solicits,
        s.router_adverts,
        s.router_solicits,
        s.echo_replies,
        s.icmp_errors,
        s.icmp_suppressed,
        s.filter_unreachables,
        s.filter_resets,
        s.filter_resets_suppressed,
        s.resolved,
        s.resolve_failed,
        s.to_host,
        s.from_host,
        s.local_drops,
        s.redirects_ignored,
        s.router_adverts_ignored,
        s.neighbour_drops,
        s.invalid,
        run.send_errors
    );
    // Punts the workers dropped, by class and reason; ICMP errors are policed before the copy.
    let mut punt_drops = state.punt.drops();
    punt_drops.add(
        PuntClass::IcmpError,
        PuntDrop::Policed,
        run.workers.iter().map(|w| w.icmp_counts().1).sum(),
    );
    for (reason, n) in punt_drops.named().filter(|&(_, n)| n > 0) {
        let _ = writeln!(out, "  drop {reason:<32} {n}");
    }
    println!(
        "neighbours: evicted {}, table full {}, fib full {}",
        s.neighbour_evictions, s.neighbour_table_full, s.fib_full
    );
    for (reason, n) in s.rejects.iter().filter(|&(_, n)| n > 0) {
        println!("  arp/ndp ignored {reason:<24} {n}");
    }
}

/// Per-rule counters (rules that saw no packet are listed too: it shows dead rules), then the
/// state table's.
fn print_firewall(out: &mut String, stats: &FirewallStats) {
    let rules = stats.rules();
    let _ = writeln!(
        out,
        "{:<6} {:<16} {:<11} {:<6} {:>12} {:>14} {:>10}",
        "line", "label", "ridentifier", "action", "packets", "bytes", "states"
    );
    for r in rules.snapshot() {
        let line = if r.rule.is_some() { r.line.to_string() } else { "-".into() };
        let label =
            r.label.as_deref().unwrap_or(if r.rule.is_some() { "" } else { "(default pass)" });
        let action = match r.action {
            fw::rules::Action::Pass => "pass",
            fw::rules::Action::Block => "block",
        };
        let rid = r.ridentifier.map_or_else(String::new, |n| n.to_string());
        let _ = writeln!(
            out,
            "{line:<6} {label:<16} {rid:<11} {action:<6} {:>12} {:>14} {:>10}",
            r.packets, r.bytes, r.states
        );
    }
    let states: Vec<String> = stats.states().iter().map(|(n, v)| format!("{n} {v}")).collect();
    let _ = writeln!(out, "states: {}", states.join(", "));
    let scrub = stats.scrub();
    if scrub[0].1 > 0 {
        let scrub: Vec<String> = scrub.iter().map(|(n, v)| format!("{n} {v}")).collect();
        let _ = writeln!(out, "scrub: {}", scrub.join(", "));
    }
}

/// The log's records and losses, when anything was logged or a rule logs.
fn print_log(out: &mut String, state: &RouterState) {
    let logs = |h: &&Arc<crate::logger::LogHub>| {
        h.totals.written.load(Ordering::Relaxed) > 0
            || state.slot.as_ref().is_some_and(|s| s.current().log.any)
    };
    if let Some(hub) = state.log.as_ref().filter(logs) {
        let t = &hub.totals;
        let lost = hub.losses();
        let _ = writeln!(
            out,
            "log: {} records, lost: rate limit {}, rings full {}, slow clients {}; file write errors {}",
            t.written.load(Ordering::Relaxed),
            lost.rate_limited,
            lost.rings_full,
            t.client_drops.load(Ordering::Relaxed),
            t.file_errors.load(Ordering::Relaxed)
        );
    }
}

/// The kernel fast path's part: what it forwarded on each interface, and its entries.
pub(super) fn fast_path(o: &crate::offload::Offload, physical: &[config::Interface]) {
    let mut report = String::from("fast path (in the kernel):\n");
    for (i, iface) in physical.iter().enumerate() {
        let c = o.port_counts(i).unwrap_or_default();
        let _ = write!(
            report,
            "  {}: {} packets in, {} packets out",
            iface.name, c.rx_packets, c.tx_packets
        );
        if c.handoff_lost > 0 {
            let _ = write!(report, ", {} lost between the socket filter and tc", c.handoff_lost);
        }
        report.push('\n');
    }
    let s = &o.stats;
    let _ = writeln!(
        report,
        "  flow entries written: {}, refused by the kernel: {}; flows left to the pipeline (output takes no redirected frames): {}",
        s.installed.load(Ordering::Relaxed),
        s.errors.load(Ordering::Relaxed),
        s.no_redirect.load(Ordering::Relaxed)
    );
    let _ = writeln!(
        report,
        "  packets credited to their rules: {}; entries retired: {}, evicted before their last counts were read: {}",
        s.credited.load(Ordering::Relaxed),
        s.retired.load(Ordering::Relaxed),
        s.evicted.load(Ordering::Relaxed)
    );
    print!("{report}");
}

/// State sync's part: what the link sent and took, what the workers made of the peer's states
/// (the `show ha` document, as a line).
pub(super) fn ha(view: &crate::ha::HaView) {
    let v = view.json();
    let n = |k: &str| v[k].as_u64().unwrap_or(0);
    println!(
        "state sync: sent {} datagrams ({} messages, {} send errors), received {} ({} messages, {} refused, {} states refused); workers: {} inserted, {} updated, {} stale, {} removed, {} refused, {} bulk updates, {} lost; translations: {} inserted, {} refused",
        n("datagrams_sent"),
        n("messages_sent"),
        n("send_errors"),
        n("datagrams_received"),
        n("messages_received"),
        n("refused"),
        n("states_refused"),
        n("inserted"),
        n("updated"),
        n("stale"),
        n("removed"),
        n("import_refused"),
        n("worker_bulk_updates"),
        n("lost"),
        n("translations"),
        n("translations_refused"),
    );
}
