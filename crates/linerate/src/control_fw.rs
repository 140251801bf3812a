//! The control socket's firewall commands: `rules` (every rule with its counters summed over
//! the workers, as `pfctl -s rules -v`), `states FILTER`, `kill-states FILTER` and
//! `flush-states` (pfctl's `-s state`, `-k`, `-F states`).
//!
//! The states live in the workers' own tables: the control thread sends each worker a
//! request through its channel ([`dataplane::firewall::requests`]) and gathers the replies;
//! the workers serve them between batches, a stretch of the table per poll.

use std::net::IpAddr;
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use dataplane::FirewallStats;
use dataplane::firewall::requests::{StateFilter, StateOp, StateReply, StateRequest};
use serde_json::{Value, json};

/// Most states one `show states` lists (all matching ones are counted).
pub const MAX_LISTED: usize = 100_000;
/// How long the control thread waits for every worker to walk its table.
const WORKER_WAIT: Duration = Duration::from_secs(30);

/// What the control thread holds of the workers' firewalls.
pub struct FwControl {
    /// Each worker's counters (per rule, state table).
    pub stats: Vec<Arc<FirewallStats>>,
    /// Each worker's request channel.
    pub state_requests: Vec<Sender<StateRequest>>,
    /// The lines of the rule file the running rules were compiled from (for `rules`).
    pub source: Mutex<Vec<String>>,
}

impl FwControl {
    pub fn new(
        stats: Vec<Arc<FirewallStats>>,
        state_requests: Vec<Sender<StateRequest>>,
        source: &str,
    ) -> FwControl {
        FwControl {
            stats,
            state_requests,
            source: Mutex::new(source.lines().map(str::to_owned).collect()),
        }
    }

    /// Records the text of the rule file just published.
    pub fn set_source(&self, text: &str) {
        *self.source.lock().unwrap_or_else(|e| e.into_inner()) =
            text.lines().map(str::to_owned).collect();
    }
}

/// Answers a firewall command (`None`: not one of them).
pub fn answer(fw: Option<&FwControl>, command: &str) -> Option<String> {
    let (word, arg) = command.split_once(' ').unwrap_or((command, ""));
    if !["rules", "states", "kill-states", "flush-states"].contains(&word) {
        return None;
    }
    let Some(fw) = fw else {
        return Some("error: no [firewall] table in the running config".into());
    };
    let result = match word {
        "rules" => Ok(rules(fw)),
        "flush-states" => {
            ask(fw, StateOp::Kill, StateFilter::default()).map(|r| json!({"flushed": r.removed}))
        }
        _ => parse_filter(arg).and_then(|(filter, limit)| match word {
            "states" => ask(fw, StateOp::List { limit }, filter).map(|r| states_json(fw, &r)),
            _ => ask(fw, StateOp::Kill, filter).map(|r| json!({"killed": r.removed})),
        }),
    };
    Some(result.map_or_else(|e| format!("error: {e:#}"), |v| v.to_string()))
}

/// Whether a command changes the router (root and linerate's uid only).
pub fn is_admin_command(command: &str) -> bool {
    let word = command.split(' ').next().unwrap_or("");
    ["kill-states", "flush-states"].contains(&word)
}

/// Every rule of the running set with its counters summed over the workers that use it
/// (one that has not adopted a just-published set yet counts nothing), the default pass last.
pub(crate) fn rules(fw: &FwControl) -> Value {
    // The newest set any worker uses: the one just published, once adopted.
    let Some(newest) = fw.stats.iter().max_by_key(|s| s.generation()) else { return json!([]) };
    let newest = newest.rules();
    let source = fw.source.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let mut rows = newest.snapshot();
    for r in &mut rows {
        (r.packets, r.bytes, r.states) = (0, 0, 0);
    }
    for set in fw.stats.iter().map(|s| s.rules()).filter(|s| Arc::ptr_eq(&s.rules, &newest.rules)) {
        for (sum, r) in rows.iter_mut().zip(set.snapshot()) {
            sum.packets += r.packets;
            sum.bytes += r.bytes;
            sum.states += r.states;
        }
    }
    let list: Vec<Value> = rows
        .iter()
        .map(|r| {
            let text = r.rule.and_then(|_| source.get(r.line.wrapping_sub(1))).map(|l| l.trim().to_owned());
            json!({
                "number": r.rule, "line": (r.line > 0).then_some(r.line), "label": r.label, "ridentifier": r.ridentifier, "text": text,
                "action": match r.action { fw::rules::Action::Pass => "pass", fw::rules::Action::Block => "block" },
                "packets": r.packets, "bytes": r.bytes, "states": r.states,
            })
        })
        .collect();
    json!(list)
}

/// `{"src": "ADDR[/LEN]", "dst": ..., "host": ..., "port": N, "proto": N, "limit": N}`, every
/// key optional.
fn parse_filter(arg: &str) -> Result<(StateFilter, usize)> {
    let v: Value = if arg.trim().is_empty() {
        json!({})
    } else {
        serde_json::from_str(arg).context("the filter is not JSON")?
    };
    let Some(obj) = v.as_object() else { bail!("the filter is not a JSON object") };
    let mut f = StateFilter::default();
    let mut limit = 1000;
    for (k, val) in obj {
        match k.as_str() {
            "src" => f.src = Some(prefix(val)?),
            "dst" => f.dst = Some(prefix(val)?),
            "host" => f.host = Some(prefix(val)?),
            "port" => {
                f.port = Some(
                    val.as_u64()
                        .and_then(|p| u16::try_from(p).ok())
                        .context("port must be 0..=65535")?,
                )
            }
            "proto" => {
                f.proto = Some(
                    val.as_u64()
                        .and_then(|p| u8::try_from(p).ok())
                        .context("proto must be 0..=255")?,
                )
            }
            "limit" => {
                limit = val
                    .as_u64()
                    .map(|n| n as usize)
                    .filter(|&n| n <= MAX_LISTED)
                    .with_context(|| format!("limit must be 0..={MAX_LISTED}"))?
            }
            other => bail!("unknown filter key {other:?}"),
        }
    }
    Ok((f, limit))
}

/// `ADDR` or `ADDR/LEN`.
pub fn parse_prefix(s: &str) -> Result<(IpAddr, u8)> {
    let (a, len) = s.split_once('/').map_or((s, None), |(a, l)| (a, Some(l)));
    let addr: IpAddr = a.parse().with_context(|| format!("{s:?} is not an address or prefix"))?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let len = match len {
        None => max,
        Some(l) => l
            .parse::<u8>()
            .ok()
            .filter(|&l| l <= max)
            .with_context(|| format!("{s:?}: prefix length must be 0..={max}"))?,
    };
    Ok((addr, len))
}

fn prefix(v: &Value) -> Result<(IpAddr, u8)> {
    parse_prefix(v.as_str().context("an address must be a string")?)
}

/// Sends the request to every worker and sums their replies (rows in worker order).
fn ask(fw: &FwControl, op: StateOp, filter: StateFilter) -> Result<StateReply> {
    let (tx, rx) = channel();
    let mut asked = 0;
    for worker in &fw.state_requests {
        if worker.send(StateRequest { op, filter, reply: tx.clone() }).is_ok() {
            asked += 1;
        }
    }
    drop(tx);
    let deadline = Instant::now() + WORKER_WAIT;
    let mut replies = Vec::new();
    while replies.len() < asked {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(r) => replies.push(r),
            Err(_) => bail!(
                "{} of {} workers did not answer within {} s (stopped?)",
                asked - replies.len(),
                fw.state_requests.len(),
                WORKER_WAIT.as_secs()
            ),
        }
    }
    if asked < fw.state_requests.len() {
        bail!("{} workers have stopped", fw.state_requests.len() - asked);
    }
    replies.sort_by_key(|r| r.worker);
    let mut sum = StateReply::default();
    for r in replies {
        sum.matched += r.matched;
        sum.removed += r.removed;
        sum.in_use += r.in_use;
        sum.limit += r.limit;
        let room = match op {
            StateOp::List { limit } => limit.saturating_sub(sum.rows.len()),
            StateOp::Kill => 0,
        };
        sum.rows.extend(r.rows.into_iter().take(room));
    }
    Ok(sum)
}

fn proto_name(p: u8) -> String {
    match p {
        1 => "icmp".into(),
        6 => "tcp".into(),
        17 => "udp".into(),
        58 => "ipv6-icmp".into(),
        n => n.to_string(),
    }
}

fn states_json(fw: &FwControl, r: &StateReply) -> Value {
    let source_rules = fw.stats.first().map(|s| s.rules());
    let rows: Vec<Value> = r
        .rows
        .iter()
        .map(|row| {
            let (i, e) = (row.ends.initiator, row.ends.responder);
            let rule = source_rules.as_ref().and_then(|s| s.rules.rules.rules.get(row.rule as usize));
            let (line, ridentifier) = (rule.map(|r| r.line), rule.and_then(|r| r.ridentifier));
            json!({
                "proto": proto_name(row.proto), "src": i.addr.to_string(), "sport": i.port, "dst": e.addr.to_string(), "dport": e.port,
                "state": format!("{}:{}", fw::state::state_name(row.proto, row.states[0]), fw::state::state_name(row.proto, row.states[1])),
                // A state of a rule a reload removed names none of the current set's.
                "expires_in": row.expires_in, "rule": rule.map(|_| row.rule), "line": line, "ridentifier": ridentifier,
            })
        })
        .collect();
    json!({"states": rows, "matched": r.matched, "shown": rows.len(), "in_use": r.in_use, "limit": r.limit})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_parse_and_refuse() {
        let (f, limit) = parse_filter(
            r#"{"src":"10.0.0.0/8","dst":"2001:db8::1","port":53,"proto":17,"limit":5}"#,
        )
        .unwrap();
        assert_eq!(limit, 5);
        assert_eq!(f.src, Some(("10.0.0.0".parse().unwrap(), 8)));
        assert_eq!(f.dst, Some(("2001:db8::1".parse().unwrap(), 128)));
        assert_eq!((f.port, f.proto), (Some(53), Some(17)));
        assert_eq!(parse_filter("").unwrap(), (StateFilter::default(), 1000));
        assert!(
            format!("{:#}", parse_filter(r#"{"src":"10.0.0.0/33"}"#).unwrap_err())
                .contains("prefix length must be 0..=32")
        );
        assert!(
            format!("{:#}", parse_filter(r#"{"sport":1}"#).unwrap_err())
                .contains("unknown filter key")
        );
        assert!(parse_filter(r#"{"limit":100001}"#).is_err());
    }

    #[test]
    fn commands_need_a_firewall_and_kill_is_for_admins() {
        assert_eq!(answer(None, "routes"), None);
        assert!(answer(None, "states {}").unwrap().starts_with("error: no [firewall]"));
        assert!(
            is_admin_command("kill-states {\"src\":\"10.0.0.1\"}")
                && is_admin_command("flush-states")
        );
        assert!(!is_admin_command("states {}") && !is_admin_command("rules"));
    }
}
