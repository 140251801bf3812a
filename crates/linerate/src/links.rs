//! Following the ports' links over netlink (issue 46): a thread (`lr-links`) that logs each
//! port's link going down or up (administratively, or its carrier) and counts it, for `show
//! interfaces` and the metrics. A port that goes down has its routes withdrawn from the FIB
//! (`dataplane::fib`, `ports_down.rs`), so that other paths and less specific routes take
//! over, until it comes back; its learned neighbours are flushed and its host-stack TAP
//! loses its carrier meanwhile. A port whose interface is deleted is down until an interface
//! of its name comes back (a re-plugged NIC, a veth a container runtime recreated, a driver
//! reloaded: a new ifindex); the port is then rebuilt on it in place ([`crate::rebuild`]).
//! Where it cannot be (`router.rebuild_ports = false`, a failure) the router stops with an error naming the port, for the service manager to restart it
//! (`dist/linerate.service`: `Restart=on-failure`): its sockets, XDP and tc programs and
//! NAPI threads were bound to the old interface and would forward nothing, silently.
//!
//! The same thread follows the addresses the host stack adds to and removes from the TAPs
//! (issue 43): a VRRP daemon on a TAP (keepalived) adds its virtual address when it becomes
//! master and removes it when it stops being one; the router then answers ARP and NDP for
//! it and takes the packets to it on that port, or gives it up (`docs/ha.md`, "Addresses
//! with keepalived"). The config's addresses stay whatever the host stack does.

use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use anyhow::{Context, Result};
use dataplane::slowpath::SlowPath;
use io::netlink::addr::{AddrEvent, parse_addr};
use io::netlink::link::{LinkEvent, LinkSocket, parse_link};

/// How long the thread waits for an event before it looks at the stop flag again.
const WAIT_MS: i32 = 200;

/// One port's link as the thread last heard of it.
#[derive(Debug)]
pub struct PortLink {
    pub name: String,
    /// The interface's index: a new one when it is created again.
    pub ifindex: AtomicU32,
    /// Up with a carrier.
    pub running: AtomicBool,
    /// Times it went down or up since start.
    pub changes: AtomicU64,
    /// Times the port was rebuilt on its interface created again.
    pub rebuilds: AtomicU64,
}

/// The ports' links, shared with the control socket.
#[derive(Debug, Default)]
pub struct Links {
    pub ports: Vec<PortLink>,
    /// Ports are rebuilt on their interfaces created again (`router.rebuild_ports`).
    pub rebuild: bool,
}

/// What a link event calls for.
#[derive(Debug, PartialEq, Eq)]
pub enum Change {
    /// Port `port` (index in [`Links::ports`]) went down (`false`) or came back.
    Running(usize, bool),
    /// Port `port`'s interface was deleted; it was running until then.
    Gone { port: usize, was_running: bool },
    /// Port `port`'s interface was created again as `ifindex` (it was `old`) and set up,
    /// `running` (with a carrier) or not.
    Recreated { port: usize, old: u32, ifindex: u32, running: bool },
    /// The router must stop, for this reason.
    Stop(String),
}

impl Links {
    /// The physical ports `(name, ifindex)`, running at start.
    pub fn new(ports: &[(String, u32)], rebuild: bool) -> Links {
        let ports = ports
            .iter()
            .map(|(name, ifindex)| PortLink {
                name: name.clone(),
                ifindex: AtomicU32::new(*ifindex),
                running: AtomicBool::new(true),
                changes: AtomicU64::new(0),
                rebuilds: AtomicU64::new(0),
            })
            .collect();
        Links { ports, rebuild }
    }

    pub fn of(&self, name: &str) -> Option<&PortLink> {
        self.ports.iter().find(|p| p.name == name)
    }

    /// Takes one event; returns what it calls for, if anything.
    pub fn apply(&self, e: &LinkEvent) -> Option<Change> {
        let (i, p) = self.ports.iter().enumerate().find(|(_, p)| p.name == e.name)?;
        let ifindex = p.ifindex.load(Ordering::Relaxed);
        if e.ifindex != ifindex {
            if e.deleted {
                return None; // an older interface of that name, already replaced
            }
            if !self.rebuild {
                return Some(Change::Stop(format!(
                    "interface {} was created again (ifindex {ifindex} -> {}): linerate's sockets and programs are bound to the old one, and router.rebuild_ports is off, so it rebuilds no port in place; stopping so that the service manager restarts it on the new one",
                    e.name, e.ifindex
                )));
            }
            // Rebuilt once it is up (created down, then set up): its NAPI instances and the
            // slow path's socket need it up.
            if !e.up {
                return None;
            }
            p.ifindex.store(e.ifindex, Ordering::Relaxed);
            if p.running.swap(false, Ordering::Relaxed) {
                p.changes.fetch_add(1, Ordering::Relaxed);
            }
            return Some(Change::Recreated {
                port: i,
                old: ifindex,
                ifindex: e.ifindex,
                running: e.running(),
            });
        }
        if e.deleted {
            if !self.rebuild {
                return Some(Change::Stop(format!(
                    "interface {} (ifindex {}) was deleted: linerate cannot forward on it, and router.rebuild_ports is off, so it rebuilds no port in place; stopping so that the service manager restarts it when the interface is back",
                    e.name, e.ifindex
                )));
            }
            let was_running = p.running.swap(false, Ordering::Relaxed);
            if was_running {
                p.changes.fetch_add(1, Ordering::Relaxed);
            }
            return Some(Change::Gone { port: i, was_running });
        }
        if p.running.swap(e.running(), Ordering::Relaxed) == e.running() {
            return None;
        }
        p.changes.fetch_add(1, Ordering::Relaxed);
        Some(Change::Running(i, e.running()))
    }
}

/// What the thread acts on: the ports' links, and the FIB through the slow path's lock.
pub struct Follow {
    pub links: Arc<Links>,
    pub slow: Arc<Mutex<SlowPath>>,
    /// Each physical port's logical ports (itself and its VLAN sub-interfaces), as the FIB
    /// numbers them.
    pub logical: Vec<Vec<u16>>,
    /// The host-stack TAP of each logical port (`None` without one): its carrier follows
    /// the port's link, so that routing daemons on it see the link go down.
    pub taps: Vec<Option<io::tap::Tap>>,
    /// Rebuilds a port on its interface created again (`router.rebuild_ports`).
    pub rebuild: Option<Arc<crate::rebuild::Rebuilder>>,
}

impl Follow {
    /// A port down or back: logged, its routes withdrawn or put back.
    fn running(&self, port: usize, running: bool, up: bool) {
        let Some(p) = self.links.ports.get(port) else { return };
        let mut slow = self.slow.lock().unwrap_or_else(|e| e.into_inner());
        let (mut routes, mut neighbours) = (0, 0);
        for &l in self.logical.get(port).map_or(&[][..], Vec::as_slice) {
            match slow.fib_mut().set_port_running(l, running) {
                Ok(n) => routes += n,
                Err(e) => crate::log::warn(format_args!("link {}: routes: {e}", p.name)),
            }
            if !running {
                neighbours += slow.flush_port(l);
            }
            if let Some(Some(tap)) = self.taps.get(usize::from(l))
                && let Err(e) = tap.set_carrier(running)
            {
                crate::log::warn(format_args!(
                    "link {}: the carrier of {}: {e}",
                    p.name,
                    tap.name()
                ));
            }
        }
        drop(slow);
        let state = match (running, up) {
            (true, _) => "up, its routes back",
            (false, true) => "down (no carrier), its routes withdrawn",
            (false, false) => "down (set down), its routes withdrawn",
        };
        crate::log::notice(format_args!(
            "link {}: {state} ({routes} routes, {neighbours} neighbours flushed)",
            p.name
        ));
    }
}

impl Follow {
    /// A port's interface deleted: down (routes withdrawn) until it is created again.
    fn gone(&self, port: usize, was_running: bool) {
        let name = self.links.ports.get(port).map_or("?", |p| p.name.as_str());
        crate::log::warn(format_args!(
            "interface {name} was deleted: its port is down until an interface of that name is back"
        ));
        if was_running {
            self.running(port, false, false);
        }
    }

    /// A port's interface created again: the port rebuilt on it, then up if it runs. Returns
    /// why the router must stop if it cannot be rebuilt.
    fn recreated(&self, port: usize, old: u32, ifindex: u32, e: &LinkEvent) -> Option<String> {
        let p = self.links.ports.get(port)?;
        let fail = |why: String| {
            Some(format!(
                "interface {} was created again (ifindex {old} -> {ifindex}) and its port cannot be rebuilt in place: {why}; stopping so that the service manager restarts linerate on it",
                p.name
            ))
        };
        let Some(rebuild) = &self.rebuild else { return fail("rebuilding is off".into()) };
        crate::log::notice(format_args!(
            "interface {} created again (ifindex {old} -> {ifindex}): rebuilding its port",
            p.name
        ));
        match rebuild.rebuild(port, old, ifindex) {
            Ok(line) => crate::log::notice(format_args!("{line}")),
            Err(e) => return fail(format!("{e:#}")),
        }
        p.rebuilds.fetch_add(1, Ordering::Relaxed);
        // Its routes were withdrawn when the old interface went (or, if that event was
        // missed, they are still in: putting them back changes nothing).
        if e.running() && !p.running.swap(true, Ordering::Relaxed) {
            p.changes.fetch_add(1, Ordering::Relaxed);
            self.running(port, true, e.up);
        }
        None
    }
}

/// The addresses the host stack added to the TAPs, which the router took as its own.
#[derive(Default)]
struct TapAddresses {
    /// Each logical port's TAP's ifindex.
    taps: Vec<Option<u32>>,
    /// (logical port, address) taken from the TAPs, to give up when they go.
    taken: HashSet<(u16, IpAddr)>,
}

impl Follow {
    fn tap_addresses(&self) -> TapAddresses {
        let index =
            |t: &Option<io::tap::Tap>| t.as_ref().and_then(|t| io::netdev::ifindex(t.name()).ok());
        TapAddresses { taps: self.taps.iter().map(index).collect(), taken: HashSet::new() }
    }

    /// An address added to or removed from a TAP: taken as the router's own on the TAP's
    /// port, or given up (only one taken so). IPv6 link-local addresses are the kernel's own.
    fn address(&self, e: &AddrEvent, t: &mut TapAddresses) {
        let Some(port) = t.taps.iter().position(|&i| i == Some(e.ifindex)) else { return };
        let port = port as u16;
        if matches!(e.addr, IpAddr::V6(a) if a.is_unicast_link_local()) {
            return;
        }
        let mut slow = self.slow.lock().unwrap_or_else(|e| e.into_inner());
        let name = slow.ports().get(usize::from(port)).map(|p| p.name.clone()).unwrap_or_default();
        let (done, what) = if e.deleted {
            if !t.taken.remove(&(port, e.addr)) {
                return;
            }
            (slow.remove_address(port, e.addr), "removed from its TAP: given up")
        } else {
            let r = slow.add_address(port, e.addr, e.prefix_len);
            if matches!(r, Ok(true)) {
                t.taken.insert((port, e.addr));
            }
            (r, "added to its TAP: the router answers for it")
        };
        drop(slow);
        match done {
            Ok(true) => crate::log::notice(format_args!(
                "address {}/{} on {name} {what}",
                e.addr, e.prefix_len
            )),
            Ok(false) => {}
            Err(err) => crate::log::warn(format_args!("address {} on {name}: {err}", e.addr)),
        }
    }
}

/// Starts the thread; `failure` gets the reason when it stops the router (`stop` set).
pub fn start(
    follow: Follow,
    stop: Arc<AtomicBool>,
    failure: Arc<Mutex<Option<String>>>,
) -> Result<JoinHandle<()>> {
    let sock = LinkSocket::open().context("opening a netlink socket for link events")?;
    std::thread::Builder::new()
        .name("lr-links".into())
        .spawn(move || run(&sock, &follow, &stop, &failure))
        .context("starting the link events thread")
}

fn run(sock: &LinkSocket, follow: &Follow, stop: &AtomicBool, failure: &Mutex<Option<String>>) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut addresses = follow.tap_addresses();
    while !stop.load(Ordering::Relaxed) {
        let n = match sock.recv(&mut buf, WAIT_MS) {
            Ok(Some(n)) => n,
            Ok(None) => continue,
            Err(e) => {
                crate::log::warn(format_args!("link events: {e} (events lost)"));
                continue;
            }
        };
        for m in io::netlink::route::messages(&buf[..n]) {
            if let Some(a) = parse_addr(m) {
                follow.address(&a, &mut addresses);
                continue;
            }
            let Some(e) = parse_link(m) else { continue };
            match follow.links.apply(&e) {
                None => {}
                Some(Change::Running(port, running)) => follow.running(port, running, e.up),
                Some(Change::Gone { port, was_running }) => follow.gone(port, was_running),
                Some(Change::Recreated { port, old, ifindex, .. }) => {
                    if let Some(why) = follow.recreated(port, old, ifindex, &e) {
                        stop_for(&why, stop, failure);
                        return;
                    }
                }
                Some(Change::Stop(why)) => {
                    stop_for(&why, stop, failure);
                    return;
                }
            }
        }
    }
}

/// Stops the router for `why`, which `run` reports as its failure.
fn stop_for(why: &str, stop: &AtomicBool, failure: &Mutex<Option<String>>) {
    crate::log::error(format_args!("{why}"));
    *failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(why.to_owned());
    stop.store(true, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(name: &str, ifindex: u32, deleted: bool, up: bool, carrier: bool) -> LinkEvent {
        LinkEvent { deleted, ifindex, name: name.into(), up, carrier }
    }

    #[test]
    fn down_and_up_are_counted_deletion_and_recreation_stop_without_rebuilding() {
        let links = Links::new(&[("lrd0".into(), 5), ("lrd1".into(), 6)], false);
        let down = links.apply(&event("lrd1", 6, false, true, false));
        assert_eq!(down, Some(Change::Running(1, false)));
        assert_eq!(
            links.apply(&event("lrd1", 6, false, true, true)),
            Some(Change::Running(1, true))
        );
        assert_eq!(links.apply(&event("lrd1", 6, false, true, true)), None, "no change");
        let p = links.of("lrd1").unwrap();
        assert!(p.running.load(Ordering::Relaxed));
        assert_eq!(p.changes.load(Ordering::Relaxed), 2);
        assert_eq!(links.apply(&event("eth9", 9, true, false, false)), None, "not a port");
        let Some(Change::Stop(gone)) = links.apply(&event("lrd0", 5, true, false, false)) else {
            panic!("a deleted port stops the router")
        };
        assert!(gone.contains("lrd0 (ifindex 5) was deleted"), "{gone}");
        let Some(Change::Stop(again)) = links.apply(&event("lrd0", 11, false, true, true)) else {
            panic!("a port created again stops the router")
        };
        assert!(again.contains("created again (ifindex 5 -> 11)"), "{again}");
    }

    #[test]
    fn a_deleted_port_is_down_until_created_again_then_rebuilt() {
        let links = Links::new(&[("lrd0".into(), 5)], true);
        assert_eq!(
            links.apply(&event("lrd0", 5, true, false, false)),
            Some(Change::Gone { port: 0, was_running: true })
        );
        let p = links.of("lrd0").unwrap();
        assert!(!p.running.load(Ordering::Relaxed));
        assert_eq!(links.apply(&event("lrd0", 11, false, false, false)), None, "not up yet");
        assert_eq!(
            links.apply(&event("lrd0", 11, false, true, false)),
            Some(Change::Recreated { port: 0, old: 5, ifindex: 11, running: false })
        );
        assert_eq!(p.ifindex.load(Ordering::Relaxed), 11);
        // The old interface's late deletion is not the new one's.
        assert_eq!(links.apply(&event("lrd0", 5, true, false, false)), None);
        // Its carrier afterwards: running again.
        assert_eq!(
            links.apply(&event("lrd0", 11, false, true, true)),
            Some(Change::Running(0, true))
        );
        // Created again without its deletion heard (events lost): rebuilt all the same.
        assert_eq!(
            links.apply(&event("lrd0", 12, false, true, true)),
            Some(Change::Recreated { port: 0, old: 11, ifindex: 12, running: true })
        );
    }
}
