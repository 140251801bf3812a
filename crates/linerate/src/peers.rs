//! Serving a socket's peers (the control socket's, the metrics endpoint's): each on a
//! thread of its own, so that a slow peer holds up nobody else, a bound on how many at once
//! ([`Slots`]), and deadlines for what a peer sends and for reading what it is sent, in all
//! rather than per read: a timeout per read lets a peer that sends a byte now and then hold
//! its thread as long as it likes.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The peers being served, at most `max`: a [`Slot`] is taken when one is accepted and given
/// back when its thread ends.
#[derive(Clone)]
pub struct Slots {
    taken: Arc<AtomicUsize>,
    max: usize,
}

/// One peer's place among its [`Slots`].
pub struct Slot(Arc<AtomicUsize>);

impl Slots {
    pub fn new(max: usize) -> Slots {
        Slots { taken: Arc::new(AtomicUsize::new(0)), max }
    }

    pub fn max(&self) -> usize {
        self.max
    }

    pub fn take(&self) -> Option<Slot> {
        self.taken
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < self.max).then_some(n + 1))
            .ok()?;
        Some(Slot(Arc::clone(&self.taken)))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A stream whose reads and writes can be given a timeout.
pub trait Timed {
    fn read_timeout(&self, t: Duration) -> io::Result<()>;
    fn write_timeout(&self, t: Duration) -> io::Result<()>;
}

impl Timed for UnixStream {
    fn read_timeout(&self, t: Duration) -> io::Result<()> {
        self.set_read_timeout(Some(t))
    }
    fn write_timeout(&self, t: Duration) -> io::Result<()> {
        self.set_write_timeout(Some(t))
    }
}

impl Timed for TcpStream {
    fn read_timeout(&self, t: Duration) -> io::Result<()> {
        self.set_read_timeout(Some(t))
    }
    fn write_timeout(&self, t: Duration) -> io::Result<()> {
        self.set_write_timeout(Some(t))
    }
}

/// Reads from `conn` into `buf` until `done(buf)` or the peer closes, at most `max` bytes,
/// within `limit` in all.
pub fn read_until<S: Timed>(
    conn: &S,
    max: u64,
    limit: Duration,
    done: impl Fn(&[u8]) -> bool,
) -> io::Result<Vec<u8>>
where
    for<'a> &'a S: Read,
{
    let deadline = Instant::now() + limit;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !done(&buf) {
        if buf.len() as u64 >= max {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("longer than {max} bytes"),
            ));
        }
        conn.read_timeout(left(deadline, limit)?)?;
        let want = chunk.len().min((max - buf.len() as u64) as usize);
        match (&*conn).read(&mut chunk[..want]) {
            Ok(0) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                return Err(timed_out("nothing complete", limit));
            }
            Err(e) => return Err(e),
        }
    }
    Ok(buf)
}

/// One line of at most `max` bytes (with its `\n`, if it came) from `conn`, read within
/// `limit` in all.
pub fn read_line(conn: &UnixStream, max: u64, limit: Duration) -> io::Result<String> {
    let mut line =
        read_until(conn, max, limit, |b| b.contains(&b'\n')).map_err(|e| match e.kind() {
            io::ErrorKind::InvalidData => io::Error::new(e.kind(), format!("the command is {e}")),
            io::ErrorKind::TimedOut => timed_out("no command line", limit),
            _ => e,
        })?;
    if let Some(end) = line.iter().position(|&b| b == b'\n') {
        line.truncate(end + 1);
    }
    String::from_utf8(line)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "the command is not UTF-8"))
}

/// Writes `bytes` to `conn` within `limit` in all.
pub fn write_all<S: Timed>(conn: &S, bytes: &[u8], limit: Duration) -> io::Result<()>
where
    for<'a> &'a S: Write,
{
    let deadline = Instant::now() + limit;
    let mut rest = bytes;
    while !rest.is_empty() {
        conn.write_timeout(left(deadline, limit)?)?;
        match (&*conn).write(rest) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => rest = &rest[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                return Err(timed_out("the answer not read", limit));
            }
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
        assert_eq!(read_line(&server, 64, Duration::from_secs(5)).unwrap(), "show routes\n");
        let (mut client, server) = UnixStream::pair().unwrap();
        let writer = std::thread::spawn(move || {
            let _ = client.write_all(&vec![b'x'; 1 << 20]);
        });
        let e = read_line(&server, 64 << 10, Duration::from_secs(5)).unwrap_err().to_string();
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
    fn slots_are_bounded_and_given_back() {
        let slots = Slots::new(8);
        let held: Vec<Slot> = (0..8).map(|_| slots.take().unwrap()).collect();
        assert!(slots.take().is_none());
        drop(held);
        assert!(slots.take().is_some());
    }
}
