//! What linerate asks of a NIC's driver through the SIOCETHTOOL ioctl (`linux/ethtool.h`):
//! its RSS configuration ([`rss`]), its statistics ([`stats`]) and GRO ([`gro`]).

pub mod gro;
pub mod rss;
pub mod stats;

pub use rss::*;
pub use stats::*;
