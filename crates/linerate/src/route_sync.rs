//! `[router.kernel_routes]`: mirrors one of the kernel's routing tables into linerate's FIB,
//! as VPP's linux-cp plugin and grout do, so that a routing daemon on the host-stack TAPs
//! (BIRD, FRR) routes for linerate.
//!
//! Two threads ([`threads`]): `lr-routes` dumps the table, then reads `RTM_NEWROUTE` /
//! `RTM_DELROUTE` from the route multicast groups and hands them over as they came;
//! `lr-routes-fib` records them here, coalesced (a prefix changed ten times is applied once,
//! as it ends up), and applies the changed prefixes to the FIB in slices of [`SLICE`] under
//! the slow path's lock. Reading never waits for applying, so the socket's buffer does not
//! fill while the FIB catches up. The workers never wait: the FIB is updated in place (see
//! `dataplane::fib`). If the socket's buffer overflowed anyway (`ENOBUFS`, messages lost), the
//! table is dumped again and the FIB made to match it; prefixes keep their routes while the
//! dump is read.
//!
//! What the FIB takes of a kernel route ([`RouteSync::target`]): the lowest-metric route of a
//! prefix with TOS 0; unicast next hops on linerate's TAPs (the TAP of port X is port X),
//! equal cost whatever their weights; `blackhole` (dropped, counted `blackhole`),
//! `unreachable` and `prohibit` (ICMP destination unreachable, counted `no_route`). A route
//! that names a nexthop object (`RTA_NH_ID`, FRR's default) forwards by the object as the
//! kernel last described it (a group: its members, equal cost), and follows it when it
//! changes or goes ([`RouteSync::take_nexthop`]). The rest is left out and counted by reason,
//! and the first of each reason logged: next hops on other interfaces (a route with none on a
//! TAP is not mirrored), gateways of the other family, encapsulations, source-specific
//! routes, other route types.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use config::KernelRoutes;
use dataplane::fib::{FibControl, PrefixMap, PrefixSet, Target};
use io::netlink::nexthop::{self, NexthopKind, NexthopMessage};
use io::netlink::route::{self, NLM_F_APPEND, RouteMessage, RouteNextHop, RouteSocket};

mod small;
mod threads;

use small::Small;

pub use threads::start;

/// Prefixes applied per hold of the slow path's lock (the slow path waits at most this long).
const SLICE: usize = 4096;
/// The route socket's receive buffer, asked for (the kernel doubles it and charges 832 bytes
/// per queued IPv4 notification, 1280 per IPv6 one on Linux 6.18): room for about 400k
/// messages, the IPv6 routes of a full table deleted at once (330k/s here) while the reader
/// waits for a CPU. Memory is taken only while messages wait.
pub const RCVBUF: usize = 256 << 20;

/// Why a kernel route, or a next hop of one, is not in the FIB.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Skip {
    /// Its interface is not one of linerate's TAPs.
    UnknownInterface,
    /// A gateway of the other family, an encapsulation, a source prefix; a nexthop object
    /// that is one of these, or that the kernel did not describe.
    Unsupported,
    /// Not unicast, blackhole, unreachable or prohibit (local, broadcast, throw, ...).
    RouteType,
    /// A TOS other than 0.
    Tos,
    /// The FIB refused it (next-hop ids, multipath groups or LPM groups exhausted).
    FibFull,
}

impl Skip {
    const ALL: [Skip; 5] =
        [Skip::UnknownInterface, Skip::Unsupported, Skip::RouteType, Skip::Tos, Skip::FibFull];

    pub fn name(self) -> &'static str {
        match self {
            Skip::UnknownInterface => "unknown_interface",
            Skip::Unsupported => "unsupported",
            Skip::RouteType => "route_type",
            Skip::Tos => "tos",
            Skip::FibFull => "fib_full",
        }
    }
}

/// Counters, shared with the control socket (`show`'s `kernel_routes`).
#[derive(Debug, Default)]
pub struct SyncStats {
    /// Route messages read (dumps included).
    pub messages: AtomicU64,
    /// Prefixes applied to the FIB (after coalescing).
    pub applied: AtomicU64,
    /// Kernel routes in the FIB's view (installed or shadowed by another source); a prefix
    /// withdrawn counts until the withdrawal is applied (`pending` says how many wait).
    pub routes: AtomicU64,
    /// Changed prefixes not yet applied.
    dirty: AtomicU64,
    /// Messages read and handed over, not yet taken.
    queued: AtomicU64,
    /// Full dumps (1 at start, one more per overflow).
    pub dumps: AtomicU64,
    /// Receive buffer overflows: messages were lost, the table was dumped again.
    pub overruns: AtomicU64,
    skipped: [AtomicU64; 5],
}

impl SyncStats {
    /// Changes read from the kernel and not yet in the FIB (messages, or prefixes once
    /// coalesced).
    pub fn pending(&self) -> u64 {
        self.dirty.load(Relaxed) + self.queued.load(Relaxed)
    }

    /// (reason, count) for every reason a route or next hop was left out.
    pub fn skipped(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        Skip::ALL.iter().map(|&s| (s.name(), self.skipped[s as usize].load(Relaxed)))
    }
}

/// One kernel route of a prefix (the kernel may hold several, by metric).
#[derive(Debug, Clone, PartialEq, Eq)]
struct KernelRoute {
    metric: u32,
    kind: u8,
    hops: Small<RouteNextHop>,
    /// The nexthop object it forwards by, if any (then `hops` is only a fallback while the
    /// object is unknown).
    nh_id: Option<u32>,
    skip: Option<Skip>,
}

/// What a route forwards to, resolved.
enum Resolved {
    Hops(Vec<RouteNextHop>),
    Blackhole,
}

/// A prefix of the mirrored table.
type Key = (IpAddr, u8);

/// What the mirror holds for a prefix: its kernel routes, and whether they changed since the
/// FIB was last told. A prefix whose last route went stays, with none, until that is applied:
/// the flag here spares a set of changed prefixes, whose search per change (a cache miss in
/// a full table) cost as much as this map's own.
#[derive(Debug, Default)]
struct Prefix {
    list: Small<KernelRoute>,
    dirty: bool,
}

/// The mirrored table as the kernel last said, and the prefixes changed since the last apply.
pub struct RouteSync {
    cfg: KernelRoutes,
    /// TAP ifindex -> logical port.
    ports: HashMap<u32, u16>,
    routes: PrefixMap<Key, Prefix>,
    /// While a dump is read: the table as it was before it, for the prefixes the dump has not
    /// reached yet (so that they keep their routes until then).
    stale: PrefixMap<Key, Small<KernelRoute>>,
    /// Changed prefixes (flagged in `routes`), to take them from in slices; once each, but
    /// for those a dump's start moved to `stale`.
    dirty_list: Vec<Key>,
    /// When the last dump started, until the FIB has caught up with it.
    dump_started: Option<Instant>,
    dumping: bool,
    /// Nexthop objects by id, as the kernel last described them.
    nexthops: HashMap<u32, NexthopKind>,
    /// Object id -> the prefixes with a route that names it (a group's members reach their
    /// routes through the groups that hold them).
    users: HashMap<u32, PrefixSet<Key>>,
    /// The objects the dump being read has named so far.
    dumped_nexthops: HashSet<u32>,
    /// The message being taken, its list of next hops reused from one to the next.
    scratch: RouteMessage,
    pub stats: Arc<SyncStats>,
    logged: HashSet<Skip>,
}

impl RouteSync {
    pub fn new(cfg: KernelRoutes, ports: HashMap<u32, u16>) -> RouteSync {
        RouteSync {
            cfg,
            ports,
            routes: PrefixMap::default(),
            stale: PrefixMap::default(),
            dirty_list: Vec::new(),
            dump_started: None,
            dumping: false,
            nexthops: HashMap::new(),
            users: HashMap::new(),
            dumped_nexthops: HashSet::new(),
            scratch: RouteMessage::default(),
            stats: Arc::default(),
            logged: HashSet::new(),
        }
    }

    fn skip(&mut self, why: Skip, what: &dyn Fn() -> String) {
        self.stats.skipped[why as usize].fetch_add(1, Relaxed);
        if self.logged.insert(why) {
            eprintln!(
                "linerate: kernel routes: {} not mirrored ({}; counted, logged once)",
                what(),
                why.name()
            );
        }
    }

    /// Takes one netlink message (a route message of another table, or neither a route nor a
    /// nexthop message, is ignored).
    pub fn handle(&mut self, m: &[u8]) {
        if m.get(4..6).is_some_and(|t| nexthop::is_nexthop(u16::from_ne_bytes([t[0], t[1]]))) {
            if let Ok(n) = nexthop::parse_nexthop(m) {
                self.stats.messages.fetch_add(1, Relaxed);
                self.take_nexthop(n);
            }
            return;
        }
        let mut msg = std::mem::take(&mut self.scratch);
        if route::parse_route_into(m, &mut msg).is_ok()
            && msg.table == self.cfg.table
            && self.cfg.takes(msg.protocol)
        {
            self.stats.messages.fetch_add(1, Relaxed);
            self.take(&msg);
        }
        self.scratch = msg;
    }

    /// Publishes the table's size and what waits to be applied.
    fn publish(&self) {
        self.stats.routes.store(self.routes.len() as u64, Relaxed);
        self.stats.dirty.store(self.dirty_list.len() as u64, Relaxed);
    }

    fn take(&mut self, msg: &RouteMessage) {
        let key = (msg.dst, msg.dst_len);
        if msg.tos != 0 {
            self.skip(Skip::Tos, &|| format!("{}/{} tos {}", key.0, key.1, msg.tos));
            return;
        }
        let skip = match (msg.unsupported, msg.kind) {
            (Some(_), _) if msg.new => Some(Skip::Unsupported),
            (
                None,
                route::RTN_UNICAST
                | route::RTN_BLACKHOLE
                | route::RTN_UNREACHABLE
                | route::RTN_PROHIBIT,
            ) => None,
            _ if msg.new => Some(Skip::RouteType),
            _ => None,
        };
        if let Some(why) = skip {
            let reason = msg.unsupported.unwrap_or("its type");
            self.skip(why, &|| format!("{}/{} ({reason}, type {})", key.0, key.1, msg.kind));
        }
        // One hash of the prefix for the whole change (a full table's withdrawal is a million).
        let prefix = self.routes.entry(key).or_default();
        let list = &mut prefix.list;
        // Small: FRR names an object in every route, so these are per route there.
        let objects: Small<u32> = list.iter().filter_map(|r| r.nh_id).chain(msg.nh_id).collect();
        let at = list.iter().position(|r| r.metric == msg.metric);
        if msg.new {
            let r = KernelRoute {
                metric: msg.metric,
                kind: msg.kind,
                hops: Small::from(&msg.next_hops[..]),
                nh_id: msg.nh_id,
                skip,
            };
            match at {
                // IPv6 `ip route append`: one more next hop of an existing route.
                Some(i) if msg.flags & NLM_F_APPEND != 0 && msg.dst.is_ipv6() => {
                    for &h in r.hops.iter() {
                        if !list[i].hops.contains(&h) {
                            list[i].hops.push(h);
                        }
                    }
                }
                Some(i) => list[i] = r,
                None => list.push(r),
            }
        } else if let Some(i) = at {
            // IPv6 deletes one next hop of a multipath route at a time on some kernels: take
            // away the ones named; the route goes when none is left (or none was named).
            let object = list[i].nh_id.is_some();
            let hops = &mut list[i].hops;
            if object
                || msg.next_hops.is_empty()
                || hops.iter().all(|h| {
                    msg.next_hops.iter().any(|d| d.gateway == h.gateway && d.ifindex == h.ifindex)
                })
            {
                list.remove(i);
            } else {
                hops.retain(|h| {
                    !msg.next_hops.iter().any(|d| d.gateway == h.gateway && d.ifindex == h.ifindex)
                });
            }
        }
        let named: Small<u32> = if objects.is_empty() {
            Small::Empty
        } else {
            list.iter().filter_map(|r| r.nh_id).collect()
        };
        if !std::mem::replace(&mut prefix.dirty, true) {
            self.dirty_list.push(key);
        }
        if !objects.is_empty() {
            self.note_users(key, &objects, &named);
        }
        if self.dumping {
            self.stale.remove(&key);
        }
    }

    /// Records which of the objects `before` the routes of `key` name now (`after`).
    fn note_users(&mut self, key: Key, before: &[u32], after: &[u32]) {
        for id in before {
            if after.contains(id) {
                self.users.entry(*id).or_default().insert(key);
            } else if let Some(keys) = self.users.get_mut(id) {
                keys.remove(&key);
                if keys.is_empty() {
                    self.users.remove(id);
                }
            }
        }
    }

    /// Takes a nexthop object's change. The kernel tells the routes that use a changed
    /// object only with `net.ipv4.nexthop_compat_mode` 1 and only IPv4 ones; it deletes the
    /// routes that use a deleted object without an `RTM_DELROUTE` for IPv4 ones (and IPv6 ones
    /// in mode 0), and takes a deleted object out of the groups that hold it with an
    /// `RTM_NEWNEXTHOP` of the group alone. So the mirror does all of this itself.
    fn take_nexthop(&mut self, n: NexthopMessage) {
        if self.dumping {
            self.dumped_nexthops.insert(n.id);
        }
        if !n.new {
            self.remove_nexthop(n.id);
        } else if self.nexthops.get(&n.id) != Some(&n.kind) {
            self.nexthops.insert(n.id, n.kind);
            self.mark_users(n.id);
        }
    }

    /// The groups that hold object `id`.
    fn groups_holding(&self, id: u32) -> Vec<u32> {
        let holds =
            |k: &NexthopKind| matches!(k, NexthopKind::Group(m) if m.iter().any(|&(i, _)| i == id));
        self.nexthops.iter().filter(|(_, k)| holds(k)).map(|(&g, _)| g).collect()
    }

    /// Marks every prefix whose route forwards by object `id`, directly or through a group.
    fn mark_users(&mut self, id: u32) {
        let mut keys = Vec::new();
        for i in std::iter::once(id).chain(self.groups_holding(id)) {
            keys.extend(self.users.get(&i).into_iter().flatten().copied());
        }
        for key in keys {
            self.mark(key);
        }
    }

    /// Object `id` is gone, as the kernel does it: the routes that name it go, and so does
    /// it from the groups that held it (a group left empty goes too).
    fn remove_nexthop(&mut self, id: u32) {
        self.nexthops.remove(&id);
        for key in self.users.remove(&id).unwrap_or_default() {
            if let Some(p) = self.routes.get_mut(&key) {
                p.list.retain(|r| r.nh_id != Some(id));
            }
            if let Some(list) = self.stale.get_mut(&key) {
                list.retain(|r| r.nh_id != Some(id));
                if list.is_empty() {
                    self.stale.remove(&key);
                }
            }
            self.mark(key);
        }
        for g in self.groups_holding(id) {
            let Some(NexthopKind::Group(members)) = self.nexthops.get_mut(&g) else { continue };
            members.retain(|&(i, _)| i != id);
            if members.is_empty() {
                self.remove_nexthop(g);
            } else {
                self.mark_users(g);
            }
        }
    }

    /// What object `id` forwards to: a group's single-hop members (the kernel allows a
    /// blackhole only as a group's one member).
    fn resolve(&self, id: u32) -> Result<Resolved, String> {
        let one = |i: u32| match self.nexthops.get(&i) {
            Some(NexthopKind::One(h)) => Ok(Some(*h)),
            Some(NexthopKind::Blackhole) => Ok(None),
            Some(NexthopKind::Unsupported(why)) => Err(format!("nexthop object {i}: {why}")),
            Some(NexthopKind::Group(_)) => Err(format!("nexthop object {i}: a group in a group")),
            None => Err(format!("nexthop object {i} unknown")),
        };
        let members = match self.nexthops.get(&id) {
            Some(NexthopKind::Group(m)) => {
                m.iter().map(|&(i, _)| one(i)).collect::<Result<Vec<_>, _>>()?
            }
            _ => vec![one(id)?],
        };
        if members.iter().any(Option::is_none) {
            return Ok(Resolved::Blackhole);
        }
        Ok(Resolved::Hops(members.into_iter().flatten().collect()))
    }

    /// What the FIB should hold for a prefix now: its lowest-metric route, if linerate can
    /// forward by it.
    fn target(&mut self, key: Key) -> Option<Target> {
        let best = self
            .routes
            .get(&key)
            .map(|p| &p.list)
            .filter(|l| !l.is_empty())
            .or_else(|| self.stale.get(&key))?
            .iter()
            .min_by_key(|r| r.metric)?
            .clone();
        if best.skip.is_some() {
            return None;
        }
        let hops = match best.nh_id {
            // An object the kernel did not describe: the next hops it listed, if any.
            Some(id) if self.nexthops.contains_key(&id) || best.hops.is_empty() => {
                match self.resolve(id) {
                    Ok(Resolved::Hops(hops)) => Small::from(hops),
                    Ok(Resolved::Blackhole) => return Some(Target::Blackhole),
                    Err(why) => {
                        self.skip(Skip::Unsupported, &|| format!("{}/{} ({why})", key.0, key.1));
                        return None;
                    }
                }
            }
            _ => match best.kind {
                route::RTN_BLACKHOLE => return Some(Target::Blackhole),
                route::RTN_UNREACHABLE | route::RTN_PROHIBIT => return Some(Target::Unreachable),
                _ => best.hops,
            },
        };
        let mut via = Vec::new();
        let mut connected = None;
        for h in hops.iter() {
            if h.gateway.is_some_and(|g| g.is_ipv4() != key.0.is_ipv4()) {
                self.skip(Skip::Unsupported, &|| {
                    format!(
                        "next hop {:?} of {}/{} (a gateway of the other family)",
                        h.gateway, key.0, key.1
                    )
                });
                continue;
            }
            let Some(&port) = self.ports.get(&h.ifindex) else {
                self.skip(Skip::UnknownInterface, &|| {
                    format!(
                        "next hop {:?} (ifindex {}) of {}/{}",
                        h.gateway, h.ifindex, key.0, key.1
                    )
                });
                continue;
            };
            match h.gateway {
                Some(gw) => via.push((gw, port)),
                None => connected = connected.or(Some(port)),
            }
        }
        match (via.is_empty(), connected) {
            (false, _) => {
                via.truncate(dataplane::adjacency::MAX_PATHS);
                Some(Target::Via(via))
            }
            (true, Some(port)) => Some(Target::Connected(port)),
            (true, None) => None,
        }
    }

    fn mark(&mut self, key: Key) {
        let prefix = self.routes.entry(key).or_default();
        if !std::mem::replace(&mut prefix.dirty, true) {
            self.dirty_list.push(key);
        }
    }

    /// Whether changes wait to be applied.
    pub fn is_dirty(&self) -> bool {
        !self.dirty_list.is_empty()
    }

    /// Applies up to `max` changed prefixes to the FIB; returns how many.
    pub fn apply(&mut self, fib: &mut FibControl, max: usize) -> usize {
        // Taken from the end in place: a slice's own list would be a large allocation each.
        let start = self.dirty_list.len().saturating_sub(max);
        let n = self.dirty_list.len() - start;
        for i in start..self.dirty_list.len() {
            let key = self.dirty_list[i];
            if let Some(p) = self.routes.get_mut(&key) {
                p.dirty = false;
            }
            let res = match self.target(key) {
                Some(t) => fib.set_kernel(key.0, key.1, &t),
                None => fib.remove_kernel(key.0, key.1).map(drop),
            };
            if let Err(e) = res {
                self.skip(Skip::FibFull, &|| format!("{}/{}: {e}", key.0, key.1));
                let _ = fib.remove_kernel(key.0, key.1);
            }
            // A prefix left without routes goes once the FIB has been told.
            if let Entry::Occupied(e) = self.routes.entry(key)
                && e.get().list.is_empty()
            {
                e.remove();
            }
        }
        self.dirty_list.truncate(start);
        self.stats.applied.fetch_add(n as u64, Relaxed);
        self.publish();
        n
    }

    /// Starts reading a new dump: the table known so far is kept aside for the prefixes the
    /// dump has not reached yet.
    fn start_dump(&mut self, at: Instant) {
        // Flags go with the entries: the prefixes still listed are applied all the same.
        self.stale.extend(
            self.routes.drain().filter(|(_, p)| !p.list.is_empty()).map(|(key, p)| (key, p.list)),
        );
        self.dumped_nexthops.clear();
        self.dumping = true;
        self.dump_started = Some(at);
        self.stats.dumps.fetch_add(1, Relaxed);
    }

    /// The dump has been read: the prefixes and nexthop objects it did not name are gone.
    fn finish_dump(&mut self) {
        let gone: Vec<(Key, Vec<u32>)> = self
            .stale
            .drain()
            .map(|(key, list)| (key, list.iter().filter_map(|r| r.nh_id).collect()))
            .collect();
        for (key, objects) in gone {
            self.note_users(key, &objects, &[]);
            self.mark(key);
        }
        let vanished: Vec<u32> =
            self.nexthops.keys().filter(|id| !self.dumped_nexthops.contains(id)).copied().collect();
        for id in vanished {
            self.remove_nexthop(id);
        }
        self.dumping = false;
        self.publish();
    }

    /// Once the FIB holds the whole of the last dump: a line saying how long that took.
    fn dump_report(&mut self) -> Option<String> {
        if self.dumping || self.is_dirty() {
            return None;
        }
        let secs = self.dump_started.take()?.elapsed().as_secs_f64();
        let n = self.routes.len();
        Some(format!(
            "linerate: kernel routes: table {} dumped, {n} routes in the FIB in {secs:.2} s ({:.0} routes/s)",
            self.cfg.table,
            n as f64 / secs.max(1e-9)
        ))
    }
}

/// The TAPs' ifindexes and their logical ports (the TAP of port X is port X).
pub fn tap_ports(cfg: &config::Config) -> HashMap<u32, u16> {
    crate::host::tap_names(cfg)
        .iter()
        .enumerate()
        .filter_map(|(port, name)| io::netdev::ifindex(name).ok().map(|i| (i, port as u16)))
        .collect()
}

/// The route socket's receive buffer: [`RCVBUF`], or for fault injection (a test that must
/// see the buffer overflow and the table dumped again) the bytes in `LINERATE_ROUTE_RCVBUF`.
fn rcvbuf() -> usize {
    let Ok(v) = std::env::var("LINERATE_ROUTE_RCVBUF") else { return RCVBUF };
    v.parse().unwrap_or_else(|_| {
        crate::log::warn(format_args!(
            "LINERATE_ROUTE_RCVBUF={v:?} is not a number of bytes: the default {RCVBUF} is used"
        ));
        RCVBUF
    })
}

/// The mirror of `router.kernel_routes`, if configured: its state and its subscribed socket
/// (call once the TAPs exist, before the capabilities are dropped).
pub fn open(cfg: &config::Config) -> anyhow::Result<Option<(RouteSync, RouteSocket)>> {
    let Some(k) = &cfg.router.kernel_routes else { return Ok(None) };
    let sock = RouteSocket::open(rcvbuf()).map_err(|e| {
        anyhow::anyhow!(
            "{}: router.kernel_routes: opening a route netlink socket: {e}",
            cfg.path.display()
        )
    })?;
    let ports = tap_ports(cfg);
    let protocols = if k.protocols.is_empty() {
        "every protocol but kernel, ra and redirect".to_owned()
    } else {
        format!("protocols {:?}", k.protocols)
    };
    eprintln!(
        "linerate: kernel routes: mirroring table {} ({protocols}) through {} TAPs",
        k.table,
        ports.len()
    );
    Ok(Some((RouteSync::new(k.clone(), ports), sock)))
}

#[cfg(test)]
mod tests;
