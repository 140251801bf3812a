//! What linerate asks of a NIC's driver through the SIOCETHTOOL ioctl (`linux/ethtool.h`):
//! its RSS configuration ([`rss`]) and its statistics ([`stats`]).

pub mod rss;
pub mod stats;

pub use rss::*;
pub use stats::*;
