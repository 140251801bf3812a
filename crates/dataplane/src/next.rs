//! Where each packet of a batch goes next: the forwarding node's decision per packet (VPP's
//! "next node"), made by the classify pass and revised by the firewall's passes.

use crate::counters::DropReason;

/// The decision for one packet of the batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    Drop(DropReason),
    /// For the router; arrived on logical port `in_port`.
    Local {
        in_port: u16,
    },
    /// IPv4 to route; the IP header starts at `l3`; `slot` indexes the route lookup arrays.
    V4 {
        l3: u16,
        slot: u16,
        in_port: u16,
    },
    V6 {
        l3: u16,
        slot: u16,
        in_port: u16,
    },
    /// `synproxy state`'s answer to a client's SYN, built in the SYN's buffer: sent back out
    /// of the port the SYN came in on.
    Reflect,
}

/// A packet the classify pass found routable.
#[derive(Clone, Copy)]
pub(crate) struct RoutedPacket {
    /// The offset of its IP header in the frame.
    pub l3: usize,
    pub v4: bool,
    /// The logical port it came in on (an interface or VLAN sub-interface: what `on IFACE`
    /// names).
    pub in_port: u16,
}

impl Next {
    /// Where a packet to route is and where it came from (`None`: not to route).
    #[inline(always)]
    pub fn routed(&self) -> Option<RoutedPacket> {
        match *self {
            Next::V4 { l3, in_port, .. } => {
                Some(RoutedPacket { l3: usize::from(l3), v4: true, in_port })
            }
            Next::V6 { l3, in_port, .. } => {
                Some(RoutedPacket { l3: usize::from(l3), v4: false, in_port })
            }
            _ => None,
        }
    }
}
