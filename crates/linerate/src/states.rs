//! `linerate show rules|states`, `linerate kill states` and `linerate flush states`: clients
//! of the control socket's firewall commands ([`crate::control_fw`]), as pfctl's
//! `-s rules -v`, `-s state`, `-k` and `-F states`.

use std::fmt::Write as _;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::{Map, Value, json};

use crate::client::SocketArgs;

/// Which states `show states` lists.
#[derive(clap::Args, Default)]
pub struct StateFilterArgs {
    /// States whose initiator's address is in ADDR[/LEN].
    #[arg(long, value_name = "ADDR[/LEN]")]
    src: Option<String>,
    /// States whose responder's address is in ADDR[/LEN].
    #[arg(long, value_name = "ADDR[/LEN]")]
    dst: Option<String>,
    /// States with either end in ADDR[/LEN].
    #[arg(long, value_name = "ADDR[/LEN]")]
    host: Option<String>,
    /// States with either end on this port.
    #[arg(long)]
    port: Option<u16>,
    /// tcp, udp, icmp, ipv6-icmp or a protocol number.
    #[arg(long)]
    proto: Option<String>,
    /// List at most this many (all matching ones are counted) [default: 1000].
    #[arg(long)]
    limit: Option<usize>,
}

impl StateFilterArgs {
    pub fn is_set(&self) -> bool {
        self.src.is_some()
            || self.dst.is_some()
            || self.host.is_some()
            || self.port.is_some()
            || self.proto.is_some()
            || self.limit.is_some()
    }

    /// The filter as the control socket takes it, checked here for a clear error.
    fn to_json(&self) -> Result<Value> {
        let mut m = Map::new();
        for (key, v) in [("src", &self.src), ("dst", &self.dst), ("host", &self.host)] {
            if let Some(v) = v {
                crate::control_fw::parse_prefix(v).with_context(|| format!("--{key}"))?;
                m.insert(key.into(), json!(v));
            }
        }
        if let Some(p) = self.port {
            m.insert("port".into(), json!(p));
        }
        if let Some(p) = &self.proto {
            m.insert("proto".into(), json!(proto_number(p)?));
        }
        if let Some(n) = self.limit {
            if n > crate::control_fw::MAX_LISTED {
                bail!("--limit: at most {}", crate::control_fw::MAX_LISTED);
            }
            m.insert("limit".into(), json!(n));
        }
        Ok(Value::Object(m))
    }
}

fn proto_number(p: &str) -> Result<u8> {
    Ok(match p {
        "icmp" => 1,
        "tcp" => 6,
        "udp" => 17,
        "ipv6-icmp" | "icmp6" => 58,
        n => n.parse().with_context(|| {
            format!("--proto {n:?}: not tcp, udp, icmp, ipv6-icmp or a number 0..=255")
        })?,
    })
}

fn query(socket: &SocketArgs, command: &str) -> Result<Value> {
    // Walking millions of states takes the workers a while.
    let answer = crate::client::request(&socket.socket()?, command, Duration::from_secs(60))?;
    serde_json::from_str(&answer).with_context(|| format!("{command}: not JSON: {answer:.80}"))
}

/// `show rules` (`states` false) or `show states`.
pub fn show(
    states: bool,
    as_json: bool,
    filter: &StateFilterArgs,
    socket: &SocketArgs,
) -> Result<()> {
    let v = if states {
        query(socket, &format!("states {}", filter.to_json()?))?
    } else {
        if filter.is_set() {
            bail!(
                "--src, --dst, --host, --port, --proto and --limit select states: use them with `show states`"
            );
        }
        query(socket, "rules")?
    };
    let text = match (as_json, states) {
        (true, _) => format!("{v}\n"),
        (false, true) => states_table(&v),
        (false, false) => rules_text(&v),
    };
    crate::output::print(&text)?;
    Ok(())
}

fn s(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// As `pfctl -s rules -v`: each rule, then its counters.
fn rules_text(v: &Value) -> String {
    let mut out = String::new();
    for r in v.as_array().into_iter().flatten() {
        let head = match r["number"].as_u64() {
            Some(n) => format!(
                "@{n} {}",
                r["text"]
                    .as_str()
                    .map_or_else(|| format!("(line {})", s(&r["line"])), str::to_owned)
            ),
            None => "(no rule matched: pass)".to_owned(),
        };
        let _ = writeln!(
            out,
            "{head}\n  [ Packets: {}  Bytes: {}  States: {} ]",
            s(&r["packets"]),
            s(&r["bytes"]),
            s(&r["states"])
        );
    }
    out
}

/// `addr:port`, IPv6 addresses in brackets.
fn endpoint(addr: &Value, port: &Value) -> String {
    let a = s(addr);
    if a.contains(':') { format!("[{a}]:{}", s(port)) } else { format!("{a}:{}", s(port)) }
}

/// As `pfctl -s state`: one line per state, initiator first, then how many matched.
fn states_table(v: &Value) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<9} {:<45} {:<45} {:<24} {:>8} rule",
        "proto", "initiator", "responder", "state", "expires"
    );
    for st in v["states"].as_array().into_iter().flatten() {
        let mut rule = match st["line"].as_u64() {
            Some(line) => format!("@{} (line {line})", s(&st["rule"])),
            None => format!("@{}", s(&st["rule"])),
        };
        if let Some(n) = st["ridentifier"].as_u64() {
            rule.push_str(&format!(" ridentifier {n}"));
        }
        let _ = writeln!(
            out,
            "{:<9} {:<45} {:<45} {:<24} {:>7}s {rule}",
            s(&st["proto"]),
            endpoint(&st["src"], &st["sport"]),
            endpoint(&st["dst"], &st["dport"]),
            s(&st["state"]),
            s(&st["expires_in"])
        );
    }
    let _ = writeln!(
        out,
        "{} of {} matching states shown; table: {} in use, limit {}",
        s(&v["shown"]),
        s(&v["matched"]),
        s(&v["in_use"]),
        s(&v["limit"])
    );
    out
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum StatesWord {
    States,
}

#[derive(clap::Args)]
pub struct KillArgs {
    /// What to kill: `states`.
    what: StatesWord,
    /// Kill the states this host (ADDR[/LEN]) initiated (pfctl -k HOST).
    #[arg(short = 's', long = "src", value_name = "HOST")]
    src: String,
    /// ... to this host only (pfctl -k HOST -k HOST).
    #[arg(short = 'd', long = "dst", value_name = "HOST")]
    dst: Option<String>,
    #[command(flatten)]
    socket: SocketArgs,
}

#[derive(clap::Args)]
pub struct FlushArgs {
    /// What to flush: `states`.
    what: StatesWord,
    #[command(flatten)]
    socket: SocketArgs,
}

pub fn kill_main(args: KillArgs) -> Result<()> {
    let StatesWord::States = args.what;
    let filter = StateFilterArgs {
        src: Some(args.src.clone()),
        dst: args.dst.clone(),
        ..StateFilterArgs::default()
    };
    let v = query(&args.socket, &format!("kill-states {}", filter.to_json()?))?;
    let to = args.dst.map_or(String::new(), |d| format!(" to {d}"));
    crate::output::print(&format!("killed {} states from {}{to}\n", s(&v["killed"]), args.src))?;
    Ok(())
}

pub fn flush_main(args: FlushArgs) -> Result<()> {
    let StatesWord::States = args.what;
    let v = query(&args.socket, "flush-states")?;
    crate::output::print(&format!("{} states cleared\n", s(&v["flushed"])))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_json_and_errors() {
        let f = StateFilterArgs {
            src: Some("10.0.0.0/8".into()),
            port: Some(53),
            proto: Some("udp".into()),
            ..Default::default()
        };
        assert_eq!(f.to_json().unwrap(), json!({"src": "10.0.0.0/8", "port": 53, "proto": 17}));
        let bad = StateFilterArgs { host: Some("10.0.0.300".into()), ..Default::default() };
        assert!(format!("{:#}", bad.to_json().unwrap_err()).contains("--host"));
        assert!(proto_number("sctp").is_err());
        assert_eq!(proto_number("132").unwrap(), 132);
    }

    #[test]
    fn tables() {
        let v = json!({"states": [{"proto": "udp", "src": "2001:db8::1", "sport": 5, "dst": "10.0.0.1", "dport": 53,
                                   "state": "MULTIPLE:SINGLE", "expires_in": 30, "rule": 1, "line": 2, "ridentifier": 1000000103}],
                       "matched": 3, "shown": 1, "in_use": 3, "limit": 1000});
        let t = states_table(&v);
        assert!(
            t.contains("[2001:db8::1]:5")
                && t.contains("10.0.0.1:53")
                && t.contains("@1 (line 2) ridentifier 1000000103"),
            "{t}"
        );
        assert!(t.contains("1 of 3 matching states shown"), "{t}");
        let r = rules_text(
            &json!([{"number": 0, "text": "pass all", "packets": 5, "bytes": 300, "states": 1},
                                   {"number": null, "packets": 0, "bytes": 0, "states": 0}]),
        );
        assert!(r.starts_with("@0 pass all\n  [ Packets: 5  Bytes: 300  States: 1 ]"), "{r}");
        assert!(r.contains("(no rule matched: pass)"), "{r}");
    }
}
