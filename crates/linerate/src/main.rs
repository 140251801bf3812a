//! `linerate`: a userspace software router and firewall. This file only parses the command
//! line and hands each subcommand to its module; the work is in the library crates.

mod bench;
mod check;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "linerate", version, about = "Userspace software router, firewall and bench lab")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the forwarding pipeline on one core over in-memory ports and report Mpps.
    Bench(bench::BenchArgs),
    /// Validate a configuration file without touching any interface.
    Check(check::CheckArgs),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Bench(args) => bench::main(args),
        Command::Check(args) => check::main(args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("linerate: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
