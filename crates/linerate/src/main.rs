//! `linerate`: a userspace software router and firewall. This file only hands each
//! subcommand of the command line ([`cli`]) to its module; the work is in the library crates.

mod bench;
mod check;
mod cli;
mod client;
mod control;
mod control_fw;
mod describe;
mod fail_closed;
mod ha;
mod host;
mod kernel_bypass;
mod lab_cmd;
mod links;
mod log;
mod logger;
mod metrics;
mod notify;
mod offload;
mod output;
mod owner;
mod peers;
mod privilege;
mod rebuild;
mod receive;
mod reload;
mod route_sync;
mod router_state;
mod rule_file;
mod run;
mod service;
mod show;
mod signals;
mod states;
mod steering;
mod stream;
mod table;
mod tools;
mod traffic;

use cli::Command;

fn main() -> std::process::ExitCode {
    let cli = cli::parse();
    if let Command::Stat { args } = &cli.command {
        return stat_main(args);
    }
    log::init(cli.log_level);
    let result = match cli.command {
        Command::Run(args) => run::main(args),
        Command::Check(args) => check::main(args),
        Command::Reload(args) => reload::main(args),
        Command::Show(args) => show::show_main(args),
        Command::Top(args) => show::top_main(args),
        Command::Kill(args) => states::kill_main(args),
        Command::Flush(args) => states::flush_main(args),
        Command::Table(args) => table::main(args),
        Command::Log(args) => stream::log_main(args),
        Command::Capture(args) => stream::capture_main(args),
        Command::InstallService(args) => service::install_main(args),
        Command::Lab(args) => lab_cmd::main(args),
        Command::Bench(args) => bench::main(args),
        Command::Gen(args) => traffic::gen_main(args),
        Command::Rcv(args) => traffic::rcv_main(args),
        Command::Stat { .. } => unreachable!("handled above"),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("linerate: {}", error_chain(&err));
            std::process::ExitCode::FAILURE
        }
    }
}

/// `linerate stat`: ministat's exit codes and output, byte for byte.
fn stat_main(args: &[std::ffi::OsString]) -> std::process::ExitCode {
    use std::io::IsTerminal;
    // ministat sizes its plot to the terminal: COLUMNS, else 74 columns.
    let width = if std::io::stdout().is_terminal() {
        lab::stat::terminal_default_width(std::env::var_os("COLUMNS").as_deref(), None)
    } else {
        74
    };
    let code = lab::stat::run_with_default_width(
        args,
        &mut std::io::stdin().lock(),
        &mut std::io::stdout().lock(),
        &mut std::io::stderr().lock(),
        width,
    );
    std::process::ExitCode::from(code.clamp(0, 255) as u8)
}

/// The error and its causes joined with ": ", leaving out a cause whose text the message
/// already carries (many library errors quote their source in their own message).
fn error_chain(err: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in err.chain() {
        let part = cause.to_string();
        if text.contains(&part) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&part);
    }
    text
}
