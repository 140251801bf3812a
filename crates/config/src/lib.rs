//! linerate configuration: the router TOML file (`Config`) and the plain
//! route file used by `linerate bench --routes-file` (`routefile`).
//!
//! Every error is a [`ConfigError`] that names the file, line and column of
//! the offending value: `router.toml:12:9: interface "lr-b": mac ...`.
//! See `examples/router.toml` in the repository for a documented example.
#![forbid(unsafe_code)]

mod context;
mod file_routes;
mod ha;
mod kernel_routes;
mod log;
mod mac;
mod prefix;
mod punt;
mod ra;
mod route_checks;
pub mod routefile;
mod socket_scan;
mod span;
mod validate;

use std::fmt;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;

pub use ha::HaSettings;
pub use kernel_routes::{KernelRoutes, PROTO_KERNEL, PROTO_LINERATE};
pub use log::LogSettings;
pub use mac::{MacAddr, MacParseError};
pub use prefix::{IfAddr, Prefix, PrefixError};
pub use punt::{PuntClassLimits, PuntSettings};
pub use ra::RouterAdvertSettings;
pub use socket_scan::{control_socket, control_socket_in};
pub use span::{LineIndex, line_col};

/// A validated router configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub router: RouterSettings,
    pub interfaces: Vec<Interface>,
    pub routes: Vec<Route>,
    pub neighbours: Vec<Neighbour>,
    /// The optional `[firewall]` table.
    pub firewall: Option<FirewallSettings>,
    /// The `[log]` table (defaults when absent).
    pub log: LogSettings,
    /// The `[ha]` table: state synchronisation with a peer box (none when absent).
    pub ha: Option<HaSettings>,
    /// The file it was loaded from (as given to `load`/`parse`).
    pub path: PathBuf,
}

/// The `[router]` table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouterSettings {
    /// Worker threads, 1..=256 (default 1).
    pub workers: usize,
    /// Packets per batch, 32..=256 (default 64).
    pub batch_size: usize,
    /// Unix control socket path (default `/run/linerate.sock`).
    pub control_socket: PathBuf,
    /// Host-stack passthrough: one TAP per interface carrying what is addressed to the
    /// router to the kernel, and what the kernel sends back to the wire (default true).
    pub host_stack: bool,
    /// ICMP errors the router sends per second, all interfaces together (OpenBSD's
    /// `net.inet.icmp.errppslimit`; default 100, 0 sends none).
    pub icmp_errors_per_second: u32,
    /// Workers sleep in `poll(2)` after a moment without traffic instead of spinning
    /// (default true).
    pub sleep_when_idle: bool,
    /// Run the kernel's receive work for the interfaces (NAPI) in kernel threads pinned to
    /// the workers' CPUs below the workers' priority, so an overload is dropped in the
    /// driver's ring instead of starving the workers (default true; needs
    /// `sleep_when_idle`).
    pub napi_threads: bool,
    /// Neighbour cache entries (ARP and NDP together), 16..=1,048,576 (default 65,536). Each
    /// resolved one holds a host route and a next-hop id; when the cache is full the least
    /// recently used failed, incomplete, then stale entry makes room.
    pub max_neighbours: usize,
    /// `[router.punt]`: per-class limits on the frames the workers hand to the slow path.
    pub punt: PuntSettings,
    /// Keep the kernel from forwarding while linerate runs and after it stops or crashes:
    /// `run` sets the namespace's `net.ipv4.ip_forward` and `net.ipv6.conf.all.forwarding`
    /// to 0 and leaves them so (default false).
    pub fail_closed: bool,
    /// Switch to this user (and its primary group) once set up, keeping only the
    /// capabilities the running router needs (default: stay as started).
    pub user: Option<String>,
    /// `route_file`: static routes, one per line ([`routefile`]'s format), resolved against
    /// the config file's directory; loaded with the config and appended to
    /// [`Config::routes`].
    pub route_file: Option<PathBuf>,
    /// Members of this group may use the read-only commands of the control socket
    /// (`show`, `top`); the socket file gets this group and mode 0660 (default: none, 0600).
    pub control_group: Option<String>,
    /// Serve the counters as Prometheus / OpenMetrics text on `GET /metrics` at this TCP
    /// address (default: off).
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// `[router.kernel_routes]`: the kernel routing table mirrored into the FIB (default:
    /// none).
    pub kernel_routes: Option<KernelRoutes>,
    /// Offload the flows the pipeline decided to the XDP fast path in the kernel, on AF_XDP
    /// interfaces (default true; docs/router.md, "The fast path in the kernel").
    pub fast_path: bool,
    /// Flow entries of the fast path for each address family (each direction of a flow is
    /// one), 1024..=16,777,216 (default 262,144): the least recently used entry makes room.
    pub fast_path_flows: u32,
    /// Rebuild a port in place when its interface is deleted and created again under the same
    /// name (a re-plugged NIC, a recreated veth): `run` then keeps, in its permitted set, the
    /// capabilities that opening a port needs. Off: `run` stops for its service manager to
    /// restart it (default true; docs/router.md, "Link events").
    pub rebuild_ports: bool,
}

impl Default for RouterSettings {
    fn default() -> Self {
        RouterSettings {
            workers: 1,
            batch_size: 64,
            control_socket: PathBuf::from("/run/linerate.sock"),
            host_stack: true,
            icmp_errors_per_second: 100,
            sleep_when_idle: true,
            napi_threads: true,
            max_neighbours: 65_536,
            punt: PuntSettings::default(),
            fail_closed: false,
            user: None,
            control_group: None,
            metrics_listen: None,
            route_file: None,
            kernel_routes: None,
            rebuild_ports: true,
            fast_path: true,
            fast_path_flows: 1 << 18,
        }
    }
}

/// The `[firewall]` table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FirewallSettings {
    /// The pf-syntax rule file, already resolved against the config file's directory.
    pub rules: PathBuf,
}

/// The largest IP MTU: a frame buffer holds 1984 bytes (`io::pool::MAX_FRAME_LEN`), an
/// Ethernet header and an 802.1Q tag take 18 of them.
pub const MAX_MTU: u16 = 1966;

/// One `[[interface]]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interface {
    pub name: String,
    /// `None`: read the address from the kernel at run time.
    pub mac: Option<MacAddr>,
    pub addresses: Vec<IfAddr>,
    /// 68..=[`MAX_MTU`] (default 1500).
    pub mtu: u16,
    pub backend: Backend,
    /// Where AF_XDP's steering program runs (default auto: native if the driver can).
    pub xdp_mode: XdpMode,
    /// An 802.1Q sub-interface: frames tagged `tag` on `parent`. The parent is another
    /// (untagged) interface of the config; backend and MAC are the parent's.
    pub vlan: Option<Vlan>,
    /// Name of the host-stack TAP (must start with `lr`); `None`: derived from the name.
    pub tap: Option<String>,
    /// `ra`: send IPv6 router advertisements on this link (RFC 4861 6.2); `None`: none.
    pub ra: Option<RouterAdvertSettings>,
}

/// The 802.1Q side of a sub-interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vlan {
    pub parent: String,
    /// VLAN id, 1..=4094.
    pub tag: u16,
}

/// Where the AF_XDP steering program runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum XdpMode {
    /// Native if the driver supports it, else generic.
    #[default]
    Auto,
    /// In the driver.
    Native,
    /// On the kernel's generic (skb) path, after RPS: on veth this keeps the XDP work on
    /// the receiving CPU instead of the sender's.
    Generic,
}

impl FromStr for XdpMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(XdpMode::Auto),
            "native" => Ok(XdpMode::Native),
            "generic" => Ok(XdpMode::Generic),
            _ => Err(format!("unknown xdp_mode {s:?} (expected auto, native or generic)")),
        }
    }
}

impl Interface {
    /// The host-stack TAP's name: `tap` if given, else `lrh` + the interface name (cut to
    /// Linux's 15 bytes; `index` keeps cut names unique).
    pub fn tap_name(&self, index: usize) -> String {
        if let Some(t) = &self.tap {
            return t.clone();
        }
        let full = format!("lrh{}", self.name.trim_start_matches("lr"));
        if full.len() <= 15 {
            full
        } else {
            let tail = format!("-{index}");
            format!("{}{tail}", &full[..15 - tail.len()])
        }
    }

    /// True if `ip` is inside one of this interface's address prefixes.
    pub fn is_on_link(&self, ip: &IpAddr) -> bool {
        self.addresses.iter().any(|a| a.contains(ip))
    }
}

/// One `[[route]]`. `interface` is always resolved (given or inferred).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    pub prefix: Prefix,
    /// `None`: directly connected on `interface`.
    pub via: Option<IpAddr>,
    pub interface: String,
    /// Further equal-cost next hops, with their interfaces, when `via` is a list
    /// (`via = ["10.0.0.1", "10.0.1.1"]`: `via` holds the first).
    pub also_via: Vec<(IpAddr, String)>,
}

impl Route {
    /// Every next hop (gateway, interface): none for a directly connected route.
    pub fn next_hops(&self) -> Vec<(IpAddr, &str)> {
        let first = self.via.map(|v| (v, self.interface.as_str()));
        first.into_iter().chain(self.also_via.iter().map(|(a, i)| (*a, i.as_str()))).collect()
    }
}

/// One static `[[neighbour]]`. `interface` is always resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Neighbour {
    pub address: IpAddr,
    pub mac: MacAddr,
    pub interface: String,
}

/// Packet I/O backend of an interface.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Backend {
    /// AF_XDP if available, else AF_PACKET.
    #[default]
    Auto,
    AfXdp,
    AfPacket,
    /// In-process queues (tests and benchmarks).
    Memory,
}

impl Backend {
    pub const ALL: [Backend; 4] =
        [Backend::Auto, Backend::AfXdp, Backend::AfPacket, Backend::Memory];

    /// The config spelling: `auto`, `af_xdp`, `af_packet`, `memory`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Backend::Auto => "auto",
            Backend::AfXdp => "af_xdp",
            Backend::AfPacket => "af_packet",
            Backend::Memory => "memory",
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Backend {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Backend::ALL.into_iter().find(|b| b.as_str() == s).ok_or_else(|| {
            format!("unknown backend {s:?} (expected auto, af_xdp, af_packet or memory)")
        })
    }
}

impl Config {
    /// Reads and validates `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        // (The route file, if any, is read by `parse`.)
        let text = read(path)?;
        Config::parse(&text, path)
    }

    /// Validates `text`; `path` is used only in error messages and
    /// stored in `Config::path`.
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        validate::build(text, path)
    }

    pub fn interface(&self, name: &str) -> Option<&Interface> {
        self.interfaces.iter().find(|i| i.name == name)
    }
}

/// A located configuration error. `line`/`column` are 1-based; `line == 0`
/// means the error has no position (e.g. the file could not be read).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub path: PathBuf,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl ConfigError {
    /// An error at byte `offset` of `text`.
    pub fn at(path: &Path, text: &str, offset: usize, message: impl Into<String>) -> ConfigError {
        let (line, column) = span::line_col(text, offset);
        ConfigError { path: path.to_owned(), line, column, message: message.into() }
    }

    /// An error without a position.
    pub fn whole_file(path: &Path, message: impl Into<String>) -> ConfigError {
        ConfigError { path: path.to_owned(), line: 0, column: 0, message: message.into() }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.path.display(), self.message)
        } else {
            write!(f, "{}:{}:{}: {}", self.path.display(), self.line, self.column, self.message)
        }
    }
}

impl std::error::Error for ConfigError {}

/// The most bytes a configuration or route file may hold: a full Internet table (a million
/// IPv4 and 200,000 IPv6 routes) is about 50 MiB.
const MAX_FILE_BYTES: u64 = 1 << 30;

/// The text of the regular file at `path`: a device (`/dev/zero`), a pipe or a runaway file
/// fails at once rather than filling memory or blocking a reload.
pub(crate) fn read(path: &Path) -> Result<String, ConfigError> {
    let cannot = |why: String| ConfigError::whole_file(path, format!("cannot read: {why}"));
    let file = std::fs::File::open(path).map_err(|e| cannot(e.to_string()))?;
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Err(cannot("not a regular file".into()));
    }
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::io::Read::take(file, MAX_FILE_BYTES + 1), &mut text)
        .map_err(|e| cannot(e.to_string()))?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(cannot(format!("larger than {} GiB", MAX_FILE_BYTES >> 30)));
    }
    Ok(text)
}
#[cfg(test)]
mod tests;
