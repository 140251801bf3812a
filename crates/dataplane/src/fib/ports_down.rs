//! Ports whose link is down: the routes through them are withdrawn, as the kernel withdraws
//! the routes through a device that goes down, so that the other paths of a multipath route
//! and less specific routes (a backup default) take over; they are put back when the link
//! returns. Interface (connected) routes of the port are withdrawn whole; a static route
//! keeps its paths through other ports, or is withdrawn (its prefix then goes to the
//! kernel's route for it, if any). Kernel routes follow the kernel, which does the same.

use std::net::IpAddr;

use super::routes::Target;
use super::{FibControl, FibError, RouteKind, RouteSource};

impl FibControl {
    /// `target` as the ports' links allow: `None` if every path goes through a port that is
    /// down.
    pub(super) fn live_target(&self, target: &Target) -> Option<Target> {
        match target {
            Target::Via(paths) => {
                let live: Vec<(IpAddr, u16)> =
                    paths.iter().copied().filter(|(_, p)| !self.down.contains(p)).collect();
                (!live.is_empty()).then_some(Target::Via(live))
            }
            Target::Connected(p) if self.down.contains(p) => None,
            other => Some(other.clone()),
        }
    }

    /// Logical port `port`'s link went down (`running` false) or came back: its routes
    /// withdrawn or put back. Returns how many routes changed.
    pub fn set_port_running(&mut self, port: u16, running: bool) -> Result<usize, FibError> {
        let changed = if running { self.down.remove(&port) } else { self.down.insert(port) };
        if !changed {
            return Ok(0);
        }
        let mut n = if running { self.connected_back(port)? } else { self.connected_gone(port)? };
        let statics: Vec<((IpAddr, u8), Target)> = self
            .statics
            .iter()
            .filter(|(_, (t, _))| uses(t, port))
            .map(|(k, (t, _))| (*k, t.clone()))
            .collect();
        for ((prefix, len), target) in statics {
            let id = self.install_static(prefix, len, &target)?;
            if let Some((_, old)) = self.statics.insert((prefix, len), (target, id)) {
                self.release(old);
            }
            n += 1;
        }
        Ok(n)
    }

    /// Whether logical port `port`'s link is down.
    pub fn port_down(&self, port: u16) -> bool {
        self.down.contains(&port)
    }

    /// Whether `prefix/len` is an interface route withdrawn while its port is down (it still
    /// holds the prefix against static routes, as while installed).
    pub(super) fn withdrawn_interface_route(&self, prefix: IpAddr, len: u8) -> bool {
        self.down_connected.iter().any(|&(p, l, _)| (p, l) == (prefix, len))
    }

    fn connected_gone(&mut self, port: u16) -> Result<usize, FibError> {
        let gone: Vec<(IpAddr, u8)> = self
            .routes
            .iter()
            .filter(|(_, i)| {
                i.source == RouteSource::Interface && i.kind == RouteKind::Connected { port }
            })
            .map(|(k, _)| *k)
            .collect();
        for &(prefix, len) in &gone {
            self.withdraw(prefix, len)?;
            self.down_connected.push((prefix, len, port));
        }
        Ok(gone.len())
    }

    fn connected_back(&mut self, port: u16) -> Result<usize, FibError> {
        let (back, keep): (Vec<_>, Vec<_>) =
            self.down_connected.drain(..).partition(|&(_, _, p)| p == port);
        self.down_connected = keep;
        for &(prefix, len, p) in &back {
            self.add_connected(prefix, len, p)?;
        }
        Ok(back.len())
    }
}

/// Whether a static route's target goes through `port`.
fn uses(t: &Target, port: u16) -> bool {
    match t {
        Target::Via(paths) => paths.iter().any(|&(_, p)| p == port),
        Target::Connected(p) => *p == port,
        Target::Blackhole | Target::Unreachable => false,
    }
}
