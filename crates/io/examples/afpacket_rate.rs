//! How many 60-byte frames per second one thread sends through an AF_PACKET tx ring on veth
//! `lrp0`, and one thread receives from the rx ring on its peer `lrp1`.
//!
//! `cargo run --release --example afpacket_rate [seconds]` as root. Creates namespace
//! `lrr-<pid>` (removed on exit, also on panic) and pins sender and receiver to CPUs 0 and 1.

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use io::afpacket::{self, PacketConfig};
use io::{Batch, FramePool, RxPort, TxPort};

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

struct Netns(String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

fn enter(ns: &str) {
    let file = std::fs::File::open(format!("/var/run/netns/{ns}")).expect("open netns");
    // SAFETY: setns on a namespace fd we hold open; affects only the calling thread.
    let rc = unsafe { libc::setns(std::os::fd::AsRawFd::as_raw_fd(&file), libc::CLONE_NEWNET) };
    assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
}

/// CPU time the calling thread has used (so the figure can be read per CPU-second on a
/// shared machine).
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: writes one timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn main() {
    let secs: u64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(3);
    let ns = veth_pair();
    let stop = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(AtomicBool::new(false));
    let receiver = {
        let (name, stop, ready) = (ns.0.clone(), Arc::clone(&stop), Arc::clone(&ready));
        std::thread::spawn(move || receive(&name, &stop, &ready))
    };
    while !ready.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(1));
    }
    let name = ns.0.clone();
    let sent = std::thread::spawn(move || send(&name, secs)).join().expect("sender");
    stop.store(true, Ordering::Release);
    let received = receiver.join().expect("receiver");
    report(&sent, &received);
}

/// A namespace of its own holding veth `lrp0` - `lrp1`, both up, without IPv6 (no router
/// solicitations in the count).
fn veth_pair() -> Netns {
    let ns = Netns(format!("lrr-{}", std::process::id()));
    ip(&["netns", "add", &ns.0]);
    for key in ["all", "default"] {
        let _ = Command::new("ip")
            .args([
                "netns",
                "exec",
                &ns.0,
                "sysctl",
                "-qw",
                &format!("net.ipv6.conf.{key}.disable_ipv6=1"),
            ])
            .output();
    }
    ip(&["-n", &ns.0, "link", "add", "lrp0", "type", "veth", "peer", "name", "lrp1"]);
    ip(&["-n", &ns.0, "link", "set", "lrp0", "up"]);
    ip(&["-n", &ns.0, "link", "set", "lrp1", "up"]);
    ns
}

/// What the sender did.
struct Sent {
    stats: io::PortStats,
    errors: afpacket::TxErrors,
    elapsed: Duration,
    cpu: Duration,
}

/// What the receiver got.
struct Received {
    stats: io::PortStats,
    counters: afpacket::RxCounters,
    kernel: afpacket::KernelStats,
}

/// The receiver on CPU 1: reads `lrp1` until the sender is done and the ring stays empty.
fn receive(ns: &str, stop: &AtomicBool, ready: &AtomicBool) -> Received {
    enter(ns);
    let _ = io::affinity::pin_current_thread(1 % io::affinity::available_cpus());
    let mut rx = afpacket::open_rx("lrp1", &PacketConfig::default()).expect("open rx");
    let mut pool = FramePool::new(4096);
    let mut batch = Batch::new();
    ready.store(true, Ordering::Release);
    let mut idle_since = None;
    loop {
        if rx.rx_burst(&mut pool, &mut batch, 256) == 0 {
            if stop.load(Ordering::Acquire) {
                // Sender done: read what is left (blocks retire within 2 ms), then stop.
                let since = *idle_since.get_or_insert_with(Instant::now);
                if since.elapsed() > Duration::from_millis(100) {
                    break;
                }
            }
            std::hint::spin_loop();
            continue;
        }
        idle_since = None;
        for d in batch.drain() {
            pool.free(d);
        }
    }
    let kernel = rx.kernel_stats();
    Received { stats: rx.stats(), counters: rx.counters(), kernel }
}

/// The sender on CPU 0: numbered 60-byte frames to `lrp0` for `secs` seconds.
fn send(ns: &str, secs: u64) -> Sent {
    enter(ns);
    let _ = io::affinity::pin_current_thread(0);
    let mut tx = afpacket::open_tx("lrp0", &PacketConfig::default()).expect("open tx");
    let mut pool = FramePool::new(4096);
    let mut batch = Batch::new();
    let mut frame = [0u8; 60];
    frame[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    frame[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    frame[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
    let cpu0 = thread_cpu();
    let start = Instant::now();
    let end = start + Duration::from_secs(secs);
    let mut seq = 0u32;
    while Instant::now() < end {
        for _ in 0..64 {
            let mut d = pool.alloc().expect("pool");
            frame[14..18].copy_from_slice(&seq.to_be_bytes());
            seq = seq.wrapping_add(1);
            pool.write(&mut d, &frame);
            batch.push(d);
        }
        tx.tx_burst(&mut pool, &mut batch);
    }
    tx.flush(&mut pool);
    Sent {
        stats: tx.stats(),
        errors: tx.errors(),
        elapsed: start.elapsed(),
        cpu: thread_cpu() - cpu0,
    }
}

fn report(s: &Sent, r: &Received) {
    let t = s.elapsed.as_secs_f64();
    let (ts, te, cpu) = (&s.stats, &s.errors, s.cpu);
    let (rs, rc, k) = (&r.stats, &r.counters, &r.kernel);
    let sent = ts.tx_packets;
    println!("60-byte frames, {t:.2} s, one sender thread (lrp0), one receiver thread (lrp1):");
    println!(
        "  tx: {sent} queued ({:.3} Mpps), {} dropped (ring full {}, invalid {}), {} kick errors",
        sent as f64 / t / 1e6,
        ts.tx_dropped,
        te.ring_full,
        te.invalid,
        te.kick_errors
    );
    println!(
        "  rx: {} received ({:.3} Mpps), kernel saw {} dropped {} (ring freezes {}), pool-empty stops {}",
        rs.rx_packets,
        rs.rx_packets as f64 / t / 1e6,
        k.packets,
        k.drops,
        k.freezes,
        rc.pool_empty
    );
    println!(
        "  sender thread CPU: {:.2} s of {t:.2} s wall ({:.3} Mpps per CPU-second; user + kernel, incl. the veth receive path it drives)",
        cpu.as_secs_f64(),
        sent as f64 / cpu.as_secs_f64() / 1e6
    );
    println!(
        "  loss: {:.3} %",
        100.0 * (sent.saturating_sub(rs.rx_packets)) as f64 / sent.max(1) as f64
    );
}
