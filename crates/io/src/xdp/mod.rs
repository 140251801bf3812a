//! AF_XDP ports (kernel doc `networking/af_xdp.rst`): frames move between the NIC and a
//! [`FramePool`] through four shared-memory rings, and the pool's region is itself the UMEM.
//!
//! [`open`] binds one socket to one (interface, queue) and returns its two halves, an
//! [`XdpRx`] and an [`XdpTx`]. All sockets of a worker share one UMEM (pass the first port's
//! [`Umem`] when opening the others), so a frame received on one port is sent out of another
//! by handing its descriptor over: no copy in user space. Linerate loads its own steering
//! program (`lr_fast`, see [`fastpath`]) that redirects IPv4, IPv6 and VLAN-tagged frames to the
//! sockets and passes everything else (ARP, ...) to the kernel.
//!
//! The pool must outlive every port opened on it (the kernel pins and writes into its region
//! until the last socket closes); a worker owns both and drops its ports first. Frames that
//! sit in a port's fill or tx rings when the port is dropped are not returned to the pool.

mod attach;
pub mod bpf;
pub mod fastpath;
pub mod features;
pub mod kernel_copy;
pub mod livegen;
mod netlink;
pub mod object;
pub mod ring;
pub mod sink;
pub mod skb_path;
mod socket;

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

use crate::batch::Batch;
use crate::pool::{FRAME_SIZE, FrameDesc, FramePool};
use crate::port::{PortStats, RxPort, TxPort};
use crate::sys;
use sys::XdpDesc;

/// Offset of received data in its chunk in copy mode (the kernel's `XDP_PACKET_HEADROOM`):
/// a received frame's `FrameDesc::addr` is its chunk base plus this.
pub const RX_HEADROOM: u32 = sys::XDP_PACKET_HEADROOM;

/// Bind attempts on a busy queue, 25 ms apart, before reporting it busy.
const BUSY_RETRIES: u32 = 20;
/// Fewest frames added to a fill ring at once.
const FILL_STEP: u32 = 64;

/// Where the steering program runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum XdpMode {
    /// Native if the driver supports it, else generic.
    #[default]
    Auto,
    /// In the driver (`XDP_FLAGS_DRV_MODE`).
    Native,
    /// On the kernel's skb path (`XDP_FLAGS_SKB_MODE`): works everywhere, slower.
    Generic,
}

/// Whether the socket may map the NIC's DMA straight onto the UMEM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ZeroCopy {
    /// Zero-copy if the driver supports it (native mode only), else copy mode.
    #[default]
    Auto,
    /// Zero-copy or fail.
    Require,
    /// Copy mode.
    Never,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XdpConfig {
    /// Receive queue of the interface to bind to.
    pub queue: u32,
    /// Entries of each of the four rings (a power of two).
    pub ring_size: u32,
    pub mode: XdpMode,
    pub zero_copy: ZeroCopy,
    /// The steering program drops (and counts) IP and VLAN frames arriving on a queue with
    /// no socket instead of passing them to the kernel.
    pub fail_closed: bool,
    /// The size of the fast path's flow tables ([`fastpath`]; its program steers the frames
    /// to the sockets in any case): `None` for a port that offloads nothing.
    pub fast_path: Option<u32>,
}

impl Default for XdpConfig {
    fn default() -> Self {
        XdpConfig {
            queue: 0,
            ring_size: 2048,
            mode: XdpMode::Auto,
            zero_copy: ZeroCopy::Auto,
            fail_closed: false,
            fast_path: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum XdpError {
    #[error("interface `{0}` does not exist in this network namespace (see `ip link`)")]
    NoInterface(String),
    #[error(
        "{op} on `{ifname}`: permission denied; AF_XDP needs root, or CAP_NET_ADMIN + CAP_NET_RAW + \
         CAP_BPF + CAP_IPC_LOCK (or an RLIMIT_MEMLOCK larger than the frame pool)"
    )]
    NotPermitted { op: &'static str, ifname: String },
    #[error("AF_XDP/XDP unsupported: {0}")]
    Unsupported(String),
    #[error(
        "queue {queue} of `{ifname}` is already bound by another AF_XDP socket (another linerate or \
         XDP tool, or this queue opened twice)"
    )]
    QueueBusy { ifname: String, queue: u32 },
    #[error("`{ifname}` cannot do zero-copy AF_XDP ({source}); set zero_copy to Auto or Never")]
    ZeroCopyUnsupported { ifname: String, source: io::Error },
    #[error("the kernel rejected linerate's XDP program: {source}\nverifier log:\n{log}")]
    ProgramRejected { source: io::Error, log: String },
    #[error(
        "XDP program `{name}` (id {id}) is already attached to `{ifname}` and is not linerate's; \
         remove it with `ip link set dev {ifname} xdp off` (or stop the tool that loaded it)"
    )]
    ForeignProgram { ifname: String, id: u32, name: String },
    #[error(
        "XDP program `{name}` (id {id}) on `{ifname}` is held by a live process; is another \
         linerate running on this interface?"
    )]
    InUse { ifname: String, id: u32, name: String, source: io::Error },
    #[error("invalid AF_XDP setup: {0}")]
    Config(String),
    #[error("{op} on `{ifname}`: {source}")]
    Sys { op: &'static str, ifname: String, source: io::Error },
}

impl XdpError {
    fn sys(op: &'static str, ifname: &str, source: io::Error) -> Self {
        match source.raw_os_error() {
            Some(libc::EPERM | libc::EACCES) => {
                XdpError::NotPermitted { op, ifname: ifname.into() }
            }
            Some(libc::EAFNOSUPPORT) => XdpError::Unsupported(format!(
                "{op}: the kernel was built without AF_XDP (CONFIG_XDP_SOCKETS)"
            )),
            Some(libc::ENOSYS) => {
                XdpError::Unsupported(format!("{op}: the kernel has no bpf() (CONFIG_BPF_SYSCALL)"))
            }
            _ => XdpError::Sys { op, ifname: ifname.into(), source },
        }
    }
}

/// The socket both halves of a port share.
struct Socket {
    fd: OwnedFd,
    ifname: String,
    queue: u32,
    zero_copy: bool,
    /// Start and length of the registered region (the pool's).
    region: (usize, usize),
    /// Keeps the steering program attached while the socket lives; declared after `fd` so
    /// the socket leaves the XSKMAP before the program goes.
    attach: Arc<attach::Attachment>,
    /// Keeps the pool's region allocated while the kernel may still write into it, even if
    /// the pool is dropped first (declared last: released after the socket is closed).
    _lease: crate::pool::RegionLease,
}

/// A registered UMEM (a pool's region) and the socket that registered it; pass it to [`open`]
/// to make another socket share it.
#[derive(Clone)]
pub struct Umem {
    first: Arc<Socket>,
}

/// Opens an AF_XDP socket on (`ifname`, `cfg.queue`), receiving into and sending from `pool`.
/// Frames it receives are stamped as arriving on `port`. With `shared`, the socket uses that
/// UMEM (which must be `pool`'s) instead of registering the pool again.
///
/// Attaches linerate's steering program to `ifname` unless a port already did; a stale
/// program of linerate's (`lr_fast`, or an older `lr_xsk`) left attached by a crashed linerate
/// is replaced.
pub fn open(
    pool: &mut FramePool,
    ifname: &str,
    port: u16,
    cfg: &XdpConfig,
    shared: Option<&Umem>,
) -> Result<(XdpRx, XdpTx), XdpError> {
    check_config(cfg)?;
    let region = pool.region();
    let region_id = (region.0 as usize, region.1);
    if let Some(u) = shared
        && u.first.region != region_id
    {
        return Err(XdpError::Config(
            "the shared UMEM was registered for another frame pool".into(),
        ));
    }
    let ifindex = sys::ifindex(ifname).ok_or_else(|| XdpError::NoInterface(ifname.into()))?;
    let attach = attach::get_or_attach(ifname, ifindex, cfg.mode, cfg.fail_closed, cfg.fast_path)?;

    // Sharing the UMEM of a socket on the same (interface, queue) would share its rings too,
    // which these ports do not do: the queue is taken.
    if let Some(u) = shared
        && Arc::ptr_eq(&u.first.attach, &attach)
        && u.first.queue == cfg.queue
    {
        return Err(XdpError::QueueBusy { ifname: ifname.into(), queue: cfg.queue });
    }
    let binder = Binder { region, ifindex, ifname, cfg };
    let parts = binder.bind(shared, attach.mode)?;
    attach
        .set_socket(cfg.queue, parts.fd.as_raw_fd())
        .map_err(|e| XdpError::sys("insert socket in XSKMAP", ifname, e))?;

    let sock = Arc::new(Socket {
        fd: parts.fd,
        ifname: ifname.into(),
        queue: cfg.queue,
        zero_copy: parts.zero_copy,
        region: region_id,
        attach,
        _lease: pool.lease(),
    });
    let mut rx = XdpRx {
        sock: Arc::clone(&sock),
        fill: parts.fill,
        rx: parts.rx,
        port,
        stats: PortStats::default(),
        filled: 0,
    };
    rx.top_up(pool);
    let tx =
        XdpTx { sock, tx: parts.tx, comp: parts.comp, in_flight: 0, stats: PortStats::default() };
    Ok((rx, tx))
}

/// The ring size and queue the kernel side supports.
fn check_config(cfg: &XdpConfig) -> Result<(), XdpError> {
    if !cfg.ring_size.is_power_of_two() || !(64..=1 << 16).contains(&cfg.ring_size) {
        return Err(XdpError::Config(format!(
            "ring_size {} is not a power of two in 64..=65536",
            cfg.ring_size
        )));
    }
    if cfg.queue >= bpf::MAX_QUEUES {
        return Err(XdpError::Config(format!(
            "queue {} is above the supported {}",
            cfg.queue,
            bpf::MAX_QUEUES - 1
        )));
    }
    Ok(())
}

/// What creating and binding a socket of [`open`] needs.
struct Binder<'a> {
    region: (*mut u8, usize),
    ifindex: u32,
    ifname: &'a str,
    cfg: &'a XdpConfig,
}

impl Binder<'_> {
    /// A bound socket: on `shared`'s UMEM, or on a new one in the mode `cfg.zero_copy` asks
    /// for (`Auto`: zero-copy when the program runs in the driver, else copy).
    fn bind(&self, shared: Option<&Umem>, mode: XdpMode) -> Result<socket::Parts, XdpError> {
        let zero_copy = self.cfg.zero_copy;
        Ok(match (shared, zero_copy) {
            (Some(u), _) => {
                let parts = self
                    .create(socket::Bind::Shared(u.first.fd.as_raw_fd()))
                    .map_err(|e| self.error(e))?;
                if zero_copy == ZeroCopy::Require && !parts.zero_copy {
                    return Err(XdpError::Config(
                        "zero-copy required but the shared UMEM is in copy mode".into(),
                    ));
                }
                parts
            }
            (None, ZeroCopy::Never) => {
                self.create(socket::Bind::Copy).map_err(|e| self.error(e))?
            }
            (None, ZeroCopy::Require) => {
                self.create(socket::Bind::ZeroCopy).map_err(|e| match e.step {
                    "bind" if e.source.raw_os_error() != Some(libc::EBUSY) => {
                        XdpError::ZeroCopyUnsupported {
                            ifname: self.ifname.into(),
                            source: e.source,
                        }
                    }
                    _ => self.error(e),
                })?
            }
            // Zero-copy needs the program in the driver; a failed bind leaves the socket
            // unusable, so fall back on a fresh one.
            (None, ZeroCopy::Auto) if mode == XdpMode::Native => {
                match self.create(socket::Bind::ZeroCopy) {
                    Ok(parts) => parts,
                    Err(e) if e.step == "bind" && e.source.raw_os_error() != Some(libc::EBUSY) => {
                        self.create(socket::Bind::Copy).map_err(|e| self.error(e))?
                    }
                    Err(e) => return Err(self.error(e)),
                }
            }
            (None, ZeroCopy::Auto) => self.create(socket::Bind::Copy).map_err(|e| self.error(e))?,
        })
    }

    /// [`socket::create`]. A queue whose last socket just closed stays bound until deferred
    /// kernel work releases it (a few milliseconds): EBUSY is retried for a while before the
    /// queue is called busy.
    fn create(&self, bind: socket::Bind) -> Result<socket::Parts, socket::StepError> {
        let mut tries = 0;
        loop {
            match socket::create(
                self.region,
                self.ifindex,
                self.cfg.queue,
                self.cfg.ring_size,
                bind,
            ) {
                Err(e)
                    if e.step == "bind"
                        && e.source.raw_os_error() == Some(libc::EBUSY)
                        && tries < BUSY_RETRIES =>
                {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(25));
                }
                r => return r,
            }
        }
    }

    /// A failed step as the operator should read it.
    fn error(&self, e: socket::StepError) -> XdpError {
        let ifname = self.ifname;
        match e.source.raw_os_error() {
            Some(libc::EBUSY) if e.step == "bind" => {
                XdpError::QueueBusy { ifname: ifname.into(), queue: self.cfg.queue }
            }
            Some(libc::EINVAL) if e.step == "bind" => XdpError::Sys {
                op: "bind AF_XDP socket (does the queue exist? see `ethtool -l`)",
                ifname: ifname.into(),
                source: e.source,
            },
            Some(libc::ENOBUFS | libc::ENOMEM) if e.step == "XDP_UMEM_REG" => XdpError::Sys {
                op: "register UMEM (raise RLIMIT_MEMLOCK, e.g. `ulimit -l unlimited`)",
                ifname: ifname.into(),
                source: e.source,
            },
            _ => XdpError::sys(e.step, ifname, e.source),
        }
    }
}

/// Receiving half of an AF_XDP socket.
pub struct XdpRx {
    sock: Arc<Socket>,
    fill: ring::Ring<u64>,
    rx: ring::Ring<XdpDesc>,
    port: u16,
    stats: PortStats,
    /// Frames ever put on the fill ring, to account for them when the socket is retired.
    filled: u64,
}

impl XdpRx {
    /// The mode the steering program runs in and whether the socket is zero-copy.
    pub fn mode(&self) -> (XdpMode, bool) {
        (self.sock.attach.mode, self.sock.zero_copy)
    }

    /// The UMEM this socket uses, to share it with the next port opened on the same pool.
    pub fn umem(&self) -> Umem {
        Umem { first: Arc::clone(&self.sock) }
    }

    /// Interface and queue the socket is bound to.
    pub fn binding(&self) -> (&str, u32) {
        (&self.sock.ifname, self.sock.queue)
    }

    /// Frames lent to the kernel: on the fill ring, or received and not yet taken by
    /// `rx_burst`. With every port's count and the tx frames in flight, this accounts for
    /// every pool frame not in the pool or in the pipeline.
    pub fn kernel_frames(&mut self) -> u32 {
        let size = self.fill.idx.size();
        size - self.fill.free(size) + self.rx.available(size)
    }

    /// Hands free pool frames to the kernel until the fill ring is full (or the pool empty).
    fn top_up(&mut self, pool: &mut FramePool) {
        let free = self.fill.free(self.fill.idx.size());
        let mut n = 0;
        while n < free {
            let Some(frame) = pool.alloc() else { break };
            let idx = self.fill.idx.produce(1);
            self.fill.write(idx, (frame.addr & !(FRAME_SIZE as u32 - 1)) as u64);
            n += 1;
        }
        if n > 0 {
            self.fill.publish();
            self.filled += u64::from(n);
        }
    }

    /// Goes on from the counters of the socket this one replaces (its interface created
    /// again), so that the port's counters never go back.
    pub fn inherit(&mut self, old: PortStats) {
        self.stats.rx_packets += old.rx_packets;
        self.stats.rx_bytes += old.rx_bytes;
        self.stats.rx_dropped += old.rx_dropped;
        // What was received before counts as filled before, for `retire`'s balance.
        self.filled += old.rx_packets;
    }

    /// Takes back into `pool` the frames the kernel still held for this socket (on the fill
    /// ring, or received and not read) once its interface is gone: the kernel unbound it and
    /// uses neither ring again. Frames a driver took for zero-copy receive and never gave back
    /// are lost with the socket.
    pub fn retire(mut self, pool: &mut FramePool) -> Retired {
        let on_fill = self.fill.unconsumed();
        for &addr in &on_fill {
            pool.free(FrameDesc { addr: addr as u32, len: 0, port: 0 });
        }
        let unread = self.rx.available(self.rx.idx.size());
        let start = self.rx.idx.consume(unread);
        for i in 0..unread {
            let d = self.rx.read(start.wrapping_add(i));
            pool.free(FrameDesc { addr: d.addr as u32, len: 0, port: 0 });
        }
        self.rx.publish();
        let returned = on_fill.len() as u64 + u64::from(unread);
        // Every frame put on the fill ring was read, is returned now, or stayed in the kernel.
        let lost = self.filled.saturating_sub(self.stats.rx_packets + returned);
        Retired { returned, lost }
    }
}

/// What retiring one half of a socket gave back to the pool.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Retired {
    /// Frames back in the pool.
    pub returned: u64,
    /// Frames the kernel kept (in flight when the interface went, or held by its driver).
    pub lost: u64,
}

impl RxPort for XdpRx {
    #[inline]
    fn rx_burst(&mut self, pool: &mut FramePool, batch: &mut Batch, max: usize) -> usize {
        debug_assert_eq!(
            pool.region().0 as usize,
            self.sock.region.0,
            "port used with another pool"
        );
        // Keep the fill ring topped up, in steps of at least FILL_STEP frames: the kernel
        // drops frames when it finds no chunk to receive into.
        let step = FILL_STEP.min(self.fill.idx.size() / 2);
        if self.fill.free(step) >= step {
            self.top_up(pool);
        }
        if self.fill.needs_wakeup() {
            socket::kick_rx(self.sock.fd.as_raw_fd());
        }
        let want = max.min(batch.room()) as u32;
        let n = self.rx.available(want);
        if n == 0 {
            return 0;
        }
        let start = self.rx.idx.consume(n);
        let mut bytes = 0u64;
        for i in 0..n {
            let d = self.rx.read(start.wrapping_add(i));
            bytes += d.len as u64;
            let desc = FrameDesc { addr: d.addr as u32, len: d.len as u16, port: self.port };
            // AF_XDP carries no checksum state: finish what a sender on this host left partial.
            crate::offload::complete_if_partial(pool.frame_mut(desc));
            batch.push(desc);
        }
        self.rx.publish();
        self.stats.rx_packets += n as u64;
        self.stats.rx_bytes += bytes;
        n as usize
    }

    fn wait_fd(&self) -> Option<std::os::fd::RawFd> {
        Some(self.sock.fd.as_raw_fd())
    }

    /// Includes the kernel's drops (no chunk on the fill ring, rx ring full): one syscall.
    fn stats(&self) -> PortStats {
        let k = socket::statistics(self.sock.fd.as_raw_fd());
        PortStats {
            rx_dropped: self.stats.rx_dropped + k.rx_dropped + k.rx_ring_full,
            ..self.stats
        }
    }
}

/// Sending half of an AF_XDP socket.
pub struct XdpTx {
    sock: Arc<Socket>,
    tx: ring::Ring<XdpDesc>,
    comp: ring::Ring<u64>,
    /// Frames on the tx ring or in flight, not yet completed.
    in_flight: u32,
    stats: PortStats,
}

impl XdpTx {
    /// Frames handed to the kernel and not yet completed (returned to the pool).
    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// Goes on from the counters of the socket this one replaces.
    pub fn inherit(&mut self, old: PortStats) {
        self.stats.tx_packets += old.tx_packets;
        self.stats.tx_bytes += old.tx_bytes;
        self.stats.tx_dropped += old.tx_dropped;
    }

    /// Takes back into `pool` what the kernel never sent (on the tx ring) and what it has
    /// completed, once the socket's interface is gone; waits up to `wait` for frames in
    /// flight (an skb being freed) to complete.
    pub fn retire(mut self, pool: &mut FramePool, wait: std::time::Duration) -> Retired {
        let mut returned = 0u64;
        for d in self.tx.unconsumed() {
            pool.free(FrameDesc { addr: d.addr as u32, len: 0, port: 0 });
            returned += 1;
            self.in_flight -= 1;
        }
        let until = std::time::Instant::now() + wait;
        loop {
            let before = self.in_flight;
            self.reap(pool);
            returned += u64::from(before - self.in_flight);
            if self.in_flight == 0 || std::time::Instant::now() >= until {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        Retired { returned, lost: u64::from(self.in_flight) }
    }

    /// Returns completed frames to the pool.
    fn reap(&mut self, pool: &mut FramePool) {
        let n = self.comp.available(self.comp.idx.size());
        if n == 0 {
            return;
        }
        let start = self.comp.idx.consume(n);
        for i in 0..n {
            let addr = self.comp.read(start.wrapping_add(i));
            pool.free(FrameDesc { addr: addr as u32, len: 0, port: 0 });
        }
        self.comp.publish();
        self.in_flight -= n;
    }

    /// Wakes the kernel to transmit if it asked for it. In copy mode every send is a syscall
    /// that moves a bounded number of frames (32 by default), so kick until the ring drains.
    fn kick(&mut self, pool: &mut FramePool) {
        let rounds = self.tx.idx.size() / 32 + 2;
        for _ in 0..rounds {
            if !self.tx.needs_wakeup() {
                return;
            }
            match socket::kick_tx(self.sock.fd.as_raw_fd()) {
                Ok(()) => return,
                // More left (or the completion ring is full): reap and go again.
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => self.reap(pool),
                // Busy (another sender), out of skbs, link down: not errors, retry next burst.
                Err(_) => return,
            }
        }
    }
}

impl TxPort for XdpTx {
    #[inline]
    fn tx_burst(&mut self, pool: &mut FramePool, batch: &mut Batch) {
        debug_assert_eq!(
            pool.region().0 as usize,
            self.sock.region.0,
            "port used with another pool"
        );
        self.reap(pool);
        let len = batch.len() as u32;
        let room = self.tx.free(len);
        let mut n = 0u32;
        let mut bytes = 0u64;
        for d in batch.drain() {
            // The kernel silently discards a descriptor that leaves its chunk (aligned mode)
            // and never completes it: drop it here, where it can be counted and freed.
            let fits = (d.addr as usize % FRAME_SIZE) + d.len as usize <= FRAME_SIZE;
            if n < room && fits {
                let idx = self.tx.idx.produce(1);
                self.tx.write(idx, XdpDesc { addr: d.addr as u64, len: d.len as u32, options: 0 });
                n += 1;
                bytes += d.len as u64;
            } else {
                pool.free(d);
                self.stats.tx_dropped += 1;
            }
        }
        if n > 0 {
            self.tx.publish();
            self.in_flight += n;
            self.stats.tx_packets += n as u64;
            self.stats.tx_bytes += bytes;
        }
        self.kick(pool);
    }

    fn flush(&mut self, pool: &mut FramePool) {
        self.kick(pool);
        self.reap(pool);
    }

    fn stats(&self) -> PortStats {
        self.stats
    }
}

/// Attaches, in native mode, an XDP program that passes every frame, until the returned
/// link is closed. A veth receives in NAPI, which [`crate::napi`] can move into a thread,
/// only while an XDP program is attached (or GRO is on): AF_PACKET ports on veth use this.
pub fn attach_pass(ifname: &str) -> Result<OwnedFd, XdpError> {
    let ifindex = sys::ifindex(ifname).ok_or_else(|| XdpError::NoInterface(ifname.into()))?;
    let prog = object::load_xdp(object::TOOLS, bpf::PASS_PROG_NAME, &[])
        .map_err(|e| XdpError::ProgramRejected { source: e, log: String::new() })?
        .prog;
    // The link holds the program; its fd can close.
    bpf::link_xdp(prog.as_raw_fd(), ifindex, sys::XDP_FLAGS_DRV_MODE)
        .map_err(|e| XdpError::sys("attach XDP pass program (native)", ifname, e))
}

/// IP frames the fail-closed steering program on `ifname` dropped because no socket was
/// bound to their queue (`None` unless this process attached it with `fail_closed`).
pub fn unsteered_drops(ifname: &str) -> Option<u64> {
    attach::unsteered_drops(sys::ifindex(ifname)?)
}

/// The XDP program attached to `ifname` (in the calling thread's namespace), as (id, name).
pub fn attached_program(ifname: &str) -> Result<Option<(u32, String)>, XdpError> {
    let ifindex = sys::ifindex(ifname).ok_or_else(|| XdpError::NoInterface(ifname.into()))?;
    let Some(a) =
        netlink::query(ifindex).map_err(|e| XdpError::sys("query XDP program", ifname, e))?
    else {
        return Ok(None);
    };
    let name =
        bpf::prog_name(a.prog_id).map_err(|e| XdpError::sys("read program name", ifname, e))?;
    Ok(Some((a.prog_id, name)))
}

/// Attaches linerate's steering program, under the BPF object name `name`, to `ifname`
/// through netlink, the way a crashed older linerate (`lr_xsk`) or another tool could have
/// left it: it stays after this process exits. For tests of the stale-program replacement;
/// returns the program id.
#[doc(hidden)]
pub fn attach_via_netlink(ifname: &str, name: &str, generic: bool) -> Result<u32, XdpError> {
    let ifindex = sys::ifindex(ifname).ok_or_else(|| XdpError::NoInterface(ifname.into()))?;
    // Any program will do: only its name is looked at.
    let prog = bpf::load_xdp(&[bpf::Insn::mov_imm(0, bpf::XDP_PASS), bpf::Insn::exit()], name)
        .map_err(|e| XdpError::ProgramRejected { source: e.source, log: e.log })?;
    let flags = if generic { sys::XDP_FLAGS_SKB_MODE } else { sys::XDP_FLAGS_DRV_MODE };
    netlink::set_xdp(ifindex, prog.as_raw_fd(), flags)
        .map_err(|e| XdpError::sys("attach via netlink", ifname, e))?;
    Ok(attached_program(ifname)?.map_or(0, |(id, _)| id))
}
