//! `linerate check -c FILE`: load and validate a config, then build its tables in memory.

use std::path::PathBuf;

use anyhow::Result;

#[derive(clap::Args)]
pub struct CheckArgs {
    /// Configuration file (TOML).
    #[arg(short, long)]
    config: PathBuf,
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
    let rules = match &cfg.firewall {
        Some(f) => {
            let compiled = crate::rule_file::load(&cfg, &f.rules)?;
            format!(", firewall {}: {} rules", f.rules.display(), compiled.rules.rule_count())
        }
        None => String::new(),
    };
    println!(
        "{}: ok ({} interfaces, {} routes, {} neighbours{rules})",
        args.config.display(),
        cfg.interfaces.len(),
        cfg.routes.len(),
        cfg.neighbours.len()
    );
    Ok(())
}
