//! The kernel's receive work for linerate's interfaces, moved onto the workers' CPUs below
//! the workers' priority: how linerate avoids receive livelock on any driver.
//!
//! The kernel receives a frame (driver, XDP program, copy into the AF_XDP UMEM or the
//! AF_PACKET ring) in a NAPI poll, normally in softirq context, which preempts any thread.
//! Offered more than the worker forwards, those polls take the worker's CPU, fill rings that
//! nobody drains and drop there after paying for the copy: the worker forwards almost nothing
//! (receive livelock, Mogul and Ramakrishnan, 1997). With threaded NAPI
//! (Documentation/networking/napi.rst, "Threaded NAPI") each poll runs in a kernel thread;
//! linerate pins that thread to the worker's CPU below the worker ([`NAPI_NICE`]), so it runs
//! when the worker yields or sleeps ([`crate::idle`]) and wakes it with a batch. What the worker cannot take waits in
//! the driver's ring (veth: a 256-entry ring) and is dropped there, before any work is spent
//! on it. Everything is restored when the [`NapiThreads`] is dropped.

use std::fs;
use std::io;
use std::path::PathBuf;

use crate::netlink::{self, NLMSG_HDRLEN, attr_u32, attrs, push_attr, u16_at};

/// Nice value of placed NAPI threads: a third of the worker's CFS weight, so a busy worker
/// keeps most of the CPU and the thread still runs as soon as the worker yields or sleeps.
pub const NAPI_NICE: i32 = 5;

// linux/genetlink.h and linux/netdev.h (the "netdev" generic netlink family).
const GENL_ID_CTRL: u16 = 0x10;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;
const NETDEV_CMD_QUEUE_GET: u8 = 10;
const NETDEV_CMD_NAPI_GET: u8 = 11;
const NETDEV_A_QUEUE_ID: u16 = 1;
const NETDEV_A_QUEUE_IFINDEX: u16 = 2;
const NETDEV_A_QUEUE_TYPE: u16 = 3;
const NETDEV_A_QUEUE_NAPI_ID: u16 = 4;
const NETDEV_QUEUE_TYPE_RX: u32 = 0;
const NETDEV_A_NAPI_IFINDEX: u16 = 1;
const NETDEV_A_NAPI_ID: u16 = 2;
const NETDEV_A_NAPI_PID: u16 = 4;
pub(crate) const GENL_HDRLEN: usize = 4;

/// One NAPI instance of an interface: its id, the rx queues it serves and its thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Napi {
    pub id: u32,
    pub rx_queues: Vec<u32>,
    /// The kernel thread polling it (threaded NAPI only).
    pub tid: Option<u32>,
}

pub(crate) fn genl_request(family: u16, cmd: u8, flags: u16, attrs_out: &[u8]) -> Vec<u8> {
    let mut body = vec![cmd, 1, 0, 0];
    body.extend_from_slice(attrs_out);
    netlink::message(family, flags, &body)
}

pub(crate) fn genl_family(name: &str) -> io::Result<u16> {
    let mut a = Vec::new();
    push_attr(&mut a, CTRL_ATTR_FAMILY_NAME, format!("{name}\0").as_bytes());
    let replies = netlink::exchange(
        libc::NETLINK_GENERIC,
        &genl_request(GENL_ID_CTRL, CTRL_CMD_GETFAMILY, 0, &a),
    )?;
    replies
        .iter()
        .filter(|m| m.len() >= NLMSG_HDRLEN + GENL_HDRLEN)
        .flat_map(|m| attrs(&m[NLMSG_HDRLEN + GENL_HDRLEN..]))
        .find(|(t, p)| *t == CTRL_ATTR_FAMILY_ID && p.len() >= 2)
        .map(|(_, p)| u16_at(p, 0))
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::Unsupported,
                format!("no generic netlink family {name:?}"),
            )
        })
}

/// Dumps `cmd` for `ifindex`, returning each object's attributes as (type, u32) pairs.
fn dump(family: u16, cmd: u8, ifindex_attr: u16, ifindex: u32) -> io::Result<Vec<Vec<(u16, u32)>>> {
    let mut a = Vec::new();
    push_attr(&mut a, ifindex_attr, &ifindex.to_ne_bytes());
    let replies = netlink::exchange(
        libc::NETLINK_GENERIC,
        &genl_request(family, cmd, libc::NLM_F_DUMP as u16, &a),
    )?;
    Ok(replies
        .iter()
        .filter(|m| m.len() >= NLMSG_HDRLEN + GENL_HDRLEN && u16_at(m, 4) == family)
        .map(|m| {
            attrs(&m[NLMSG_HDRLEN + GENL_HDRLEN..])
                .filter_map(|(t, p)| Some((t, attr_u32(p)?)))
                .collect()
        })
        .collect())
}

fn get(obj: &[(u16, u32)], ty: u16) -> Option<u32> {
    obj.iter().find(|(t, _)| *t == ty).map(|(_, v)| *v)
}

/// The NAPI instances of `ifindex` (in the calling thread's network namespace), with the rx
/// queues each serves; needs Linux 6.9 (thread ids in `napi-get`).
pub fn napis(ifindex: u32) -> io::Result<Vec<Napi>> {
    let family = genl_family("netdev")?;
    let mut out: Vec<Napi> = dump(family, NETDEV_CMD_NAPI_GET, NETDEV_A_NAPI_IFINDEX, ifindex)?
        .iter()
        .filter(|o| get(o, NETDEV_A_NAPI_IFINDEX) == Some(ifindex))
        .filter_map(|o| {
            Some(Napi {
                id: get(o, NETDEV_A_NAPI_ID)?,
                rx_queues: Vec::new(),
                tid: get(o, NETDEV_A_NAPI_PID),
            })
        })
        .collect();
    for q in dump(family, NETDEV_CMD_QUEUE_GET, NETDEV_A_QUEUE_IFINDEX, ifindex)? {
        let rx = get(&q, NETDEV_A_QUEUE_TYPE) == Some(NETDEV_QUEUE_TYPE_RX);
        if let (true, Some(id), Some(napi)) =
            (rx, get(&q, NETDEV_A_QUEUE_ID), get(&q, NETDEV_A_QUEUE_NAPI_ID))
            && let Some(n) = out.iter_mut().find(|n| n.id == napi)
        {
            n.rx_queues.push(id);
        }
    }
    out.sort_by_key(|n| n.id);
    Ok(out)
}

/// [`napis`] of the interface `ifindex` in another network namespace (`netns`, e.g.
/// `/run/netns/NAME`), asked from a short-lived thread that enters it: the netlink socket
/// answers for the namespace of the thread that opens it, and `setns` moves only that thread.
pub fn napis_in_netns(netns: &std::path::Path, ifindex: u32) -> io::Result<Vec<Napi>> {
    let ns = fs::File::open(netns)?;
    std::thread::scope(|s| {
        s.spawn(|| {
            use std::os::fd::AsRawFd;
            // SAFETY: setns on a namespace file we hold open; it changes only this thread,
            // which ends when the lookup is done.
            if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(io::Error::last_os_error());
            }
            napis(ifindex)
        })
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("the NAPI lookup thread panicked")))
    })
}

/// Why the receive work of an interface could not be placed.
#[derive(Debug, thiserror::Error)]
pub enum NapiError {
    #[error(
        "{ifname} has no NAPI instance to run in a thread (a veth gets one with an XDP program or GRO)"
    )]
    NoNapi { ifname: String },
    #[error("{ifname}: {what}: {source}")]
    Sys { ifname: String, what: &'static str, source: io::Error },
}

struct SavedThread {
    tid: u32,
    cpus: Vec<usize>,
    nice: i32,
}

/// Threaded NAPI turned on for one interface, its threads placed; restores the interface's
/// settings and the threads' CPUs and priorities on drop.
pub struct NapiThreads {
    ifname: String,
    threaded_was: String,
    rps_was: Vec<(PathBuf, String)>,
    saved: Vec<SavedThread>,
    napis: Vec<Napi>,
}

fn sysfs(ifname: &str, attr: &str) -> PathBuf {
    PathBuf::from("/sys/class/net").join(ifname).join(attr)
}

impl NapiThreads {
    /// Turns threaded NAPI on for `ifname` and receive packet steering off (which would hand
    /// the frames back to a softirq on another CPU).
    pub fn enable(ifname: &str, ifindex: u32) -> Result<NapiThreads, NapiError> {
        let err = |what| move |source| NapiError::Sys { ifname: ifname.into(), what, source };
        let threaded = sysfs(ifname, "threaded");
        let threaded_was =
            fs::read_to_string(&threaded).map_err(err("reading threaded"))?.trim().to_owned();
        if let Err(e) = fs::write(&threaded, "1") {
            // The kernel refuses when the device has no NAPI at all (veth without XDP or GRO).
            return Err(if napis(ifindex).is_ok_and(|n| n.is_empty()) {
                NapiError::NoNapi { ifname: ifname.into() }
            } else {
                err("enabling threaded NAPI")(e)
            });
        }
        let mut me = NapiThreads {
            ifname: ifname.into(),
            threaded_was,
            rps_was: Vec::new(),
            saved: Vec::new(),
            napis: Vec::new(),
        };
        me.rps_was = rps_off(ifname).map_err(err("turning RPS off"))?;
        me.napis =
            napis(ifindex).map_err(err("listing NAPI instances (netdev generic netlink)"))?;
        if me.napis.iter().all(|n| n.tid.is_none()) {
            return Err(NapiError::NoNapi { ifname: ifname.into() });
        }
        Ok(me)
    }

    /// The interface's NAPI instances.
    pub fn napis(&self) -> &[Napi] {
        &self.napis
    }

    /// Pins the thread of NAPI `id` to `cpu` at [`NAPI_NICE`].
    pub fn place(&mut self, id: u32, cpu: usize) -> Result<(), NapiError> {
        let Some(tid) = self.napis.iter().find(|n| n.id == id).and_then(|n| n.tid) else {
            return Ok(());
        };
        let ifname = self.ifname.clone();
        let err = |what| {
            let ifname = ifname.clone();
            move |source| NapiError::Sys { ifname, what, source }
        };
        if !self.saved.iter().any(|s| s.tid == tid) {
            let cpus =
                crate::affinity::thread_cpus(tid).map_err(err("reading a NAPI thread's CPUs"))?;
            let nice = crate::affinity::thread_nice(tid)
                .map_err(err("reading a NAPI thread's priority"))?;
            self.saved.push(SavedThread { tid, cpus, nice });
        }
        crate::affinity::pin_thread(tid, cpu).map_err(err("pinning a NAPI thread"))?;
        crate::affinity::set_thread_nice(tid, NAPI_NICE)
            .map_err(err("lowering a NAPI thread's priority"))
    }
}

/// Clears every rx queue's `rps_cpus`, returning the old values.
fn rps_off(ifname: &str) -> io::Result<Vec<(PathBuf, String)>> {
    let mut was = Vec::new();
    for entry in fs::read_dir(sysfs(ifname, "queues"))? {
        let path = entry?.path().join("rps_cpus");
        if path.exists() {
            let old = fs::read_to_string(&path)?.trim().to_owned();
            fs::write(&path, "0")?;
            was.push((path, old));
        }
    }
    Ok(was)
}

impl Drop for NapiThreads {
    fn drop(&mut self) {
        for s in &self.saved {
            let _ = crate::affinity::set_thread_cpus(s.tid, &s.cpus);
            let _ = crate::affinity::set_thread_nice(s.tid, s.nice);
        }
        for (path, old) in &self.rps_was {
            let _ = fs::write(path, old);
        }
        let _ = fs::write(sysfs(&self.ifname, "threaded"), &self.threaded_was);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_has_no_napi_and_the_family_resolves() {
        // Every kernel this project supports has the netdev family (Linux 6.5+).
        let family = genl_family("netdev").unwrap();
        assert!(family >= GENL_ID_CTRL);
        assert!(napis(1).unwrap().is_empty(), "lo polls no NAPI");
        assert!(genl_family("lr-no-such-family").is_err());
    }

    #[test]
    fn napis_are_found_in_another_namespace() {
        if !crate::netdev::is_root() {
            crate::netdev::skip_test("needs root");
            return;
        }
        let ns = format!("lrnapi{}", std::process::id());
        let sh = |cmd: &str| {
            std::process::Command::new("sh").args(["-c", cmd]).status().unwrap().success()
        };
        assert!(sh(&format!("ip netns add {ns}")));
        let ok = sh(&format!(
            "ip -n {ns} link add lrnapi0 type veth peer name lrnapi1 && ip -n {ns} link set lrnapi0 up && ip -n {ns} link set lrnapi1 up \
             && ip netns exec {ns} ethtool -K lrnapi0 gro on >/dev/null && ip netns exec {ns} sh -c 'echo 1 > /sys/class/net/lrnapi0/threaded'"
        ));
        let ifindex = std::process::Command::new("ip")
            .args(["netns", "exec", &ns, "cat", "/sys/class/net/lrnapi0/ifindex"])
            .output()
            .unwrap();
        let ifindex: u32 = String::from_utf8_lossy(&ifindex.stdout).trim().parse().unwrap_or(0);
        let found = napis_in_netns(&PathBuf::from("/run/netns").join(&ns), ifindex);
        sh(&format!("ip netns del {ns}"));
        assert!(ok);
        let found = found.unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].tid.is_some(), "threaded NAPI has a thread: {found:?}");
        assert!(
            napis(ifindex).unwrap().iter().all(|n| n.id != found[0].id),
            "this thread's namespace is not the test's"
        );
    }
}
