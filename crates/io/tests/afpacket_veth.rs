//! AF_PACKET ports over a veth pair in a private network namespace (needs root; otherwise the
//! tests print "skipped: needs root" and pass).
//!
//! Each test makes namespace `lrp-<pid>-<tag>` holding veth `lrp0` <-> `lrp1`, runs its body in
//! a thread that has entered the namespace (setns is per thread), and deletes the namespace in
//! a Drop guard, so a failing test leaves nothing behind.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use io::afpacket::{self, PacketConfig, PacketError, PacketRx, PacketTx};
use io::{Batch, FramePool, RxPort, TxPort};

const MAGIC: &[u8; 4] = b"LRAF";

mod common;

use common::{ETHERTYPE_TEST, ip, veth_ns};

fn test_frame(seq: u32, len: usize) -> Vec<u8> {
    common::test_frame(MAGIC, seq, len)
}

/// IPv4/UDP frame of flow `flow` carrying magic + `seq` in the payload.
fn flow_frame(flow: u32, seq: u32) -> Vec<u8> {
    let mut f = vec![0u8; 64];
    f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&50u16.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[10, 0, (flow >> 8) as u8, flow as u8]);
    ip[16..20].copy_from_slice(&[10, 1, 0, 1]);
    let sum = ip.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], c[1]]))).sum::<u32>();
    let sum = !((sum & 0xffff) + (sum >> 16)) as u16;
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    f[34..36].copy_from_slice(&(1000 + flow as u16).to_be_bytes());
    f[36..38].copy_from_slice(&2000u16.to_be_bytes());
    f[38..40].copy_from_slice(&30u16.to_be_bytes());
    f[42..46].copy_from_slice(MAGIC);
    f[46..50].copy_from_slice(&seq.to_be_bytes());
    f
}

/// The seq of one of our test frames (either kind), or None for other traffic.
fn seq_of(frame: &[u8]) -> Option<u32> {
    let at = match u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]) {
        ETHERTYPE_TEST => 14,
        0x0800 => 42,
        _ => return None,
    };
    (frame.get(at..at + 4)? == MAGIC)
        .then(|| u32::from_be_bytes(frame[at + 4..at + 8].try_into().unwrap()))
}

fn send(tx: &mut PacketTx, pool: &mut FramePool, frames: &[Vec<u8>]) {
    let mut batch = Batch::new();
    for chunk in frames.chunks(64) {
        for f in chunk {
            let mut d = pool.alloc().expect("pool");
            pool.write(&mut d, f);
            batch.push(d);
        }
        tx.tx_burst(pool, &mut batch);
    }
}

/// Receives until `want` test frames arrived or `idle` passed without any; returns the test
/// frames' bytes (other traffic is freed and ignored).
fn drain(rx: &mut PacketRx, pool: &mut FramePool, want: usize, idle: Duration) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    let mut batch = Batch::new();
    let mut last = Instant::now();
    while got.len() < want && last.elapsed() < idle {
        if rx.rx_burst(pool, &mut batch, 64) == 0 {
            rx.wait(10);
            continue;
        }
        last = Instant::now();
        for d in batch.drain() {
            let f = pool.frame(d);
            if seq_of(f).is_some() {
                got.push(f.to_vec());
            }
            pool.free(d);
        }
    }
    got
}

#[test]
fn ten_thousand_frames_cross_the_veth_intact() {
    need_root!();
    const N: u32 = 10_000;
    let ns = veth_ns("lrp", "b");
    ns.run(|| {
        let cfg = PacketConfig { port: 7, ..Default::default() };
        let mut tx = afpacket::open_tx("lrp0", &cfg).unwrap();
        let mut rx = afpacket::open_rx("lrp1", &cfg).unwrap();
        let mut pool = FramePool::new(1024);
        let len_of = |seq: u32| 60 + (seq as usize * 37) % (1514 - 60 + 1);
        let mut seen = HashSet::new();
        let mut batch = Batch::new();
        let check = |batch: &mut Batch, pool: &mut FramePool, seen: &mut HashSet<u32>| {
            for d in batch.drain() {
                let f = pool.frame(d);
                if let Some(seq) = seq_of(f) {
                    assert_eq!(d.port, 7);
                    assert_eq!(f, &test_frame(seq, len_of(seq))[..], "frame {seq} bytes");
                    assert!(seen.insert(seq), "frame {seq} twice");
                }
                pool.free(d);
            }
        };
        // Send in bursts and drain concurrently (one thread, alternating).
        for burst in 0..N / 100 {
            let frames: Vec<Vec<u8>> =
                (burst * 100..(burst + 1) * 100).map(|s| test_frame(s, len_of(s))).collect();
            send(&mut tx, &mut pool, &frames);
            while rx.rx_burst(&mut pool, &mut batch, 256) > 0 {
                check(&mut batch, &mut pool, &mut seen);
            }
        }
        tx.flush(&mut pool);
        let deadline = Instant::now() + Duration::from_secs(5);
        while seen.len() < N as usize && Instant::now() < deadline {
            if rx.rx_burst(&mut pool, &mut batch, 256) == 0 {
                rx.wait(20);
            }
            check(&mut batch, &mut pool, &mut seen);
        }
        let (ts, ks) = (tx.stats(), rx.kernel_stats());
        assert_eq!(
            seen.len(),
            N as usize,
            "received {} of {N}; tx {ts:?} {:?}; kernel {ks:?}; rx {:?}",
            seen.len(),
            tx.errors(),
            rx.counters()
        );
        assert_eq!((ts.tx_packets, ts.tx_dropped), (N as u64, 0));
        assert_eq!(ks.drops, 0);
        assert!(ks.packets >= u64::from(N), "{ks:?}");
        assert_eq!(rx.counters().truncated, 0);
        assert_eq!(pool.available(), 1024, "every chunk back in the pool");
    });
}

#[test]
fn rx_ignores_what_the_host_sends_and_errors_are_actionable() {
    need_root!();
    let ns = veth_ns("lrp", "o");
    ip(&["-n", &ns.0, "link", "add", "lrpdown", "type", "veth", "peer", "name", "lrpdown1"])
        .unwrap(); // left down
    ns.run(|| {
        let cfg = PacketConfig::default();
        // Frames through the qdisc path are what other packet sockets see as outgoing.
        let mut tx =
            afpacket::open_tx("lrp0", &PacketConfig { qdisc_bypass: false, ..cfg.clone() })
                .unwrap();
        let mut tx_bypass = afpacket::open_tx("lrp0", &cfg).unwrap();
        let mut rx_router = afpacket::open_rx("lrp0", &cfg).unwrap();
        let mut rx_capture =
            afpacket::open_rx("lrp0", &PacketConfig { ignore_outgoing: false, ..cfg.clone() })
                .unwrap();
        let mut rx_peer = afpacket::open_rx("lrp1", &cfg).unwrap();
        let mut pool = FramePool::new(512);
        let frames: Vec<Vec<u8>> = (0..100).map(|s| test_frame(s, 100)).collect();
        send(&mut tx, &mut pool, &frames);
        let frames: Vec<Vec<u8>> = (100..200).map(|s| test_frame(s, 100)).collect();
        send(&mut tx_bypass, &mut pool, &frames);
        assert_eq!(
            drain(&mut rx_peer, &mut pool, 200, Duration::from_secs(2)).len(),
            200,
            "all sent"
        );
        let captured = drain(&mut rx_capture, &mut pool, 100, Duration::from_secs(1));
        assert_eq!(
            captured.len(),
            100,
            "control: a socket without IGNORE_OUTGOING sees the qdisc-path frames"
        );
        let echoed = drain(&mut rx_router, &mut pool, 1, Duration::from_millis(300));
        assert!(echoed.is_empty(), "rx on lrp0 saw {} of its own frames", echoed.len());
        assert_eq!(pool.available(), 512);

        match afpacket::open_rx("lrpdown", &cfg) {
            Err(e @ PacketError::InterfaceDown(_)) => {
                assert!(e.to_string().contains("ip link set lrpdown up"), "{e}")
            }
            other => panic!("expected InterfaceDown, got {:?}", other.err()),
        }
        match afpacket::open("lrp-missing", &cfg) {
            Err(e @ PacketError::NoInterface(_)) => {
                assert!(e.to_string().contains("ip link"), "{e}")
            }
            other => panic!("expected NoInterface, got {:?}", other.err()),
        }
    });
}

#[test]
fn fanout_group_splits_flows_exactly_once() {
    need_root!();
    const FLOWS: u32 = 128;
    const PER_FLOW: u32 = 25;
    let ns = veth_ns("lrp", "f");
    ns.run(|| {
        let group = (std::process::id() & 0xffff) as u16;
        let cfg = PacketConfig { fanout: Some(group), ..Default::default() };
        let mut a = afpacket::open_rx("lrp1", &PacketConfig { port: 1, ..cfg.clone() }).unwrap();
        let mut b = afpacket::open_rx("lrp1", &PacketConfig { port: 2, ..cfg.clone() }).unwrap();
        let mut tx = afpacket::open_tx("lrp0", &cfg).unwrap();
        let mut pool = FramePool::new(1024);
        let frames: Vec<Vec<u8>> =
            (0..FLOWS * PER_FLOW).map(|s| flow_frame(s % FLOWS, s)).collect();
        for chunk in frames.chunks(512) {
            send(&mut tx, &mut pool, chunk);
        }
        let total = (FLOWS * PER_FLOW) as usize;
        let mut owner: HashMap<u32, u16> = HashMap::new(); // flow -> socket
        let mut seen = HashSet::new();
        let mut counts = [0usize; 2];
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut batch = Batch::new();
        while seen.len() < total && Instant::now() < deadline {
            let n = a.rx_burst(&mut pool, &mut batch, 256) + b.rx_burst(&mut pool, &mut batch, 256);
            if n == 0 {
                a.wait(5);
            }
            for d in batch.drain() {
                let f = pool.frame(d);
                if let Some(seq) = seq_of(f) {
                    assert_eq!(f, &frames[seq as usize][..]);
                    assert!(seen.insert(seq), "frame {seq} delivered twice");
                    counts[d.port as usize - 1] += 1;
                    let flow = seq % FLOWS;
                    let first = *owner.entry(flow).or_insert(d.port);
                    assert_eq!(first, d.port, "flow {flow} split across sockets");
                }
                pool.free(d);
            }
        }
        assert_eq!(seen.len(), total, "received {} of {total}", seen.len());
        assert!(counts[0] > 0 && counts[1] > 0, "both members get frames: {counts:?}");
        eprintln!("fanout split {counts:?}");
    });
}

#[test]
fn vlan_tagged_frames_arrive_with_their_tag() {
    need_root!();
    let ns = veth_ns("lrp", "v");
    ns.run(|| {
        let cfg = PacketConfig::default();
        let mut tx = afpacket::open_tx("lrp0", &cfg).unwrap();
        let mut rx = afpacket::open_rx("lrp1", &cfg).unwrap();
        let mut pool = FramePool::new(256);
        // dst, src, 802.1Q tag (VID 100), then the test EtherType and payload.
        let frames: Vec<Vec<u8>> = (0..20u32)
            .map(|s| {
                let inner = test_frame(s, 100);
                let mut f = inner[..12].to_vec();
                f.extend_from_slice(&[0x81, 0x00, 0x00, 100]);
                f.extend_from_slice(&inner[12..]);
                f
            })
            .collect();
        assert!(!rx.wait(20), "nothing sent yet");
        send(&mut tx, &mut pool, &frames);
        // wait() sleeps in poll(2) until the kernel retires the block (after rx_timeout_ms).
        let t = Instant::now();
        assert!(
            rx.wait(5000) && t.elapsed() < Duration::from_millis(1000),
            "wait woke after {:?}",
            t.elapsed()
        );
        let mut got = Vec::new();
        let mut batch = Batch::new();
        let deadline = Instant::now() + Duration::from_secs(2);
        while got.len() < frames.len() && Instant::now() < deadline {
            if rx.rx_burst(&mut pool, &mut batch, 64) == 0 {
                rx.wait(10);
            }
            for d in batch.drain() {
                got.push(pool.frame(d).to_vec());
                pool.free(d);
            }
        }
        got.retain(|f| f.len() == 104 && f[12..14] == [0x81, 0x00]);
        assert_eq!(
            got, frames,
            "tagged frames arrive as sent (tag re-inserted if the NIC stripped it)"
        );
    });
}
