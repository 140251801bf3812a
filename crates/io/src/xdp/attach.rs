//! One steering program per interface, shared by the sockets on its queues, attached as a
//! bpf_link (detached by the kernel when the last fd closes, also if linerate crashes), with
//! replacement of a stale netlink-attached linerate program.

use std::io;
use std::os::fd::{OwnedFd, RawFd};
use std::sync::{Arc, Mutex, Weak};

use super::fastpath::FastPath;
use super::{XdpError, XdpMode, bpf, netlink, sys};

/// The steering program (the fast path's, shared by every interface: the XSKMAP range of
/// `slot`) and the link holding it on one interface.
pub struct Attachment {
    netns: u64,
    pub ifindex: u32,
    pub mode: XdpMode,
    fast: Arc<FastPath>,
    slot: u32,
    /// Whether this port offloads flows (its program steers in any case).
    offloads: bool,
    /// Closing this detaches the program.
    _link: OwnedFd,
    /// The tc program at the interface's ingress (with `offloads`, where tcx is there).
    tc_link: Option<OwnedFd>,
}

impl Drop for Attachment {
    fn drop(&mut self) {
        if self.tc_link.take().is_some() {
            self.fast.clear_tc(self.slot, self.ifindex);
        }
    }
}

/// Flow entries of a fast path whose ports offload nothing (it only steers).
const STEERING_ONLY_FLOWS: u32 = 1024;

impl Attachment {
    /// Points queue `queue`'s entry of the steering map at socket `sock`.
    pub fn set_socket(&self, queue: u32, sock: RawFd) -> io::Result<()> {
        self.fast.xsk_set(self.slot, queue, sock)
    }

    fn unsteered(&self) -> Option<u64> {
        self.fast
            .fail_closed()
            .then(|| self.fast.port_counts(self.slot as u16).ok().map(|c| c.unsteered))
            .flatten()
    }
}

/// Live attachments of this process, so that sockets on several queues of one interface share
/// its program instead of colliding on it.
static ATTACHED: Mutex<Vec<Weak<Attachment>>> = Mutex::new(Vec::new());

/// The fail-closed drop count of linerate's program on `ifindex` in this namespace, if this
/// process attached it with fail-closed on.
pub fn unsteered_drops(ifindex: u32) -> Option<u64> {
    let netns = sys::netns_id();
    let all = ATTACHED.lock().unwrap_or_else(|e| e.into_inner());
    let a =
        all.iter().filter_map(Weak::upgrade).find(|a| a.netns == netns && a.ifindex == ifindex)?;
    a.unsteered()
}

/// The attachment on `ifindex` (in the calling thread's namespace), creating it if needed.
/// With `fast` (the flow table's size), the fast path's program steers (and forwards the
/// flows linerate offloads).
pub fn get_or_attach(
    ifname: &str,
    ifindex: u32,
    want: XdpMode,
    fail_closed: bool,
    fast: Option<u32>,
) -> Result<Arc<Attachment>, XdpError> {
    let netns = sys::netns_id();
    let mut all = ATTACHED.lock().unwrap_or_else(|e| e.into_inner());
    all.retain(|w| w.strong_count() > 0);
    if let Some(a) =
        all.iter().filter_map(Weak::upgrade).find(|a| a.netns == netns && a.ifindex == ifindex)
    {
        if want != XdpMode::Auto && want != a.mode {
            return Err(XdpError::Config(format!(
                "`{ifname}` already runs linerate's program in {:?} mode, {want:?} requested for another queue",
                a.mode
            )));
        }
        if fail_closed != a.fast.fail_closed() || fast.is_some() != a.offloads {
            return Err(XdpError::Config(format!(
                "`{ifname}` already runs linerate's program with fail-closed = {}, fast path = {}",
                a.fast.fail_closed(),
                a.offloads
            )));
        }
        return Ok(a);
    }
    let shared = FastPath::shared(fast.unwrap_or(STEERING_ONLY_FLOWS), fail_closed)?;
    let slot = shared.register(ifindex)?;
    let a = Arc::new(attach(ifname, ifindex, want, shared, slot, fast.is_some())?);
    all.push(Arc::downgrade(&a));
    Ok(a)
}

fn attach(
    ifname: &str,
    ifindex: u32,
    want: XdpMode,
    fast: Arc<FastPath>,
    slot: u32,
    offloads: bool,
) -> Result<Attachment, XdpError> {
    let prog = fast.prog_fd();
    let modes: &[XdpMode] = match want {
        XdpMode::Auto => &[XdpMode::Native, XdpMode::Generic],
        XdpMode::Native => &[XdpMode::Native],
        XdpMode::Generic => &[XdpMode::Generic],
    };
    let mut last = None;
    for &mode in modes {
        match link_replacing_stale(ifname, ifindex, prog, mode) {
            Ok(link) => {
                // Without tcx (before Linux 6.6) the frames XDP cannot rewrite go to the pipeline.
                let tc_link = offloads.then(|| fast.attach_tc(slot, ifindex).ok()).flatten();
                return Ok(Attachment {
                    netns: sys::netns_id(),
                    ifindex,
                    mode,
                    fast,
                    slot,
                    offloads,
                    _link: link,
                    tc_link,
                });
            }
            // The driver has no native XDP: try generic (skb) mode.
            Err(LinkError::Io(e)) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => last = Some(e),
            // Native XDP refuses a link whose MTU does not fit a page (veth, virtio_net).
            Err(LinkError::Io(e)) if e.raw_os_error() == Some(libc::ERANGE) => {
                return Err(mtu_too_large(ifname, mode));
            }
            Err(LinkError::Io(e)) => {
                return Err(XdpError::sys("attach XDP program (BPF_LINK_CREATE)", ifname, e));
            }
            Err(LinkError::Fatal(e)) => return Err(e),
        }
    }
    Err(XdpError::Unsupported(format!(
        "`{ifname}` cannot run XDP in {want:?} mode: {}",
        last.map_or_else(String::new, |e| e.to_string())
    )))
}

/// The error for a driver that refuses XDP because of the link's MTU.
fn mtu_too_large(ifname: &str, mode: XdpMode) -> XdpError {
    let mtu = crate::netdev::mtu(ifname).map_or_else(|_| "its".to_owned(), |m| m.to_string());
    XdpError::Unsupported(format!(
        "`{ifname}` refuses XDP in {mode:?} mode with an MTU of {mtu} (the driver's limit for XDP): \
         lower the link's MTU (`ip link set {ifname} mtu 1500`; linerate takes frames of at most 1984 bytes), or use backend \"af_packet\""
    ))
}

enum LinkError {
    Io(io::Error),
    Fatal(XdpError),
}

fn mode_flags(mode: XdpMode) -> u32 {
    if mode == XdpMode::Native { sys::XDP_FLAGS_DRV_MODE } else { sys::XDP_FLAGS_SKB_MODE }
}

/// Creates the link; if a program attached through netlink is in the way and is linerate's
/// (left by a crash), detaches it and tries once more.
fn link_replacing_stale(
    ifname: &str,
    ifindex: u32,
    prog: RawFd,
    mode: XdpMode,
) -> Result<OwnedFd, LinkError> {
    let flags = mode_flags(mode);
    let err = match bpf::link_xdp(prog, ifindex, flags) {
        Ok(link) => return Ok(link),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EBUSY | libc::EEXIST)) => e,
        Err(e) => return Err(LinkError::Io(e)),
    };
    let fatal = |e| LinkError::Fatal(e);
    let Some(old) = netlink::query(ifindex)
        .map_err(|e| fatal(XdpError::sys("query XDP program (netlink)", ifname, e)))?
    else {
        return Err(LinkError::Io(err));
    };
    let name = bpf::prog_name(old.prog_id).unwrap_or_else(|e| format!("<unknown: {e}>"));
    if !bpf::OWN_PROG_NAMES.contains(&name.as_str()) {
        return Err(fatal(XdpError::ForeignProgram {
            ifname: ifname.into(),
            id: old.prog_id,
            name,
        }));
    }
    if let Err(e) = netlink::set_xdp(ifindex, -1, old.mode_flags) {
        // Netlink cannot detach a bpf_link: a live process (another linerate) holds it.
        return Err(fatal(XdpError::InUse {
            ifname: ifname.into(),
            id: old.prog_id,
            name,
            source: e,
        }));
    }
    bpf::link_xdp(prog, ifindex, flags).map_err(LinkError::Io)
}
