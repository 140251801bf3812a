//! The control socket of `linerate run` (its clients: `linerate reload` in [`crate::reload`],
//! `show` and `top` in [`crate::show`], through [`crate::client`]).
//!
//! `run` listens on the config's `router.control_socket`, a Unix stream socket created
//! under a umask that gives it mode 0600 (0660 and group `router.control_group` if set)
//! from the moment it exists. Each connection's peer is checked with `SO_PEERCRED`: root and
//! the uid linerate runs as may use every command; members of `router.control_group` only
//! the read-only ones (all but `reload`); anyone else is refused. The protocol is one line
//! per connection, one line back:
//! - `reload` re-reads the config file, its rule file, its static routes (changed ones in
//!   place, unchanged ones untouched) and its static neighbours, and applies them off the
//!   fast path, answering `ok: N rules` (and what changed), or
//!   `error: file:line:col: problem` with nothing changed (SIGHUP does the same; see
//!   [`crate::reload`]);
//! - `stats`, `routes`, `neighbours`, `interfaces` answer one JSON document each (see
//!   [`crate::show`] for their fields);
//! - `log` and `capture ...` (root and linerate's uid only) stream packets on a thread of
//!   their own ([`crate::stream`]).

use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use dataplane::fib::{RouteKind, RouteSource};
use dataplane::punt::{PuntClass, PuntDrop, PuntDrops};
use serde_json::{Value, json};
use std::sync::atomic::Ordering::Relaxed;

use crate::peers::{self, Slots};
use crate::router_state::RouterState;

/// Who may use the control socket: root and `admin_uid` every command, members of
/// `read_gid` the read-only ones.
#[derive(Clone, Copy, Debug)]
pub struct Access {
    pub admin_uid: u32,
    pub read_gid: Option<u32>,
}

#[derive(Debug, PartialEq, Eq)]
enum Role {
    Admin,
    ReadOnly,
}

impl Access {
    fn role(&self, peer: &io::privilege::Peer) -> Option<Role> {
        if peer.uid == 0 || peer.uid == self.admin_uid {
            Some(Role::Admin)
        } else if self.read_gid.is_some_and(|g| peer.gid == g || peer.groups.contains(&g)) {
            Some(Role::ReadOnly)
        } else {
            None
        }
    }
}

/// The listening socket; its file is removed when this is dropped (at `run`'s exit).
pub struct Server {
    path: PathBuf,
    listener: Option<UnixListener>,
}

impl Server {
    /// Binds the socket at `path` (replacing a stale file no process listens on), mode 0600,
    /// or 0660 with `group_readable`, then gives the file to `owner` (uid, gid) if set.
    pub fn bind(
        path: &std::path::Path,
        owner: (Option<u32>, Option<u32>),
        group_readable: bool,
    ) -> Result<Server> {
        if std::fs::symlink_metadata(path).is_ok() {
            if UnixStream::connect(path).is_ok() {
                bail!("another process is listening on it");
            }
            std::fs::remove_file(path).context("removing the stale socket file")?;
        }
        // The mode is set by the umask at bind(2): a chmod afterwards would leave a moment
        // when anyone could connect.
        let mask = if group_readable { 0o117 } else { 0o177 };
        let listener =
            io::privilege::with_umask(mask, || UnixListener::bind(path)).context("binding")?;
        let server = Server { path: path.to_owned(), listener: Some(listener) };
        if owner != (None, None) {
            std::os::unix::fs::chown(path, owner.0, owner.1)
                .context("giving the socket file to router.user / router.control_group")?;
        }
        Ok(server)
    }

    /// Serves the socket on a thread of its own.
    pub fn serve(&mut self, state: Arc<RouterState>, access: Access) -> Result<()> {
        let listener = self.listener.take().context("already serving")?;
        std::thread::Builder::new()
            .name("lr-control".into())
            .spawn(move || {
                let slots = Slots::new(MAX_READ_ONLY);
                for conn in listener.incoming().flatten() {
                    accept(conn, &state, access, &slots);
                }
            })
            .context("starting the control thread")?;
        Ok(())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The longest command line read from a peer allowed every command: `table ... replace`
/// carries a whole table file (a million entries are about 20 MiB).
const MAX_ADMIN_LINE: u64 = fw::rules::MAX_RULE_FILE_BYTES;
/// The longest from a read-only peer (`show`, `top`: a few words).
const MAX_READ_ONLY_LINE: u64 = 64 << 10;
/// How long a read-only peer has to send its command line; an admin's may carry a whole
/// table file (`table ... replace`).
const READ_ONLY_READ: Duration = Duration::from_secs(5);
const ADMIN_READ: Duration = Duration::from_secs(30);
/// How long a peer has to read its answer (a full table's `routes` is tens of MB).
const WRITE: Duration = Duration::from_secs(60);
/// Read-only peers served at once; more are told the socket is busy. The admin's are
/// always served.
const MAX_READ_ONLY: usize = 8;

/// A new connection: its peer checked, then served on a thread of its own
/// ([`crate::peers`]); a refusal is answered here.
fn accept(conn: UnixStream, state: &Arc<RouterState>, access: Access, slots: &Slots) {
    let refuse = |conn: &UnixStream, why: String| {
        let _ =
            peers::write_all(conn, format!("error: {why}\n").as_bytes(), Duration::from_secs(1));
    };
    let role = match io::privilege::peer(conn.as_raw_fd()) {
        Err(e) => {
            return refuse(
                &conn,
                format!("permission denied: cannot read the peer's credentials ({e})"),
            );
        }
        Ok(peer) => match access.role(&peer) {
            None => {
                let group = access
                    .read_gid
                    .map_or(String::new(), |g| format!(", or group {g} for show and top"));
                return refuse(
                    &conn,
                    format!(
                        "permission denied: uid {} may not use this socket (root, uid {}{group})",
                        peer.uid, access.admin_uid
                    ),
                );
            }
            Some(role) => role,
        },
    };
    let slot = match role {
        Role::Admin => None,
        Role::ReadOnly => match slots.take() {
            Some(slot) => Some(slot),
            None => {
                return refuse(
                    &conn,
                    format!("busy: {} read-only peers are being served; try again", slots.max()),
                );
            }
        },
    };
    let state = Arc::clone(state);
    let spawned = std::thread::Builder::new().name("lr-control-peer".into()).spawn(move || {
        let _slot = slot;
        serve(conn, &state, access, role);
    });
    if let Err(e) = spawned {
        crate::log::error(format_args!("control socket: cannot start a thread for a peer: {e}"));
    }
}

/// One peer's command and answer.
fn serve(conn: UnixStream, state: &Arc<RouterState>, access: Access, role: Role) {
    // Read only once the peer may send something, and only so much, in so long: a line read
    // without a bound could fill the router's memory.
    let (max, limit) = match role {
        Role::Admin => (MAX_ADMIN_LINE, ADMIN_READ),
        Role::ReadOnly => (MAX_READ_ONLY_LINE, READ_ONLY_READ),
    };
    let answer = match peers::read_line(&conn, max, limit) {
        Err(e) => format!("error: reading the command: {e}"),
        Ok(line) => match (role, line.trim()) {
            (Role::ReadOnly, "reload") => {
                format!("error: permission denied: reload needs root or uid {}", access.admin_uid)
            }
            (Role::ReadOnly, c)
                if crate::control_fw::is_admin_command(c) || crate::table::is_admin_command(c) =>
            {
                format!(
                    "error: permission denied: {} needs root or uid {}",
                    c.split(' ').next().unwrap_or(c),
                    access.admin_uid
                )
            }
            // Packets' contents: for the admin only.
            (Role::ReadOnly, c) if crate::stream::is_stream(c) => format!(
                "error: permission denied: log and capture need root or uid {}",
                access.admin_uid
            ),
            (Role::Admin, c) if crate::stream::is_stream(c) => {
                return crate::stream::serve(conn, Arc::clone(state), c.to_owned());
            }
            (_, command) => answer(state, command),
        },
    };
    let _ = peers::write_all(&conn, format!("{}\n", answer.replace('\n', "; ")).as_bytes(), WRITE);
}

fn answer(state: &RouterState, command: &str) -> String {
    match command {
        "reload" => crate::reload::reload(state),
        "stats" => stats(state).to_string(),
        "routes" => routes(state).to_string(),
        "neighbours" => neighbours(state).to_string(),
        "interfaces" => interfaces(state).to_string(),
        "ha" => state.ha.as_ref().map_or_else(
            || "error: no state sync: the config has no [ha]".to_owned(),
            |h| h.json().to_string(),
        ),
        other => crate::control_fw::answer(state.fw.as_ref(), other).or_else(|| crate::table::answer(state.slot.as_ref(), other)).unwrap_or_else(|| {
            format!("error: unknown command {other:?} (expected reload, stats, routes, neighbours, interfaces, ha, rules, states, kill-states, flush-states, table-show, table-test or table-change)")
        }),
    }
}

/// Counters of every worker (per physical interface: its queue), their sums per interface,
/// drop reasons and the slow path's counters.
pub(crate) fn stats(state: &RouterState) -> Value {
    let physical: Vec<&dataplane::PortInfo> =
        state.ports.iter().filter(|p| p.vlan.is_none()).collect();
    let snaps: Vec<WorkerSnapshot> = state
        .workers
        .iter()
        .map(|w| (w.snapshot(), w.port_snapshot(Duration::from_millis(200))))
        .collect();
    let mut total = dataplane::Counts::default();
    for (c, _) in &snaps {
        total.add(c);
    }
    let drops: serde_json::Map<String, Value> =
        total.drops_by_reason().map(|(r, n)| (r.name().to_owned(), json!(n))).collect();
    json!({
        "uptime": state.started.elapsed().as_secs_f64(),
        "totals": {"rx": total.rx, "forwarded": total.forwarded, "local": total.local, "slow_path": total.slow_path, "dropped": total.dropped()},
        "interfaces": interface_stats(state, &physical, &snaps),
        "workers": worker_stats(&physical, &snaps),
        "drops": drops,
        "slow_path": slow_path_stats(state, &snaps),
        "kernel_routes": state.kernel_routes.as_ref().map(|k| json!({
            "messages": k.messages.load(Relaxed), "applied": k.applied.load(Relaxed), "routes": k.routes.load(Relaxed), "pending": k.pending(),
            "dumps": k.dumps.load(Relaxed), "overruns": k.overruns.load(Relaxed),
            "skipped": k.skipped().map(|(n, v)| (n.to_owned(), json!(v))).collect::<serde_json::Map<_, _>>(),
        })),
        "ha": state.ha.as_ref().map(|h| h.json()),
    })
}

/// A worker's published counters and its per-port statistics.
type WorkerSnapshot = (dataplane::Counts, dataplane::counters::PortSnapshot);

/// One port's (or one queue's) packets, bytes and drops; the frames the worker found
/// malformed (`c`) count as receive errors, the rest of its drops as receive drops.
fn port_stats(p: &io::PortStats, c: Option<&dataplane::Counts>) -> Value {
    let errors = c.map_or(0, |c| {
        use dataplane::DropReason::*;
        [Truncated, BadVersion, BadLength, BadChecksum]
            .iter()
            .map(|&r| c.drops[r as usize])
            .sum::<u64>()
    });
    json!({
        "rx_packets": p.rx_packets, "rx_bytes": p.rx_bytes, "rx_errors": errors,
        "rx_drops": p.rx_dropped + c.map_or(0, |c| c.dropped()) - errors,
        "tx_packets": p.tx_packets, "tx_bytes": p.tx_bytes, "tx_drops": p.tx_dropped,
    })
}

/// Each worker's counters, with its queue of every physical interface.
fn worker_stats(physical: &[&dataplane::PortInfo], snaps: &[WorkerSnapshot]) -> Vec<Value> {
    snaps
        .iter()
        .enumerate()
        .map(|(w, (c, ps))| {
            let queues: Vec<Value> = physical
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let mut v = port_stats(&ps.ports.get(i).copied().unwrap_or_default(), ps.counts.get(i));
                    v["interface"] = json!(p.name);
                    v
                })
                .collect();
            json!({"worker": w, "rx": c.rx, "forwarded": c.forwarded, "local": c.local, "slow_path": c.slow_path,
                   "dropped": c.dropped(), "icmp_sent": ps.icmp_sent, "icmp_suppressed": ps.icmp_suppressed, "queues": queues})
        })
        .collect()
}

/// Each physical interface's counters: its queues summed over the workers.
fn interface_stats(
    state: &RouterState,
    physical: &[&dataplane::PortInfo],
    snaps: &[WorkerSnapshot],
) -> Vec<Value> {
    physical
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut sum = io::PortStats::default();
            let mut counts = dataplane::Counts::default();
            for (_, ps) in snaps {
                let s = ps.ports.get(i).copied().unwrap_or_default();
                sum.rx_packets += s.rx_packets;
                sum.rx_bytes += s.rx_bytes;
                sum.rx_dropped += s.rx_dropped;
                sum.tx_packets += s.tx_packets;
                sum.tx_bytes += s.tx_bytes;
                sum.tx_dropped += s.tx_dropped;
                if let Some(c) = ps.counts.get(i) {
                    counts.add(c);
                }
            }
            let mut v = port_stats(&sum, Some(&counts));
            v["name"] = json!(p.name);
            v["backend"] = json!(state.kinds.get(i));
            // Fail-closed AF_XDP: IP frames dropped in the kernel for want of a socket.
            v["no_socket_drops"] = json!(io::xdp::unsteered_drops(&p.name));
            v["fast_path"] = fast_path_stats(&p.name);
            let link = link_of(state, p);
            v["link_up"] = json!(link.map(|(up, _, _)| up));
            v["link_changes"] = json!(link.map(|(_, n, _)| n));
            v["rebuilds"] = json!(link.map(|(_, _, r)| r));
            v
        })
        .collect()
}

/// What the kernel fast path forwarded from and to interface `name` (null where it does not
/// run), and whether its outputs take redirected frames.
fn fast_path_stats(name: &str) -> Value {
    let Some(fast) = io::xdp::fastpath::FastPath::current() else { return Value::Null };
    let Ok(ifindex) = io::netdev::ifindex(name) else { return Value::Null };
    let Some(c) = fast.counts_of(ifindex) else { return Value::Null };
    json!({"rx_packets": c.rx_packets, "rx_bytes": c.rx_bytes, "tx_packets": c.tx_packets, "tx_bytes": c.tx_bytes, "handoff_lost": c.handoff_lost, "takes_redirects": fast.takes(ifindex)})
}

/// The slow path's counters, with the punts the workers dropped before it saw them.
fn slow_path_stats(state: &RouterState, snaps: &[WorkerSnapshot]) -> Value {
    let s = state.slow.lock().unwrap_or_else(|e| e.into_inner()).stats;
    let punt_drops = punt_drops(state, snaps);
    let queue_full: u64 =
        PuntClass::ALL.iter().map(|&c| punt_drops.get(c, PuntDrop::QueueFull)).sum();
    json!({
        "arp_replies": s.arp_replies, "arp_requests": s.arp_requests, "nd_adverts": s.nd_adverts, "nd_solicits": s.nd_solicits,
        "router_adverts": s.router_adverts, "router_solicits": s.router_solicits,
        "echo_replies": s.echo_replies, "icmp_errors": s.icmp_errors, "icmp_suppressed": s.icmp_suppressed,
        "filter_unreachables": s.filter_unreachables, "filter_resets": s.filter_resets, "filter_resets_suppressed": s.filter_resets_suppressed,
        "resolved": s.resolved, "resolve_failed": s.resolve_failed, "sent_after_resolution": s.sent_after_resolution,
        "neighbour_drops": s.neighbour_drops, "fragments": s.fragments, "to_host": s.to_host, "from_host": s.from_host,
        "local_drops": s.local_drops, "redirects_ignored": s.redirects_ignored, "router_adverts_ignored": s.router_adverts_ignored, "invalid": s.invalid, "punt_overflows": queue_full,
        "punt_drops": punt_drops.named().map(|(k, n)| (k, json!(n))).collect::<serde_json::Map<_, _>>(),
        "neighbour_evictions": s.neighbour_evictions, "neighbours_flushed": s.neighbours_flushed, "neighbour_table_full": s.neighbour_table_full, "fib_full": s.fib_full,
        "neighbour_rejects": s.rejects.iter().map(|(k, n)| (k.to_owned(), json!(n))).collect::<serde_json::Map<_, _>>(),
    })
}

/// The workers' punt drops by class and reason (ICMP errors are policed by the workers'
/// ICMP rate limit, before the copy).
fn punt_drops(state: &RouterState, snaps: &[WorkerSnapshot]) -> PuntDrops {
    let mut d = state.punt.drops();
    d.add(
        PuntClass::IcmpError,
        PuntDrop::Policed,
        snaps.iter().map(|(_, ps)| ps.icmp_suppressed).sum(),
    );
    d
}

fn port_name(state: &RouterState, port: u16) -> Value {
    json!(state.ports.get(port as usize).map(|p| p.name.as_str()))
}

fn routes(state: &RouterState) -> Value {
    let sp = state.slow.lock().unwrap_or_else(|e| e.into_inner());
    let fib = sp.fib();
    let list: Vec<Value> = fib
        .routes_by_source()
        .map(|(prefix, len, kind, source)| {
            let (k, via, port) = match kind {
                RouteKind::Local => ("local", vec![], None),
                RouteKind::Blackhole => ("blackhole", vec![], None),
                RouteKind::Unreachable => ("unreachable", vec![], None),
                RouteKind::Connected { port } => ("connected", vec![], Some(port)),
                RouteKind::Via { gateway, port } => ("via", vec![(gateway, port)], Some(port)),
                RouteKind::Multipath { group, .. } => ("multipath", fib.group_members(group), None),
                RouteKind::Neighbour { port } => ("neighbour", vec![], Some(port)),
                RouteKind::Broadcast { port } => ("broadcast", vec![], Some(port)),
            };
            let source = match source {
                RouteSource::Interface => "interface",
                RouteSource::Neighbour => "neighbour",
                RouteSource::Static => "static",
                RouteSource::Kernel => "kernel",
            };
            let paths: Vec<Value> = via.iter().map(|&(gw, p)| json!({"via": gw.to_string(), "interface": port_name(state, p)})).collect();
            json!({"prefix": format!("{prefix}/{len}"), "kind": k, "via": via.first().map(|v| v.0.to_string()),
                   "interface": port.map(|p| port_name(state, p)), "source": source, "paths": paths})
        })
        .collect();
    json!(list)
}

pub(crate) fn neighbours(state: &RouterState) -> Value {
    let sp = state.slow.lock().unwrap_or_else(|e| e.into_inner());
    let list: Vec<Value> = sp
        .neighbours()
        .into_iter()
        .map(|(ip, st, mac, port)| {
            json!({"address": ip.to_string(), "state": format!("{st:?}").to_lowercase(), "mac": mac.map(|m| m.to_string()),
                   "interface": port.map(|p| port_name(state, p))})
        })
        .collect();
    json!(list)
}

/// A physical port's link (running, changes since start, rebuilds on its interface created
/// again), as the link events thread knows it.
fn link_of(state: &RouterState, p: &dataplane::PortInfo) -> Option<(bool, u64, u64)> {
    let parent = match p.vlan {
        None => p.name.as_str(),
        Some(_) => state.ports.iter().find(|q| q.phys == p.phys && q.vlan.is_none())?.name.as_str(),
    };
    let l = state.links.of(parent)?;
    Some((l.running.load(Relaxed), l.changes.load(Relaxed), l.rebuilds.load(Relaxed)))
}

fn interfaces(state: &RouterState) -> Value {
    let list: Vec<Value> = state
        .ports
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let parent = p.vlan.map(|_| state.ports.iter().find(|q| q.phys == p.phys && q.vlan.is_none()).map(|q| q.name.clone()));
            let link = link_of(state, p);
            json!({
                "name": p.name, "mac": p.mac.to_string(), "mtu": p.mtu, "vlan": p.vlan, "parent": parent.flatten(),
                "addresses": p.addresses.iter().map(|(a, l)| format!("{a}/{l}")).collect::<Vec<_>>(),
                "tap": state.cfg.router.host_stack.then(|| state.cfg.interfaces[i].tap_name(i)),
                "backend": state.kinds.get(p.phys as usize),
                "link": link.map(|(up, _, _)| if up { "up" } else { "down" }),
                "link_changes": link.map(|(_, n, _)| n),
                "rebuilds": link.map(|(_, _, r)| r),
            })
        })
        .collect();
    json!(list)
}

#[cfg(test)]
mod tests {
    use super::*;
    use io::privilege::Peer;

    #[test]
    fn roles_by_peer_credentials() {
        let access = Access { admin_uid: 999, read_gid: Some(50) };
        let peer = |uid, gid, groups: &[u32]| Peer { pid: 1, uid, gid, groups: groups.to_vec() };
        assert_eq!(access.role(&peer(0, 0, &[])), Some(Role::Admin));
        assert_eq!(access.role(&peer(999, 999, &[])), Some(Role::Admin));
        assert_eq!(access.role(&peer(1000, 50, &[])), Some(Role::ReadOnly));
        assert_eq!(access.role(&peer(1000, 1000, &[7, 50])), Some(Role::ReadOnly));
        assert_eq!(access.role(&peer(1000, 1000, &[7])), None);
        assert_eq!(Access { admin_uid: 0, read_gid: None }.role(&peer(65534, 65534, &[50])), None);
    }
}
