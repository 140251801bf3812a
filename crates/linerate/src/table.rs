//! `linerate table NAME show|test|add|delete|flush|replace` (pfctl's `-t NAME -T ...`): the
//! client, and the control socket's `table-show`, `table-test` and `table-change` commands,
//! which change the running rules' table as [`dataplane::firewall::tables`] says (the rules
//! stay, their counters go on; the next reload of the rule file defines the tables anew).

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use dataplane::firewall::RulesSlot;
use dataplane::firewall::tables::TableOp;
use fw::rules::TableEntry;
use serde_json::{Value, json};

use crate::client::SocketArgs;

#[derive(clap::Args)]
pub struct TableArgs {
    /// The table, as the rule file names it (`<bad>` or `bad`).
    name: String,
    /// What to do (pfctl -T ...): list the entries, test addresses, add or delete entries,
    /// remove them all, or replace them.
    op: TableCommand,
    /// Addresses (`test`) or `[!]ADDR[/LEN]` entries (`add`, `delete`, `replace`).
    args: Vec<String>,
    /// A table file for `add`, `delete` or `replace`: `[!]ADDR[/LEN]` words, `#` comments.
    #[arg(short, long)]
    file: Option<PathBuf>,
    #[command(flatten)]
    socket: SocketArgs,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum TableCommand {
    Show,
    Test,
    Add,
    Delete,
    Flush,
    Replace,
}

/// `[!]ADDR[/LEN]`.
fn entry(s: &str) -> Result<TableEntry> {
    let (negated, w) = s.strip_prefix('!').map_or((false, s), |w| (true, w));
    let prefix = fw::rules::parse_prefix(w)
        .with_context(|| format!("{s:?} is not an address or a prefix"))?;
    Ok(TableEntry { negated, prefix })
}

fn entries(words: &[String]) -> Result<Vec<TableEntry>> {
    words.iter().map(|w| entry(w)).collect()
}

/// An entry as pfctl shows it: a host without its length.
fn show_entry(e: &TableEntry) -> String {
    let p = e.prefix.to_string();
    let host = p
        .strip_suffix("/32")
        .filter(|_| e.prefix.af == fw::packet::Af::Inet)
        .or_else(|| p.strip_suffix("/128"));
    format!("{}{}", if e.negated { "!" } else { "" }, host.unwrap_or(&p))
}

pub fn main(args: TableArgs) -> Result<()> {
    let name = args.name.trim_start_matches('<').trim_end_matches('>').to_owned();
    let op = args.op;
    if matches!(op, TableCommand::Show | TableCommand::Flush | TableCommand::Test)
        && args.file.is_some()
    {
        bail!("--file goes with add, delete or replace");
    }
    let (command, body) = match op {
        TableCommand::Show | TableCommand::Flush if !args.args.is_empty() => {
            bail!("{} takes no addresses", if op == TableCommand::Show { "show" } else { "flush" })
        }
        TableCommand::Show => ("table-show", json!({"name": name})),
        TableCommand::Flush => ("table-change", json!({"name": name, "op": "flush"})),
        TableCommand::Test => {
            if args.args.is_empty() {
                bail!("test needs an address");
            }
            for a in &args.args {
                a.parse::<IpAddr>().with_context(|| format!("{a:?} is not an address"))?;
            }
            ("table-test", json!({"name": name, "addresses": args.args}))
        }
        TableCommand::Add | TableCommand::Delete | TableCommand::Replace => {
            let mut list = entries(&args.args)?;
            if let Some(f) = &args.file {
                read_file(f, &mut list)?;
            }
            let word = match op {
                TableCommand::Add => "add",
                TableCommand::Delete => "delete",
                _ => "replace",
            };
            (
                "table-change",
                json!({"name": name, "op": word, "entries": list.iter().map(show_entry).collect::<Vec<_>>()}),
            )
        }
    };
    // Compiling a large rule set again takes a while.
    let answer = crate::client::request(
        &args.socket.socket()?,
        &format!("{command} {body}"),
        Duration::from_secs(120),
    )?;
    let v: Value =
        serde_json::from_str(&answer).with_context(|| format!("{command}: {answer:.200}"))?;
    crate::output::print(&text(op, &name, &v))?;
    Ok(())
}

fn read_file(path: &Path, out: &mut Vec<TableEntry>) -> Result<()> {
    let text = fw::rules::read_rule_text(path).with_context(|| format!("{}", path.display()))?;
    fw::rules::parse_table_file(&text, path, out).map_err(|e| anyhow::anyhow!("{e}"))
}

fn text(op: TableCommand, name: &str, v: &Value) -> String {
    match op {
        TableCommand::Show => v["entries"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| format!("   {}\n", e.as_str().unwrap_or("")))
            .collect(),
        TableCommand::Test => {
            let list = v["matches"].as_array().into_iter().flatten();
            list.map(|m| {
                format!(
                    "{} {}\n",
                    m["address"].as_str().unwrap_or(""),
                    if m["match"] == json!(true) { "matches" } else { "does not match" }
                )
            })
            .collect()
        }
        _ => format!(
            "<{name}>: {} added, {} deleted, {} entries\n",
            v["added"], v["deleted"], v["entries"]
        ),
    }
}

/// Whether a control command changes a table (for root and linerate's uid only).
pub fn is_admin_command(command: &str) -> bool {
    command.split(' ').next() == Some("table-change")
}

/// Answers `table-show`, `table-test` and `table-change` (`None`: not one of them).
pub fn answer(slot: Option<&Arc<RulesSlot>>, command: &str) -> Option<String> {
    let (word, arg) = command.split_once(' ').unwrap_or((command, ""));
    if !["table-show", "table-test", "table-change"].contains(&word) {
        return None;
    }
    let Some(slot) = slot else {
        return Some("error: no [firewall] table in the running config".into());
    };
    let result =
        serde_json::from_str::<Value>(arg).context("the request is not JSON").and_then(|req| {
            let name = req["name"].as_str().context("no table name")?;
            match word {
                "table-show" => show(slot, name),
                "table-test" => test(slot, name, &req),
                _ => change(slot, name, &req),
            }
        });
    Some(result.map_or_else(|e| format!("error: {e:#}"), |v| v.to_string()))
}

fn show(slot: &RulesSlot, name: &str) -> Result<Value> {
    let t = slot.table(name).with_context(|| format!("no table <{name}> in the running rules"))?;
    Ok(
        json!({"entries": t.entries.iter().map(show_entry).collect::<Vec<_>>(), "constant": t.constant}),
    )
}

fn test(slot: &RulesSlot, name: &str, req: &Value) -> Result<Value> {
    let rules = slot.current();
    let mut out = Vec::new();
    for a in req["addresses"].as_array().into_iter().flatten() {
        let text = a.as_str().context("an address must be a string")?;
        let addr: IpAddr = text.parse().with_context(|| format!("{text:?} is not an address"))?;
        let (af, bits) = match addr {
            IpAddr::V4(v) => (fw::packet::Af::Inet, u128::from(u32::from(v))),
            IpAddr::V6(v) => (fw::packet::Af::Inet6, u128::from(v)),
        };
        let matched = rules
            .table_test(name, af, bits)
            .with_context(|| format!("no table <{name}> in the running rules"))?;
        out.push(json!({"address": text, "match": matched}));
    }
    Ok(json!({"matches": out}))
}

fn change(slot: &RulesSlot, name: &str, req: &Value) -> Result<Value> {
    let list = || -> Result<Vec<TableEntry>> {
        req["entries"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| entry(e.as_str().context("an entry must be a string")?))
            .collect()
    };
    let op = match req["op"].as_str() {
        Some("add") => TableOp::Add(list()?),
        Some("delete") => TableOp::Delete(list()?),
        Some("flush") => TableOp::Flush,
        Some("replace") => TableOp::Replace(list()?),
        other => bail!("unknown table operation {other:?} (add, delete, flush or replace)"),
    };
    let c = slot.change_table(name, op)?;
    Ok(json!({"added": c.added, "deleted": c.deleted, "entries": c.entries}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_parse_and_show_as_pfctl() {
        let e = entries(&[
            "10.0.0.1".into(),
            "!10.1.0.0/16".into(),
            "2001:db8::1".into(),
            "2001:db8::/32".into(),
        ])
        .unwrap();
        assert_eq!(
            e.iter().map(show_entry).collect::<Vec<_>>(),
            ["10.0.0.1", "!10.1.0.0/16", "2001:db8::1", "2001:db8::/32"]
        );
        assert!(
            format!("{:#}", entry("10.0.0.300").unwrap_err())
                .contains("not an address or a prefix")
        );
        assert!(is_admin_command("table-change {}") && !is_admin_command("table-show {}"));
        assert_eq!(answer(None, "routes"), None);
        assert!(
            answer(None, "table-show {\"name\":\"t\"}")
                .unwrap()
                .starts_with("error: no [firewall]")
        );
    }

    #[test]
    fn changes_and_tests_through_the_socket_commands() {
        let rules = dataplane::firewall::CompiledRules::parse(
            "table <t> persist\nblock in from <t>\n",
            Path::new("t.conf"),
            &|_| None,
        )
        .unwrap();
        let slot = RulesSlot::new(Arc::new(rules));
        let ask = |c: &str| answer(Some(&slot), c).unwrap();
        assert_eq!(
            ask(r#"table-change {"name":"t","op":"add","entries":["192.0.2.1","!192.0.2.0/24"]}"#),
            r#"{"added":2,"deleted":0,"entries":2}"#
        );
        assert_eq!(
            ask(r#"table-show {"name":"t"}"#),
            r#"{"constant":false,"entries":["192.0.2.1","!192.0.2.0/24"]}"#
        );
        assert_eq!(
            ask(r#"table-test {"name":"t","addresses":["192.0.2.1","192.0.2.2"]}"#),
            r#"{"matches":[{"address":"192.0.2.1","match":true},{"address":"192.0.2.2","match":false}]}"#
        );
        assert_eq!(
            ask(r#"table-change {"name":"t","op":"flush"}"#),
            r#"{"added":0,"deleted":2,"entries":0}"#
        );
        assert!(
            ask(r#"table-change {"name":"u","op":"flush"}"#)
                .starts_with("error: no table <u> in the running rules")
        );
        assert!(
            ask(r#"table-change {"name":"t","op":"zap"}"#)
                .starts_with("error: unknown table operation")
        );
    }
}
