//! TOML deserialization into span-carrying raw structs, then semantic
//! validation into the public types. The first error wins.

use std::collections::HashMap;
use std::net::IpAddr;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use crate::context::{Ctx, Origin};
use crate::route_checks::{
    Seen, broadcast_of, interface_route_problem, on_link, own_address, via_problem,
};
use crate::{
    Backend, Config, ConfigError, FirewallSettings, IfAddr, Interface, MacAddr, Neighbour, Prefix,
    Route, RouterSettings, Vlan, XdpMode,
};

type S<T> = Spanned<T>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    router: Option<RawRouter>,
    #[serde(default)]
    interface: Vec<RawInterface>,
    #[serde(default)]
    route: Vec<RawRoute>,
    #[serde(default)]
    neighbour: Vec<RawNeighbour>,
    firewall: Option<RawFirewall>,
    log: Option<crate::log::RawLog>,
    ha: Option<crate::ha::RawHa>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFirewall {
    rules: S<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRouter {
    workers: Option<S<i64>>,
    batch_size: Option<S<i64>>,
    control_socket: Option<S<String>>,
    host_stack: Option<bool>,
    icmp_errors_per_second: Option<S<i64>>,
    sleep_when_idle: Option<S<bool>>,
    napi_threads: Option<S<bool>>,
    max_neighbours: Option<S<i64>>,
    punt: Option<crate::punt::RawPunt>,
    fail_closed: Option<bool>,
    user: Option<S<String>>,
    control_group: Option<S<String>>,
    metrics_listen: Option<S<String>>,
    route_file: Option<S<String>>,
    kernel_routes: Option<S<crate::kernel_routes::RawKernelRoutes>>,
    fast_path: Option<bool>,
    fast_path_flows: Option<S<i64>>,
    rebuild_ports: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawInterface {
    name: S<String>,
    mac: Option<S<String>>,
    #[serde(default)]
    addresses: Vec<S<String>>,
    mtu: Option<S<i64>>,
    backend: Option<S<String>>,
    xdp_mode: Option<S<String>>,
    queues: Option<S<i64>>,
    parent: Option<S<String>>,
    vlan: Option<S<i64>>,
    tap: Option<S<String>>,
    ra: Option<S<crate::ra::RawRa>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRoute {
    prefix: S<String>,
    /// One address, or a list of them (equal-cost multipath).
    via: Option<S<toml::Value>>,
    interface: Option<S<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNeighbour {
    address: S<String>,
    mac: S<String>,
    interface: Option<S<String>>,
}

/// Longest Unix socket path (`sun_path` is 108 bytes incl. the NUL).
pub(crate) const MAX_SOCKET_PATH: usize = 107;

pub(crate) fn build(text: &str, path: &Path) -> Result<Config, ConfigError> {
    let cx = Ctx::new(text, path);
    let raw: RawFile = toml::from_str(text).map_err(|e| {
        // toml messages may span several lines ("invalid table header\nexpected ..."): keep one.
        let msg = e.message().trim().split('\n').map(str::trim).collect::<Vec<_>>().join("; ");
        match e.span() {
            Some(s) => cx.err(s, msg),
            None => ConfigError::whole_file(path, msg),
        }
    })?;
    let router = router(&cx, raw.router)?;
    let interfaces = interfaces(&cx, raw.interface)?;
    let mut seen = Seen::default();
    let mut routes = routes(&cx, &interfaces, raw.route, &mut seen)?;
    if let Some(file) = &router.route_file {
        crate::file_routes::add(&cx, &interfaces, file, &mut seen, &mut routes)?;
    }
    let neighbours = neighbours(&cx, &interfaces, raw.neighbour)?;
    let firewall = raw.firewall.map(|f| firewall(&cx, f)).transpose()?;
    let log = crate::log::settings(&cx, path, raw.log)?;
    let ha = crate::ha::settings(&cx, path, raw.ha, firewall.is_some())?;
    Ok(Config { router, interfaces, routes, neighbours, firewall, log, ha, path: path.to_owned() })
}

/// `[firewall]`: the rule file, relative to the config file's directory (so a config and its
/// rules can move together). The rule file itself is parsed by `fw`, at check and run time.
fn firewall(cx: &Ctx, raw: RawFirewall) -> Result<FirewallSettings, ConfigError> {
    let p = raw.rules.get_ref();
    if p.is_empty() || p.contains('\0') {
        return Err(
            cx.err(raw.rules.span(), "firewall: rules must be a non-empty path without NUL bytes")
        );
    }
    let dir = cx.path().parent().unwrap_or(Path::new(""));
    Ok(FirewallSettings { rules: dir.join(p) })
}

fn router(cx: &Ctx, raw: Option<RawRouter>) -> Result<RouterSettings, ConfigError> {
    let d = RouterSettings::default();
    let Some(r) = raw else { return Ok(d) };
    let workers = cx.int(&r.workers, "router: ", "workers", 1, 256, d.workers as i64)? as usize;
    let batch_size =
        cx.int(&r.batch_size, "router: ", "batch_size", 32, 256, d.batch_size as i64)? as usize;
    let control_socket = control_socket(cx, r.control_socket)?.unwrap_or(d.control_socket);
    let icmp_errors_per_second = cx.int(
        &r.icmp_errors_per_second,
        "router: ",
        "icmp_errors_per_second",
        0,
        1_000_000,
        i64::from(d.icmp_errors_per_second),
    )? as u32;
    let sleep_when_idle = r.sleep_when_idle.as_ref().map_or(d.sleep_when_idle, |b| *b.get_ref());
    let napi_threads =
        r.napi_threads.as_ref().map_or(d.napi_threads && sleep_when_idle, |b| *b.get_ref());
    if let (Some(n), false) = (&r.napi_threads, sleep_when_idle)
        && *n.get_ref()
    {
        return Err(cx.err(n.span(), "router: napi_threads = true needs sleep_when_idle = true: the receive threads run only while the workers sleep"));
    }
    let max_neighbours = cx.int(
        &r.max_neighbours,
        "router: ",
        "max_neighbours",
        16,
        1 << 20,
        d.max_neighbours as i64,
    )? as usize;
    let route_file = route_file(cx, r.route_file.as_ref())?;
    let fast_path_flows = cx.int(
        &r.fast_path_flows,
        "router: ",
        "fast_path_flows",
        1024,
        1 << 24,
        i64::from(d.fast_path_flows),
    )? as u32;
    let user = account_name(cx, r.user.as_ref(), "user")?;
    let control_group = account_name(cx, r.control_group.as_ref(), "control_group")?;
    let metrics_listen = metrics_listen(cx, r.metrics_listen.as_ref())?;
    Ok(RouterSettings {
        workers,
        batch_size,
        control_socket,
        host_stack: r.host_stack.unwrap_or(d.host_stack),
        icmp_errors_per_second,
        sleep_when_idle,
        napi_threads,
        max_neighbours,
        punt: crate::punt::settings(cx, r.punt)?,
        fail_closed: r.fail_closed.unwrap_or(d.fail_closed),
        user,
        control_group,
        metrics_listen,
        route_file,
        kernel_routes: crate::kernel_routes::settings(
            cx,
            r.kernel_routes,
            r.host_stack.unwrap_or(d.host_stack),
        )?,
        fast_path: r.fast_path.unwrap_or(d.fast_path),
        fast_path_flows,
        rebuild_ports: r.rebuild_ports.unwrap_or(d.rebuild_ports),
    })
}

/// `router.control_socket`: a path short enough for a Unix socket address.
fn control_socket(cx: &Ctx, v: Option<S<String>>) -> Result<Option<PathBuf>, ConfigError> {
    let Some(s) = v else { return Ok(None) };
    let p = s.get_ref();
    if p.is_empty() || p.contains('\0') {
        return Err(
            cx.err(s.span(), "router: control_socket must be a non-empty path without NUL bytes")
        );
    }
    if p.len() > MAX_SOCKET_PATH {
        return Err(cx.err(s.span(), format!(
            "router: control_socket path is {} bytes long; Unix socket paths are limited to {MAX_SOCKET_PATH} bytes",
            p.len()
        )));
    }
    Ok(Some(PathBuf::from(p)))
}

/// `router.route_file`, relative to the config file's directory.
fn route_file(cx: &Ctx, v: Option<&S<String>>) -> Result<Option<PathBuf>, ConfigError> {
    match v {
        None => Ok(None),
        Some(f) if f.get_ref().is_empty() || f.get_ref().contains('\0') => {
            Err(cx.err(f.span(), "router: route_file must be a non-empty path without NUL bytes"))
        }
        Some(f) => Ok(Some(cx.path().parent().unwrap_or(Path::new("")).join(f.get_ref()))),
    }
}

/// `router.metrics_listen`: an address and port.
fn metrics_listen(
    cx: &Ctx,
    v: Option<&S<String>>,
) -> Result<Option<std::net::SocketAddr>, ConfigError> {
    let Some(s) = v else { return Ok(None) };
    let addr = s.get_ref().parse().map_err(|_| {
        cx.err(s.span(), format!("router: metrics_listen {:?} is not an address and port (e.g. \"127.0.0.1:9111\" or \"[::1]:9111\")", s.get_ref()))
    })?;
    Ok(Some(addr))
}

/// A user or group name as useradd(8) accepts it: 1..=32 bytes of letters, digits, `_`, `-`
/// and `.`, not starting with `-` (resolved against the system's accounts when `run` starts).
fn account_name(cx: &Ctx, v: Option<&S<String>>, key: &str) -> Result<Option<String>, ConfigError> {
    let Some(v) = v else { return Ok(None) };
    let n = v.get_ref();
    let ok = (1..=32).contains(&n.len())
        && !n.starts_with('-')
        && n.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b));
    if !ok {
        return Err(cx.err(v.span(), format!("router: {key} {n:?} is not a user or group name (1..=32 letters, digits, '_', '-', '.'; not starting with '-')")));
    }
    Ok(Some(n.clone()))
}

/// Linux `dev_valid_name`: 1..=15 bytes, not `.`/`..`, no `/`, `:` or whitespace.
fn name_problem(n: &str) -> Option<&'static str> {
    if n.is_empty() {
        Some("is empty")
    } else if n.len() > 15 {
        Some("is longer than 15 bytes")
    } else if n == "." || n == ".." {
        Some("is reserved")
    } else if n.contains(['/', ':', '\0']) || n.chars().any(char::is_whitespace) {
        Some("must not contain '/', ':', NUL or whitespace")
    } else {
        None
    }
}

fn mac(cx: &Ctx, owner: &str, s: &S<String>) -> Result<MacAddr, ConfigError> {
    let m: MacAddr = s.get_ref().parse().map_err(|e| {
        cx.err(s.span(), format!("{owner}: mac {:?} is not a MAC address ({e})", s.get_ref()))
    })?;
    if !m.is_unicast() {
        let kind = if m.is_zero() {
            "an all-zero"
        } else if m.is_broadcast() {
            "a broadcast"
        } else {
            "a multicast"
        };
        return Err(cx.err(
            s.span(),
            format!("{owner}: mac {m} is {kind} address, not a unicast station address"),
        ));
    }
    Ok(m)
}

fn ip(cx: &Ctx, owner: &str, key: &str, s: &S<String>) -> Result<IpAddr, ConfigError> {
    s.get_ref().parse().map_err(|_| {
        cx.err(s.span(), format!("{owner}: {key} {:?} is not an IPv4 or IPv6 address", s.get_ref()))
    })
}

/// An interface as read, before sub-interfaces are matched with their parents.
struct ReadInterface {
    iface: Interface,
    /// A sub-interface's `parent` and `vlan` tag.
    parent: Option<(S<String>, u16)>,
    /// Where its name is, for errors found after all are read.
    name_span: Range<usize>,
}

/// What the interfaces read so far claimed: names (and their lines) and addresses.
#[derive(Default)]
struct Claimed {
    names: HashMap<String, usize>,
    addresses: HashMap<IpAddr, String>,
    /// The on-link prefixes so far, by interface: a prefix is on one link.
    networks: HashMap<Prefix, String>,
}

fn interfaces(cx: &Ctx, raw: Vec<RawInterface>) -> Result<Vec<Interface>, ConfigError> {
    let mut claimed = Claimed::default();
    let mut read = Vec::with_capacity(raw.len());
    for r in raw {
        read.push(interface(cx, r, &mut claimed)?);
    }
    let name_spans: Vec<Range<usize>> = read.iter().map(|r| r.name_span.clone()).collect();
    let done = resolve_parents(cx, read)?;
    distinct_taps(cx, &done, &name_spans)?;
    Ok(done)
}

/// One `[[interface]]` on its own (its `parent` not yet looked up).
fn interface(
    cx: &Ctx,
    r: RawInterface,
    claimed: &mut Claimed,
) -> Result<ReadInterface, ConfigError> {
    let name = r.name.get_ref().clone();
    if let Some(p) = name_problem(&name) {
        return Err(cx.err(r.name.span(), format!(
            "interface name {name:?} {p} (Linux names are 1..=15 bytes, no '/', ':' or whitespace)"
        )));
    }
    if let Some(first) = claimed.names.get(&name) {
        return Err(cx.err(
            r.name.span(),
            format!("duplicate interface {name:?} (first defined at line {first})"),
        ));
    }
    claimed.names.insert(name.clone(), cx.line(&r.name.span()));
    let owner = format!("interface {name:?}");
    let mac = r.mac.as_ref().map(|m| mac(cx, &owner, m)).transpose()?;
    let addresses = addresses(cx, &owner, &name, &r.addresses, claimed)?;
    let mtu = cx.int(&r.mtu, &format!("{owner}: "), "mtu", 68, 9000, 1500)? as u16;
    if let Some(m) = r.mtu.as_ref().filter(|_| mtu > crate::MAX_MTU) {
        return Err(cx.err(m.span(), format!(
            "{owner}: mtu {mtu} is more than linerate's frame buffers hold: at most {} (jumbo frames are not supported; longer frames are dropped as frame_too_long)",
            crate::MAX_MTU
        )));
    }
    if let Some(q) = &r.queues {
        return Err(cx.err(q.span(), format!(
            "{owner}: queues is no longer a setting: each worker reads one queue (router.workers); set the interface's queue count with `ethtool -L {} combined N`",
            r.name.get_ref()
        )));
    }
    let backend = parsed(cx, &owner, r.backend.as_ref(), Backend::Auto)?;
    let xdp_mode = parsed(cx, &owner, r.xdp_mode.as_ref(), XdpMode::Auto)?;
    let parent = parent_and_tag(cx, &owner, &r)?;
    let tap = tap(cx, &owner, r.tap.as_ref())?;
    let ra =
        r.ra.as_ref().map(|ra| crate::ra::settings(cx, &owner, ra, &addresses, mtu)).transpose()?;
    let iface = Interface { name, mac, addresses, mtu, backend, xdp_mode, vlan: None, tap, ra };
    Ok(ReadInterface { iface, parent, name_span: r.name.span() })
}

/// A keyword setting (`default` when absent); its error is the value's own, after `owner`.
fn parsed<T: std::str::FromStr>(
    cx: &Ctx,
    owner: &str,
    v: Option<&S<String>>,
    default: T,
) -> Result<T, ConfigError>
where
    T::Err: std::fmt::Display,
{
    match v {
        None => Ok(default),
        Some(v) => v.get_ref().parse().map_err(|e| cx.err(v.span(), format!("{owner}: {e}"))),
    }
}

/// An interface's addresses: unicast, each on one interface only (`claimed`: the addresses
/// of the interfaces before it).
fn addresses(
    cx: &Ctx,
    owner: &str,
    name: &str,
    raw: &[S<String>],
    claimed: &mut Claimed,
) -> Result<Vec<IfAddr>, ConfigError> {
    let mut addresses = Vec::with_capacity(raw.len());
    for a in raw {
        let ifa: IfAddr = a.get_ref().parse().map_err(|e| {
            cx.err(
                a.span(),
                format!("{owner}: address {:?} is not a valid CIDR address: {e}", a.get_ref()),
            )
        })?;
        if ifa.addr.is_unspecified() || ifa.addr.is_multicast() {
            return Err(
                cx.err(a.span(), format!("{owner}: address {} is not a unicast address", ifa.addr))
            );
        }
        if let Some(why) = not_a_router_address(&ifa) {
            return Err(cx.err(a.span(), format!("{owner}: address {ifa} {why}")));
        }
        if let Some(other) = claimed.addresses.get(&ifa.addr) {
            return Err(cx.err(
                a.span(),
                format!("{owner}: address {} is already assigned to interface {other:?}", ifa.addr),
            ));
        }
        // The same prefix on two links: one of its routes would replace the other's (IPv6
        // link-local prefixes are on every link).
        let link_local = matches!(ifa.addr, IpAddr::V6(v) if v.is_unicast_link_local());
        match claimed.networks.get(&ifa.network()) {
            Some(other) if other != name && !link_local => {
                return Err(cx.err(a.span(), format!("{owner}: address {ifa}: its prefix {} is interface {other:?}'s already (a prefix is on one link)", ifa.network())));
            }
            _ => {}
        }
        claimed.addresses.insert(ifa.addr, name.to_owned());
        claimed.networks.insert(ifa.network(), name.to_owned());
        addresses.push(ifa);
    }
    Ok(addresses)
}

/// Why `a` cannot be a router's address though it is unicast: a loopback address (the
/// classify pass drops 127.0.0.0/8 and ::1 as martians), or the broadcast address of its
/// own IPv4 prefix (/30 and wider).
fn not_a_router_address(a: &IfAddr) -> Option<&'static str> {
    match a.addr {
        IpAddr::V4(v) if v.is_loopback() => Some("is a loopback address (martian on the wire)"),
        IpAddr::V6(v) if v.is_loopback() => Some("is the loopback address (martian on the wire)"),
        _ if a.broadcast() == Some(a.addr) => Some("is the broadcast address of its prefix"),
        _ => None,
    }
}

/// A sub-interface's `parent` and `vlan` tag (both or neither); what it inherits from its
/// parent may not be set.
fn parent_and_tag(
    cx: &Ctx,
    owner: &str,
    r: &RawInterface,
) -> Result<Option<(S<String>, u16)>, ConfigError> {
    match (&r.parent, &r.vlan) {
        (None, None) => Ok(None),
        (Some(p), None) => {
            Err(cx.err(p.span(), format!("{owner}: parent needs a vlan tag (vlan = 1..=4094)")))
        }
        (None, Some(v)) => Err(
            cx.err(v.span(), format!("{owner}: vlan needs a parent interface (parent = \"NAME\")"))
        ),
        (Some(p), Some(_)) => {
            let tag = cx.int(&r.vlan, &format!("{owner}: "), "vlan", 1, 4094, 1)? as u16;
            let inherited = [
                ("mac", r.mac.as_ref().map(|m| m.span())),
                ("backend", r.backend.as_ref().map(|b| b.span())),
                ("xdp_mode", r.xdp_mode.as_ref().map(|b| b.span())),
            ];
            if let Some((key, Some(span))) = inherited.into_iter().find(|(_, s)| s.is_some()) {
                return Err(cx.err(
                    span,
                    format!(
                        "{owner}: {key} cannot be set on a VLAN sub-interface (it is its parent's)"
                    ),
                ));
            }
            Ok(Some((p.clone(), tag)))
        }
    }
}

/// `tap`: the name of the interface's host-stack TAP, one linerate may create.
fn tap(cx: &Ctx, owner: &str, t: Option<&S<String>>) -> Result<Option<String>, ConfigError> {
    let Some(t) = t else { return Ok(None) };
    let n = t.get_ref();
    if let Some(p) = name_problem(n) {
        return Err(cx.err(t.span(), format!("{owner}: tap name {n:?} {p}")));
    }
    if !n.starts_with("lr") {
        return Err(cx.err(t.span(), format!("{owner}: tap name {n:?} must start with \"lr\" (every interface linerate creates does)")));
    }
    Ok(Some(n.clone()))
}

/// Sub-interfaces matched with their parents, once every interface is known (so the order
/// in the file is free): a parent is a configured physical interface, and each of its tags
/// is used once.
fn resolve_parents(cx: &Ctx, read: Vec<ReadInterface>) -> Result<Vec<Interface>, ConfigError> {
    let mut tags: HashMap<(String, u16), String> = HashMap::new();
    let snapshot: Vec<(String, bool)> =
        read.iter().map(|r| (r.iface.name.clone(), r.parent.is_some())).collect();
    let mut done = Vec::with_capacity(read.len());
    for ReadInterface { mut iface, parent: vlan, .. } in read {
        if let Some((parent, tag)) = vlan {
            let owner = format!("interface {:?}", iface.name);
            match snapshot.iter().find(|(n, _)| n == parent.get_ref()) {
                None => {
                    return Err(cx.err(
                        parent.span(),
                        format!(
                            "{owner}: parent {:?} is not a configured interface",
                            parent.get_ref()
                        ),
                    ));
                }
                Some((_, true)) => {
                    return Err(cx.err(parent.span(), format!("{owner}: parent {:?} is itself a VLAN sub-interface (stacked tags are not supported)", parent.get_ref())));
                }
                Some(_) => {}
            }
            if let Some(other) = tags.insert((parent.get_ref().clone(), tag), iface.name.clone()) {
                return Err(cx.err(
                    parent.span(),
                    format!(
                        "{owner}: vlan {tag} on {:?} is already interface {other:?}",
                        parent.get_ref()
                    ),
                ));
            }
            iface.vlan = Some(Vlan { parent: parent.into_inner(), tag });
        }
        done.push(iface);
    }
    Ok(done)
}

/// No two interfaces share a host-stack TAP name, and no TAP takes an interface's name.
fn distinct_taps(
    cx: &Ctx,
    ifaces: &[Interface],
    name_spans: &[Range<usize>],
) -> Result<(), ConfigError> {
    let mut taps: HashMap<String, String> = HashMap::new();
    for (i, iface) in ifaces.iter().enumerate() {
        let t = iface.tap_name(i);
        if let Some(other) = ifaces.iter().find(|o| o.name == t) {
            return Err(cx.err(name_spans[i].clone(), format!(
                "interface {:?}'s host-stack TAP would be named {t:?}, as interface {:?} is: set `tap = \"lr...\"` to another name", iface.name, other.name
            )));
        }
        if let Some(other) = taps.insert(t.clone(), iface.name.clone()) {
            return Err(cx.err(name_spans[i].clone(), format!(
                "interfaces {other:?} and {:?} would both use host-stack TAP {t:?}: set `tap = \"lr...\"` on one of them", iface.name
            )));
        }
    }
    Ok(())
}

fn known_interface(
    cx: &Ctx,
    ifaces: &[Interface],
    owner: &str,
    s: &S<String>,
) -> Result<String, ConfigError> {
    let n = s.get_ref();
    if ifaces.iter().any(|i| i.name == *n) {
        return Ok(n.clone());
    }
    let known: Vec<String> = ifaces.iter().map(|i| format!("{:?}", i.name)).collect();
    let known = if known.is_empty() {
        "none are defined".to_owned()
    } else {
        format!("defined: {}", known.join(", "))
    };
    Err(cx.err(s.span(), format!("{owner}: interface {n:?} is not defined ({known})")))
}

fn routes(
    cx: &Ctx,
    ifaces: &[Interface],
    raw: Vec<RawRoute>,
    seen: &mut Seen,
) -> Result<Vec<Route>, ConfigError> {
    let mut out = Vec::with_capacity(raw.len());
    for r in raw {
        let ps = &r.prefix;
        let prefix: Prefix = ps.get_ref().parse().map_err(|e| {
            cx.err(ps.span(), format!("route: prefix {:?} is invalid: {e}", ps.get_ref()))
        })?;
        let owner = format!("route {prefix}");
        if let Some(first) = seen.get(&prefix) {
            let first = cx.line(&match *first {
                Origin::Config(offset) => offset..offset,
                Origin::File(_) => {
                    unreachable!("the route file is read after the [[route]] tables")
                }
            });
            return Err(
                cx.err(ps.span(), format!("duplicate {owner} (first defined at line {first})"))
            );
        }
        if let Some(problem) = interface_route_problem(ifaces, &prefix) {
            return Err(cx.err(ps.span(), format!("{owner} {problem}")));
        }
        seen.insert(prefix, Origin::Config(ps.span().start));
        let vias = match &r.via {
            None => Vec::new(),
            Some(v) => next_hops(cx, ifaces, &owner, prefix, v)?,
        };
        let span = r.via.as_ref().map_or(ps.span(), |v| v.span());
        let interface_of = |a: &IpAddr| -> Result<String, ConfigError> {
            match &r.interface {
                Some(i) => known_interface(cx, ifaces, &owner, i),
                None => match on_link(ifaces, a) {
                    Some(i) => Ok(i.name.clone()),
                    None => Err(cx.err(span.clone(), format!(
                        "{owner}: via {a} is not on-link on any interface (no interface address prefix contains it); \
                         add `interface = \"...\"` to the route"
                    ))),
                },
            }
        };
        let interface = match (&r.interface, vias.first()) {
            (Some(i), _) => known_interface(cx, ifaces, &owner, i)?,
            (None, Some(a)) => interface_of(a)?,
            (None, None) => return Err(cx.err(ps.span(), format!(
                "{owner} has neither `via` nor `interface`; a directly connected route needs `interface`"
            ))),
        };
        let mut also_via = Vec::new();
        for a in vias.iter().skip(1) {
            also_via.push((*a, interface_of(a)?));
        }
        out.push(Route { prefix, via: vias.first().copied(), interface, also_via });
    }
    Ok(out)
}

/// Most next hops of one route (the FIB's multipath group size).
const MAX_PATHS: usize = 16;

/// A route's `via`: one address or a list of distinct ones (equal-cost multipath), each a
/// unicast address of the prefix's family that is not the router's own.
fn next_hops(
    cx: &Ctx,
    ifaces: &[Interface],
    owner: &str,
    prefix: Prefix,
    v: &S<toml::Value>,
) -> Result<Vec<IpAddr>, ConfigError> {
    let texts: Vec<&str> = match v.get_ref() {
        toml::Value::String(s) => vec![s.as_str()],
        toml::Value::Array(list) if !list.is_empty() && list.len() <= MAX_PATHS => {
            let mut out = Vec::new();
            for x in list {
                let Some(s) = x.as_str() else {
                    return Err(cx.err(
                        v.span(),
                        format!(
                            "{owner}: via must be an address or a list of addresses, found {x}"
                        ),
                    ));
                };
                out.push(s);
            }
            out
        }
        toml::Value::Array(list) => {
            return Err(cx.err(
                v.span(),
                format!("{owner}: via lists {} next hops (1..={MAX_PATHS})", list.len()),
            ));
        }
        other => {
            return Err(cx.err(
                v.span(),
                format!("{owner}: via must be an address or a list of addresses, found {other}"),
            ));
        }
    };
    let mut out: Vec<IpAddr> = Vec::new();
    for t in texts {
        let a: IpAddr = t.parse().map_err(|_| {
            cx.err(v.span(), format!("{owner}: via {t:?} is not an IPv4 or IPv6 address"))
        })?;
        if let Some(problem) = via_problem(ifaces, &prefix, &a) {
            return Err(cx.err(v.span(), format!("{owner}: {problem}")));
        }
        if out.contains(&a) {
            return Err(cx.err(v.span(), format!("{owner}: via lists {a} twice")));
        }
        out.push(a);
    }
    Ok(out)
}

fn neighbours(
    cx: &Ctx,
    ifaces: &[Interface],
    raw: Vec<RawNeighbour>,
) -> Result<Vec<Neighbour>, ConfigError> {
    let mut out = Vec::with_capacity(raw.len());
    let mut seen: HashMap<(IpAddr, String), usize> = HashMap::new();
    for r in raw {
        let address = ip(cx, "neighbour", "address", &r.address)?;
        let owner = format!("neighbour {address}");
        if address.is_unspecified() || address.is_multicast() {
            return Err(
                cx.err(r.address.span(), format!("{owner}: address is not a unicast address"))
            );
        }
        if let Some((i, net)) = broadcast_of(ifaces, &address) {
            return Err(cx.err(
                r.address.span(),
                format!(
                    "{owner}: address is the broadcast address of {net} on interface {:?}",
                    i.name
                ),
            ));
        }
        if let Some(i) = own_address(ifaces, &address) {
            return Err(cx.err(
                r.address.span(),
                format!("{owner}: address is this router's own address on interface {:?}", i.name),
            ));
        }
        let mac = mac(cx, &owner, &r.mac)?;
        let interface = match &r.interface {
            Some(i) => known_interface(cx, ifaces, &owner, i)?,
            None => match on_link(ifaces, &address) {
                Some(i) => i.name.clone(),
                None => return Err(cx.err(r.address.span(), format!(
                    "{owner}: address is not on-link on any interface (no interface address prefix contains it); \
                     add `interface = \"...\"`"
                ))),
            },
        };
        let key = (address, interface.clone());
        if let Some(first) = seen.get(&key) {
            return Err(cx.err(
                r.address.span(),
                format!(
                    "duplicate {owner} on interface {interface:?} (first defined at line {first})"
                ),
            ));
        }
        seen.insert(key, cx.line(&r.address.span()));
        out.push(Neighbour { address, mac, interface });
    }
    Ok(out)
}
