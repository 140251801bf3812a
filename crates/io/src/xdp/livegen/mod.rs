//! An in-kernel packet generator: an XDP program run by BPF_PROG_RUN in live-frames mode
//! (Linux 5.18; kernel doc `bpf/bpf_prog_run.rst`, "Running XDP programs in live frame
//! mode"; what xdp-trafficgen does). The kernel makes each frame from one template in a page
//! of its own page pool, runs the program on it, and sends it out of the interface through
//! the driver's `ndo_xdp_xmit` when the program returns XDP_TX: no socket, no skb, no copy
//! from user space. The program ([`program`]) gives each frame the next flow of the
//! configured set (sources x destinations) and size, and fixes the lengths and checksums.
//!
//! BPF_PROG_RUN reports runs, not frames sent: a driver may refuse frames (veth: its peer's
//! 256-entry ring is full, or the peer has no NAPI and takes none) and the syscall still
//! succeeds. [`Sender`] counts what really left from the driver's `xdp_xmit` statistics
//! (`ethtool -S`), before and after each call.

mod layout;
mod program;
#[cfg(test)]
mod tests;

use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, OwnedFd};

pub use layout::Layout;

use super::bpf;
use crate::ethtool::DriverStats;

/// BPF object name of the program.
pub const PROG_NAME: &str = "lr_livegen";
/// Frames the kernel sends per flush (its most, TEST_XDP_MAX_BATCH).
pub const MAX_BATCH: u32 = 256;

/// One step of the size cycle: an Ethernet frame of `frame_len` bytes (no FCS) holding an IP
/// packet of `ip_len` bytes (the rest is padding).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameSize {
    pub frame_len: usize,
    pub ip_len: usize,
}

/// What to send. Frame `i` goes from source `i % S` to destination `(i / S) % D` with size
/// `(i / (S * D)) % Z`: all flows at one size, then all flows at the next.
pub struct Spec<'a> {
    /// A UDP frame (IPv4 or IPv6, optionally 802.1Q-tagged) whose payload is zeros, at
    /// least as long as the largest size: its MACs, tag, TTL and other constant fields are
    /// sent as they are.
    pub template: &'a [u8],
    /// Source (address, port)s, of the template's family.
    pub sources: &'a [(IpAddr, u16)],
    pub destinations: &'a [(IpAddr, u16)],
    pub sizes: &'a [FrameSize],
}

#[derive(Debug, thiserror::Error)]
pub enum LiveGenError {
    #[error("generator template: {0}")]
    Template(String),
    #[error("the kernel rejected the generator's XDP program: {source}\nverifier log:\n{log}")]
    Rejected { source: io::Error, log: String },
    #[error("{what}: {source}")]
    Sys { what: String, source: io::Error },
    #[error("interface `{0}` does not exist in this network namespace (see `ip link`)")]
    NoInterface(String),
    #[error(
        "`{ifname}` has no driver statistics of XDP transmits (no `xdp_xmit` in `ethtool -S {ifname}`): \
         the xdp-live generator could not tell frames sent from frames dropped"
    )]
    NoXmitCounters { ifname: String },
    #[error(
        "`{ifname}` took none of the {attempted} frames sent by XDP: its veth peer{peer} has no NAPI \
         to receive them. Enable it on the peer with `ethtool -K PEER gro on` (or attach an XDP \
         program to the peer), and check that both ends are up"
    )]
    PeerNotReady { ifname: String, attempted: u64, peer: String },
}

impl LiveGenError {
    /// A call that failed for want of memory or room (ENOMEM, ENOSPC: seen once in a lab on
    /// Linux 6.18 while the DUT forwarded the frames), which the next call may not meet.
    pub fn is_transient(&self) -> bool {
        matches!(self, LiveGenError::Sys { source, .. } if matches!(source.raw_os_error(), Some(libc::ENOSPC | libc::ENOMEM)))
    }
}

fn sys(what: impl Into<String>) -> impl FnOnce(io::Error) -> LiveGenError {
    let what = what.into();
    move |source| LiveGenError::Sys { what, source }
}

/// The loaded program and its maps.
pub struct Generator {
    prog: OwnedFd,
    /// State, sizes, sources, destinations.
    maps: [OwnedFd; 4],
    /// The program's metadata ([`program::META`]), then the template.
    data: Vec<u8>,
    layout: Layout,
}

impl Generator {
    /// Checks `spec`, fills the maps and loads the program.
    pub fn load(spec: &Spec) -> Result<Generator, LiveGenError> {
        let layout = Layout::of(spec.template)?;
        let count = |what: &str, n: usize| match u32::try_from(n) {
            Ok(n) if n > 0 && n < i32::MAX as u32 => Ok(n),
            _ => Err(LiveGenError::Template(format!("{n} {what}: expected 1 to {}", i32::MAX - 1))),
        };
        let counts = program::Counts {
            sources: count("sources", spec.sources.len())?,
            destinations: count("destinations", spec.destinations.len())?,
            sizes: count("sizes", spec.sizes.len())?,
        };
        let table =
            |name: &str, value_size: usize, values: &[u8]| -> Result<OwnedFd, LiveGenError> {
                let n = (values.len() / value_size) as u32;
                let map = bpf::create_array(name, value_size as u32, n)
                    .map_err(sys(format!("creating map {name} of {n} entries")))?;
                bpf::array_fill(map.as_raw_fd(), value_size, values)
                    .map_err(sys(format!("filling map {name}")))?;
                Ok(map)
            };
        let state = table("lr_gen_state", layout::STATE_VALUE, &[0; layout::STATE_VALUE])?;
        let sizes = table("lr_gen_sizes", layout::SIZE_VALUE, &layout::sizes(layout, spec)?)?;
        let sources =
            table("lr_gen_src", layout::ENDPOINT_VALUE, &layout::endpoints(layout, spec.sources)?)?;
        let destinations = table(
            "lr_gen_dst",
            layout::ENDPOINT_VALUE,
            &layout::endpoints(layout, spec.destinations)?,
        )?;
        let maps = program::Maps {
            state: state.as_raw_fd(),
            sizes: sizes.as_raw_fd(),
            sources: sources.as_raw_fd(),
            destinations: destinations.as_raw_fd(),
        };
        let insns = program::program(layout, &spec.template[..layout.headers_end()], &maps, counts);
        let prog = bpf::load_xdp(&insns, PROG_NAME)
            .map_err(|e| LiveGenError::Rejected { source: e.source, log: e.log })?;
        let data = [&program::META[..], spec.template].concat();
        Ok(Generator { prog, maps: [state, sizes, sources, destinations], data, layout })
    }

    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// The template the kernel copies into each new page.
    pub fn template(&self) -> &[u8] {
        &self.data[program::META.len()..]
    }

    /// Runs the program once, not live, on `frame` (what a recycled page would hold) with
    /// the generator's metadata, and returns its verdict and the frame it made. For tests:
    /// the flow state advances as it does when sending.
    pub fn run_on(&self, frame: &[u8]) -> Result<(u32, Vec<u8>), LiveGenError> {
        self.run_on_page(program::META, frame)
    }

    /// [`run_on`](Self::run_on) with `meta` in the metadata: what a recycled page holds there
    /// after a receiver wrote into the headroom.
    pub fn run_on_page(&self, meta: [u8; 4], frame: &[u8]) -> Result<(u32, Vec<u8>), LiveGenError> {
        let input = [&meta[..], frame].concat();
        let (verdict, out) =
            bpf::test_run_frame(self.prog.as_raw_fd(), &input, meta.len() as u32, 4096)
                .map_err(sys("BPF_PROG_RUN (test)"))?;
        match out.get(..meta.len()) {
            Some(m) if m == meta => Ok((verdict, out[meta.len()..].to_vec())),
            _ => Err(LiveGenError::Template("the program changed its metadata".into())),
        }
    }

    /// Runs the program once, not live, on `frame` without the generator's metadata, as on
    /// a frame received by the interface the program is attached to (see [`Sender::open`]).
    pub fn run_on_received(&self, frame: &[u8]) -> Result<(u32, Vec<u8>), LiveGenError> {
        bpf::test_run_frame(self.prog.as_raw_fd(), frame, 0, 4096)
            .map_err(sys("BPF_PROG_RUN (test)"))
    }

    /// Whether `verdict` (from [`run_on`](Self::run_on)) sends the frame.
    pub fn sends(verdict: u32) -> bool {
        verdict == program::XDP_TX as u32
    }

    /// Whether `verdict` lets the frame go on untouched.
    pub fn passes(verdict: u32) -> bool {
        verdict == program::XDP_PASS as u32
    }

    /// Makes and offers `frames` frames to interface `ifindex`, `batch` per flush. A signal
    /// may end the call early (EINTR, not an error): [`runs`](Self::runs) says how many ran.
    fn send_raw(&self, ifindex: u32, frames: u32, batch: u32) -> io::Result<()> {
        match bpf::run_live(
            self.prog.as_raw_fd(),
            &self.data,
            program::META.len() as u32,
            ifindex,
            frames,
            batch,
        ) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(()),
            other => other,
        }
    }

    /// Runs of the program since it was loaded (its state map's counter).
    pub fn runs(&self) -> io::Result<u64> {
        let mut value = [0u8; layout::STATE_VALUE];
        bpf::array_get(self.maps[0].as_raw_fd(), 0, &mut value)?;
        let at = layout::ST_RUNS as usize;
        Ok(u64::from_ne_bytes(value[at..at + 8].try_into().expect("8 bytes")))
    }
}

/// Frames offered to the driver and what became of them, since the [`Sender`] opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Runs of the program: frames made and offered.
    pub attempted: u64,
    /// Frames the driver took (its `xdp_xmit` counters).
    pub sent: u64,
    /// Frames the driver refused and counted (`xdp_xmit_errors`: veth's peer ring full).
    pub refused: u64,
}

/// The driver's counters of frames sent and refused by `ndo_xdp_xmit`, summed over queues
/// (veth: `tx_queue_N_xdp_xmit`, `tx_queue_N_xdp_xmit_errors`).
struct XmitCounters {
    stats: DriverStats,
    sent: Vec<usize>,
    refused: Vec<usize>,
    peer: Option<usize>,
}

impl XmitCounters {
    fn open(ifname: &str) -> Result<XmitCounters, LiveGenError> {
        let stats = DriverStats::open(ifname)
            .map_err(sys(format!("reading the driver statistics of {ifname} (ethtool -S)")))?;
        let pick = |suffix: &str| {
            stats
                .names()
                .iter()
                .enumerate()
                .filter(|(_, n)| n.ends_with(suffix))
                .map(|(i, _)| i)
                .collect::<Vec<_>>()
        };
        let (sent, refused) = (pick("xdp_xmit"), pick("xdp_xmit_errors"));
        if sent.is_empty() {
            return Err(LiveGenError::NoXmitCounters { ifname: ifname.to_owned() });
        }
        let peer = stats.names().iter().position(|n| n == "peer_ifindex");
        Ok(XmitCounters { stats, sent, refused, peer })
    }

    /// (sent, refused, peer ifindex if the driver says).
    fn read(&self) -> io::Result<(u64, u64, Option<u64>)> {
        let v = self.stats.read()?;
        let total = |idx: &[usize]| idx.iter().map(|&i| v[i]).sum::<u64>();
        Ok((total(&self.sent), total(&self.refused), self.peer.map(|i| v[i])))
    }
}

/// A [`Generator`] bound to the interface it sends on, counting what leaves.
pub struct Sender {
    generator: Generator,
    /// The program attached (generic mode) to the interface, or why it is not.
    attached: Result<OwnedFd, String>,
    ifname: String,
    ifindex: u32,
    counters: XmitCounters,
    base: (u64, u64),
    base_runs: u64,
    totals: Totals,
}

impl Sender {
    /// Prepares to send on `ifname` (in this thread's network namespace).
    ///
    /// While it is open, the program is also attached to `ifname` in generic mode, where it
    /// passes every received frame untouched (they have no metadata). BPF_PROG_RUN adds a
    /// program to the kernel's XDP dispatcher for the call and removes it after, each a
    /// rewrite of the dispatcher's code and an RCU grace period: about 20 ms per call. An
    /// attached program stays in the dispatcher and the calls skip both. If it cannot be
    /// attached (another XDP program is there), the generator still works, with fewer,
    /// longer calls: see [`attach_error`](Self::attach_error).
    pub fn open(generator: Generator, ifname: &str) -> Result<Sender, LiveGenError> {
        let ifindex = crate::sys::ifindex(ifname)
            .ok_or_else(|| LiveGenError::NoInterface(ifname.to_owned()))?;
        let attached =
            bpf::link_xdp(generator.prog.as_raw_fd(), ifindex, crate::sys::XDP_FLAGS_SKB_MODE)
                .map_err(|e| e.to_string());
        let counters = XmitCounters::open(ifname)?;
        let (sent, refused, _) =
            counters.read().map_err(sys(format!("reading the XDP counters of {ifname}")))?;
        let base_runs = generator.runs().map_err(sys("reading the generator's run count"))?;
        Ok(Sender {
            generator,
            attached,
            ifname: ifname.to_owned(),
            ifindex,
            counters,
            base: (sent, refused),
            base_runs,
            totals: Totals::default(),
        })
    }

    /// Makes and offers `frames` more frames (on this CPU), `batch` per flush (1 to
    /// [`MAX_BATCH`]), and returns the totals so far. The first call fails with
    /// [`LiveGenError::PeerNotReady`] if the driver took and refused none of its frames.
    pub fn send(&mut self, frames: u32, batch: u32) -> Result<Totals, LiveGenError> {
        if frames == 0 {
            return Ok(self.totals);
        }
        let what = || format!("sending on {} (BPF_PROG_RUN, live frames)", self.ifname);
        self.generator
            .send_raw(self.ifindex, frames, batch.clamp(1, MAX_BATCH))
            .map_err(sys(what()))?;
        let first = self.totals.attempted == 0;
        self.totals.attempted =
            self.generator.runs().map_err(sys("reading the generator's run count"))?
                - self.base_runs;
        let (sent, refused, peer) = self
            .counters
            .read()
            .map_err(sys(format!("reading the XDP counters of {}", self.ifname)))?;
        self.totals.sent = sent.saturating_sub(self.base.0);
        self.totals.refused = refused.saturating_sub(self.base.1);
        if first && self.totals.attempted > 0 && self.totals.sent == 0 && self.totals.refused == 0 {
            let peer = peer.map(|i| format!(" (ifindex {i})")).unwrap_or_default();
            return Err(LiveGenError::PeerNotReady {
                ifname: self.ifname.clone(),
                attempted: self.totals.attempted,
                peer,
            });
        }
        Ok(self.totals)
    }

    pub fn totals(&self) -> Totals {
        self.totals
    }

    /// Why the program could not be attached to the interface (each call then costs tens of
    /// milliseconds more; see [`open`](Self::open)).
    pub fn attach_error(&self) -> Option<&str> {
        self.attached.as_ref().err().map(String::as_str)
    }
}
