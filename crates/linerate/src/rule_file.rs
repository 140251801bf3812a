//! The firewall's rule file read against a config: `run` loads it at start, `reload` when
//! asked, and `check` the same way, so a file `check` accepts loads at run time.

use std::path::Path;

use anyhow::{Context, Result};
use config::Config;
use dataplane::firewall::CompiledRules;

/// A rule file, compiled.
pub struct RuleFile {
    pub rules: CompiledRules,
    /// The text the rules were compiled from (`linerate show rules`).
    pub text: String,
}

/// Parses and compiles the config's rule file, interface names resolving to port indices in
/// the config's interface order (the worker's port numbering), with the interfaces'
/// addresses for `self`, interface hosts and `antispoof`.
pub fn load(cfg: &Config, rules: &Path) -> Result<RuleFile> {
    let named = |name: &str| cfg.interfaces.iter().position(|i| i.name == name).map(|i| i as u16);
    let egress = egress(cfg);
    let ifaces = |name: &str| {
        named(name).or_else(|| if name == "egress" { egress.as_ref().ok().copied() } else { None })
    };
    let text = fw::rules::read_rule_text(rules)
        .with_context(|| format!("{}:0:0: cannot read rule file", rules.display()))?;
    let mut addresses: Vec<(String, Vec<(std::net::IpAddr, u8)>)> = cfg
        .interfaces
        .iter()
        .map(|i| (i.name.clone(), i.addresses.iter().map(|a| (a.addr, a.prefix_len)).collect()))
        .collect();
    if let (None, Ok(port)) = (named("egress"), &egress) {
        addresses.push(("egress".into(), addresses[usize::from(*port)].1.clone()));
    }
    let compiled =
        CompiledRules::parse_with_addresses(&text, rules, &ifaces, &addresses).map_err(|e| {
            let text = e.to_string();
            match &egress {
                Err(why) if text.contains("\"egress\"") || text.contains("`egress") => {
                    anyhow::anyhow!("{text} (pf's `egress` group: {why})")
                }
                // Typed: a reload's caller may downcast it to read the position.
                _ => anyhow::Error::new(e),
            }
        })?;
    // NAT66's `(IFACE)` is the interface's first address that is not link-local.
    let has_addr = |i: u16, af: fw::packet::Af| {
        cfg.interfaces.get(usize::from(i)).is_some_and(|i| {
            i.addresses.iter().any(|a| match (a.addr, af) {
                (std::net::IpAddr::V4(_), fw::packet::Af::Inet) => true,
                (std::net::IpAddr::V6(v6), fw::packet::Af::Inet6) => {
                    v6.segments()[0] & 0xffc0 != 0xfe80
                }
                _ => false,
            })
        })
    };
    if let Some((r, i, af)) = fw::nat::iface_without_address(&compiled.rules, &has_addr) {
        let name = &cfg.interfaces[usize::from(i)].name;
        let family = if af == fw::packet::Af::Inet { "IPv4" } else { "global IPv6" };
        anyhow::bail!(
            "{}:{}:{}: `{}` translates to ({name}), which has no {family} address in the config",
            rules.display(),
            r.line,
            r.column,
            r.kind.name()
        );
    }
    // What is accepted but does nothing here (an empty anchor, `set skip` on an interface
    // not configured): said once per load, so that `check` shows it before `run` does.
    for n in &compiled.rules.notices {
        eprintln!("linerate: notice: {n}");
    }
    Ok(RuleFile { rules: compiled, text })
}

/// pf's `egress` interface group (OpenBSD: the interfaces that hold a default route): here
/// the interface by which every static default route of the config leaves (`[[route]]`
/// 0.0.0.0/0 and ::/0, all their next hops). Routes learned at run time (kernel, BIRD, FRR)
/// do not count: a rule set is resolved once, when it is loaded.
fn egress(cfg: &Config) -> std::result::Result<u16, String> {
    let mut found: Vec<&str> = Vec::new();
    for r in cfg.routes.iter().filter(|r| r.prefix.len == 0) {
        let hops = r.next_hops();
        let names: Vec<&str> = if hops.is_empty() {
            vec![r.interface.as_str()]
        } else {
            hops.iter().map(|(_, i)| *i).collect()
        };
        for n in names {
            if !found.contains(&n) {
                found.push(n);
            }
        }
    }
    match found.as_slice() {
        [] => Err("no static default route ([[route]] 0.0.0.0/0 or ::/0) names its interface; name the interface instead".into()),
        [one] => cfg.interfaces.iter().position(|i| i.name == *one).map(|i| i as u16).ok_or_else(|| format!("the default route's interface {one:?} is not configured")),
        many => Err(format!("the default routes leave by {} interfaces ({}); linerate resolves `egress` to one: name them instead", many.len(), many.join(", "))),
    }
}
