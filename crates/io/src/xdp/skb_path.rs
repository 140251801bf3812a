//! The fast path on an AF_PACKET port: no XDP program on the interface (on a veth or
//! virtio_net, XDP turns the peer's TSO off and copies every skb into a page of its own), the
//! fast path's tc program first at its ingress, and its socket filter on each of linerate's
//! rx sockets there, which keeps the frames tc forwards from the pipeline
//! (`bpf/fastpath.bpf.c`: `lr_fast_tc`, `lr_fast_sock`).

use std::os::fd::{OwnedFd, RawFd};
use std::sync::{Arc, Mutex, Weak};

use super::XdpError;
use super::fastpath::FastPath;
use crate::sys;

/// The tc program on one interface, and the fast path whose maps it reads.
pub struct SkbPath {
    netns: u64,
    ifindex: u32,
    fast: Arc<FastPath>,
    /// Closing this detaches the program.
    _link: OwnedFd,
}

impl SkbPath {
    /// The socket filter to put on each rx socket of the interface.
    pub fn socket_filter(&self) -> RawFd {
        self.fast.socket_filter()
    }
}

/// Live attachments of this process: the rx sockets of every worker on one interface share
/// its tc program.
static ATTACHED: Mutex<Vec<Weak<SkbPath>>> = Mutex::new(Vec::new());

/// The skb fast path on `ifindex` (in the calling thread's namespace), attaching it if needed
/// with a flow table of `flows` entries. Needs tcx (Linux 6.6).
pub fn get_or_attach(
    ifname: &str,
    ifindex: u32,
    flows: u32,
    fail_closed: bool,
) -> Result<Arc<SkbPath>, XdpError> {
    let netns = sys::netns_id();
    let mut all = ATTACHED.lock().unwrap_or_else(|e| e.into_inner());
    all.retain(|w| w.strong_count() > 0);
    if let Some(a) =
        all.iter().filter_map(Weak::upgrade).find(|a| a.netns == netns && a.ifindex == ifindex)
    {
        return Ok(a);
    }
    let fast = FastPath::shared(flows, fail_closed)?;
    let slot = fast.register(ifindex)?;
    let link = fast
        .attach_tc(slot, ifindex)
        .map_err(|e| XdpError::sys("attach the fast path's tc program (tcx)", ifname, e))?;
    let a = Arc::new(SkbPath { netns, ifindex, fast, _link: link });
    all.push(Arc::downgrade(&a));
    Ok(a)
}
