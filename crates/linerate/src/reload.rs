//! `linerate reload` and SIGHUP: re-read the config file and apply what can change while
//! forwarding, all of it or nothing.
//!
//! What is applied: the `[firewall]` rule file (re-read and compiled, even when the config
//! did not change) and the static `[[neighbour]]` entries (added, removed or moved to a new
//! MAC or interface in the FIB and the neighbour cache, under the slow path's lock). Anything
//! else that differs from the running config is named and the whole reload refused, since
//! it would otherwise be accepted and then ignored: interface addresses (the workers' ports,
//! the local and connected routes and the TAPs would all have to change together), MTU,
//! MACs, backends, the `[router]` settings, static routes.
//!
//! The order keeps it atomic: everything is read, validated and compiled first; then the
//! neighbours change (undone if the FIB refuses one), then the rules are published (the
//! neighbours undone if that fails).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use config::{Config, Neighbour};
use dataplane::firewall::CompiledRules;
use dataplane::slowpath::SlowPath;

use crate::router_state::RouterState;

/// `linerate reload`: asks the running linerate to re-read its config; prints the answer,
/// fails if the rules were refused.
pub fn main(args: crate::client::SocketArgs) -> Result<()> {
    let socket = args.socket()?;
    let answer =
        crate::client::request(&socket, "reload", Duration::from_secs(120)).map_err(|e| {
            anyhow::anyhow!("{}", format!("{e:#}").replacen("reload: ", "reload refused: ", 1))
        })?;
    if !answer.starts_with("ok") {
        bail!("unexpected answer {answer:?}");
    }
    crate::output::print(&format!("{answer}\n"))?;
    Ok(())
}

/// Runs a reload; the answer is `ok: ...` or `error: ...` (logged on stderr either way).
pub fn reload(state: &RouterState) -> String {
    match try_reload(state) {
        Ok(summary) => {
            crate::log::info(format_args!("reloaded: {summary}"));
            format!("ok: {summary}")
        }
        Err(e) => {
            crate::log::error(format_args!("reload refused, nothing changed: {e:#}"));
            format!("error: {e:#}")
        }
    }
}

fn try_reload(state: &RouterState) -> Result<String> {
    let mut running = state.running.lock().unwrap_or_else(|e| e.into_inner());
    let new = Config::load(&running.path)?;
    let refused = restart_needed(&running, &new);
    if !refused.is_empty() {
        bail!("{}: {}", running.path.display(), refused.join("; "));
    }
    let rules = match (&state.slot, &new.firewall) {
        (Some(_), Some(fw)) => Some(compile(state, &running, &fw.rules)?),
        _ => None,
    };
    let changes = neighbour_changes(&running.neighbours, &new.neighbours);
    let ports: HashMap<&str, u16> =
        running.interfaces.iter().enumerate().map(|(i, x)| (x.name.as_str(), i as u16)).collect();
    let (old_routes, new_routes) = (static_routes(state, &running)?, static_routes(state, &new)?);
    let routed;
    {
        let mut slow = state.slow.lock().unwrap_or_else(|e| e.into_inner());
        routed = slow
            .fib_mut()
            .set_static_routes(&new_routes)
            .with_context(|| format!("{}: static routes", new.path.display()))?;
        if let Err(e) = apply_neighbours(&mut slow, &ports, &running.neighbours, &changes) {
            slow.fib_mut().set_static_routes(&old_routes).context("restoring the static routes")?;
            return Err(e);
        }
        if let (Some(slot), Some(new_rules)) = (&state.slot, rules.as_ref()) {
            let published = slot.publish(Arc::clone(&new_rules.compiled)).with_context(|| {
                format!(
                    "{}: set limit states",
                    new.firewall.as_ref().map_or(String::new(), |f| f.rules.display().to_string())
                )
            });
            if let Err(e) = published {
                let undo = neighbour_changes(&new.neighbours, &running.neighbours);
                apply_neighbours(&mut slow, &ports, &new.neighbours, &undo)
                    .context("undoing the neighbour changes")?;
                slow.fib_mut()
                    .set_static_routes(&old_routes)
                    .context("restoring the static routes")?;
                return Err(e);
            }
            if let Some(fw) = &state.fw {
                fw.set_source(&new_rules.text);
            }
        }
    }
    let mut summary = match &rules {
        Some(r) => format!("{} rules", r.compiled.rule_count()),
        None => "no firewall".to_owned(),
    };
    if !changes.is_empty() {
        let _ = write!(
            summary,
            "; static neighbours: {} set, {} removed",
            changes.set.len(),
            changes.removed.len()
        );
    }
    if routed.added + routed.changed + routed.removed > 0 {
        let _ = write!(
            summary,
            "; static routes: {} added, {} changed, {} removed, {} unchanged",
            routed.added, routed.changed, routed.removed, routed.unchanged
        );
    }
    running.neighbours = new.neighbours;
    running.routes = new.routes;
    running.firewall = new.firewall;
    Ok(summary)
}

/// The static routes of `cfg` as the FIB takes them (next hops resolved to this run's ports).
fn static_routes(state: &RouterState, cfg: &Config) -> Result<Vec<dataplane::fib::StaticRoute>> {
    setup::static_routes(cfg, &state.ports)
        .with_context(|| format!("{}: static routes", cfg.path.display()))
}

/// The rules a reload publishes, and their text for `show rules`.
struct NewRules {
    compiled: Arc<CompiledRules>,
    text: String,
}

/// Parses and compiles the rule file, refusing `keep state` where this run cannot keep it.
fn compile(state: &RouterState, running: &Config, path: &std::path::Path) -> Result<NewRules> {
    let loaded = crate::rule_file::load(running, path)?;
    if let Some(why) =
        state.reload_refusal.as_ref().filter(|_| crate::steering::keeps_state(&loaded.rules.rules))
    {
        bail!("{}: {why}", path.display());
    }
    Ok(NewRules { compiled: Arc::new(loaded.rules), text: loaded.text })
}

/// What changes in the static neighbours: entries to set (new, or with another MAC or
/// interface) and addresses to forget.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct NeighbourChanges {
    pub set: Vec<Neighbour>,
    pub removed: Vec<IpAddr>,
}

impl NeighbourChanges {
    pub fn is_empty(&self) -> bool {
        self.set.is_empty() && self.removed.is_empty()
    }
}

/// The changes that turn the static neighbours `old` into `new`.
pub fn neighbour_changes(old: &[Neighbour], new: &[Neighbour]) -> NeighbourChanges {
    let before: HashMap<IpAddr, &Neighbour> = old.iter().map(|n| (n.address, n)).collect();
    let after: HashMap<IpAddr, &Neighbour> = new.iter().map(|n| (n.address, n)).collect();
    let set = new.iter().filter(|n| before.get(&n.address) != Some(n)).cloned().collect();
    let removed = old.iter().map(|n| n.address).filter(|a| !after.contains_key(a)).collect();
    NeighbourChanges { set, removed }
}

/// Applies `changes` to the static neighbours `current`; if the FIB refuses one, what was done
/// is undone and the error returned.
fn apply_neighbours(
    slow: &mut SlowPath,
    ports: &HashMap<&str, u16>,
    current: &[Neighbour],
    changes: &NeighbourChanges,
) -> Result<()> {
    let port = |n: &Neighbour| {
        ports.get(n.interface.as_str()).copied().with_context(|| {
            format!("neighbour {}: interface {:?} is not running", n.address, n.interface)
        })
    };
    for a in &changes.removed {
        slow.remove_static(*a);
    }
    for (done, n) in changes.set.iter().enumerate() {
        let res = port(n).and_then(|p| {
            slow.set_static(n.address, p, wire::MacAddr(n.mac.0))
                .with_context(|| format!("neighbour {}", n.address))
        });
        if let Err(e) = res {
            for undone in &changes.set[..done] {
                slow.remove_static(undone.address);
            }
            for old in current.iter().filter(|o| {
                changes.removed.contains(&o.address)
                    || changes.set.iter().any(|s| s.address == o.address)
            }) {
                if let Ok(p) = port(old) {
                    let _ = slow.set_static(old.address, p, wire::MacAddr(old.mac.0));
                }
            }
            return Err(e);
        }
    }
    Ok(())
}

/// What differs between the running config and `new` that a reload cannot apply, each named
/// ("interface lrd0 address changed (+198.18.1.1/24): restart needed").
pub fn restart_needed(running: &Config, new: &Config) -> Vec<String> {
    let mut out = Vec::new();
    let names = |c: &Config| c.interfaces.iter().map(|i| i.name.clone()).collect::<Vec<_>>();
    if names(running) != names(new) {
        out.push(format!(
            "interfaces changed ({} -> {}): restart needed",
            names(running).join(", "),
            names(new).join(", ")
        ));
        return out;
    }
    for (old, new) in running.interfaces.iter().zip(&new.interfaces) {
        let name = &old.name;
        if old.addresses != new.addresses {
            let fmt = |a: &config::IfAddr| format!("{}/{}", a.addr, a.prefix_len);
            let added: Vec<String> = new
                .addresses
                .iter()
                .filter(|a| !old.addresses.contains(a))
                .map(|a| format!("+{}", fmt(a)))
                .collect();
            let removed: Vec<String> = old
                .addresses
                .iter()
                .filter(|a| !new.addresses.contains(a))
                .map(|a| format!("-{}", fmt(a)))
                .collect();
            let what = [added, removed].concat();
            let what = if what.is_empty() { "order".to_owned() } else { what.join(" ") };
            out.push(format!("interface {name} address changed ({what}): restart needed"));
        }
        // A MAC left out of the config is the kernel's, read at start.
        let mac_changed = new.mac.is_some_and(|m| Some(m) != old.mac);
        let other = [
            ("mac", mac_changed),
            ("mtu", old.mtu != new.mtu),
            ("backend", old.backend != new.backend),
            ("xdp_mode", old.xdp_mode != new.xdp_mode),
            ("vlan", old.vlan != new.vlan),
            ("tap", old.tap != new.tap),
            ("ra", old.ra != new.ra),
        ];
        for (key, _) in other.iter().filter(|(_, changed)| *changed) {
            out.push(format!("interface {name} {key} changed: restart needed"));
        }
    }
    let (a, b) = (&running.router, &new.router);
    let router = [
        ("workers", a.workers != b.workers),
        ("batch_size", a.batch_size != b.batch_size),
        ("control_socket", a.control_socket != b.control_socket),
        ("host_stack", a.host_stack != b.host_stack),
        ("icmp_errors_per_second", a.icmp_errors_per_second != b.icmp_errors_per_second),
        ("sleep_when_idle", a.sleep_when_idle != b.sleep_when_idle),
        ("napi_threads", a.napi_threads != b.napi_threads),
        ("max_neighbours", a.max_neighbours != b.max_neighbours),
        ("punt", a.punt != b.punt),
        ("fail_closed", a.fail_closed != b.fail_closed),
        ("user", a.user != b.user),
        ("control_group", a.control_group != b.control_group),
        ("metrics_listen", a.metrics_listen != b.metrics_listen),
        ("kernel_routes", a.kernel_routes != b.kernel_routes),
        ("fast_path", a.fast_path != b.fast_path),
        ("fast_path_flows", a.fast_path_flows != b.fast_path_flows),
    ];
    for (key, _) in router.iter().filter(|(_, changed)| *changed) {
        out.push(format!("router.{key} changed: restart needed"));
    }
    if running.log != new.log {
        out.push("[log] changed: restart needed".to_owned());
    }
    match (&running.firewall, &new.firewall) {
        (None, Some(_)) => out.push(
            "[firewall] added: restart needed (the workers were started without one)".to_owned(),
        ),
        (Some(_), None) => out.push("[firewall] removed: restart needed".to_owned()),
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    const BASE: &str = "[[interface]]\nname = \"lr-a\"\nmac = \"02:00:00:00:00:01\"\naddresses = [\"198.18.0.1/24\", \"2001:db8:a::1/64\"]\n\
        [[interface]]\nname = \"lr-b\"\naddresses = [\"198.19.0.1/24\"]\n";

    fn cfg(extra: &str) -> Config {
        Config::parse(&format!("{BASE}{extra}"), Path::new("router.toml"))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn neighbours_are_set_and_removed() {
        let n = |a: &str, mac: &str, i: &str| {
            format!("[[neighbour]]\naddress = \"{a}\"\nmac = \"{mac}\"\ninterface = \"{i}\"\n")
        };
        let old = cfg(&[
            n("198.18.0.2", "02:00:00:00:00:02", "lr-a"),
            n("198.19.0.2", "02:00:00:00:00:03", "lr-b"),
            n("198.19.0.3", "02:00:00:00:00:04", "lr-b"),
        ]
        .concat());
        let new = cfg(&[
            n("198.18.0.2", "02:00:00:00:00:02", "lr-a"),
            n("198.19.0.2", "02:00:00:00:00:09", "lr-b"),
            n("198.18.0.7", "02:00:00:00:00:07", "lr-a"),
        ]
        .concat());
        assert!(restart_needed(&old, &new).is_empty());
        let c = neighbour_changes(&old.neighbours, &new.neighbours);
        let set: Vec<String> = c.set.iter().map(|n| format!("{} {}", n.address, n.mac)).collect();
        assert_eq!(set, ["198.19.0.2 02:00:00:00:00:09", "198.18.0.7 02:00:00:00:00:07"]);
        assert_eq!(c.removed, ["198.19.0.3".parse::<IpAddr>().unwrap()]);
        assert!(neighbour_changes(&old.neighbours, &old.neighbours).is_empty());
    }

    #[test]
    fn what_needs_a_restart_is_named() {
        let old = cfg("");
        let moved = cfg("").interfaces;
        let mut new = cfg("");
        new.interfaces[0].addresses.push("198.18.1.1/24".parse().unwrap());
        new.interfaces[1].mtu = 9000;
        new.router.workers = 4;
        // Static routes are applied, not refused.
        new.routes = cfg("[[route]]\nprefix = \"10.0.0.0/8\"\nvia = \"198.19.0.2\"\n").routes;
        assert_eq!(
            restart_needed(&old, &new),
            [
                "interface lr-a address changed (+198.18.1.1/24): restart needed",
                "interface lr-b mtu changed: restart needed",
                "router.workers changed: restart needed",
            ]
        );
        // A MAC read from the kernel at start is not a change when the config still leaves it out.
        let mut running = old.clone();
        running.interfaces[1].mac = Some(config::MacAddr([2, 0, 0, 0, 0, 0x0b]));
        assert!(restart_needed(&running, &old).is_empty());
        let mut removed = old.clone();
        removed.interfaces = moved[..1].to_vec();
        assert_eq!(
            restart_needed(&old, &removed),
            ["interfaces changed (lr-a, lr-b -> lr-a): restart needed"]
        );
    }
}
