//! linerate's eBPF objects (`crates/io/bpf/*.bpf.c`, built by clang in `build.rs`), and the
//! loading of one XDP program of an object with its maps, by aya.

use std::io;
use std::os::fd::{AsFd, OwnedFd};

use aya::EbpfLoader;
use aya::maps::{Map, MapData};
use aya::programs::{SchedClassifier, SocketFilter, Xdp};

/// `bpf/fastpath.bpf.c`: the fast path and the steering to the sockets.
pub static FASTPATH: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/fastpath.bpf.o"));
/// `bpf/tools.bpf.c`: the lab's counting sink and the pass-everything program.
pub static TOOLS: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/tools.bpf.o"));
/// `bpf/kernel_copy.bpf.c`: the tc program that drops the kernel's copy of forwarded frames.
pub static KERNEL_COPY: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/kernel_copy.bpf.o"));

/// A loaded XDP program and the maps of its object (the object itself is dropped: these
/// fds keep the kernel's objects).
pub struct Loaded {
    pub prog: OwnedFd,
    /// The tc program loaded with it ([`load_xdp_and_tc`]), sharing its maps.
    pub tc: Option<OwnedFd>,
    /// The socket filter loaded with it ([`load_fast_path`]), sharing its maps.
    pub socket: Option<OwnedFd>,
    maps: Vec<(String, OwnedFd)>,
}

impl Loaded {
    /// The map `name` of the object (once).
    pub fn take_map(&mut self, name: &str) -> io::Result<OwnedFd> {
        let at = self
            .maps
            .iter()
            .position(|(n, _)| n == name)
            .ok_or_else(|| io::Error::other(format!("the object has no map {name}")))?;
        Ok(self.maps.swap_remove(at).1)
    }
}

/// Loads XDP program `prog` of `object`, its maps created with the sizes of `max_entries`
/// (by name) where given. The error carries the verifier's or the loader's words.
pub fn load_xdp(object: &[u8], prog: &str, max_entries: &[(&str, u32)]) -> io::Result<Loaded> {
    load_xdp_and_tc(object, prog, None, max_entries)
}

/// As [`load_xdp_and_tc`], and socket filter `socket` of the same object too.
pub fn load_fast_path(
    object: &[u8],
    prog: &str,
    tc: &str,
    socket: &str,
    max_entries: &[(&str, u32)],
) -> io::Result<Loaded> {
    let (mut tc_fd, mut socket_fd) = (None, None);
    load_object(object, prog, max_entries, |obj| {
        socket_fd = Some(load_socket_filter(obj, socket)?);
        tc_fd = Some(load_tc(obj, tc)?);
        Ok(())
    })
    .map(|l| Loaded { tc: tc_fd, socket: socket_fd, ..l })
}

/// As [`load_xdp`], and tc program `tc` of the same object too, with the same maps.
pub fn load_xdp_and_tc(
    object: &[u8],
    prog: &str,
    tc: Option<&str>,
    max_entries: &[(&str, u32)],
) -> io::Result<Loaded> {
    let mut tc_fd = None;
    load_object(object, prog, max_entries, |obj| {
        if let Some(name) = tc {
            tc_fd = Some(load_tc(obj, name)?);
        }
        Ok(())
    })
    .map(|l| Loaded { tc: tc_fd, ..l })
}

/// Loads XDP program `prog` of `object` and, by `more`, others of it; then takes its maps.
fn load_object(
    object: &[u8],
    prog: &str,
    max_entries: &[(&str, u32)],
    more: impl FnOnce(&mut aya::Ebpf) -> io::Result<()>,
) -> io::Result<Loaded> {
    let mut loader = EbpfLoader::new();
    for (map, n) in max_entries {
        loader.set_max_entries(map, *n);
    }
    let mut obj = loader
        .load(object)
        .map_err(|e| io::Error::other(format!("loading the object of {prog}: {e}")))?;
    let program: &mut Xdp = obj
        .program_mut(prog)
        .ok_or_else(|| io::Error::other(format!("the object has no program {prog}")))?
        .try_into()
        .map_err(|e| io::Error::other(format!("{prog} is not an XDP program: {e}")))?;
    program.load().map_err(|e| io::Error::other(format!("the kernel refused {prog}: {e:?}")))?;
    let prog_fd = program
        .fd()
        .map_err(|e| io::Error::other(format!("{prog}: {e}")))?
        .as_fd()
        .try_clone_to_owned()?;
    more(&mut obj)?;
    Ok(Loaded { prog: prog_fd, tc: None, socket: None, maps: take_maps(&mut obj)? })
}

/// Loads tc program `prog` of `object` alone, with its maps.
pub fn load_tc_only(object: &[u8], prog: &str) -> io::Result<Loaded> {
    let mut obj = EbpfLoader::new()
        .load(object)
        .map_err(|e| io::Error::other(format!("loading the object of {prog}: {e}")))?;
    let prog_fd = load_tc(&mut obj, prog)?;
    Ok(Loaded { prog: prog_fd, tc: None, socket: None, maps: take_maps(&mut obj)? })
}

/// Every map of a loaded object, by name, as fds of their own.
fn take_maps(obj: &mut aya::Ebpf) -> io::Result<Vec<(String, OwnedFd)>> {
    let names: Vec<String> = obj.maps().map(|(n, _)| n.to_owned()).collect();
    let mut maps = Vec::new();
    for name in names {
        if let Some(map) = obj.take_map(&name) {
            maps.push((name, map_fd(&map)?));
        }
    }
    Ok(maps)
}

/// Loads tc program `name` of a loaded object.
fn load_tc(obj: &mut aya::Ebpf, name: &str) -> io::Result<OwnedFd> {
    let program: &mut SchedClassifier = obj
        .program_mut(name)
        .ok_or_else(|| io::Error::other(format!("the object has no program {name}")))?
        .try_into()
        .map_err(|e| io::Error::other(format!("{name} is not a tc program: {e}")))?;
    program.load().map_err(|e| io::Error::other(format!("the kernel refused {name}: {e:?}")))?;
    program.fd().map_err(|e| io::Error::other(format!("{name}: {e}")))?.as_fd().try_clone_to_owned()
}

/// Loads socket filter `name` of a loaded object.
fn load_socket_filter(obj: &mut aya::Ebpf, name: &str) -> io::Result<OwnedFd> {
    let program: &mut SocketFilter = obj
        .program_mut(name)
        .ok_or_else(|| io::Error::other(format!("the object has no program {name}")))?
        .try_into()
        .map_err(|e| io::Error::other(format!("{name} is not a socket filter: {e}")))?;
    program.load().map_err(|e| io::Error::other(format!("the kernel refused {name}: {e:?}")))?;
    program.fd().map_err(|e| io::Error::other(format!("{name}: {e}")))?.as_fd().try_clone_to_owned()
}

/// A duplicate of the fd of one of the object's maps.
fn map_fd(map: &Map) -> io::Result<OwnedFd> {
    let data: &MapData = match map {
        Map::Array(d)
        | Map::DevMapHash(d)
        | Map::HashMap(d)
        | Map::LruHashMap(d)
        | Map::PerCpuArray(d)
        | Map::XskMap(d) => d,
        _ => return Err(io::Error::other("unexpected map type")),
    };
    data.fd().as_fd().try_clone_to_owned()
}
