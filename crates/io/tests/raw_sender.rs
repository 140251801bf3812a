//! The slow path's raw AF_PACKET sender over a veth pair in a private network namespace
//! `lrr-<pid>-<tag>` (veth `lrr0` <-> `lrr1`), received with the TPACKET_V3 rx port on the
//! peer. Needs root; otherwise the tests print "skipped: needs root" and pass.

use std::io::ErrorKind;
use std::time::{Duration, Instant};

use io::afpacket::{self, PacketConfig, RawSender};
use io::{Batch, FramePool, RxPort};

mod common;

use common::{ETHERTYPE_TEST, ip, veth_ns};

const MAGIC: &[u8; 4] = b"LRRS";

fn test_frame(seq: u32, len: usize) -> Vec<u8> {
    common::test_frame(MAGIC, seq, len)
}

/// One of our test frames, with or without an 802.1Q tag.
fn is_test_frame(f: &[u8]) -> bool {
    let at = if f.get(12..14) == Some(&[0x81, 0x00]) { 16 } else { 12 };
    f.get(at..at + 2) == Some(&ETHERTYPE_TEST.to_be_bytes()) && f.get(at + 2..at + 6) == Some(MAGIC)
}

#[test]
fn ten_frames_cross_the_veth_in_order() {
    need_root!();
    let ns = veth_ns("lrr", "s");
    ns.run(|| {
        let mut rx = afpacket::open_rx("lrr1", &PacketConfig::default()).unwrap();
        let tx = RawSender::open("lrr0").unwrap();
        assert_eq!(tx.ifname(), "lrr0");
        // Sizes from the Ethernet minimum to a full 1500-byte MTU, one VLAN-tagged.
        let mut frames: Vec<Vec<u8>> = (0..10u32)
            .map(|s| {
                test_frame(s, [60, 64, 100, 128, 256, 512, 1000, 1400, 1500, 1514][s as usize])
            })
            .collect();
        let inner = frames[9].split_off(12);
        frames[9].extend_from_slice(&[0x81, 0x00, 0x00, 100]);
        frames[9].extend_from_slice(&inner); // 1518 bytes: tagged full-size frame
        for f in &frames {
            tx.send(f).unwrap();
        }
        let mut pool = FramePool::new(256);
        let mut batch = Batch::new();
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(3);
        while got.len() < frames.len() && Instant::now() < deadline {
            if rx.rx_burst(&mut pool, &mut batch, 64) == 0 {
                rx.wait(20);
            }
            for d in batch.drain() {
                let f = pool.frame(d);
                if is_test_frame(f) {
                    got.push(f.to_vec());
                }
                pool.free(d);
            }
        }
        assert_eq!(got.len(), frames.len(), "received {} of {}", got.len(), frames.len());
        for (i, (g, f)) in got.iter().zip(&frames).enumerate() {
            assert_eq!(g, f, "frame {i}: bytes and order");
        }
        assert_eq!(pool.available(), 256);
    });
}

#[test]
fn oversize_frames_and_down_links_are_errors() {
    need_root!();
    let ns = veth_ns("lrr", "e");
    ip(&["-n", &ns.0, "link", "add", "lrrdown", "type", "veth", "peer", "name", "lrrdown1"])
        .unwrap(); // left down
    let name = ns.name();
    ns.run(|| {
        let tx = RawSender::open("lrr0").unwrap();
        // Longer than MTU 1500 + Ethernet header (+ one VLAN tag's allowance): refused.
        let e = tx.send(&test_frame(0, 1600)).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EMSGSIZE), "{e}");
        // Opening needs the interface up, with the same advice as the ring ports ...
        let e = RawSender::open("lrrdown").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NetworkDown);
        assert!(e.to_string().contains("ip link set lrrdown up"), "{e}");
        let e = RawSender::open("lrr-missing").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotFound);
        assert!(e.to_string().contains("ip link"), "{e}");
        // ... and a link that goes down later makes sends fail (ENETDOWN), not block.
        ip(&["-n", name, "link", "set", "lrr0", "down"]).unwrap();
        let e = tx.send(&test_frame(1, 100)).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENETDOWN), "{e}");
    });
}
