//! The command line: one subcommand per module of this crate, listed in `linerate --help`
//! under two headings, the router's commands and the lab's.

use clap::builder::StyledStr;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::{
    bench, check, client, lab_cmd, log, run, service, show, states, stream, table, traffic,
};

#[derive(Parser)]
#[command(name = "linerate", version, about = "Userspace software router, firewall and bench lab")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Most verbose messages printed on stderr (with `<N>` syslog prefixes when stderr is
    /// the systemd journal).
    #[arg(long, global = true, value_enum, default_value = "info")]
    pub log_level: log::Level,
}

#[derive(Subcommand)]
pub enum Command {
    // The router (`Router commands` in --help).
    /// Forward between the configured interfaces until SIGINT/SIGTERM (SIGHUP: reload).
    Run(run::RunArgs),
    /// Validate a configuration file without touching any interface.
    Check(check::CheckArgs),
    /// Make a running `linerate run` re-read its config: rule file and static neighbours (atomic).
    Reload(client::SocketArgs),
    /// Show the routes, neighbours, interfaces or drop counters of a running `linerate run`.
    Show(show::ShowArgs),
    /// Live per-interface and per-queue rates and drops of a running `linerate run`.
    Top(show::TopArgs),
    /// Remove firewall states of a running `linerate run` (pfctl -k).
    Kill(states::KillArgs),
    /// Remove every firewall state of a running `linerate run` (pfctl -F states).
    Flush(states::FlushArgs),
    /// Show, test or change a firewall table of a running `linerate run` (pfctl -t TABLE -T).
    Table(table::TableArgs),
    /// Print (or write as a pflog capture) the packets that firewall rules with `log` decide.
    Log(stream::LogArgs),
    /// Capture frames inside a running `linerate run`: as received, as sent, or dropped.
    Capture(stream::CaptureArgs),
    /// Install linerate as a systemd service (dist/linerate.service).
    InstallService(service::InstallArgs),
    // The lab (`Lab commands` in --help).
    /// Build a generator -> DUT -> receiver lab in namespaces and compare configuration sets.
    Lab(lab_cmd::LabArgs),
    /// Run the forwarding pipeline on one core over in-memory ports and report Mpps.
    Bench(bench::BenchArgs),
    /// Send UDP flows of minimum-size frames (or IMIX) on an interface, pkt-gen style.
    Gen(traffic::GenArgs),
    /// Count the frames arriving on an interface, per second.
    Rcv(traffic::RcvArgs),
    /// Compare sets of numbers as FreeBSD's ministat(1) does: same options, same output.
    #[command(disable_help_flag = true, disable_version_flag = true)]
    Stat {
        /// ministat's options and files, e.g. `-c 99 -s a.txt b.txt`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
        args: Vec<std::ffi::OsString>,
    },
}

/// The headings `linerate --help` lists the subcommands under (clap has one heading for all
/// of them), in order; every subcommand is in one group.
const COMMAND_GROUPS: [(&str, &[&str]); 3] = [
    (
        "Router commands",
        &[
            "run",
            "check",
            "reload",
            "show",
            "top",
            "kill",
            "flush",
            "table",
            "log",
            "capture",
            "install-service",
        ],
    ),
    ("Lab commands", &["lab", "bench", "gen", "rcv", "stat"]),
    ("Other commands", &["help"]),
];

/// Parses the command line (exits with clap's message on an error, `--help` or `--version`).
pub fn parse() -> Cli {
    let matches = command().get_matches();
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

/// The command line's definition, with the subcommands grouped in its help.
pub fn command() -> clap::Command {
    let mut cmd = Cli::command();
    // Built, so that the `help` subcommand clap adds is there to be listed.
    cmd.build();
    let template = help_template(&cmd);
    cmd.help_template(template)
}

/// clap's default help layout, with the subcommands under [`COMMAND_GROUPS`]' headings.
fn help_template(cmd: &clap::Command) -> StyledStr {
    let (header, literal) = (cmd.get_styles().get_header(), cmd.get_styles().get_literal());
    let width = cmd.get_subcommands().map(|s| s.get_name().len()).max().unwrap_or(0);
    let mut t = String::from("{before-help}{about-with-newline}\n{usage-heading} {usage}\n\n");
    for (heading, names) in COMMAND_GROUPS {
        t.push_str(&format!("{}{heading}:{}\n", header.render(), header.render_reset()));
        for sub in names.iter().filter_map(|&n| cmd.find_subcommand(n)) {
            let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
            let (name, pad) = (sub.get_name(), width - sub.get_name().len());
            t.push_str(&format!(
                "  {}{name}{}{:pad$}  {about}\n",
                literal.render(),
                literal.render_reset(),
                ""
            ));
        }
        t.push('\n');
    }
    t.push_str(&format!(
        "{}Options:{}\n{{options}}{{after-help}}",
        header.render(),
        header.render_reset()
    ));
    StyledStr::from(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_subcommand_is_in_one_group() {
        let cmd = command();
        let names: Vec<&str> = cmd.get_subcommands().map(|s| s.get_name()).collect();
        for name in &names {
            let groups = COMMAND_GROUPS.iter().filter(|(_, g)| g.contains(name)).count();
            assert_eq!(groups, 1, "{name} is in {groups} groups of `linerate --help`");
        }
        for (_, group) in COMMAND_GROUPS {
            for name in group {
                assert!(names.contains(name), "{name} is grouped but is no subcommand");
            }
        }
    }

    #[test]
    fn help_lists_every_subcommand_under_its_heading() {
        let help = command().render_help().to_string();
        let router = help.find("Router commands:").expect(&help);
        let lab = help.find("Lab commands:").expect(&help);
        let options = help.find("Options:").expect(&help);
        assert!(router < lab && lab < options, "{help}");
        let at = |name: &str| {
            help.find(&format!("\n  {name} ")).unwrap_or_else(|| panic!("{name} missing: {help}"))
        };
        assert!(router < at("reload") && at("reload") < lab, "{help}");
        assert!(lab < at("bench") && at("bench") < options, "{help}");
        assert!(help.contains("--log-level <LOG_LEVEL>"), "{help}");
        assert!(!help.contains('{'), "a template tag left over: {help}");
    }
}
