//! The tc program that drops the kernel's copy of forwarded frames, on a real veth (needs
//! root; otherwise "skipped: needs root"). Frames sent into `lrk0` arrive at `lrk1`, which
//! holds 10.77.0.1: the kernel's IPv4 input counts every frame it sees (`Ip: InReceives` in
//! the namespace's /proc/net/snmp). With the program attached it must see only the frames
//! for 10.77.0.1; after the program is dropped, all of them again.

use std::time::Duration;

use io::afpacket::{self, PacketConfig};
use io::xdp::kernel_copy::KernelCopyDrop;
use io::{Batch, FramePool, TxPort};

mod common;

use common::{ip, veth_ns};

/// An IPv4/UDP frame to `dst_mac`, `dst`, with a valid header checksum.
fn udp_frame(dst_mac: [u8; 6], dst: [u8; 4]) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[..6].copy_from_slice(&dst_mac);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0x77, 1]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let h = &mut f[14..34];
    h[0] = 0x45;
    h[2..4].copy_from_slice(&46u16.to_be_bytes());
    h[8] = 64;
    h[9] = 17;
    h[12..16].copy_from_slice(&[10, 77, 0, 2]);
    h[16..20].copy_from_slice(&dst);
    let sum: u32 = h.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], c[1]]))).sum();
    let sum = !(((sum & 0xffff) + (sum >> 16)) as u16);
    h[10..12].copy_from_slice(&sum.to_be_bytes());
    f[34..36].copy_from_slice(&4000u16.to_be_bytes());
    f[36..38].copy_from_slice(&9u16.to_be_bytes());
    f[38..40].copy_from_slice(&26u16.to_be_bytes());
    f
}

/// `Ip: InReceives` of the calling thread's namespace.
fn ip_in_receives() -> u64 {
    let snmp = std::fs::read_to_string("/proc/thread-self/net/snmp").unwrap();
    let mut lines = snmp.lines().filter(|l| l.starts_with("Ip:"));
    let (names, values) = (lines.next().unwrap(), lines.next().unwrap());
    let at = names.split_whitespace().position(|n| n == "InReceives").unwrap();
    values.split_whitespace().nth(at).unwrap().parse().unwrap()
}

#[test]
fn the_kernel_sees_only_frames_for_the_router() {
    need_root!();
    let ns = veth_ns("lrk", "copy");
    ip(&["-n", ns.name(), "addr", "add", "10.77.0.1/24", "dev", "lrk1"]).unwrap();
    let mac = [2, 0, 0, 0, 0x77, 2];
    ip(&["-n", ns.name(), "link", "set", "lrk1", "address", "02:00:00:00:77:02"]).unwrap();
    ns.run(|| {
        let mut tx = afpacket::open_tx("lrk0", &PacketConfig::default()).unwrap();
        let mut pool = FramePool::new(256);
        // 20 frames for the router, 30 it would forward: how many the kernel took in.
        let mut round = || {
            let before = ip_in_receives();
            let mut batch = Batch::new();
            for i in 0..50u8 {
                let dst = if i % 5 < 2 { [10, 77, 0, 1] } else { [10, 88, 0, i] };
                let mut d = pool.alloc().unwrap();
                pool.write(&mut d, &udp_frame(mac, dst));
                batch.push(d);
            }
            tx.tx_burst(&mut pool, &mut batch);
            std::thread::sleep(Duration::from_millis(200));
            ip_in_receives() - before
        };
        assert_eq!(round(), 50, "without the program the kernel takes every frame in");
        let addrs = vec!["10.77.0.1".parse().unwrap()];
        let attached =
            KernelCopyDrop::attach(&[("lrk1".to_owned(), addrs.clone())], false).unwrap();
        assert_eq!(round(), 20, "only the frames for the router reach IP input");
        drop(attached);
        assert_eq!(round(), 50, "detached when dropped");
        let all = KernelCopyDrop::attach(&[("lrk1".to_owned(), addrs)], true).unwrap();
        assert_eq!(round(), 0, "everything dropped (host stack on TAPs)");
        drop(all);
        assert!(
            KernelCopyDrop::attach(&[("lrk9".to_owned(), vec![])], false).is_err(),
            "no such interface"
        );
    });
}
