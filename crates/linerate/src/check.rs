//! `linerate check -c FILE [-v]`: load and validate a config, then build its tables in
//! memory; with `-v`, print the firewall's rule set as linerate read it, the way `pfctl -nvf`
//! prints what it loaded.

use std::path::PathBuf;

use anyhow::Result;

#[derive(clap::Args)]
pub struct CheckArgs {
    /// Configuration file (TOML).
    #[arg(short, long)]
    config: PathBuf,
    /// After the summary, print the firewall's rule set as linerate read it: one rule per
    /// line after macro and list expansion, pf's defaults explicit (as `pfctl -nvf`).
    #[arg(short, long)]
    verbose: bool,
}

pub fn main(args: CheckArgs) -> Result<()> {
    let mut cfg = config::Config::load(&args.config)?;
    // Building the FIB catches what only the tables can tell (capacity, port numbering).
    // Interfaces without a configured MAC get theirs from the kernel at run time (a stand-in
    // here; the config is not copied: it may hold a full table).
    for iface in &mut cfg.interfaces {
        iface.mac.get_or_insert(config::MacAddr([0x02, 0, 0, 0, 0, 0]));
    }
    setup::fib(&cfg)?;
    // The rule file is parsed and compiled as `run` would (interface names -> port indices in
    // the config's interface order), so a file that `check` accepts loads at run time.
    let loaded = match &cfg.firewall {
        Some(f) => Some((f.rules.clone(), crate::rule_file::load(&cfg, &f.rules)?)),
        None => None,
    };
    let mut rules = loaded.as_ref().map_or_else(String::new, |(path, file)| {
        format!(", firewall {}: {} rules", path.display(), file.rules.rule_count())
    });
    // The sync key is read as `run` reads it: a missing or short key fails here.
    if let Some(ha) = &cfg.ha {
        let key = crate::ha::key(ha)?;
        let auth = if key.is_some() { "authenticated" } else { "unauthenticated" };
        rules.push_str(&format!(", state sync with {} ({auth})", ha.peer));
    }
    println!(
        "{}: ok ({} interfaces, {} routes, {} neighbours{rules})",
        args.config.display(),
        cfg.interfaces.len(),
        cfg.routes.len(),
        cfg.neighbours.len()
    );
    if let (true, Some((_, file))) = (args.verbose, &loaded) {
        // Port indices are the config's interface order, as the rule file was read.
        let names: Vec<&str> = cfg.interfaces.iter().map(|i| i.name.as_str()).collect();
        print!("{}", file.rules.rules.to_pf_text(&names)?);
    }
    Ok(())
}
