//! Sleeping until a port has frames: how an idle worker gives its CPU back.
//!
//! A worker that found nothing for a while blocks in `poll(2)` on its rx sockets instead of
//! spinning. AF_XDP sockets are readable as soon as a frame is on their rx ring; TPACKET_V3
//! sockets once a block is retired (full, or after its timeout), see `afpacket`.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

/// Blocks until one of `fds` is readable or `timeout` passes; returns whether one is
/// readable. An interrupted call (a signal) counts as a timeout. A socket's pending error
/// (an AF_PACKET socket's ENETDOWN when its link went down or its interface away) is read,
/// which clears it: otherwise poll(2) would report it at once every time, and the idle
/// worker would spin instead of sleeping.
pub fn wait_readable(fds: &[RawFd], timeout: Duration) -> io::Result<bool> {
    let mut polls: Vec<libc::pollfd> =
        fds.iter().map(|&fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 }).collect();
    let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
    // SAFETY: `polls` is a live, initialised array of `polls.len()` pollfd structs that the
    // kernel only writes the `revents` fields of.
    let ret = unsafe { libc::poll(polls.as_mut_ptr(), polls.len() as libc::nfds_t, ms) };
    if ret < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted { Ok(false) } else { Err(e) };
    }
    let mut readable = false;
    for p in &polls {
        if p.revents & libc::POLLERR != 0 {
            let mut pending: libc::c_int = 0;
            let _ = crate::sys::getsockopt(p.fd, libc::SOL_SOCKET, libc::SO_ERROR, &mut pending);
        }
        readable |= p.revents & libc::POLLIN != 0;
    }
    Ok(readable)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixDatagram;
    use std::time::Instant;

    #[test]
    fn wakes_on_data_and_times_out_without() {
        let (a, b) = UnixDatagram::pair().unwrap();
        let start = Instant::now();
        assert!(!wait_readable(&[b.as_raw_fd()], Duration::from_millis(20)).unwrap());
        assert!(start.elapsed() >= Duration::from_millis(15));
        a.send(b"x").unwrap();
        assert!(wait_readable(&[b.as_raw_fd()], Duration::from_secs(5)).unwrap());
    }

    /// A socket with a pending error wakes the poll once; the error is read, and the next
    /// poll sleeps.
    #[test]
    fn a_pending_error_is_cleared_not_reported_forever() {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let closed = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = closed.local_addr().unwrap();
        drop(closed);
        s.connect(to).unwrap();
        s.send(b"x").unwrap(); // answered by ICMP port unreachable: ECONNREFUSED pending
        std::thread::sleep(Duration::from_millis(50));
        assert!(!wait_readable(&[s.as_raw_fd()], Duration::from_millis(20)).unwrap());
        let start = Instant::now();
        assert!(!wait_readable(&[s.as_raw_fd()], Duration::from_millis(30)).unwrap());
        assert!(start.elapsed() >= Duration::from_millis(25), "slept: {:?}", start.elapsed());
    }
}
