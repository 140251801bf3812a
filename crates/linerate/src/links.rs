//! Following the ports' links over netlink (issue 46): a thread (`lr-links`) that logs each
//! port's link going down or up (administratively, or its carrier) and counts it, for `show
//! interfaces` and the metrics; and that stops the router, with an error naming the port,
//! when a port is deleted or created again under the same name (a re-plugged NIC, a veth a
//! container runtime recreated, a driver reloaded): linerate's sockets, XDP and tc programs
//! and NAPI threads were bound to the old interface and would forward nothing, silently.
//! The service manager restarts it (`dist/linerate.service`: `Restart=on-failure`), which
//! opens the new interface. A port that goes down has its routes withdrawn from the FIB
//! (`dataplane::fib`, `ports_down.rs`), so that other paths and less specific routes take
//! over, until it comes back; its learned neighbours are flushed and its host-stack TAP
//! loses its carrier meanwhile. Not done yet:
//! rebuilding the port in place.
//!
//! The same thread follows the addresses the host stack adds to and removes from the TAPs
//! (issue 43): a VRRP daemon on a TAP (keepalived) adds its virtual address when it becomes
//! master and removes it when it stops being one; the router then answers ARP and NDP for
//! it and takes the packets to it on that port, or gives it up (`docs/ha.md`, "Addresses
//! with keepalived"). The config's addresses stay whatever the host stack does.

use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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
    pub ifindex: u32,
    /// Up with a carrier.
    pub running: AtomicBool,
    /// Times it went down or up since start.
    pub changes: AtomicU64,
}

/// The ports' links, shared with the control socket.
#[derive(Debug, Default)]
pub struct Links {
    pub ports: Vec<PortLink>,
}

/// What a link event calls for.
#[derive(Debug, PartialEq, Eq)]
pub enum Change {
    /// Port `port` (index in [`Links::ports`]) went down (`false`) or came back.
    Running(usize, bool),
    /// The router must stop, for this reason.
    Stop(String),
}

impl Links {
    /// The physical ports `(name, ifindex)`, running at start.
    pub fn new(ports: &[(String, u32)]) -> Links {
        let ports = ports
            .iter()
            .map(|(name, ifindex)| PortLink {
                name: name.clone(),
                ifindex: *ifindex,
                running: AtomicBool::new(true),
                changes: AtomicU64::new(0),
            })
            .collect();
        Links { ports }
    }

    pub fn of(&self, name: &str) -> Option<&PortLink> {
        self.ports.iter().find(|p| p.name == name)
    }

    /// Takes one event; returns what it calls for, if anything.
    pub fn apply(&self, e: &LinkEvent) -> Option<Change> {
        let (i, p) = self.ports.iter().enumerate().find(|(_, p)| p.name == e.name)?;
        if e.ifindex != p.ifindex {
            if e.deleted {
                return None; // an older interface of that name, already replaced
            }
            return Some(Change::Stop(format!(
                "interface {} was created again (ifindex {} -> {}): linerate's sockets and programs are bound to the old one; stopping so that the service manager restarts it on the new one",
                e.name, p.ifindex, e.ifindex
            )));
        }
        if e.deleted {
            return Some(Change::Stop(format!(
                "interface {} (ifindex {}) was deleted: linerate cannot forward on it; stopping so that the service manager restarts it when the interface is back",
                e.name, e.ifindex
            )));
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
                Some(Change::Stop(why)) => {
                    crate::log::error(format_args!("{why}"));
                    *failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
                    stop.store(true, Ordering::Relaxed);
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(name: &str, ifindex: u32, deleted: bool, up: bool, carrier: bool) -> LinkEvent {
        LinkEvent { deleted, ifindex, name: name.into(), up, carrier }
    }

    #[test]
    fn down_and_up_are_counted_deletion_and_recreation_stop() {
        let links = Links::new(&[("lrd0".into(), 5), ("lrd1".into(), 6)]);
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
}
