//! One TCP connection, A:PA to B:PB, as the `modulate state` and `synproxy state` tests send
//! it through the state table.

use fw::packet::{Af, Dir, PacketKey, proto};

pub const A: u128 = 0x0a00_0001;
pub const B: u128 = 0xc633_6402;
pub const PA: u16 = 40000;
pub const PB: u16 = 80;

/// The key of a segment with `flags` sent by A (`from_a`) or B, received on interface 1.
pub fn key(from_a: bool, flags: u8) -> PacketKey {
    let (src, dst, src_port, dst_port) = if from_a { (A, B, PA, PB) } else { (B, A, PB, PA) };
    PacketKey {
        af: Af::Inet,
        dir: Dir::In,
        iface: 1,
        proto: proto::TCP,
        src,
        dst,
        src_port,
        dst_port,
        tcp_flags: flags,
        len: 40,
        ..PacketKey::ZERO
    }
}
