//! AF_XDP over a veth pair in a private network namespace (`lrx-<pid>-<test>`), as root.
//! Without root every test prints "skipped: needs root" and passes.

use std::time::{Duration, Instant};

use io::xdp::{self, XdpConfig, XdpError, XdpMode, XdpRx, XdpTx, ZeroCopy};
use io::{Batch, FRAME_SIZE, FrameDesc, FramePool, RxPort, TxPort};

const MAC0: [u8; 6] = [0x02, 0, 0, 0, 0x77, 0x00];
const MAC1: [u8; 6] = [0x02, 0, 0, 0, 0x77, 0x01];
const IP0: [u8; 4] = [10, 77, 0, 1];
const IP1: [u8; 4] = [10, 77, 0, 2];
const MARK: &[u8; 6] = b"LRXTST";

mod common;

use common::{Netns, is_root};

fn root() -> bool {
    if is_root() {
        return true;
    }
    io::netdev::skip_test("needs root");
    false
}

fn ip(args: &[&str]) -> String {
    common::ip(args).unwrap()
}

/// A namespace `lrx-<pid>-<tag>` holding the veth pair lrx0 <-> lrx1, IPv6 off.
fn veth_ns(tag: &str) -> Netns {
    let ns = Netns::create(format!("lrx-{}-{tag}", std::process::id()));
    ns.disable_ipv6();
    let n = ns.name();
    let (m0, m1) = (mac(&MAC0), mac(&MAC1));
    ip(&[
        "-n", n, "link", "add", "lrx0", "address", &m0, "type", "veth", "peer", "name", "lrx1",
        "address", &m1,
    ]);
    // Only lrx1 gets an address: the kernel ignores an ARP request whose sender address
    // is one of its own (martian source), so 10.77.0.1 must not be local.
    ip(&["-n", n, "addr", "add", "10.77.0.2/24", "dev", "lrx1"]);
    for dev in ["lo", "lrx0", "lrx1"] {
        ip(&["-n", n, "link", "set", dev, "up"]);
    }
    ns
}

fn mac(m: &[u8; 6]) -> String {
    m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

/// An Ethernet/IPv4/UDP frame from lrx0 to lrx1 carrying MARK and `seq`, `len` bytes long.
fn ipv4_frame(seq: u32, len: usize) -> Vec<u8> {
    let mut f = Vec::with_capacity(len);
    f.extend_from_slice(&MAC1);
    f.extend_from_slice(&MAC0);
    f.extend_from_slice(&[0x08, 0x00]);
    let ip_len = (len - 14) as u16;
    f.extend_from_slice(&[0x45, 0, (ip_len >> 8) as u8, ip_len as u8, 0, 0, 0x40, 0, 64, 17, 0, 0]);
    f.extend_from_slice(&IP0);
    f.extend_from_slice(&IP1);
    let udp_len = ip_len - 20;
    f.extend_from_slice(&[0x30, 0x39, 0x30, 0x39, (udp_len >> 8) as u8, udp_len as u8, 0, 0]);
    f.extend_from_slice(MARK);
    f.extend_from_slice(&seq.to_be_bytes());
    while f.len() < len {
        f.push((f.len() as u32 ^ seq) as u8);
    }
    f
}

/// An ARP request from lrx0 (10.77.0.1): who has 10.77.0.2?
fn arp_request() -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&MAC0);
    f.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&MAC0);
    f.extend_from_slice(&IP0);
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&IP1);
    f.resize(60, 0);
    f
}

fn marked_seq(frame: &[u8]) -> Option<u32> {
    let at = 14 + 20 + 8;
    (frame.len() >= at + 10 && &frame[at..at + 6] == MARK)
        .then(|| u32::from_be_bytes(frame[at + 6..at + 10].try_into().unwrap()))
}

fn send(pool: &mut FramePool, tx: &mut XdpTx, frames: &[Vec<u8>]) {
    let mut batch = Batch::new();
    for f in frames {
        let mut d = pool.alloc().expect("pool has frames");
        pool.write(&mut d, f);
        batch.push(d);
    }
    tx.tx_burst(pool, &mut batch);
    assert!(batch.is_empty());
}

/// Polls `rx` (and flushes `txs`) until `want` frames carrying MARK arrived or 3 s passed;
/// returns every descriptor received (marked or not), owned by the caller.
fn recv(
    pool: &mut FramePool,
    rx: &mut XdpRx,
    txs: &mut [&mut XdpTx],
    want: usize,
) -> Vec<FrameDesc> {
    let mut got = Vec::new();
    let mut batch = Batch::new();
    let deadline = Instant::now() + Duration::from_secs(3);
    while got.iter().filter(|d| marked_seq(pool.frame(**d)).is_some()).count() < want
        && Instant::now() < deadline
    {
        for tx in txs.iter_mut() {
            tx.flush(pool);
        }
        if rx.rx_burst(pool, &mut batch, 64) == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        got.extend(batch.drain());
    }
    got
}

fn assert_send<T: Send>() {}

#[test]
fn xdp_veth_rx_tx_arp_and_shared_umem_forwarding() {
    assert_send::<XdpRx>();
    assert_send::<XdpTx>();
    if !root() {
        return;
    }
    let ns = veth_ns("fwd");
    ns.run(|| {
        let mut pool = FramePool::new(8192);
        let cfg = XdpConfig::default();
        let (mut rx1, mut tx1) = xdp::open(&mut pool, "lrx1", 1, &cfg, None).expect("open lrx1");
        let (mut rx0, mut tx0) =
            xdp::open(&mut pool, "lrx0", 0, &cfg, Some(&rx1.umem())).expect("open lrx0");
        eprintln!("veth lrx1: {:?}, lrx0: {:?}", rx1.mode(), rx0.mode());
        assert_eq!(rx1.binding(), ("lrx1", 0));
        for name in ["lrx0", "lrx1"] {
            let (_, prog) = xdp::attached_program(name).unwrap().expect("program attached");
            assert_eq!(prog, "lr_fast");
        }

        assorted_frames_arrive_intact(&mut pool, &mut rx1, &mut tx0);
        steered_by_ethertype(&mut pool, &mut rx1, &mut tx0);
        forwarded_on_the_shared_umem(&mut pool, &mut rx0, &mut tx0, &mut rx1, &mut tx1);

        // Every sent frame completes and returns to the pool.
        let deadline = Instant::now() + Duration::from_secs(2);
        while (tx0.in_flight() > 0 || tx1.in_flight() > 0) && Instant::now() < deadline {
            tx0.flush(&mut pool);
            tx1.flush(&mut pool);
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!((tx0.in_flight(), tx1.in_flight()), (0, 0));
        assert_eq!(rx1.stats().rx_dropped, 0);
        // No frame leaked: those not in the pool are lent to the kernel for receiving.
        let lent = rx0.kernel_frames() + rx1.kernel_frames();
        assert!(lent > 2048, "fill rings kept topped up: {lent}");
        assert_eq!(pool.available() + lent as usize, 8192);

        drop((rx0, tx0, rx1, tx1));
        // Closing the last socket closed the bpf_link: nothing is left attached.
        assert_eq!(xdp::attached_program("lrx1").unwrap(), None);
        assert_eq!(xdp::attached_program("lrx0").unwrap(), None);
    });
}

/// lrx0 -> lrx1: 200 frames of assorted sizes, in two bursts, each received once and intact.
fn assorted_frames_arrive_intact(pool: &mut FramePool, rx1: &mut XdpRx, tx0: &mut XdpTx) {
    let frames: Vec<Vec<u8>> =
        (0..200).map(|i| ipv4_frame(i, 60 + (i as usize * 7) % 1400)).collect();
    send(pool, tx0, &frames[..100]);
    send(pool, tx0, &frames[100..]);
    let got = recv(pool, rx1, &mut [&mut *tx0], 200);
    let mut seen = [false; 200];
    for d in &got {
        let bytes = pool.frame(*d);
        let seq = marked_seq(bytes).expect("only test frames on lrx1") as usize;
        assert_eq!(bytes, &frames[seq][..], "frame {seq} intact");
        assert_eq!(d.port, 1);
        assert!(!seen[seq], "frame {seq} twice");
        seen[seq] = true;
        if rx1.mode().1 {
            assert!(d.addr % FRAME_SIZE as u32 >= xdp::RX_HEADROOM);
        } else {
            assert_eq!(d.addr % FRAME_SIZE as u32, xdp::RX_HEADROOM);
        }
    }
    assert_eq!(got.len(), 200, "received {} of 200", got.len());
    assert_eq!(rx1.stats().rx_packets, 200);
    assert_eq!(tx0.stats().tx_packets, 200);
    assert_eq!(tx0.stats().tx_dropped, 0);
    for d in got {
        pool.free(d);
    }
}

/// The program steers by EtherType: IPv4, IPv6, ARP and VLAN-tagged frames to the socket
/// (the router answers ARP itself); LLDP to the kernel.
fn steered_by_ethertype(pool: &mut FramePool, rx1: &mut XdpRx, tx0: &mut XdpTx) {
    let ether = |dst: &[u8; 6], ty: u16| {
        let mut f = dst.to_vec();
        f.extend_from_slice(&MAC0);
        f.extend_from_slice(&ty.to_be_bytes());
        f.resize(80, 0x5a);
        f
    };
    let lldp = ether(&[0x01, 0x80, 0xc2, 0, 0, 0x0e], 0x88cc);
    let (vlan, qinq, ipv6) = (ether(&MAC1, 0x8100), ether(&MAC1, 0x88a8), ether(&MAC1, 0x86dd));
    let arp = arp_request();
    let burst = [arp.clone(), lldp, vlan.clone(), qinq.clone(), ipv6.clone(), ipv4_frame(1000, 60)];
    send(pool, tx0, &burst);
    let got = recv(pool, rx1, &mut [&mut *tx0], 1);
    let got_bytes: Vec<Vec<u8>> = got.iter().map(|d| pool.frame(*d).to_vec()).collect();
    assert_eq!(
        got_bytes,
        [arp, vlan, qinq, ipv6, ipv4_frame(1000, 60)],
        "LLDP does not reach the socket"
    );
    for d in got {
        pool.free(d);
    }
}

/// Shared UMEM forwarding: receive on lrx1, send the same descriptors back out of lrx1,
/// receive them on lrx0. No byte is copied in user space.
fn forwarded_on_the_shared_umem(
    pool: &mut FramePool,
    rx0: &mut XdpRx,
    tx0: &mut XdpTx,
    rx1: &mut XdpRx,
    tx1: &mut XdpTx,
) {
    let frames: Vec<Vec<u8>> = (2000..2064).map(|i| ipv4_frame(i, 128)).collect();
    send(pool, tx0, &frames);
    let got = recv(pool, rx1, &mut [&mut *tx0], 64);
    assert_eq!(got.len(), 64);
    let mut batch = Batch::new();
    for d in &got {
        batch.push(*d);
    }
    tx1.tx_burst(pool, &mut batch);
    let back = recv(pool, rx0, &mut [&mut *tx0, &mut *tx1], 64);
    assert_eq!(back.len(), 64, "forwarded {} of 64", back.len());
    let mut seqs: Vec<u32> = back.iter().map(|d| marked_seq(pool.frame(*d)).unwrap()).collect();
    seqs.sort();
    assert_eq!(seqs, (2000..2064).collect::<Vec<_>>());
    for d in &back {
        let seq = marked_seq(pool.frame(*d)).unwrap();
        assert_eq!(pool.frame(*d), &frames[(seq - 2000) as usize][..]);
        assert_eq!(d.port, 0);
    }
    assert_eq!(tx1.stats().tx_packets, 64);
    for d in back {
        pool.free(d);
    }
}

#[test]
fn xdp_veth_replaces_stale_program_and_reports_errors() {
    if !root() {
        return;
    }
    let ns = veth_ns("stale");
    let nsname = ns.0.clone();
    ns.run(|| {
        let mut pool = FramePool::new(1024);
        let cfg = XdpConfig { ring_size: 256, ..XdpConfig::default() };

        // A program left attached through netlink by a "crashed" linerate: native, then generic.
        for generic in [false, true] {
            let stale = xdp::attach_via_netlink("lrx1", "lr_xsk", generic).expect("attach stale");
            assert_eq!(xdp::attached_program("lrx1").unwrap(), Some((stale, "lr_xsk".to_string())));
            let (rx, tx) = xdp::open(&mut pool, "lrx1", 1, &cfg, None).expect("open replaces the stale program");
            let (id, name) = xdp::attached_program("lrx1").unwrap().expect("ours attached");
            assert_ne!(id, stale);
            assert_eq!(name, "lr_fast");
            assert_eq!(rx.mode().0, XdpMode::Native, "veth has native XDP");

            // The same queue again, with its UMEM or a new one: busy, with an actionable error.
            for shared in [Some(&rx.umem()), None] {
                let err = xdp::open(&mut pool, "lrx1", 1, &cfg, shared).err().expect("queue is taken");
                assert!(matches!(err, XdpError::QueueBusy { queue: 0, .. }), "{err}");
                eprintln!("queue busy: {err}");
            }

            drop((rx, tx));
            assert_eq!(xdp::attached_program("lrx1").unwrap(), None, "link detached on drop");
        }

        // Someone else's program is left alone, and the error says how to remove it.
        let foreign = xdp::attach_via_netlink("lrx1", "other_xdp", false).expect("attach foreign");
        let err = xdp::open(&mut pool, "lrx1", 1, &cfg, None).err().expect("foreign program in the way");
        assert!(
            matches!(&err, XdpError::ForeignProgram { id, name, .. } if *id == foreign && name == "other_xdp"),
            "{err}"
        );
        assert!(err.to_string().contains("ip link set dev lrx1 xdp off"), "{err}");
        eprintln!("foreign: {err}");
        assert_eq!(xdp::attached_program("lrx1").unwrap(), Some((foreign, "other_xdp".to_string())));
        ip(&["-n", &nsname, "link", "set", "dev", "lrx1", "xdp", "off"]);

        // veth has no zero-copy: Require fails, saying so.
        let zc = XdpConfig { zero_copy: ZeroCopy::Require, ..cfg.clone() };
        let err = xdp::open(&mut pool, "lrx1", 1, &zc, None).err().expect("veth has no zero-copy");
        assert!(matches!(err, XdpError::ZeroCopyUnsupported { .. }), "{err}");
        eprintln!("zero-copy: {err}");

        // Generic mode on request.
        let gen_cfg = XdpConfig { mode: XdpMode::Generic, ..cfg.clone() };
        let (rx, _tx) = xdp::open(&mut pool, "lrx1", 1, &gen_cfg, None).expect("generic mode");
        assert_eq!(rx.mode(), (XdpMode::Generic, false));
        drop((rx, _tx));

        let err = xdp::open(&mut pool, "lrx9", 1, &cfg, None).err().expect("no such interface");
        assert!(matches!(err, XdpError::NoInterface(_)), "{err}");
        let bad = XdpConfig { ring_size: 1000, ..cfg };
        assert!(matches!(xdp::open(&mut pool, "lrx1", 1, &bad, None), Err(XdpError::Config(_))));
    });
}
