//! The control socket's connections: each on a thread of its own, so that a slow peer holds
//! up nobody else, with a deadline for its command line and one for its answer, and a bound
//! on the read-only peers served at once (the admin's are always served).
//!
//! Before, one thread served the peers in turn with a 5-s timeout per read: a peer sending a
//! byte every few seconds, or not reading a long answer, held every `show`, `reload` and
//! `table` command back for as long as it liked.

use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long a read-only peer has to send its command line; an admin's may carry a whole
/// table file (`table ... replace`).
pub const READ_ONLY_READ: Duration = Duration::from_secs(5);
pub const ADMIN_READ: Duration = Duration::from_secs(30);
/// How long a peer has to read its answer (a full table's `routes` is tens of MB).
pub const WRITE: Duration = Duration::from_secs(60);
/// Read-only peers served at once; more are told the socket is busy.
pub const MAX_READ_ONLY: usize = 8;

/// The read-only peers being served: taken when one is accepted, given back when its
/// thread ends.
#[derive(Clone, Default)]
pub struct ReadOnlySlots(Arc<AtomicUsize>);

/// One read-only peer's place among [`MAX_READ_ONLY`].
pub struct Slot(Arc<AtomicUsize>);

impl ReadOnlySlots {
    pub fn take(&self) -> Option<Slot> {
        self.0.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < MAX_READ_ONLY).then_some(n + 1)).ok()?;
        Some(Slot(Arc::clone(&self.0)))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// One line of at most `max` bytes (with its `\n`, if it came) from `conn`, read within
/// `limit` in all.
pub fn read_line(conn: &UnixStream, max: u64, limit: Duration) -> io::Result<String> {
    let deadline = Instant::now() + limit;
    let mut line = Vec::new();
    let mut chunk = [0u8; 4096];
    while !line.contains(&b'\n') {
        if line.len() as u64 >= max {
            return Err(io::Error::new(io::ErrorKind::InvalidData, format!("the command is longer than {max} bytes")));
        }
        conn.set_read_timeout(Some(left(deadline, limit)?))?;
        let want = chunk.len().min((max - line.len() as u64) as usize);
        match (&*conn).read(&mut chunk[..want]) {
            Ok(0) => break,
            Ok(n) => line.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => return Err(timed_out("no command line", limit)),
            Err(e) => return Err(e),
        }
    }
    if let Some(end) = line.iter().position(|&b| b == b'\n') {
        line.truncate(end + 1);
    }
    String::from_utf8(line).map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "the command is not UTF-8"))
}

/// Writes `bytes` to `conn` within `limit` in all.
pub fn write_all(conn: &UnixStream, bytes: &[u8], limit: Duration) -> io::Result<()> {
    let deadline = Instant::now() + limit;
    let mut rest = bytes;
    while !rest.is_empty() {
        conn.set_write_timeout(Some(left(deadline, limit)?))?;
        match (&*conn).write(rest) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => rest = &rest[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => return Err(timed_out("the answer not read", limit)),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// What is left of `limit` until `deadline` (an error once nothing is).
fn left(deadline: Instant, limit: Duration) -> io::Result<Duration> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() { Err(timed_out("out of time", limit)) } else { Ok(left) }
}

fn timed_out(what: &str, limit: Duration) -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, format!("{what} within {} s", limit.as_secs()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A command line is read up to its bound and no further, and within its time in all:
    /// a peer sending a byte now and then gets an error when the time is up.
    #[test]
    fn command_lines_are_bounded_in_size_and_time() {
        let (mut client, server) = UnixStream::pair().unwrap();
        client.write_all(b"show routes\nmore").unwrap();
        assert_eq!(read_line(&server, 64, READ_ONLY_READ).unwrap(), "show routes\n");
        let (mut client, server) = UnixStream::pair().unwrap();
        let writer = std::thread::spawn(move || {
            let _ = client.write_all(&vec![b'x'; 1 << 20]);
        });
        let e = read_line(&server, 64 << 10, READ_ONLY_READ).unwrap_err().to_string();
        assert_eq!(e, "the command is longer than 65536 bytes");
        drop(server);
        writer.join().unwrap();
        let (client, server) = UnixStream::pair().unwrap();
        let drip = std::thread::spawn(move || {
            for _ in 0..10 {
                if (&client).write_all(b"x").is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(150));
            }
        });
        let t0 = Instant::now();
        let e = read_line(&server, 64, Duration::from_millis(500)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(t0.elapsed() < Duration::from_millis(900), "{:?}", t0.elapsed());
        drop(server);
        drip.join().unwrap();
    }

    /// An answer its peer does not read is given up when the time is up.
    #[test]
    fn answers_not_read_are_given_up() {
        let (_client, server) = UnixStream::pair().unwrap();
        let t0 = Instant::now();
        let e = write_all(&server, &vec![b'x'; 16 << 20], Duration::from_millis(300)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(t0.elapsed() < Duration::from_secs(2));
    }

    #[test]
    fn read_only_slots_are_bounded_and_given_back() {
        let slots = ReadOnlySlots::default();
        let held: Vec<Slot> = (0..MAX_READ_ONLY).map(|_| slots.take().unwrap()).collect();
        assert!(slots.take().is_none());
        drop(held);
        assert!(slots.take().is_some());
    }
}
