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
    let cfg = config::Config::load(&args.config)?;
    // Building the FIB catches what only the tables can tell (capacity, port numbering).
    // Interfaces without a configured MAC get theirs from the kernel at run time.
    let mut probe = cfg.clone();
    for iface in &mut probe.interfaces {
        iface.mac.get_or_insert(config::MacAddr([0x02, 0, 0, 0, 0, 0]));
    }
    dataplane::fib::from_config(&probe)?;
    println!(
        "{}: ok ({} interfaces, {} routes, {} neighbours)",
        args.config.display(),
        cfg.interfaces.len(),
        cfg.routes.len(),
        cfg.neighbours.len()
    );
    Ok(())
}
