//! A plain AF_PACKET `SOCK_RAW` socket for occasional frames (packet(7)): the slow path's ARP
//! replies, ICMP errors, fragments and what the host stack sends out through the router.
//!
//! No ring: one `send(2)` per frame, copied by the kernel, through the qdisc like any host
//! traffic (so tcpdump on the host sees it). The socket is opened with protocol 0 and bound
//! with protocol 0, so the kernel never queues received frames to it (packet(7): "when
//! protocol is set to zero ... no packets are received"); the EtherType of each frame is read
//! from its own header. Sends never block: a full socket buffer (EAGAIN) or a full device queue
//! (ENOBUFS) is an error the caller counts, as a drop.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use super::{PacketError, socket_on, socket_on_any, sys, sys_err};

/// A send-only raw packet socket bound to one interface.
#[derive(Debug)]
pub struct RawSender {
    fd: OwnedFd,
    ifname: String,
}

impl RawSender {
    /// Opens a raw packet socket (CLOEXEC) bound to `ifname`. Needs root or CAP_NET_RAW; the
    /// interface must exist and be up, as for the ring ports. Errors keep the kind of the
    /// underlying failure (NotFound for a missing interface, PermissionDenied without
    /// CAP_NET_RAW) and wrap a [`PacketError`] whose message says what to do.
    pub fn open(ifname: &str) -> io::Result<RawSender> {
        let (fd, ifc) = socket_on(ifname).map_err(into_io)?;
        Self::bound(fd, ifc)
    }

    /// [`open`](Self::open) on an interface that may still be down (one just created again,
    /// whose port is being rebuilt): frames sent before it is up fail with ENETDOWN.
    pub fn open_even_down(ifname: &str) -> io::Result<RawSender> {
        let (fd, ifc, _) = socket_on_any(ifname).map_err(into_io)?;
        Self::bound(fd, ifc)
    }

    fn bound(fd: OwnedFd, ifc: super::Iface) -> io::Result<RawSender> {
        let ifname = ifc.name.as_str();
        // Protocol 0: bound to the interface for sending, registered for no EtherType.
        sys::bind(&fd, ifc.index, 0)
            .map_err(sys_err("binding the raw socket", ifname))
            .map_err(into_io)?;
        Ok(RawSender { fd, ifname: ifc.name.clone() })
    }

    /// Sends one whole frame (Ethernet header included, no FCS) on the interface, without
    /// blocking. The kernel refuses a frame longer than the MTU plus the link-layer header
    /// (EMSGSIZE) and reports a full socket buffer (WouldBlock / EAGAIN), a full device queue
    /// (ENOBUFS) or a link that went down (ENETDOWN) as errors: the frame is dropped.
    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        loop {
            // SAFETY: `frame` is valid for reads of `frame.len()` bytes for the duration of
            // the call; `fd` is an open socket we own. send(2) does not keep the pointer.
            let rc = unsafe {
                libc::send(
                    self.fd.as_raw_fd(),
                    frame.as_ptr().cast(),
                    frame.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if rc >= 0 {
                // A packet socket sends the whole frame or fails.
                return if rc as usize == frame.len() {
                    Ok(())
                } else {
                    Err(io::Error::other(format!(
                        "{}: sent {rc} of {} bytes",
                        self.ifname,
                        frame.len()
                    )))
                };
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    /// The interface the socket is bound to.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }
}

/// An open error as `io::Error` of the matching kind, keeping the actionable message.
fn into_io(e: PacketError) -> io::Error {
    let kind = match &e {
        PacketError::NoInterface(_) => io::ErrorKind::NotFound,
        PacketError::NotPermitted(_) => io::ErrorKind::PermissionDenied,
        PacketError::InterfaceDown(_) => io::ErrorKind::NetworkDown,
        PacketError::Sys { source, .. }
        | PacketError::Ring { source, .. }
        | PacketError::Fanout { source, .. } => source.kind(),
        PacketError::Config(_) => io::ErrorKind::InvalidInput,
    };
    io::Error::new(kind, e)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn shared_between_threads_and_errors_say_what_to_do() {
        assert_send_sync::<RawSender>();
        match RawSender::open("lr-does-not-ex") {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                assert!(e.to_string().contains("ip link"), "{e}")
            }
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                assert!(e.to_string().contains("CAP_NET_RAW"), "{e}")
            }
            Err(e) => panic!("unexpected error {e}"),
            Ok(_) => panic!("opened a missing interface"),
        }
        let e = RawSender::open(&"x".repeat(16)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(e.get_ref().is_some_and(|inner| inner.is::<PacketError>()));
    }
}
