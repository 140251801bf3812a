//! `router.metrics_listen`: the counters of a running `linerate run` as Prometheus text
//! (format 0.0.4) or OpenMetrics 1.0 (when the scraper's `Accept` asks for it), on
//! `GET /metrics`, as VPP's and grout's exporters do.
//!
//! A small HTTP/1.1 server of its own on std::net: one accepting thread, at most
//! [`MAX_CONNECTIONS`] connections served at once (each on a short-lived thread, with
//! deadlines for the request and the answer, [`crate::peers`]; more get 503 at once), one request per connection. It reads only what
//! the control socket reads (published counters, the workers' port statistics on request),
//! so a scrape costs the workers one publication of their port counters, never a lock.

use std::fmt::Write as _;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::Value;

use crate::peers::{self, Slots};
use crate::router_state::RouterState;

/// Connections served at once; more are answered 503 and closed.
pub const MAX_CONNECTIONS: usize = 4;
/// How long a client may take to send its request, or to read the answer, in all.
const IO_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the accepting thread waits for the request it will answer 503.
const BUSY_READ: Duration = Duration::from_millis(200);
/// Longest request head read.
const MAX_REQUEST: usize = 8192;

const PROMETHEUS_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
const OPENMETRICS_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The listening socket, bound before the router touches anything.
pub struct Server {
    listener: Option<TcpListener>,
    addr: SocketAddr,
}

impl Server {
    pub fn bind(addr: SocketAddr) -> Result<Server> {
        let listener = TcpListener::bind(addr)
            .with_context(|| format!("router.metrics_listen {addr}: cannot listen"))?;
        Ok(Server { listener: Some(listener), addr })
    }

    /// Serves `GET /metrics` on a thread of its own.
    pub fn serve(&mut self, state: Arc<RouterState>) -> Result<()> {
        let listener = self.listener.take().context("already serving")?;
        let slots = Slots::new(MAX_CONNECTIONS);
        std::thread::Builder::new()
            .name("lr-metrics".into())
            .spawn(move || {
                for conn in listener.incoming().flatten() {
                    accept(conn, &state, &slots);
                }
            })
            .context("starting the metrics thread")?;
        crate::log::info(format_args!("metrics on http://{}/metrics", self.addr));
        Ok(())
    }
}

/// Hands a connection to a thread of its own, or answers 503 if enough are being served.
fn accept(conn: TcpStream, state: &Arc<RouterState>, slots: &Slots) {
    let Some(slot) = slots.take() else {
        // The request is read first (briefly: this is the accepting thread): closing a
        // socket with unread data resets it, and the client would lose the answer.
        let _ = read_head(&conn, BUSY_READ);
        let _ = respond(&conn, "503 Service Unavailable", "text/plain", "busy\n");
        return;
    };
    let state = Arc::clone(state);
    // If the thread cannot start, the closure (and the slot) is dropped: counted back.
    let _ = std::thread::Builder::new().name("lr-metrics-conn".into()).spawn(move || {
        handle(&conn, &state);
        drop(slot);
    });
}

/// Reads the request head (up to a blank line, at most [`MAX_REQUEST`] bytes) within
/// `limit` in all.
fn read_head(conn: &TcpStream, limit: Duration) -> Option<String> {
    let ended =
        |h: &[u8]| h.windows(4).any(|w| w == b"\r\n\r\n") || h.windows(2).any(|w| w == b"\n\n");
    let head = peers::read_until(conn, MAX_REQUEST as u64, limit, ended).ok()?;
    ended(&head).then(|| String::from_utf8(head).ok()).flatten()
}

/// An answer to a request.
struct Response {
    status: &'static str,
    content_type: &'static str,
    body: String,
}

impl Response {
    fn new(status: &'static str, content_type: &'static str, body: impl Into<String>) -> Response {
        Response { status, content_type, body: body.into() }
    }
}

/// What to answer a request head.
fn route(head: &str, state: Option<&RouterState>) -> Response {
    let mut lines = head.lines();
    let request = lines.next().unwrap_or("");
    let mut parts = request.split(' ');
    let (method, target, version) =
        (parts.next().unwrap_or(""), parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    if !version.starts_with("HTTP/1.") {
        return Response::new("400 Bad Request", "text/plain", "bad request\n");
    }
    let path = target.split('?').next().unwrap_or("");
    match (method, path) {
        ("GET" | "HEAD", "/metrics") => {
            let openmetrics = lines.any(|l| {
                l.split_once(':').is_some_and(|(k, v)| {
                    k.eq_ignore_ascii_case("accept") && v.contains("application/openmetrics-text")
                })
            });
            let body = state.map_or_else(String::new, |s| render(s, openmetrics));
            Response::new(
                "200 OK",
                if openmetrics { OPENMETRICS_TYPE } else { PROMETHEUS_TYPE },
                body,
            )
        }
        ("GET" | "HEAD", _) => {
            Response::new("404 Not Found", "text/plain", "only /metrics is served here\n")
        }
        _ => Response::new("405 Method Not Allowed", "text/plain", "only GET\n"),
    }
}

fn handle(conn: &TcpStream, state: &RouterState) {
    let Some(head) = read_head(conn, IO_TIMEOUT) else {
        let _ = respond(conn, "400 Bad Request", "text/plain", "bad request\n");
        return;
    };
    let answer = route(&head, Some(state));
    let body = if head.starts_with("HEAD ") { String::new() } else { answer.body };
    let _ = respond(conn, answer.status, answer.content_type, &body);
}

fn respond(conn: &TcpStream, status: &str, ctype: &str, body: &str) -> std::io::Result<()> {
    let mut out = format!("HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len()).into_bytes();
    out.extend_from_slice(body.as_bytes());
    peers::write_all(conn, &out, IO_TIMEOUT)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Counter,
    Gauge,
}

/// Text in either format: the same samples, the metadata named as each format wants.
struct Writer {
    out: String,
    openmetrics: bool,
}

/// A label value with `\`, `"` and newlines escaped.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

impl Writer {
    /// Starts a family: `name` without `_total`, which counters' samples get.
    fn family(&mut self, name: &str, kind: Kind, help: &str) {
        let (ty, meta) = match kind {
            Kind::Counter if self.openmetrics => ("counter", name.to_owned()),
            Kind::Counter => ("counter", format!("{name}_total")),
            Kind::Gauge => ("gauge", name.to_owned()),
        };
        let _ = writeln!(self.out, "# HELP {meta} {help}\n# TYPE {meta} {ty}");
    }

    fn sample(&mut self, name: &str, kind: Kind, labels: &[(&str, &str)], value: f64) {
        let suffix = if kind == Kind::Counter { "_total" } else { "" };
        let labels: Vec<String> =
            labels.iter().map(|(k, v)| format!("{k}=\"{}\"", escape(v))).collect();
        let labels =
            if labels.is_empty() { String::new() } else { format!("{{{}}}", labels.join(",")) };
        let _ = writeln!(self.out, "{name}{suffix}{labels} {value}");
    }

    /// A family of one sample per `(labels, value)`.
    fn metric(&mut self, name: &str, kind: Kind, help: &str, samples: &[(Vec<(&str, &str)>, f64)]) {
        self.family(name, kind, help);
        for (labels, v) in samples {
            self.sample(name, kind, labels, *v);
        }
    }
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

fn text(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_owned)
}

/// Every metric, from the same documents the control socket serves.
pub fn render(state: &RouterState, openmetrics: bool) -> String {
    let stats = crate::control::stats(state);
    let mut w = Writer { out: String::new(), openmetrics };
    w.metric(
        "linerate_uptime_seconds",
        Kind::Gauge,
        "Seconds since linerate run started.",
        &[(vec![], num(&stats["uptime"]))],
    );
    interfaces(&mut w, &stats);
    workers(&mut w, state, &stats);
    slow_path(&mut w, state, &stats);
    if let Some(fw) = &state.fw {
        firewall(&mut w, state, fw);
    }
    if stats["ha"].is_object() {
        ha(&mut w, &stats["ha"]);
    }
    if openmetrics {
        w.out.push_str("# EOF\n");
    }
    w.out
}

/// State sync (`[ha]`): the link's datagrams and messages each way, what the tables made of
/// the peer's states, and whether this box's table is complete.
fn ha(w: &mut Writer, v: &Value) {
    let synced = if v["synced"] == true { 1.0 } else { 0.0 };
    w.metric(
        "linerate_ha_synced",
        Kind::Gauge,
        "1 once this box's state table is complete (the peer's bulk update ended, or none came).",
        &[(vec![], synced)],
    );
    for (key, name, help) in [
        ("datagrams_sent", "linerate_ha_datagrams_sent", "Sync datagrams sent to the peer."),
        ("messages_sent", "linerate_ha_messages_sent", "Sync messages sent to the peer."),
        (
            "datagrams_received",
            "linerate_ha_datagrams_received",
            "Sync datagrams taken from the peer.",
        ),
        (
            "refused",
            "linerate_ha_refused",
            "Sync datagrams refused: wrong source, tag, layout or a replayed sequence number.",
        ),
        (
            "states_refused",
            "linerate_ha_states_refused",
            "Peer states this box cannot represent (an unknown interface).",
        ),
        (
            "inserted",
            "linerate_ha_states_inserted",
            "Peer states inserted into the workers' tables.",
        ),
        (
            "updated",
            "linerate_ha_states_updated",
            "Peer updates applied to states the tables held.",
        ),
        (
            "stale",
            "linerate_ha_states_stale",
            "Peer updates older than the table's state (pfsync's stale updates).",
        ),
        ("removed", "linerate_ha_states_removed", "States removed because the peer removed them."),
        (
            "translations",
            "linerate_ha_translations_inserted",
            "NAT translations of peer states added to the workers' NAT tables.",
        ),
        (
            "translations_refused",
            "linerate_ha_translations_refused",
            "NAT translations of peer states not added: the NAT table full, or no route toward the side they face.",
        ),
        (
            "unknown_deletes",
            "linerate_ha_unknown_deletes",
            "The peer's deletes of a flow this box has no record of.",
        ),
        (
            "lost",
            "linerate_ha_journal_lost",
            "Times a worker's changes were lost and a bulk update sent instead.",
        ),
    ] {
        w.metric(name, Kind::Counter, help, &[(vec![], num(&v[key]))]);
    }
}

fn interfaces(w: &mut Writer, stats: &Value) {
    let ifaces = stats["interfaces"].as_array().cloned().unwrap_or_default();
    let names: Vec<(String, String)> =
        ifaces.iter().map(|i| (text(&i["name"]), text(&i["backend"]))).collect();
    for (key, name, help) in [
        (
            "rx_packets",
            "linerate_interface_rx_packets",
            "Frames received on the interface (all of linerate's queues).",
        ),
        ("rx_bytes", "linerate_interface_rx_bytes", "Bytes received on the interface."),
        (
            "rx_errors",
            "linerate_interface_rx_errors",
            "Frames received that were malformed (truncated, bad version, length or checksum).",
        ),
        (
            "rx_drops",
            "linerate_interface_rx_drops",
            "Frames received and not forwarded for any other reason (see linerate_drops_total), or dropped by the kernel's ring.",
        ),
        ("tx_packets", "linerate_interface_tx_packets", "Frames sent on the interface."),
        ("tx_bytes", "linerate_interface_tx_bytes", "Bytes sent on the interface."),
        ("tx_drops", "linerate_interface_tx_drops", "Frames the interface could not send."),
    ] {
        let samples: Vec<_> = ifaces
            .iter()
            .zip(&names)
            .map(|(i, (n, b))| {
                (vec![("interface", n.as_str()), ("backend", b.as_str())], num(&i[key]))
            })
            .collect();
        w.metric(name, Kind::Counter, help, &samples);
    }
    // The link events thread's view (`link_up` is null where it has none).
    let (mut up, mut changes, mut rebuilds) = (Vec::new(), Vec::new(), Vec::new());
    for (i, (n, _)) in ifaces.iter().zip(&names).filter(|(i, _)| i["link_up"].is_boolean()) {
        up.push((vec![("interface", n.as_str())], if i["link_up"] == true { 1.0 } else { 0.0 }));
        changes.push((vec![("interface", n.as_str())], num(&i["link_changes"])));
        rebuilds.push((vec![("interface", n.as_str())], num(&i["rebuilds"])));
    }
    if !up.is_empty() {
        w.metric(
            "linerate_interface_link_up",
            Kind::Gauge,
            "1 while the link is up with a carrier (netlink link events).",
            &up,
        );
        w.metric(
            "linerate_interface_link_changes",
            Kind::Counter,
            "Times the link went down or up since start.",
            &changes,
        );
        w.metric(
            "linerate_interface_rebuilds",
            Kind::Counter,
            "Times the port was rebuilt on its interface deleted and created again.",
            &rebuilds,
        );
    }
    // The kernel fast path's share (`router.fast_path`), on the interfaces that run it.
    let fast: Vec<_> =
        ifaces.iter().zip(&names).filter(|(i, _)| i["fast_path"].is_object()).collect();
    for (key, name, help) in [
        (
            "rx_packets",
            "linerate_fast_path_rx_packets",
            "Frames the kernel fast path took from the interface (not in linerate_interface_rx_packets).",
        ),
        (
            "tx_packets",
            "linerate_fast_path_tx_packets",
            "Frames the kernel fast path sent out of the interface (not in linerate_interface_tx_packets).",
        ),
        (
            "handoff_lost",
            "linerate_fast_path_handoff_lost",
            "AF_PACKET ports: frames the fast path's socket filter kept from the pipeline whose flow entry was gone when its tc program ran (dropped).",
        ),
    ] {
        let samples: Vec<_> = fast
            .iter()
            .map(|(i, (n, _))| (vec![("interface", n.as_str())], num(&i["fast_path"][key])))
            .collect();
        if !samples.is_empty() {
            w.metric(name, Kind::Counter, help, &samples);
        }
    }
}

fn workers(w: &mut Writer, state: &RouterState, stats: &Value) {
    let ws = stats["workers"].as_array().cloned().unwrap_or_default();
    let ids: Vec<String> = (0..ws.len()).map(|i| i.to_string()).collect();
    for (key, name, help) in [
        ("rx", "linerate_worker_rx_packets", "Packets the worker received."),
        ("forwarded", "linerate_worker_forwarded_packets", "Packets the worker forwarded."),
        (
            "local",
            "linerate_worker_local_packets",
            "Packets for the router itself (and ARP/NDP, broadcast, multicast).",
        ),
        (
            "slow_path",
            "linerate_worker_slow_path_packets",
            "Packets handed to the slow path to be sent later (resolution, fragmentation).",
        ),
        (
            "icmp_sent",
            "linerate_worker_icmp_errors",
            "ICMP errors the worker handed to the slow path.",
        ),
        (
            "icmp_suppressed",
            "linerate_worker_icmp_errors_suppressed",
            "ICMP errors not sent: the rate limit (icmp_errors_per_second).",
        ),
    ] {
        let samples: Vec<_> = ws
            .iter()
            .zip(&ids)
            .map(|(x, id)| (vec![("worker", id.as_str())], num(&x[key])))
            .collect();
        w.metric(name, Kind::Counter, help, &samples);
    }
    let names: Vec<String> =
        stats["interfaces"].as_array().into_iter().flatten().map(|i| text(&i["name"])).collect();
    let mut queues = Vec::new();
    for (x, id) in ws.iter().zip(&ids) {
        for (q, name) in x["queues"].as_array().into_iter().flatten().zip(&names) {
            queues.push((
                vec![("interface", name.as_str()), ("worker", id.as_str())],
                num(&q["rx_packets"]),
            ));
        }
    }
    w.metric(
        "linerate_queue_rx_packets",
        Kind::Counter,
        "Frames a worker received on its queue of an interface.",
        &queues,
    );
    w.family(
        "linerate_drops",
        Kind::Counter,
        "Packets dropped, by worker and reason (every drop is counted under exactly one reason).",
    );
    for (id, c) in state.workers.iter().enumerate() {
        let id = id.to_string();
        for (reason, n) in c.snapshot().drops_by_reason() {
            w.sample(
                "linerate_drops",
                Kind::Counter,
                &[("worker", &id), ("reason", reason.name())],
                n as f64,
            );
        }
    }
}

fn slow_path(w: &mut Writer, state: &RouterState, stats: &Value) {
    let s = &stats["slow_path"];
    let by = |label: &'static str,
              keys: &[(&'static str, &'static str)]|
     -> Vec<(Vec<(&'static str, &'static str)>, f64)> {
        keys.iter().map(|&(key, value)| (vec![(label, value)], num(&s[key]))).collect()
    };
    w.metric(
        "linerate_slow_path_sent",
        Kind::Counter,
        "Messages the slow path sent, by kind.",
        &by(
            "kind",
            &[
                ("arp_replies", "arp_reply"),
                ("arp_requests", "arp_request"),
                ("nd_adverts", "nd_advert"),
                ("nd_solicits", "nd_solicit"),
                ("echo_replies", "echo_reply"),
                ("icmp_errors", "icmp_error"),
                ("sent_after_resolution", "after_resolution"),
                ("fragments", "fragment"),
            ],
        ),
    );
    w.metric(
        "linerate_host_packets",
        Kind::Counter,
        "Packets between the wire and the kernel's host stack (the TAPs).",
        &by("direction", &[("to_host", "to_host"), ("from_host", "from_host")]),
    );
    w.metric(
        "linerate_slow_path_drops",
        Kind::Counter,
        "Packets the slow path dropped, by reason.",
        &by(
            "reason",
            &[
                ("local_drops", "local_unwanted"),
                ("redirects_ignored", "redirect_ignored"),
                ("router_adverts_ignored", "router_advert_ignored"),
                ("invalid", "invalid"),
                ("neighbour_drops", "neighbour_wait"),
                ("icmp_suppressed", "icmp_suppressed"),
            ],
        ),
    );
    w.metric(
        "linerate_neighbour_resolutions",
        Kind::Counter,
        "Neighbour resolutions (ARP/NDP), by result.",
        &by("result", &[("resolved", "resolved"), ("resolve_failed", "failed")]),
    );
    w.metric(
        "linerate_neighbour_evictions",
        Kind::Counter,
        "Neighbour entries removed to make room (router.max_neighbours).",
        &[(vec![], num(&s["neighbour_evictions"]))],
    );
    w.metric(
        "linerate_neighbours_flushed",
        Kind::Counter,
        "Neighbours forgotten because their port's link went down.",
        &[(vec![], num(&s["neighbours_flushed"]))],
    );
    w.metric(
        "linerate_neighbour_table_full",
        Kind::Counter,
        "New neighbours refused: the cache was full of entries that may not be evicted.",
        &[(vec![], num(&s["neighbour_table_full"]))],
    );
    let rejects: Vec<(String, f64)> = s["neighbour_rejects"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), num(v)))
        .collect();
    let samples: Vec<_> = rejects.iter().map(|(k, v)| (vec![("reason", k.as_str())], *v)).collect();
    w.metric(
        "linerate_neighbour_ignored",
        Kind::Counter,
        "ARP and NDP messages that changed nothing, by reason.",
        &samples,
    );
    let mut by_state: std::collections::BTreeMap<String, f64> =
        ["incomplete", "reachable", "stale", "probe", "failed", "permanent"]
            .iter()
            .map(|s| (s.to_string(), 0.0))
            .collect();
    for n in crate::control::neighbours(state).as_array().into_iter().flatten() {
        *by_state.entry(text(&n["state"])).or_default() += 1.0;
    }
    let samples: Vec<_> = by_state.iter().map(|(k, v)| (vec![("state", k.as_str())], *v)).collect();
    w.metric("linerate_neighbours", Kind::Gauge, "Neighbour cache entries, by state.", &samples);
    // The workers' punt stages: frames the slow path never saw.
    use dataplane::punt::{PuntClass, PuntDrop};
    let mut d = state.punt.drops();
    let policed: f64 =
        stats["workers"].as_array().into_iter().flatten().map(|x| num(&x["icmp_suppressed"])).sum();
    d.add(PuntClass::IcmpError, PuntDrop::Policed, policed as u64);
    w.family(
        "linerate_punt_drops",
        Kind::Counter,
        "Frames the workers meant to hand to the slow path and dropped, by class and reason.",
    );
    for c in PuntClass::ALL {
        for r in PuntDrop::ALL
            .into_iter()
            .filter(|&r| r != PuntDrop::NextHopLimit || c == PuntClass::Resolve)
        {
            w.sample(
                "linerate_punt_drops",
                Kind::Counter,
                &[("class", c.name()), ("reason", r.name())],
                d.get(c, r) as f64,
            );
        }
    }
}

fn firewall(w: &mut Writer, state: &RouterState, fw: &crate::control_fw::FwControl) {
    let rules = crate::control_fw::rules(fw);
    let rows = rules.as_array().cloned().unwrap_or_default();
    let labels: Vec<[String; 5]> = rows
        .iter()
        .map(|r| {
            let rule = r["number"].as_u64().map_or_else(|| "default".to_owned(), |n| n.to_string());
            let line = r["line"].as_u64().map_or_else(String::new, |n| n.to_string());
            let rid = r["ridentifier"].as_u64().map_or_else(String::new, |n| n.to_string());
            [rule, line, text(&r["action"]), r["label"].as_str().unwrap_or("").to_owned(), rid]
        })
        .collect();
    for (key, name, help) in [
        (
            "packets",
            "linerate_rule_packets",
            "Packets evaluated to this rule (or passed by its states), all workers; rule=\"default\": no rule matched.",
        ),
        ("bytes", "linerate_rule_bytes", "Bytes of those packets."),
        ("states", "linerate_rule_state_creations", "States the rule created."),
    ] {
        let samples: Vec<_> = rows
            .iter()
            .zip(&labels)
            .map(|(r, [rule, line, action, label, rid])| {
                let labels = vec![
                    ("rule", rule.as_str()),
                    ("line", line.as_str()),
                    ("action", action.as_str()),
                    ("label", label.as_str()),
                    ("ridentifier", rid.as_str()),
                ];
                (labels, num(&r[key]))
            })
            .collect();
        w.metric(name, Kind::Counter, help, &samples);
    }
    let limit = state.slot.as_ref().map_or(0, |s| s.current().rules.limit_states) as f64;
    let per_worker: Vec<(String, std::collections::HashMap<&str, u64>)> = fw
        .stats
        .iter()
        .enumerate()
        .map(|(i, s)| (i.to_string(), s.states().into_iter().collect()))
        .collect();
    let family = |w: &mut Writer,
                  name: &str,
                  kind: Kind,
                  help: &str,
                  label: Option<&str>,
                  keys: &[(&str, &str)]| {
        w.family(name, kind, help);
        for (id, c) in &per_worker {
            for &(key, value) in keys {
                let mut l = vec![("worker", id.as_str())];
                if let Some(label) = label {
                    l.push((label, value));
                }
                w.sample(name, kind, &l, c.get(key).copied().unwrap_or(0) as f64);
            }
        }
    };
    family(
        w,
        "linerate_state_table_states",
        Kind::Gauge,
        "States held by the worker's table (live, and expired not yet reclaimed).",
        None,
        &[("in_use", "")],
    );
    w.family(
        "linerate_state_table_limit",
        Kind::Gauge,
        "States the worker's table may hold (set limit states).",
    );
    for (id, _) in &per_worker {
        w.sample("linerate_state_table_limit", Kind::Gauge, &[("worker", id)], limit);
    }
    w.family(
        "linerate_nat_sessions",
        Kind::Gauge,
        "Translations the worker's NAT table holds (live, and expired not yet swept).",
    );
    for (i, s) in fw.stats.iter().enumerate() {
        let id = i.to_string();
        w.sample("linerate_nat_sessions", Kind::Gauge, &[("worker", &id)], s.nat_sessions() as f64);
    }
    family(w, "linerate_state_inserts", Kind::Counter, "States created.", None, &[("inserts", "")]);
    family(
        w,
        "linerate_state_insert_failures",
        Kind::Counter,
        "States not created, by reason.",
        Some("reason"),
        &[("insert_full", "full"), ("insert_exists", "exists")],
    );
    family(
        w,
        "linerate_state_lookups",
        Kind::Counter,
        "State lookups, by result.",
        Some("result"),
        &[("hits", "hit"), ("misses", "miss")],
    );
    family(
        w,
        "linerate_state_removals",
        Kind::Counter,
        "States removed, by cause.",
        Some("cause"),
        &[
            ("expired_lookup", "expired_lookup"),
            ("expired_sweep", "expired_sweep"),
            ("reused_closed", "port_reuse"),
            ("removed", "operator"),
            ("src_flushed", "overload_flush"),
        ],
    );
    family(
        w,
        "linerate_state_limit_refusals",
        Kind::Counter,
        "States refused, or connections removed as they became established, by the rule's limit (pf's limit counters).",
        Some("limit"),
        &[
            ("rule_max", "max"),
            ("src_limit_states", "max-src-states"),
            ("src_limit_nodes", "max-src-nodes"),
            ("src_limit_conn", "max-src-conn"),
            ("src_limit_conn_rate", "max-src-conn-rate"),
        ],
    );
    family(
        w,
        "linerate_state_synproxy",
        Kind::Counter,
        "`synproxy state` handshakes: SYN-ACKs the router answered SYNs with, SYNs it sent servers, connections handed over, packets dropped during a handshake.",
        Some("event"),
        &[
            ("synproxy_syn_acks", "syn_ack"),
            ("synproxy_syns", "syn"),
            ("synproxy_established", "established"),
            ("synproxy_dropped", "dropped"),
        ],
    );
    family(
        w,
        "linerate_state_overloads",
        Kind::Counter,
        "Sources refused by a rule with `overload <table>`, queued for the table.",
        None,
        &[("src_overload", "")],
    );
    family(
        w,
        "linerate_state_icmp_errors",
        Kind::Counter,
        "ICMP errors matched against states, by result.",
        Some("result"),
        &[
            ("icmp_error_hits", "hit"),
            ("icmp_error_misses", "miss"),
            ("icmp_error_bad_seq", "bad_seq"),
        ],
    );
    let scrub: Vec<(String, [(&str, u64); 7])> =
        fw.stats.iter().enumerate().map(|(i, s)| (i.to_string(), s.scrub())).collect();
    w.family(
        "linerate_scrub_packets",
        Kind::Counter,
        "Packets a scrub rule matched (in and out passes).",
    );
    for (id, c) in &scrub {
        w.sample("linerate_scrub_packets", Kind::Counter, &[("worker", id)], c[0].1 as f64);
    }
    w.family(
        "linerate_scrub_changes",
        Kind::Counter,
        "What scrub rules changed in packets, by change.",
    );
    for (id, c) in &scrub {
        for &(change, n) in &c[1..] {
            w.sample(
                "linerate_scrub_changes",
                Kind::Counter,
                &[("worker", id), ("change", change)],
                n as f64,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_formats_name_counters_as_they_should() {
        for om in [false, true] {
            let mut w = Writer { out: String::new(), openmetrics: om };
            w.metric(
                "linerate_x_packets",
                Kind::Counter,
                "X.",
                &[(vec![("reason", "a\"b\\c")], 3.0)],
            );
            w.metric("linerate_y", Kind::Gauge, "Y.", &[(vec![], 1.5)]);
            let want_family = if om {
                "# TYPE linerate_x_packets counter"
            } else {
                "# TYPE linerate_x_packets_total counter"
            };
            assert!(w.out.contains(want_family), "{}", w.out);
            assert!(
                w.out.contains("linerate_x_packets_total{reason=\"a\\\"b\\\\c\"} 3\n"),
                "{}",
                w.out
            );
            assert!(w.out.contains("# TYPE linerate_y gauge\nlinerate_y 1.5\n"), "{}", w.out);
        }
    }

    #[test]
    fn http_routes() {
        let get = |head: &str| {
            let answer = route(head, None);
            (answer.status, answer.content_type)
        };
        assert_eq!(get("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"), ("200 OK", PROMETHEUS_TYPE));
        assert_eq!(
            get(
                "GET /metrics HTTP/1.1\r\nAccept: application/openmetrics-text;version=1.0.0\r\n\r\n"
            ),
            ("200 OK", OPENMETRICS_TYPE)
        );
        assert_eq!(get("GET / HTTP/1.1\r\n\r\n").0, "404 Not Found");
        assert_eq!(get("POST /metrics HTTP/1.1\r\n\r\n").0, "405 Method Not Allowed");
        assert_eq!(get("garbage\r\n\r\n").0, "400 Bad Request");
    }
}
