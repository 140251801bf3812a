//! `linerate show routes|neighbours|interfaces|drops [--json]` and `linerate top`: clients of
//! the control socket of a running `linerate run` ([`crate::control`]).
//!
//! `top` prints, every interval, the layout of FreeBSD's `netstat -ihw 1` per interface
//! (input packets, errors, drops, bytes; output packets, errors, bytes), then the per-queue
//! packet rates of each interface as `nic-queue-usage` shows them (one column per worker,
//! which owns one queue of each interface), then the drop reasons that moved.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::client::{SocketArgs, request};

fn query(args: &SocketArgs, command: &str) -> Result<Value> {
    let answer = request(&args.socket()?, command, Duration::from_secs(10))?;
    serde_json::from_str(&answer).with_context(|| format!("{command}: not JSON: {answer:.80}"))
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum What {
    Routes,
    Neighbours,
    Interfaces,
    Drops,
    /// The firewall's rules with their counters (pfctl -s rules -v).
    Rules,
    /// The firewall's states, filtered (pfctl -s state).
    States,
    /// State sync with the peer box (`[ha]`): peer, synced, messages and states each way.
    Ha,
}

#[derive(clap::Args)]
pub struct ShowArgs {
    what: What,
    /// Print the JSON document instead of a table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    filter: crate::states::StateFilterArgs,
    #[command(flatten)]
    socket: SocketArgs,
}

fn s(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

pub fn show_main(args: ShowArgs) -> Result<()> {
    let command = match args.what {
        What::Routes => "routes",
        What::Neighbours => "neighbours",
        What::Interfaces => "interfaces",
        What::Drops => "stats",
        What::Ha => "ha",
        What::Rules | What::States => {
            return crate::states::show(
                matches!(args.what, What::States),
                args.json,
                &args.filter,
                &args.socket,
            );
        }
    };
    if args.filter.is_set() {
        bail!(
            "--src, --dst, --host, --port, --proto and --limit select states: use them with `show states`"
        );
    }
    let stats = query(&args.socket, command)?;
    let v = if matches!(args.what, What::Drops) { stats["drops"].clone() } else { stats.clone() };
    let text = if args.json {
        format!(
            "{v}
"
        )
    } else {
        table(args.what, &v, &stats)
    };
    crate::output::print(&text)?;
    Ok(())
}

/// The table `show` prints for `what` from its JSON document (`stats`: the whole answer).
fn table(what: What, v: &Value, stats: &Value) -> String {
    use std::fmt::Write;
    let rows = v.as_array().cloned().unwrap_or_default();
    let mut out = String::new();
    // Writing to a String cannot fail.
    match what {
        What::Routes => {
            let _ = writeln!(
                out,
                "{:<44} {:<10} {:<9} {:<40} interface",
                "prefix", "kind", "source", "via"
            );
            for r in rows {
                // A multipath route: one line per path, the prefix on the first.
                let paths =
                    r["paths"].as_array().filter(|p| p.len() > 1).cloned().unwrap_or_default();
                if paths.is_empty() {
                    let _ = writeln!(
                        out,
                        "{:<44} {:<10} {:<9} {:<40} {}",
                        s(&r["prefix"]),
                        s(&r["kind"]),
                        s(&r["source"]),
                        s(&r["via"]),
                        s(&r["interface"])
                    );
                }
                for (i, p) in paths.iter().enumerate() {
                    let (prefix, kind, source) = if i == 0 {
                        (s(&r["prefix"]), s(&r["kind"]), s(&r["source"]))
                    } else {
                        (String::new(), String::new(), String::new())
                    };
                    let _ = writeln!(
                        out,
                        "{prefix:<44} {kind:<10} {source:<9} {:<40} {}",
                        s(&p["via"]),
                        s(&p["interface"])
                    );
                }
            }
        }
        What::Neighbours => {
            let _ = writeln!(out, "{:<40} {:<18} {:<10} interface", "address", "mac", "state");
            for n in rows {
                let _ = writeln!(
                    out,
                    "{:<40} {:<18} {:<10} {}",
                    s(&n["address"]),
                    s(&n["mac"]),
                    s(&n["state"]),
                    s(&n["interface"])
                );
            }
        }
        What::Interfaces => {
            let _ = writeln!(
                out,
                "{:<16} {:<18} {:>5} {:>5} {:<12} {:<16} {:<5} addresses",
                "name", "mac", "mtu", "vlan", "parent", "tap", "link"
            );
            for i in rows {
                let addrs: Vec<String> =
                    i["addresses"].as_array().into_iter().flatten().map(s).collect();
                let _ = writeln!(
                    out,
                    "{:<16} {:<18} {:>5} {:>5} {:<12} {:<16} {:<5} {}",
                    s(&i["name"]),
                    s(&i["mac"]),
                    s(&i["mtu"]),
                    s(&i["vlan"]),
                    s(&i["parent"]),
                    s(&i["tap"]),
                    s(&i["link"]),
                    addrs.join(" ")
                );
            }
        }
        What::Ha => {
            let auth = if v["authenticated"] == true { "authenticated" } else { "unauthenticated" };
            let synced =
                if v["synced"] == true { "complete" } else { "waiting for the peer's bulk update" };
            let _ = writeln!(
                out,
                "peer {} from {} ({auth}), creator {}; table {synced}",
                s(&v["peer"]),
                s(&v["listen"]),
                s(&v["creator"])
            );
            for (what, keys) in [
                (
                    "sent",
                    &["datagrams_sent", "messages_sent", "send_errors", "bulk_updates_sent"][..],
                ),
                (
                    "received",
                    &[
                        "datagrams_received",
                        "messages_received",
                        "refused",
                        "states_refused",
                        "unknown_deletes",
                    ],
                ),
                ("into the tables", &["inserted", "updated", "stale", "removed", "import_refused"]),
                ("the workers' journals", &["worker_bulk_updates", "lost"]),
            ] {
                let parts: Vec<String> =
                    keys.iter().map(|k| format!("{k} {}", s(&v[*k]))).collect();
                let _ = writeln!(out, "{what}: {}", parts.join(", "));
            }
        }
        What::Drops => {
            let _ = writeln!(out, "{:<32} {:>14}", "reason", "packets");
            for (reason, n) in v.as_object().into_iter().flatten() {
                let _ = writeln!(out, "{reason:<32} {:>14}", s(n));
            }
            // The workers' punt stages: frames the slow path never saw, by class and reason.
            for (reason, n) in stats["slow_path"]["punt_drops"].as_object().into_iter().flatten() {
                let _ = writeln!(out, "{reason:<32} {:>14}", s(n));
            }
            // Redirects and other routers' adverts, kept from the host stack (docs/router.md).
            let _ = writeln!(
                out,
                "{:<32} {:>14}",
                "redirect_ignored",
                s(&stats["slow_path"]["redirects_ignored"])
            );
            let _ = writeln!(
                out,
                "{:<32} {:>14}",
                "router_advert_ignored",
                s(&stats["slow_path"]["router_adverts_ignored"])
            );
            // The slow path's: ARP/NDP messages that changed nothing, and why.
            for (reason, n) in stats["slow_path"]["neighbour_rejects"]
                .as_object()
                .into_iter()
                .flatten()
                .filter(|(_, n)| num(n) > 0.0)
            {
                let _ = writeln!(out, "{:<32} {:>14}", format!("arp_ndp_{reason}"), s(n));
            }
        }
        // Printed by crate::states.
        What::Rules | What::States => {}
    }
    out
}

#[derive(clap::Args)]
pub struct TopArgs {
    /// Seconds between two screens.
    #[arg(short = 'w', long, default_value_t = 1.0)]
    interval: f64,
    /// Stop after this many screens (0: until Ctrl-C).
    #[arg(short = 'n', long, default_value_t = 0)]
    count: u64,
    #[command(flatten)]
    socket: SocketArgs,
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

/// Human-readable count, as `netstat -h`: 1.2K, 3.4M.
fn human(x: f64) -> String {
    match x {
        x if x >= 1e9 => format!("{:.1}G", x / 1e9),
        x if x >= 1e6 => format!("{:.1}M", x / 1e6),
        x if x >= 1e3 => format!("{:.1}K", x / 1e3),
        x => format!("{x:.0}"),
    }
}

/// One screen: rates between two `stats` documents `secs` apart.
pub fn render(prev: &Value, now: &Value, secs: f64) -> String {
    let rate = |a: &Value, b: &Value| (num(b) - num(a)).max(0.0) / secs;
    let mut out = String::new();
    out.push_str(&format!(
        "{:<16} {:>8} {:>6} {:>6} {:>8}   {:>8} {:>6} {:>8} {:>6}\n",
        "interface", "ipkts/s", "ierrs", "idrops", "ibytes", "opkts/s", "oerrs", "obytes", "colls"
    ));
    let ifaces = now["interfaces"].as_array().cloned().unwrap_or_default();
    for (i, n) in ifaces.iter().enumerate() {
        let p = &prev["interfaces"][i];
        out.push_str(&format!(
            "{:<16} {:>8} {:>6} {:>6} {:>8}   {:>8} {:>6} {:>8} {:>6}\n",
            s(&n["name"]),
            human(rate(&p["rx_packets"], &n["rx_packets"])),
            human(rate(&p["rx_errors"], &n["rx_errors"])),
            human(rate(&p["rx_drops"], &n["rx_drops"])),
            human(rate(&p["rx_bytes"], &n["rx_bytes"])),
            human(rate(&p["tx_packets"], &n["tx_packets"])),
            human(rate(&p["tx_drops"], &n["tx_drops"])),
            human(rate(&p["tx_bytes"], &n["tx_bytes"])),
            0
        ));
    }
    let workers = now["workers"].as_array().cloned().unwrap_or_default();
    out.push_str(&format!("\n{:<16}", "queue rx pps"));
    for w in 0..workers.len() {
        out.push_str(&format!(" {:>10}", format!("q{w}")));
    }
    out.push('\n');
    for (i, n) in ifaces.iter().enumerate() {
        out.push_str(&format!("{:<16}", s(&n["name"])));
        for (w, wk) in workers.iter().enumerate() {
            let q = &wk["queues"][i]["rx_packets"];
            out.push_str(&format!(
                " {:>10}",
                human(rate(&prev["workers"][w]["queues"][i]["rx_packets"], q))
            ));
        }
        out.push('\n');
    }
    let t = &now["totals"];
    let pt = &prev["totals"];
    out.push_str(&format!(
        "\nforwarded {}/s  local {}/s  slow path {}/s  dropped {}/s\n",
        human(rate(&pt["forwarded"], &t["forwarded"])),
        human(rate(&pt["local"], &t["local"])),
        human(rate(&pt["slow_path"], &t["slow_path"])),
        human(rate(&pt["dropped"], &t["dropped"]))
    ));
    for (reason, n) in now["drops"].as_object().into_iter().flatten() {
        let r = rate(&prev["drops"][reason], n);
        if r > 0.0 {
            out.push_str(&format!("  drop {reason:<22} {}/s\n", human(r)));
        }
    }
    out
}

pub fn top_main(args: TopArgs) -> Result<()> {
    let interval = Duration::from_secs_f64(args.interval.max(0.1));
    let stop = crate::signals::stop_on_signals()?;
    let mut prev = (Instant::now(), query(&args.socket, "stats")?);
    let mut shown = 0;
    while !stop.load(std::sync::atomic::Ordering::Relaxed)
        && (args.count == 0 || shown < args.count)
    {
        std::thread::sleep(interval);
        let now = (Instant::now(), query(&args.socket, "stats")?);
        let screen = render(&prev.1, &now.1, now.0.duration_since(prev.0).as_secs_f64());
        // Clear the terminal between screens only when it is one (logs stay appendable).
        let clear =
            if std::io::IsTerminal::is_terminal(&std::io::stdout()) { "\x1b[H\x1b[2J" } else { "" };
        if !crate::output::print(&format!("{clear}{screen}\n"))? {
            break; // the reader went away
        }
        prev = now;
        shown += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn top_screen_shows_rates() {
        let doc = |rx: u64, drops: u64| {
            json!({
                "interfaces": [{"name": "lr-a", "rx_packets": rx, "rx_errors": 0, "rx_drops": drops, "rx_bytes": rx * 60,
                                "tx_packets": rx, "tx_drops": 0, "tx_bytes": rx * 60}],
                "workers": [{"queues": [{"rx_packets": rx}]}],
                "totals": {"forwarded": rx, "local": 0, "slow_path": 0, "dropped": drops},
                "drops": {"no_route": drops},
            })
        };
        let screen = render(&doc(0, 0), &doc(2_000_000, 10), 2.0);
        assert!(screen.contains("lr-a"), "{screen}");
        assert!(screen.contains("1.0M"), "{screen}");
        assert!(screen.contains("drop no_route"), "{screen}");
        assert!(screen.contains("q0"), "{screen}");
    }
}
