//! Sleeping until a port has frames: how an idle worker gives its CPU back.
//!
//! A worker that found nothing for a while blocks in `poll(2)` on its rx sockets instead of
//! spinning. AF_XDP sockets are readable as soon as a frame is on their rx ring; TPACKET_V3
//! sockets once a block is retired (full, or after its timeout), see `afpacket`.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

/// Blocks until one of `fds` is readable or `timeout` passes; returns whether one is
/// readable. An interrupted call (a signal) counts as a timeout.
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
    Ok(ret > 0)
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
}
