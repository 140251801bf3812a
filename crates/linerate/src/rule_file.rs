//! The firewall's rule file read against a config: `run` loads it at start, `reload` when
//! asked, and `check` the same way, so a file `check` accepts loads at run time.

use std::path::Path;

use anyhow::{Context, Result};
use config::Config;
use dataplane::filter::CompiledRules;

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
    let ifaces = |name: &str| cfg.interfaces.iter().position(|i| i.name == name).map(|i| i as u16);
    let text = std::fs::read_to_string(rules).with_context(|| format!("{}:0:0: cannot read rule file", rules.display()))?;
    let addresses: Vec<(String, Vec<(std::net::IpAddr, u8)>)> =
        cfg.interfaces.iter().map(|i| (i.name.clone(), i.addresses.iter().map(|a| (a.addr, a.prefix_len)).collect())).collect();
    let compiled = CompiledRules::parse_with_addresses(&text, rules, &ifaces, &addresses).map_err(anyhow::Error::msg)?;
    let has_v4 = |i: u16| cfg.interfaces.get(usize::from(i)).is_some_and(|i| i.addresses.iter().any(|a| a.addr.is_ipv4()));
    if let Some((r, i)) = fw::nat::iface_without_address(&compiled.rules, &has_v4) {
        let name = &cfg.interfaces[usize::from(i)].name;
        anyhow::bail!("{}:{}:{}: `{}` translates to ({name}), which has no IPv4 address in the config", rules.display(), r.line, r.column, r.kind.name());
    }
    // What is accepted but does nothing here (an empty anchor, `set skip` on an interface
    // not configured): said once per load, so that `check` shows it before `run` does.
    for n in &compiled.rules.notices {
        eprintln!("linerate: notice: {n}");
    }
    Ok(RuleFile { rules: compiled, text })
}
