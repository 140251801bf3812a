//! Zero-copy views of the wire formats linerate forwards.
//!
//! Every protocol has a view type `Foo<T: AsRef<[u8]>>` wrapping a byte buffer:
//!
//! * `Foo::new_unchecked(buf)` wraps without looking at the bytes; getters may
//!   panic if the buffer is too short.
//! * `Foo::new_checked(buf)` validates lengths (and version fields) and returns
//!   [`Error`] otherwise. It never panics, whatever the input, and once it has
//!   succeeded **no getter and no `payload()` panics**, whatever the bytes.
//!   Variable-length slices (`payload()`, `options()`, ...) are additionally
//!   clamped, so they stay panic-free even if setters later rewrite the
//!   length fields.
//! * Getters need `T: AsRef<[u8]>`; setters need `T: AsRef<[u8]> + AsMut<[u8]>`.
//!
//! Multi-byte fields are big-endian (network order); addresses are
//! `core::net` types.
#![forbid(unsafe_code)]

mod bytes;
mod error;
mod ip;

pub mod arp;
pub mod build;
pub mod checksum;
pub mod ethernet;
pub mod fragment;
pub mod icmp_reply;
pub mod icmpv4;
pub mod icmpv6;
pub mod ipv4;
pub mod ipv6;
pub mod ndisc;
pub mod router_advert;
pub mod tcp;
pub mod tcp_reset;
pub mod udp;

pub use arp::{ArpOperation, ArpPacket};
pub use error::Error;
pub use ethernet::{EtherType, EthernetFrame, L2Header, MacAddr, VlanHeader, parse_l2};
pub use fragment::fragment_ipv4;
pub use icmpv4::{Icmpv4Packet, Icmpv4Type};
pub use icmpv6::{Icmpv6Packet, Icmpv6Type};
pub use ip::IpProtocol;
pub use ipv4::Ipv4Packet;
pub use ipv6::Ipv6Packet;
pub use tcp::{TcpFlags, TcpPacket};
pub use udp::UdpPacket;
