//! Following the ports' links over netlink (issue 46): a thread (`lr-links`) that logs each
//! port's link going down or up (administratively, or its carrier) and counts it, for `show
//! interfaces` and the metrics; and that stops the router, with an error naming the port,
//! when a port is deleted or created again under the same name (a re-plugged NIC, a veth a
//! container runtime recreated, a driver reloaded): linerate's sockets, XDP and tc programs
//! and NAPI threads were bound to the old interface and would forward nothing, silently.
//! The service manager restarts it (`dist/linerate.service`: `Restart=on-failure`), which
//! opens the new interface. Not done yet: rebuilding the port in place, and withdrawing the
//! routes through a port that is down.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use anyhow::{Context, Result};
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

    /// Takes one event; returns why the router must stop, if it must.
    pub fn apply(&self, e: &LinkEvent) -> Option<String> {
        let p = self.of(&e.name)?;
        if e.ifindex != p.ifindex {
            if e.deleted {
                return None; // an older interface of that name, already replaced
            }
            return Some(format!(
                "interface {} was created again (ifindex {} -> {}): linerate's sockets and programs are bound to the old one; stopping so that the service manager restarts it on the new one",
                e.name, p.ifindex, e.ifindex
            ));
        }
        if e.deleted {
            return Some(format!(
                "interface {} (ifindex {}) was deleted: linerate cannot forward on it; stopping so that the service manager restarts it when the interface is back",
                e.name, e.ifindex
            ));
        }
        if p.running.swap(e.running(), Ordering::Relaxed) != e.running() {
            p.changes.fetch_add(1, Ordering::Relaxed);
            let state = if e.running() {
                "up"
            } else if e.up {
                "down (no carrier)"
            } else {
                "down (set down)"
            };
            crate::log::notice(format_args!("link {}: {state}", e.name));
        }
        None
    }
}

/// Starts the thread; `failure` gets the reason when it stops the router (`stop` set).
pub fn start(
    links: Arc<Links>,
    stop: Arc<AtomicBool>,
    failure: Arc<Mutex<Option<String>>>,
) -> Result<JoinHandle<()>> {
    let sock = LinkSocket::open().context("opening a netlink socket for link events")?;
    std::thread::Builder::new()
        .name("lr-links".into())
        .spawn(move || follow(&sock, &links, &stop, &failure))
        .context("starting the link events thread")
}

fn follow(sock: &LinkSocket, links: &Links, stop: &AtomicBool, failure: &Mutex<Option<String>>) {
    let mut buf = vec![0u8; 64 * 1024];
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
            let Some(why) = parse_link(m).and_then(|e| links.apply(&e)) else { continue };
            crate::log::error(format_args!("{why}"));
            *failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
            stop.store(true, Ordering::Relaxed);
            return;
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
        assert_eq!(links.apply(&event("lrd1", 6, false, true, false)), None);
        assert_eq!(links.apply(&event("lrd1", 6, false, true, true)), None);
        assert_eq!(links.apply(&event("lrd1", 6, false, true, true)), None, "no change");
        let p = links.of("lrd1").unwrap();
        assert!(p.running.load(Ordering::Relaxed));
        assert_eq!(p.changes.load(Ordering::Relaxed), 2);
        assert_eq!(links.apply(&event("eth9", 9, true, false, false)), None, "not a port");
        let gone = links.apply(&event("lrd0", 5, true, false, false)).unwrap();
        assert!(gone.contains("lrd0 (ifindex 5) was deleted"), "{gone}");
        let again = links.apply(&event("lrd0", 11, false, true, true)).unwrap();
        assert!(again.contains("created again (ifindex 5 -> 11)"), "{again}");
    }
}
