//! The in-kernel fast path: `bpf/fastpath.bpf.c`, built by clang, loaded by aya, and its maps.
//!
//! One program and one set of maps serve every interface linerate owns in a namespace (see
//! the program's header for what it forwards and what it steers to the sockets). linerate
//! writes a [`FlowEntry`] for each direction of a flow its pipeline forwarded, and moves the
//! settings' generation on whenever routes, neighbours, rules or tables change: entries of
//! an older generation are misses, so the pipeline decides those flows again.

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex, Weak};

use aya::EbpfLoader;
use aya::maps::{Map, MapData};
use aya::programs::Xdp;

use super::XdpError;
use super::bpf::{MapElemAttr, percpu_values};
use crate::sys;

/// Name of the program in the kernel (`bpftool prog`), one of linerate's own.
pub const PROG_NAME: &str = "lr_fast";
/// Interfaces one fast path serves (the program's `MAX_IFACES`).
pub const MAX_IFACES: u32 = 64;
/// Queues of one interface in the shared XSKMAP (the program's `MAX_QUEUES`).
pub const MAX_QUEUES: u32 = 256;
/// Default flow entries (each direction of a flow is one).
pub const DEFAULT_FLOWS: u32 = 1 << 18;

static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/fastpath.bpf.o"));

/// What the program matches a frame on (`struct flow_key`): input interface and 5-tuple,
/// addresses and ports as they are on the wire.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct FlowKey {
    pub ifindex: u32,
    pub proto: u8,
    /// 4 or 6.
    pub family: u8,
    pub sport: [u8; 2],
    pub dport: [u8; 2],
    pub pad: u16,
    pub src: [u8; 16],
    pub dst: [u8; 16],
}

/// What the program does to a frame of a flow (`struct flow_entry`), and what it counted.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowEntry {
    pub dst_mac: [u8; 6],
    pub src_mac: [u8; 6],
    pub out_ifindex: u32,
    pub generation: u32,
    /// Longest IP packet the output takes; longer ones go to the pipeline.
    pub mtu: u16,
    pub in_slot: u16,
    pub out_slot: u16,
    pub pad: u16,
    pub pad2: u32,
    pub packets: u64,
    pub bytes: u64,
    /// The kernel's jiffies at the flow's last frame.
    pub last_jiffies: u64,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct Settings {
    generation: u32,
    fail_closed: u32,
}

/// What the program counted on one interface, over every CPU.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortCounts {
    /// Frames the fast path took from this interface.
    pub rx_packets: u64,
    pub rx_bytes: u64,
    /// Frames the fast path sent out of this interface.
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// Fail-closed: IP frames dropped for want of a socket on their queue.
    pub unsteered: u64,
}

/// The loaded program and its maps.
pub struct FastPath {
    netns: u64,
    prog: OwnedFd,
    flows: OwnedFd,
    tx_ports: OwnedFd,
    xsks: OwnedFd,
    if_slots: OwnedFd,
    config: OwnedFd,
    port_stats: OwnedFd,
    fail_closed: bool,
    /// ifindex by slot (0: free).
    slots: Mutex<Vec<u32>>,
    cpus: usize,
}

/// The fast paths of this process, one per namespace.
static SHARED: Mutex<Vec<Weak<FastPath>>> = Mutex::new(Vec::new());

impl FastPath {
    /// The fast path of the calling thread's namespace, loaded on first use with room for
    /// `flows` entries. Every interface of one namespace must agree on `fail_closed`.
    pub fn shared(flows: u32, fail_closed: bool) -> Result<Arc<FastPath>, XdpError> {
        let netns = sys::netns_id();
        let mut all = SHARED.lock().unwrap_or_else(|e| e.into_inner());
        all.retain(|w| w.strong_count() > 0);
        if let Some(f) = all.iter().filter_map(Weak::upgrade).find(|f| f.netns == netns) {
            if f.fail_closed != fail_closed {
                return Err(XdpError::Config(format!("the fast path already runs with fail-closed = {}", f.fail_closed)));
            }
            return Ok(f);
        }
        let f = Arc::new(Self::load(flows, fail_closed)?);
        all.push(Arc::downgrade(&f));
        Ok(f)
    }

    /// The fast path of this namespace, if one is loaded.
    pub fn current() -> Option<Arc<FastPath>> {
        let netns = sys::netns_id();
        let all = SHARED.lock().unwrap_or_else(|e| e.into_inner());
        all.iter().filter_map(Weak::upgrade).find(|f| f.netns == netns)
    }

    /// Loads the program and creates its maps (the flow table with `flows` entries).
    pub fn load(flows: u32, fail_closed: bool) -> Result<FastPath, XdpError> {
        let load_err = |what: &str, e: &dyn std::fmt::Display| XdpError::ProgramRejected {
            source: io::Error::other(format!("{what}: {e}")),
            log: String::new(),
        };
        let mut obj = EbpfLoader::new()
            .set_max_entries("flows", flows.max(1))
            .load(OBJECT)
            .map_err(|e| load_err("loading bpf/fastpath.bpf.c's object", &e))?;
        let prog: &mut Xdp = obj
            .program_mut(PROG_NAME)
            .ok_or_else(|| load_err("the object has no program", &PROG_NAME))?
            .try_into()
            .map_err(|e| load_err("not an XDP program", &e))?;
        prog.load().map_err(|e| load_err("verifier", &format!("{e:?}")))?;
        let prog = prog
            .fd()
            .map_err(|e| load_err("program fd", &e))?
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| XdpError::sys("dup the program fd", "-", e))?;
        let mut take = |name: &str| -> Result<OwnedFd, XdpError> {
            let map = obj.take_map(name).ok_or_else(|| load_err("the object has no map", &name))?;
            map_fd(&map).map_err(|e| XdpError::sys("dup a map fd", "-", e))
        };
        let fast = FastPath {
            netns: sys::netns_id(),
            prog,
            flows: take("flows")?,
            tx_ports: take("tx_ports")?,
            xsks: take("xsks")?,
            if_slots: take("if_slots")?,
            config: take("config")?,
            port_stats: take("port_stats")?,
            fail_closed,
            slots: Mutex::new(vec![0; MAX_IFACES as usize]),
            cpus: super::sink::possible_cpus().map_err(|e| XdpError::sys("count the CPUs", "-", e))?,
        };
        fast.write_settings(0).map_err(|e| XdpError::sys("write the fast path's settings", "-", e))?;
        Ok(fast)
    }

    pub fn prog_fd(&self) -> RawFd {
        self.prog.as_raw_fd()
    }

    pub fn fail_closed(&self) -> bool {
        self.fail_closed
    }

    /// The slot of `ifindex`, given one (and its sockets' range of the XSKMAP) if it has none.
    pub fn register(&self, ifindex: u32) -> Result<u32, XdpError> {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = slots.iter().position(|&i| i == ifindex) {
            return Ok(s as u32);
        }
        let Some(s) = slots.iter().position(|&i| i == 0) else {
            return Err(XdpError::Config(format!("the fast path serves at most {MAX_IFACES} interfaces")));
        };
        update(&self.if_slots, &ifindex, &(s as u32)).map_err(|e| XdpError::sys("register an interface", "-", e))?;
        slots[s] = ifindex;
        Ok(s as u32)
    }

    /// The slot of a registered interface.
    pub fn slot_of(&self, ifindex: u32) -> Option<u16> {
        let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        slots.iter().position(|&i| i == ifindex && i != 0).map(|s| s as u16)
    }

    /// Points queue `queue` of the interface in `slot` at socket `sock`.
    pub fn xsk_set(&self, slot: u32, queue: u32, sock: RawFd) -> io::Result<()> {
        if queue >= MAX_QUEUES {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("queue {queue} >= {MAX_QUEUES}")));
        }
        super::bpf::xskmap_set(self.xsks.as_raw_fd(), slot * MAX_QUEUES + queue, sock)
    }

    /// Makes entries of generation `generation` the valid ones (0 turns the fast path off:
    /// every frame goes to the sockets).
    pub fn set_generation(&self, generation: u32) -> io::Result<()> {
        self.write_settings(generation)
    }

    fn write_settings(&self, generation: u32) -> io::Result<()> {
        let s = Settings { generation, fail_closed: u32::from(self.fail_closed) };
        update(&self.config, &0u32, &s)
    }

    /// Lets flows be redirected to `ifindex` (or no longer).
    pub fn set_output(&self, ifindex: u32, on: bool) -> io::Result<()> {
        if on {
            // struct bpf_devmap_val: the device, and no program of its own (fd -1).
            update(&self.tx_ports, &ifindex, &[ifindex, u32::MAX])
        } else {
            match delete(&self.tx_ports, &ifindex) {
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(()),
                r => r,
            }
        }
    }

    /// Writes one flow's entry (replacing any).
    pub fn insert(&self, key: &FlowKey, entry: &FlowEntry) -> io::Result<()> {
        update(&self.flows, key, entry)
    }

    /// A flow's entry, if the table has it.
    pub fn lookup(&self, key: &FlowKey) -> io::Result<Option<FlowEntry>> {
        let mut entry = FlowEntry::default();
        match lookup(&self.flows, key, &mut entry) {
            Ok(()) => Ok(Some(entry)),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// What the program counted on the interface in `slot`, summed over the CPUs.
    pub fn port_counts(&self, slot: u16) -> io::Result<PortCounts> {
        let v: [u64; 5] = percpu_values(self.port_stats.as_raw_fd(), u32::from(slot), self.cpus)?;
        Ok(PortCounts { rx_packets: v[0], rx_bytes: v[1], tx_packets: v[2], tx_bytes: v[3], unsteered: v[4] })
    }

    /// What the program counted on `ifindex`, if it is registered.
    pub fn counts_of(&self, ifindex: u32) -> Option<PortCounts> {
        self.port_counts(self.slot_of(ifindex)?).ok()
    }
}

/// A duplicate of the fd of one of the object's maps (the object is dropped after loading).
fn map_fd(map: &Map) -> io::Result<OwnedFd> {
    let data: &MapData = match map {
        Map::Array(d) | Map::DevMapHash(d) | Map::HashMap(d) | Map::LruHashMap(d) | Map::PerCpuArray(d) | Map::XskMap(d) => d,
        _ => return Err(io::Error::other("unexpected map type")),
    };
    data.fd().as_fd().try_clone_to_owned()
}

fn elem_attr<K, V>(map: &OwnedFd, key: &K, value: *const V) -> MapElemAttr {
    MapElemAttr {
        map_fd: map.as_raw_fd() as u32,
        key: key as *const K as u64,
        value: value as u64,
        ..Default::default()
    }
}

/// `BPF_MAP_UPDATE_ELEM` with `K` and `V` of the map's key and value sizes.
fn update<K: Copy, V: Copy>(map: &OwnedFd, key: &K, value: &V) -> io::Result<()> {
    sys::bpf(sys::BPF_MAP_UPDATE_ELEM, &mut elem_attr(map, key, value as *const V)).map(drop)
}

fn lookup<K: Copy, V: Copy>(map: &OwnedFd, key: &K, value: &mut V) -> io::Result<()> {
    sys::bpf(sys::BPF_MAP_LOOKUP_ELEM, &mut elem_attr(map, key, value as *mut V as *const V)).map(drop)
}

fn delete<K: Copy>(map: &OwnedFd, key: &K) -> io::Result<()> {
    sys::bpf(sys::BPF_MAP_DELETE_ELEM, &mut elem_attr(map, key, std::ptr::null::<u8>())).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_match_the_program() {
        // struct flow_key, struct flow_entry, struct port_counts in bpf/fastpath.bpf.c.
        assert_eq!(std::mem::size_of::<FlowKey>(), 44);
        assert_eq!(std::mem::size_of::<FlowEntry>(), 56);
        assert_eq!(std::mem::offset_of!(FlowEntry, packets), 32);
        assert_eq!(std::mem::size_of::<PortCounts>(), 40);
    }

    #[test]
    fn the_program_loads_and_its_maps_work() {
        if !crate::netdev::is_root() {
            panic!("needs root (bpf): run the suite as root");
        }
        let f = FastPath::load(1024, false).expect("the verifier accepts lr_fast");
        let slot = f.register(1).unwrap();
        assert_eq!(f.register(1).unwrap(), slot);
        assert_eq!(f.slot_of(1), Some(slot as u16));
        let key = FlowKey { ifindex: 1, proto: 17, family: 4, sport: [0, 9], dport: [0, 9], ..Default::default() };
        let entry = FlowEntry { out_ifindex: 1, generation: 3, mtu: 1500, ..Default::default() };
        f.insert(&key, &entry).unwrap();
        assert_eq!(f.lookup(&key).unwrap(), Some(entry));
        f.set_generation(3).unwrap();
        f.set_output(1, true).expect("a devmap entry for lo");
        f.set_output(1, false).unwrap();
        f.set_output(1, false).expect("removing an absent output is no error");
        assert_eq!(f.port_counts(slot as u16).unwrap(), PortCounts::default());
    }
}
