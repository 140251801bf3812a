//! The in-kernel fast path: `bpf/fastpath.bpf.c`, built by clang, loaded by aya, and its maps.
//!
//! One program and one set of maps serve every interface linerate owns in a namespace (see
//! the program's header for what it forwards and what it steers to the sockets). linerate
//! writes a [`FlowEntry`] for each direction of a flow its pipeline forwarded, and moves the
//! settings' generation on whenever routes, neighbours, rules or tables change: entries of
//! an older generation are misses, so the pipeline decides those flows again.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex, Weak};

use super::XdpError;
use super::bpf::{MapElemAttr, percpu_values};
use crate::sys;

/// Name of the program in the kernel (`bpftool prog`), one of linerate's own.
pub const PROG_NAME: &str = "lr_fast";
/// The tc program that forwards skbs: those XDP passes (checksums left partial by local
/// senders), and every decided flow's on an AF_PACKET port.
pub const TC_PROG_NAME: &str = "lr_fast_tc";
/// The filter of AF_PACKET rx sockets on a port whose fast path runs at tc ingress.
pub const SOCKET_PROG_NAME: &str = "lr_fast_sock";
/// Interfaces one fast path serves (the program's `MAX_IFACES`).
pub const MAX_IFACES: u32 = 64;
/// Queues of one interface in the shared XSKMAP (the program's `MAX_QUEUES`).
pub const MAX_QUEUES: u32 = 256;
/// Interfaces below this ifindex are found in an array, the others in a hash (the program's
/// `SMALL_IFINDEX`).
const SMALL_IFINDEX: u32 = 1024;

/// What the program matches a frame on: input interface and 5-tuple, addresses and ports as
/// they are on the wire (`struct flow_key4` or `struct flow_key6`, by `family`).
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
    /// [`FlowEntry::EXPIRES`], [`FlowEntry::NAT`].
    pub flags: u8,
    pub pad: u8,
    pub pad2: u32,
    pub packets: u64,
    pub bytes: u64,
    /// The kernel's jiffies at the flow's last frame.
    pub last_jiffies: u64,
    /// The input's MAC: a frame to another station's goes to the pipeline (which drops it
    /// as `not_for_us`).
    pub in_mac: [u8; 6],
    pub pad3: u16,
    /// With [`FlowEntry::EXPIRES`]: CLOCK_MONOTONIC nanoseconds (the program reads the
    /// coarse clock) from which the entry is a miss.
    pub expires: u64,
    /// With [`FlowEntry::NAT`] (IPv4): the addresses and ports the frame leaves with.
    pub nat_src: [u8; 4],
    pub nat_dst: [u8; 4],
    pub nat_sport: [u8; 2],
    pub nat_dport: [u8; 2],
    pub pad4: u32,
}

impl FlowEntry {
    /// The entry is valid until [`expires`](Self::expires): a flow the pipeline keeps state
    /// or a translation for, which it must see again to refresh them.
    pub const EXPIRES: u8 = 1;
    /// The frame's addresses and ports are rewritten (IPv4 only), checksums updated.
    pub const NAT: u8 = 2;
}

/// `struct flow_key4`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct FlowKey4 {
    ifindex: u32,
    src: [u8; 4],
    dst: [u8; 4],
    sport: [u8; 2],
    dport: [u8; 2],
    proto: u8,
    pad: [u8; 3],
}

/// `struct flow_key6`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct FlowKey6 {
    ifindex: u32,
    proto: u8,
    pad1: u8,
    sport: [u8; 2],
    dport: [u8; 2],
    pad2: u16,
    src: [u8; 16],
    dst: [u8; 16],
}

/// The program's key of `k`, in the map of its family.
enum MapKey {
    V4(FlowKey4),
    V6(FlowKey6),
}

impl FlowKey {
    fn map_key(&self) -> MapKey {
        if self.family == 4 {
            let mut k = FlowKey4 {
                ifindex: self.ifindex,
                sport: self.sport,
                dport: self.dport,
                proto: self.proto,
                ..Default::default()
            };
            k.src.copy_from_slice(&self.src[..4]);
            k.dst.copy_from_slice(&self.dst[..4]);
            MapKey::V4(k)
        } else {
            MapKey::V6(FlowKey6 {
                ifindex: self.ifindex,
                proto: self.proto,
                sport: self.sport,
                dport: self.dport,
                src: self.src,
                dst: self.dst,
                ..Default::default()
            })
        }
    }
}

impl FlowKey4 {
    fn flow_key(&self) -> FlowKey {
        let mut k = FlowKey {
            ifindex: self.ifindex,
            proto: self.proto,
            family: 4,
            sport: self.sport,
            dport: self.dport,
            ..FlowKey::default()
        };
        k.src[..4].copy_from_slice(&self.src);
        k.dst[..4].copy_from_slice(&self.dst);
        k
    }
}

impl FlowKey6 {
    fn flow_key(&self) -> FlowKey {
        FlowKey {
            ifindex: self.ifindex,
            proto: self.proto,
            family: 6,
            sport: self.sport,
            dport: self.dport,
            pad: 0,
            src: self.src,
            dst: self.dst,
        }
    }
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
    /// Frames the socket filter kept from the pipeline whose entry was gone when tc ran.
    pub handoff_lost: u64,
}

/// The loaded program and its maps.
pub struct FastPath {
    netns: u64,
    prog: OwnedFd,
    tc_prog: OwnedFd,
    socket_prog: OwnedFd,
    tc_slots: OwnedFd,
    flows4: OwnedFd,
    flows6: OwnedFd,
    tx_ports: OwnedFd,
    xsks: OwnedFd,
    if_slots: OwnedFd,
    if_slots_small: OwnedFd,
    config: OwnedFd,
    port_stats: OwnedFd,
    fail_closed: bool,
    /// ifindex by slot (0: free).
    slots: Mutex<Vec<u32>>,
    /// The outputs flows may be redirected to (what `tx_ports` holds).
    outputs: Mutex<Vec<u32>>,
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
                return Err(XdpError::Config(format!(
                    "the fast path already runs with fail-closed = {}",
                    f.fail_closed
                )));
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

    /// Loads the program and creates its maps (the flow tables with `flows` entries each).
    pub fn load(flows: u32, fail_closed: bool) -> Result<FastPath, XdpError> {
        let flows = flows.max(1);
        let sizes = [("flows4", flows), ("flows6", flows)];
        let mut obj = super::object::load_fast_path(
            super::object::FASTPATH,
            PROG_NAME,
            TC_PROG_NAME,
            SOCKET_PROG_NAME,
            &sizes,
        )
        .map_err(|e| XdpError::ProgramRejected { source: e, log: String::new() })?;
        let lost = |what: &str| XdpError::Config(format!("the fast path's object lost its {what}"));
        let tc_prog = obj.tc.take().ok_or_else(|| lost("tc program"))?;
        let socket_prog = obj.socket.take().ok_or_else(|| lost("socket filter"))?;
        let mut take = |name: &str| {
            obj.take_map(name).map_err(|e| XdpError::sys("take a map of the fast path", "-", e))
        };
        let fast = FastPath {
            netns: sys::netns_id(),
            flows4: take("flows4")?,
            flows6: take("flows6")?,
            tx_ports: take("tx_ports")?,
            xsks: take("xsks")?,
            if_slots: take("if_slots")?,
            if_slots_small: take("if_slots_small")?,
            config: take("config")?,
            port_stats: take("port_stats")?,
            tc_slots: take("tc_slots")?,
            prog: obj.prog,
            tc_prog,
            socket_prog,
            fail_closed,
            slots: Mutex::new(vec![0; MAX_IFACES as usize]),
            outputs: Mutex::new(Vec::new()),
            cpus: super::sink::possible_cpus()
                .map_err(|e| XdpError::sys("count the CPUs", "-", e))?,
        };
        fast.write_settings(0)
            .map_err(|e| XdpError::sys("write the fast path's settings", "-", e))?;
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
            return Err(XdpError::Config(format!(
                "the fast path serves at most {MAX_IFACES} interfaces"
            )));
        };
        // The program's array for small ifindexes holds slot + 1 (0: none).
        let written = if ifindex < SMALL_IFINDEX {
            update(&self.if_slots_small, &ifindex, &(s as u32 + 1))
        } else {
            update(&self.if_slots, &ifindex, &(s as u32))
        };
        written.map_err(|e| XdpError::sys("register an interface", "-", e))?;
        slots[s] = ifindex;
        Ok(s as u32)
    }

    /// Gives `new_ifindex` the slot of `old_ifindex` (an interface deleted and created again
    /// under the same name), so that its port keeps its counters and its range of the XSKMAP.
    /// Returns the slot; `None` if `old_ifindex` had none.
    pub fn move_slot(&self, old_ifindex: u32, new_ifindex: u32) -> io::Result<Option<u32>> {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        let Some(s) = slots.iter().position(|&i| i == old_ifindex && i != 0) else {
            return Ok(None);
        };
        let old = if old_ifindex < SMALL_IFINDEX {
            update(&self.if_slots_small, &old_ifindex, &0u32)
        } else {
            delete(&self.if_slots, &old_ifindex)
        };
        if let Err(e) = old
            && e.raw_os_error() != Some(libc::ENOENT)
        {
            return Err(e);
        }
        if new_ifindex < SMALL_IFINDEX {
            update(&self.if_slots_small, &new_ifindex, &(s as u32 + 1))?;
        } else {
            update(&self.if_slots, &new_ifindex, &(s as u32))?;
        }
        slots[s] = new_ifindex;
        Ok(Some(s as u32))
    }

    /// The slot of a registered interface.
    pub fn slot_of(&self, ifindex: u32) -> Option<u16> {
        let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        slots.iter().position(|&i| i == ifindex && i != 0).map(|s| s as u16)
    }

    /// Attaches the tc program at the ingress of the interface in `slot` (tcx, Linux 6.6),
    /// and lets XDP pass it the frames it cannot rewrite. The link detaches when dropped. On
    /// failure those frames keep going to the pipeline.
    pub fn attach_tc(&self, slot: u32, ifindex: u32) -> io::Result<OwnedFd> {
        let link = super::bpf::link_tcx_ingress_first(self.tc_prog.as_raw_fd(), ifindex)?;
        update(&self.tc_slots, &slot, &1u32)?;
        Ok(link)
    }

    /// The socket filter that keeps the frames the tc program forwards from an AF_PACKET
    /// port's rx sockets (attach it only where [`attach_tc`](Self::attach_tc) succeeded).
    pub fn socket_filter(&self) -> RawFd {
        self.socket_prog.as_raw_fd()
    }

    /// Stops XDP passing frames of the interface `ifindex` in `slot` to the tc program (its
    /// link is gone); nothing if the slot went to another interface meanwhile
    /// ([`move_slot`](Self::move_slot)).
    pub fn clear_tc(&self, slot: u32, ifindex: u32) {
        let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        if slots.get(slot as usize) == Some(&ifindex) {
            let _ = update(&self.tc_slots, &slot, &0u32);
        }
    }

    /// Points queue `queue` of the interface in `slot` at socket `sock`.
    pub fn xsk_set(&self, slot: u32, queue: u32, sock: RawFd) -> io::Result<()> {
        if queue >= MAX_QUEUES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("queue {queue} >= {MAX_QUEUES}"),
            ));
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
        let mut outputs = self.outputs.lock().unwrap_or_else(|e| e.into_inner());
        outputs.retain(|&i| i != ifindex);
        if on {
            // struct bpf_devmap_val: the device, and no program of its own (fd -1).
            update(&self.tx_ports, &ifindex, &[ifindex, u32::MAX])?;
            outputs.push(ifindex);
            Ok(())
        } else {
            match delete(&self.tx_ports, &ifindex) {
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(()),
                r => r,
            }
        }
    }

    /// Whether flows may be redirected to `ifindex` now ([`set_output`](Self::set_output)).
    pub fn takes(&self, ifindex: u32) -> bool {
        self.outputs.lock().unwrap_or_else(|e| e.into_inner()).contains(&ifindex)
    }

    /// Writes one flow's entry (replacing any).
    pub fn insert(&self, key: &FlowKey, entry: &FlowEntry) -> io::Result<()> {
        match key.map_key() {
            MapKey::V4(k) => update(&self.flows4, &k, entry),
            MapKey::V6(k) => update(&self.flows6, &k, entry),
        }
    }

    /// A flow's entry, if the table has it.
    pub fn lookup(&self, key: &FlowKey) -> io::Result<Option<FlowEntry>> {
        let mut entry = FlowEntry::default();
        let found = match key.map_key() {
            MapKey::V4(k) => lookup(&self.flows4, &k, &mut entry),
            MapKey::V6(k) => lookup(&self.flows6, &k, &mut entry),
        };
        match found {
            Ok(()) => Ok(Some(entry)),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Removes a flow's entry (gone already: nothing to do).
    pub fn remove(&self, key: &FlowKey) -> io::Result<()> {
        let r = match key.map_key() {
            MapKey::V4(k) => delete(&self.flows4, &k),
            MapKey::V6(k) => delete(&self.flows6, &k),
        };
        match r {
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(()),
            r => r,
        }
    }

    /// Hands every flow entry the program holds to `each`, read a few thousand at a time.
    pub fn for_each_flow(&self, mut each: impl FnMut(&FlowKey, &FlowEntry)) -> io::Result<()> {
        const CHUNK: usize = 4096;
        super::bpf::hash_for_each(self.flows4.as_raw_fd(), CHUNK, |k: &FlowKey4, e| {
            each(&k.flow_key(), e)
        })?;
        super::bpf::hash_for_each(self.flows6.as_raw_fd(), CHUNK, |k: &FlowKey6, e| {
            each(&k.flow_key(), e)
        })
    }

    /// What the program counted on the interface in `slot`, summed over the CPUs.
    pub fn port_counts(&self, slot: u16) -> io::Result<PortCounts> {
        let v: [u64; 6] = percpu_values(self.port_stats.as_raw_fd(), u32::from(slot), self.cpus)?;
        Ok(PortCounts {
            rx_packets: v[0],
            rx_bytes: v[1],
            tx_packets: v[2],
            tx_bytes: v[3],
            unsteered: v[4],
            handoff_lost: v[5],
        })
    }

    /// What the program counted on `ifindex`, if it is registered.
    pub fn counts_of(&self, ifindex: u32) -> Option<PortCounts> {
        self.port_counts(self.slot_of(ifindex)?).ok()
    }
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
    sys::bpf(sys::BPF_MAP_LOOKUP_ELEM, &mut elem_attr(map, key, value as *mut V as *const V))
        .map(drop)
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
        assert_eq!(std::mem::size_of::<FlowKey4>(), 20);
        assert_eq!(std::mem::size_of::<FlowKey6>(), 44);
        assert_eq!(std::mem::size_of::<FlowEntry>(), 88);
        assert_eq!(std::mem::offset_of!(FlowEntry, flags), 26);
        assert_eq!(std::mem::offset_of!(FlowEntry, packets), 32);
        assert_eq!(std::mem::offset_of!(FlowEntry, expires), 64);
        assert_eq!(std::mem::offset_of!(FlowEntry, nat_sport), 80);
        assert_eq!(std::mem::size_of::<PortCounts>(), 48);
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
        let key = FlowKey {
            ifindex: 1,
            proto: 17,
            family: 4,
            sport: [0, 9],
            dport: [0, 9],
            ..Default::default()
        };
        let entry = FlowEntry { out_ifindex: 1, generation: 3, mtu: 1500, ..Default::default() };
        f.insert(&key, &entry).unwrap();
        assert_eq!(f.lookup(&key).unwrap(), Some(entry));
        f.set_generation(3).unwrap();
        f.set_output(1, true).expect("a devmap entry for lo");
        assert!(f.takes(1));
        f.set_output(1, false).unwrap();
        assert!(!f.takes(1));
        f.set_output(1, false).expect("removing an absent output is no error");
        assert_eq!(f.port_counts(slot as u16).unwrap(), PortCounts::default());
    }

    /// The program on real bytes: a UDP datagram 198.18.0.2:1234 -> 198.19.0.2:9 arriving
    /// on lo (ifindex 1, slot 0) for MAC 02:00:00:00:0d:00, TTL 64.
    fn datagram() -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0x0d, 0, 2, 0, 0, 0, 0x0a, 1, 0x08, 0x00];
        let mut ip = [0x45, 0, 0, 28, 0, 1, 0x40, 0, 64, 17, 0, 0, 198, 18, 0, 2, 198, 19, 0, 2];
        let c = wire::checksum::fold(u64::from(wire::checksum::sum(&ip)));
        ip[10..12].copy_from_slice(&(!c).to_be_bytes());
        f.extend_from_slice(&ip);
        f.extend_from_slice(&[0x04, 0xd2, 0, 9, 0, 8, 0x12, 0x34]);
        f.resize(60, 0);
        f
    }

    fn flow_of(frame: &[u8]) -> FlowKey {
        let mut k = FlowKey { ifindex: 1, proto: frame[23], family: 4, ..Default::default() };
        k.src[..4].copy_from_slice(&frame[26..30]);
        k.dst[..4].copy_from_slice(&frame[30..34]);
        k.sport.copy_from_slice(&frame[34..36]);
        k.dport.copy_from_slice(&frame[36..38]);
        k
    }

    const XDP_PASS: u32 = 2;
    const XDP_REDIRECT: u32 = 4;

    /// A fast path with one flow: `datagram()`'s, decided in generation 7, out by lo.
    fn one_flow() -> FastPath {
        let f = FastPath::load(1024, false).expect("the verifier accepts lr_fast");
        assert_eq!(f.register(1).unwrap(), 0);
        f.set_output(1, true).unwrap();
        f.set_generation(7).unwrap();
        let entry = FlowEntry {
            dst_mac: [2, 0, 0, 0, 0x0b, 1],
            src_mac: [2, 0, 0, 0, 0x0d, 1],
            out_ifindex: 1,
            generation: 7,
            mtu: 1500,
            in_slot: 0,
            out_slot: 0,
            in_mac: [2, 0, 0, 0, 0x0d, 0],
            ..Default::default()
        };
        f.insert(&flow_of(&datagram()), &entry).unwrap();
        f
    }

    #[test]
    fn a_decided_flow_is_rewritten_as_the_pipeline_would() {
        assert!(crate::netdev::is_root(), "needs root (bpf): run the suite as root");
        let f = one_flow();
        let run = super::super::bpf::test_run_xdp(f.prog_fd(), &datagram(), 1, 1).unwrap();
        assert_eq!(run.action, XDP_REDIRECT);
        let mut want = datagram();
        want[0..12].copy_from_slice(&[2, 0, 0, 0, 0x0b, 1, 2, 0, 0, 0, 0x0d, 1]);
        let mut ip = wire::Ipv4Packet::new_unchecked(&mut want[14..34]);
        ip.decrement_ttl();
        assert_eq!(run.frame, want, "MACs and TTL rewritten, checksum as the pipeline's");
        assert!(wire::Ipv4Packet::new_unchecked(&run.frame[14..34]).verify_checksum());
        let entry = f.lookup(&flow_of(&datagram())).unwrap().unwrap();
        let ip_len = u64::from(u16::from_be_bytes([want[16], want[17]]));
        assert_eq!((entry.packets, entry.bytes), (1, ip_len), "the entry counts IP bytes");
        let counts = f.port_counts(0).unwrap();
        assert_eq!((counts.rx_packets, counts.rx_bytes), (1, 60), "the port counts frames");
    }

    #[test]
    fn every_entry_is_read_back_and_one_removed() {
        assert!(crate::netdev::is_root(), "needs root (bpf): run the suite as root");
        let f = one_flow();
        let entry = f.lookup(&flow_of(&datagram())).unwrap().unwrap();
        let mut other = flow_of(&datagram());
        other.sport = [0x12, 0x34];
        f.insert(&other, &entry).unwrap();
        let d6 = datagram6();
        let mut six = FlowKey { ifindex: 1, proto: 17, family: 6, ..Default::default() };
        six.src.copy_from_slice(&d6[22..38]);
        six.dst.copy_from_slice(&d6[38..54]);
        f.insert(&six, &entry).unwrap();
        let mut seen = Vec::new();
        f.for_each_flow(|k, _| seen.push(*k)).unwrap();
        seen.sort_by_key(|k| (k.family, k.sport));
        let mut want = vec![flow_of(&datagram()), other, six];
        want.sort_by_key(|k| (k.family, k.sport));
        assert_eq!(seen, want);
        f.remove(&other).unwrap();
        f.remove(&other).unwrap();
        assert_eq!(f.lookup(&other).unwrap(), None);
        let mut n = 0;
        f.for_each_flow(|_, _| n += 1).unwrap();
        assert_eq!(n, 2);
    }

    /// A UDP datagram 2001:db8:a::2 -> 2001:db8:b::2, hop limit 64, on lo.
    fn datagram6() -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0x0d, 0, 2, 0, 0, 0, 0x0a, 1, 0x86, 0xdd];
        f.extend_from_slice(&[0x60, 0, 0, 0, 0, 8, 17, 64]);
        f.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0x0a, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        f.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0x0b, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        f.extend_from_slice(&[0x04, 0xd2, 0, 9, 0, 8, 0x12, 0x34]);
        f
    }

    #[test]
    fn an_ipv6_flow_takes_its_own_table() {
        assert!(crate::netdev::is_root(), "needs root (bpf): run the suite as root");
        let f = one_flow();
        let d = datagram6();
        let mut key = FlowKey { ifindex: 1, proto: 17, family: 6, ..Default::default() };
        key.src.copy_from_slice(&d[22..38]);
        key.dst.copy_from_slice(&d[38..54]);
        key.sport.copy_from_slice(&d[54..56]);
        key.dport.copy_from_slice(&d[56..58]);
        let run = super::super::bpf::test_run_xdp(f.prog_fd(), &d, 1, 1).unwrap();
        assert_eq!(run.action, XDP_PASS, "no entry yet");
        let entry = f.lookup(&flow_of(&datagram())).unwrap().unwrap();
        f.insert(&key, &entry).unwrap();
        let run = super::super::bpf::test_run_xdp(f.prog_fd(), &d, 1, 1).unwrap();
        assert_eq!(run.action, XDP_REDIRECT);
        let mut want = d.clone();
        want[0..12].copy_from_slice(&[2, 0, 0, 0, 0x0b, 1, 2, 0, 0, 0, 0x0d, 1]);
        want[21] = 63;
        assert_eq!(run.frame, want, "MACs and hop limit rewritten");
        let mut hop1 = d.clone();
        hop1[21] = 1;
        assert_eq!(
            super::super::bpf::test_run_xdp(f.prog_fd(), &hop1, 1, 1).unwrap().action,
            XDP_PASS,
            "hop limit 1"
        );
    }

    #[test]
    fn what_the_pipeline_must_see_is_left_to_it() {
        assert!(crate::netdev::is_root(), "needs root (bpf): run the suite as root");
        let f = one_flow();
        let changed = |edit: &dyn Fn(&mut Vec<u8>)| {
            let mut d = datagram();
            edit(&mut d);
            d
        };
        let fix_ip_sum = |d: &mut Vec<u8>| {
            wire::Ipv4Packet::new_unchecked(&mut d[14..34]).fill_checksum();
        };
        let cases: Vec<(&str, Vec<u8>)> = vec![
            (
                "TTL 1",
                changed(&|d| {
                    d[22] = 1;
                    fix_ip_sum(d)
                }),
            ),
            ("bad IPv4 checksum", changed(&|d| d[24] ^= 1)),
            (
                "fragment",
                changed(&|d| {
                    d[20] = 0x20;
                    fix_ip_sum(d)
                }),
            ),
            ("another station's MAC", changed(&|d| d[5] = 9)),
            (
                "partial UDP checksum",
                changed(&|d| {
                    // 198.18.0.2 + 198.19.0.2 + 17 + 8, folded: what a CHECKSUM_PARTIAL sender leaves.
                    let pseudo = wire::checksum::fold(0xc612 + 2 + 0xc613 + 2 + 17 + 8);
                    d[40..42].copy_from_slice(&pseudo.to_be_bytes());
                }),
            ),
            (
                "IP length beyond the frame",
                changed(&|d| {
                    d[17] = 200;
                    fix_ip_sum(d)
                }),
            ),
            ("another flow", changed(&|d| d[35] = 1)),
        ];
        for (what, frame) in cases {
            let run = super::super::bpf::test_run_xdp(f.prog_fd(), &frame, 1, 1).unwrap();
            assert_eq!(run.action, XDP_PASS, "{what}: to the socket (none here: the kernel)");
            assert_eq!(run.frame, frame, "{what}: untouched");
        }
        f.set_generation(8).unwrap();
        let run = super::super::bpf::test_run_xdp(f.prog_fd(), &datagram(), 1, 1).unwrap();
        assert_eq!(run.action, XDP_PASS, "an entry of an older generation is a miss");
        f.set_output(1, false).unwrap();
        f.set_generation(7).unwrap();
        let run = super::super::bpf::test_run_xdp(f.prog_fd(), &datagram(), 1, 1).unwrap();
        assert_eq!(
            (run.action, run.frame),
            (XDP_PASS, datagram()),
            "an output gone: untouched, to the pipeline"
        );
    }

    /// The UDP checksum of an IPv4 frame's datagram (RFC 768), 0 sent as 0xffff.
    fn udp_checksum(frame: &[u8]) -> u16 {
        let ip = |r: std::ops::Range<usize>| {
            std::net::Ipv4Addr::from(<[u8; 4]>::try_from(&frame[r]).unwrap())
        };
        let udp = &frame[34..34 + usize::from(u16::from_be_bytes([frame[38], frame[39]]))];
        let mut d = udp.to_vec();
        d[6..8].fill(0);
        let pseudo = wire::checksum::pseudo_header_v4(&ip(26..30), &ip(30..34), 17, d.len() as u32);
        let c = !wire::checksum::fold(u64::from(pseudo) + u64::from(wire::checksum::sum(&d)));
        if c == 0 { 0xffff } else { c }
    }

    /// A translated flow (`nat`: 198.18.0.2:1234 leaves as 203.0.113.1:50000): addresses,
    /// ports and both checksums as a translation from scratch would leave them; a datagram
    /// without a UDP checksum keeps none. An entry past its time is a miss.
    #[test]
    fn a_translated_flow_leaves_translated_until_its_entry_expires() {
        assert!(crate::netdev::is_root(), "needs root (bpf): run the suite as root");
        let f = one_flow();
        let mut d = datagram();
        let c = udp_checksum(&d);
        d[40..42].copy_from_slice(&c.to_be_bytes());
        let mut entry = f.lookup(&flow_of(&d)).unwrap().unwrap();
        entry.flags = FlowEntry::NAT | FlowEntry::EXPIRES;
        entry.expires = u64::MAX;
        (entry.nat_src, entry.nat_dst) = ([203, 0, 113, 1], [198, 19, 0, 2]);
        (entry.nat_sport, entry.nat_dport) = (50000u16.to_be_bytes(), [0, 9]);
        f.insert(&flow_of(&d), &entry).unwrap();
        let mut want = d.clone();
        want[0..12].copy_from_slice(&[2, 0, 0, 0, 0x0b, 1, 2, 0, 0, 0, 0x0d, 1]);
        want[22] = 63;
        want[26..30].copy_from_slice(&[203, 0, 113, 1]);
        want[34..36].copy_from_slice(&50000u16.to_be_bytes());
        wire::Ipv4Packet::new_unchecked(&mut want[14..34]).fill_checksum();
        let c = udp_checksum(&want);
        want[40..42].copy_from_slice(&c.to_be_bytes());
        let run = super::super::bpf::test_run_xdp(f.prog_fd(), &d, 1, 1).unwrap();
        assert_eq!(run.action, XDP_REDIRECT);
        assert_eq!(run.frame, want, "translated, both checksums right");
        let mut unsummed = d.clone();
        unsummed[40..42].fill(0);
        let run = super::super::bpf::test_run_xdp(f.prog_fd(), &unsummed, 1, 1).unwrap();
        assert_eq!(&run.frame[40..42], &[0, 0], "no UDP checksum: still none");
        assert_eq!(&run.frame[14..40], &want[14..40]);
        entry.expires = 0;
        f.insert(&flow_of(&d), &entry).unwrap();
        let run = super::super::bpf::test_run_xdp(f.prog_fd(), &d, 1, 1).unwrap();
        assert_eq!((run.action, run.frame), (XDP_PASS, d), "expired: untouched, to the pipeline");
    }

    /// Fail-closed, with no socket on the queue: IP and tagged frames are dropped and counted
    /// (the kernel would route them unfiltered), ARP and LLDP go to the kernel; without it,
    /// the same IP frame goes to the kernel too.
    #[test]
    fn fail_closed_drops_and_counts_what_no_socket_takes() {
        assert!(crate::netdev::is_root(), "needs root (bpf): run the suite as root");
        let frame = |ethertype: u16| {
            let mut f = [0u8; 60];
            f[12..14].copy_from_slice(&ethertype.to_be_bytes());
            f
        };
        let run = |f: &FastPath, ethertype| {
            super::super::bpf::test_run_xdp(f.prog_fd(), &frame(ethertype), 1, 1).unwrap().action
        };
        let closed = FastPath::load(64, true).unwrap();
        closed.register(1).unwrap();
        for ethertype in [0x0800, 0x86dd, 0x8100] {
            assert_eq!(run(&closed, ethertype), 1, "{ethertype:#x}: XDP_DROP");
        }
        assert_eq!(run(&closed, 0x0806), XDP_PASS, "ARP");
        assert_eq!(run(&closed, 0x88cc), XDP_PASS, "LLDP");
        assert_eq!(closed.port_counts(0).unwrap().unsteered, 3);
        let open = FastPath::load(64, false).unwrap();
        open.register(1).unwrap();
        assert_eq!(run(&open, 0x0800), XDP_PASS);
        let unregistered = FastPath::load(64, true).unwrap();
        assert_eq!(run(&unregistered, 0x0800), XDP_PASS, "not linerate's interface");
    }

    /// Not a benchmark (the lab and `linerate bench` are): the program's own time per frame,
    /// hit and miss, printed for docs/performance.md (`cargo test -p linerate-io --lib
    /// fastpath -- --nocapture`).
    #[test]
    fn the_program_costs_per_frame() {
        assert!(crate::netdev::is_root(), "needs root (bpf): run the suite as root");
        let f = one_flow();
        // The repeated runs rewrite one buffer: with TTL 255 and the MACs rewritten to
        // themselves, 200 runs in a row are all hits.
        let mut frame = datagram();
        frame[22] = 255;
        wire::Ipv4Packet::new_unchecked(&mut frame[14..34]).fill_checksum();
        let mut entry = f.lookup(&flow_of(&frame)).unwrap().unwrap();
        entry.dst_mac = entry.in_mac;
        entry.src_mac = [2, 0, 0, 0, 0x0a, 1];
        f.insert(&flow_of(&frame), &entry).unwrap();
        let mut other = frame.clone();
        other[35] = 1;
        // What BPF_PROG_TEST_RUN itself costs a run: a program that only returns XDP_PASS.
        let pass = super::super::bpf::load_xdp(
            &[super::super::bpf::Insn::mov_imm(0, 2), super::super::bpf::Insn::exit()],
            "lr_test_pass",
        )
        .unwrap();
        // The least of many calls: what a run costs when nothing else interferes.
        let (mut hit, mut miss, mut base) = (u32::MAX, u32::MAX, u32::MAX);
        const CALLS: u64 = 200;
        for _ in 0..CALLS {
            let h = super::super::bpf::test_run_xdp(f.prog_fd(), &frame, 1, 200).unwrap();
            let m = super::super::bpf::test_run_xdp(f.prog_fd(), &other, 1, 200).unwrap();
            let b = super::super::bpf::test_run_xdp(pass.as_raw_fd(), &frame, 1, 200).unwrap();
            assert_eq!((h.action, m.action), (XDP_REDIRECT, XDP_PASS));
            (hit, miss, base) =
                (hit.min(h.ns_per_run), miss.min(m.ns_per_run), base.min(b.ns_per_run));
        }
        eprintln!(
            "lr_fast: {hit} ns a hit, {miss} ns a miss; an empty program {base} ns (BPF_PROG_TEST_RUN, least of {CALLS} x 200 runs)"
        );
    }
}
