//! The router's own packets on their way out through the workers. The slow-path thread reads
//! what the host stack sends on linerate's TAPs; with a firewall, it hands each IP packet to
//! the worker that owns its flow (the one its replies reach: the symmetric Toeplitz hash
//! that spreads received flows over the workers, as the NIC's RSS or, on AF_PACKET, the
//! fanout program computes it), whose firewall judges it
//! ([`Firewall::local_out`](crate::Firewall::local_out)) before the worker sends it.
//!
//! One datagram socket pair per worker: ordered, bounded by the socket's buffer (a packet
//! that finds it full is dropped and counted, as a full NIC ring would), and pollable, so a
//! sleeping worker wakes for it. A counter beside it lets a busy worker see that something
//! is queued with one relaxed load per round, without a system call.

use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixDatagram;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use io::rss::{SYMMETRIC_KEY, Toeplitz, queue_for};

/// Bytes before the frame in a datagram: the logical and the physical port.
const HEADER: usize = 4;
/// Largest frame carried: what a worker's frame buffer holds (the TAPs' MTU keeps the host
/// stack's frames within it; a larger one is dropped here, never cut).
const MAX_FRAME: usize = io::pool::MAX_FRAME_LEN;

/// The slow-path thread's end: one socket per worker.
pub struct HostOutSender {
    sockets: Vec<UnixDatagram>,
    queued: Vec<Arc<AtomicU64>>,
    hash: Toeplitz,
    /// By physical port: its frames are spread by the AF_PACKET fanout program (which hashes
    /// an ICMP query's identifier as a port), not by the NIC's RSS.
    fanout: Vec<bool>,
    /// Packets dropped because their worker's queue was full.
    pub dropped: u64,
}

/// A worker's end.
pub struct HostOutReceiver {
    socket: UnixDatagram,
    queued: Arc<AtomicU64>,
    seen: u64,
    buf: Vec<u8>,
}

/// A packet the host stack sent, as a worker receives it.
pub struct HostFrame<'a> {
    /// The logical port (interface) it leaves by: the one the rules see.
    pub port: u16,
    /// The physical port that sends it.
    pub phys: u16,
    /// The whole frame, with its 802.1Q tag if the interface has one.
    pub frame: &'a [u8],
}

/// A sender and one receiver per worker; `fanout`: by physical port, whether an AF_PACKET
/// fanout program spreads its frames over the workers.
pub fn host_out_channels(
    workers: usize,
    fanout: Vec<bool>,
) -> std::io::Result<(HostOutSender, Vec<HostOutReceiver>)> {
    let mut sender = HostOutSender {
        sockets: Vec::new(),
        queued: Vec::new(),
        hash: Toeplitz::new(&SYMMETRIC_KEY),
        fanout,
        dropped: 0,
    };
    let mut receivers = Vec::new();
    for _ in 0..workers.max(1) {
        let (tx, rx) = UnixDatagram::pair()?;
        tx.set_nonblocking(true)?;
        rx.set_nonblocking(true)?;
        let queued = Arc::new(AtomicU64::new(0));
        sender.sockets.push(tx);
        sender.queued.push(Arc::clone(&queued));
        receivers.push(HostOutReceiver {
            socket: rx,
            queued,
            seen: 0,
            buf: vec![0; HEADER + MAX_FRAME],
        });
    }
    Ok((sender, receivers))
}

impl HostOutSender {
    /// Queues `frame` for logical port `port` on physical port `phys` to the worker of its
    /// flow, chosen from `untagged` (the frame before its 802.1Q tag). `false`: dropped, the
    /// worker's queue was full or the frame larger than a frame buffer.
    pub fn send(&mut self, port: u16, phys: u16, untagged: &[u8], frame: &[u8]) -> bool {
        if frame.len() > MAX_FRAME {
            self.dropped += 1;
            return false;
        }
        let w = self.worker_of(untagged, phys);
        let mut msg = Vec::with_capacity(HEADER + frame.len());
        msg.extend_from_slice(&port.to_le_bytes());
        msg.extend_from_slice(&phys.to_le_bytes());
        msg.extend_from_slice(frame);
        if self.sockets[w].send(&msg).is_err() {
            self.dropped += 1;
            return false;
        }
        self.queued[w].fetch_add(1, Ordering::Release);
        true
    }

    /// The worker whose input on physical port `phys` receives the replies of `untagged`'s
    /// flow.
    fn worker_of(&self, untagged: &[u8], phys: u16) -> usize {
        let n = self.sockets.len();
        if n == 1 {
            return 0;
        }
        if self.fanout.get(usize::from(phys)).copied().unwrap_or(false) {
            // The kernel gives the frame to member `program's value % members`.
            return io::afpacket::toeplitz::reference(&self.hash, untagged) as usize % n;
        }
        self.hash.hash_frame(untagged).map_or(0, |h| usize::from(queue_for(h, n as u16)))
    }
}

impl HostOutReceiver {
    /// Something may be queued (one relaxed load).
    #[inline(always)]
    pub fn pending(&self) -> bool {
        self.queued.load(Ordering::Relaxed) != self.seen
    }

    /// The socket, readable while packets are queued (for the worker's sleep).
    pub fn fd(&self) -> RawFd {
        self.socket.as_raw_fd()
    }

    /// The next queued packet, if any.
    pub fn recv(&mut self) -> Option<HostFrame<'_>> {
        let n = self.socket.recv(&mut self.buf).ok()?;
        self.seen += 1;
        let b = self.buf.get(..n).filter(|b| b.len() >= HEADER)?;
        Some(HostFrame {
            port: u16::from_le_bytes([b[0], b[1]]),
            phys: u16::from_le_bytes([b[2], b[3]]),
            frame: &b[HEADER..],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A UDP frame between two addresses and ports (IPv4, no checksums: only the hash reads it).
    fn udp(src: [u8; 4], sport: u16, dst: [u8; 4], dport: u16) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 28];
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        f[14] = 0x45;
        f[14 + 9] = 17;
        f[14 + 12..14 + 16].copy_from_slice(&src);
        f[14 + 16..14 + 20].copy_from_slice(&dst);
        f[34..36].copy_from_slice(&sport.to_be_bytes());
        f[36..38].copy_from_slice(&dport.to_be_bytes());
        f
    }

    /// An IPv4 ICMP echo request or reply with identifier `id`.
    fn echo(src: [u8; 4], dst: [u8; 4], icmp_type: u8, id: u16) -> Vec<u8> {
        let mut f = udp(src, 0, dst, 0);
        f[14 + 9] = 1;
        f[34] = icmp_type;
        f[35] = 0;
        f[38..40].copy_from_slice(&id.to_be_bytes());
        f
    }

    /// Frames reach the worker that receives their flow's replies, whole and in order
    /// (behind a NIC's RSS: port 1 here).
    #[test]
    fn frames_go_to_the_worker_of_their_flow() {
        let (mut tx, mut rx) = host_out_channels(4, vec![true, false]).unwrap();
        let t = Toeplitz::new(&SYMMETRIC_KEY);
        for sport in 1000..1064u16 {
            let f = udp([10, 0, 0, 1], sport, [192, 0, 2, 7], 179);
            let reply = udp([192, 0, 2, 7], 179, [10, 0, 0, 1], sport);
            let w = usize::from(queue_for(t.hash_frame(&reply).unwrap(), 4));
            assert!(tx.send(3, 1, &f, &f));
            assert!(rx[w].pending());
            let got = rx[w].recv().unwrap();
            assert_eq!((got.port, got.phys, got.frame), (3, 1, &f[..]));
            assert!(!rx[w].pending());
            assert!(rx[w].recv().is_none());
        }
    }

    /// Behind the AF_PACKET fanout program, an echo request goes to the worker its reply
    /// reaches, which the program picks by the identifier.
    #[test]
    fn pings_go_to_the_worker_of_their_replies_behind_fanout() {
        let (mut tx, mut rx) = host_out_channels(3, vec![true]).unwrap();
        let t = Toeplitz::new(&SYMMETRIC_KEY);
        let mut workers = std::collections::HashSet::new();
        for id in 0..64u16 {
            let request = echo([10, 0, 0, 1], [192, 0, 2, 7], 8, id);
            let reply = echo([192, 0, 2, 7], [10, 0, 0, 1], 0, id);
            let w = io::afpacket::toeplitz::reference(&t, &reply) as usize % 3;
            workers.insert(w);
            assert!(tx.send(0, 0, &request, &request));
            assert!(rx[w].recv().is_some(), "id {id}: not at worker {w}");
        }
        assert_eq!(workers.len(), 3, "the identifiers spread over the workers");
    }

    /// A full queue drops and counts; what was queued still arrives.
    #[test]
    fn a_full_queue_drops_and_counts() {
        let (mut tx, mut rx) = host_out_channels(1, vec![false]).unwrap();
        let f = udp([10, 0, 0, 1], 1, [10, 0, 0, 2], 2);
        let sent = (0..100_000).take_while(|_| tx.send(0, 0, &f, &f)).count();
        assert!(sent > 0 && sent < 100_000, "sent {sent}");
        assert_eq!(tx.dropped, 1);
        let got = std::iter::from_fn(|| rx[0].recv().map(|_| ())).count();
        assert_eq!(got, sent);
        assert!(!tx.send(0, 0, &f, &vec![0u8; MAX_FRAME + 1]));
        assert_eq!(tx.dropped, 2);
    }
}
