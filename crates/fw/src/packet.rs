//! What the firewall sees of a packet: the fields rules and states match on, extracted once
//! per packet by the dataplane's classify pass.

/// Address family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Af {
    Inet,
    Inet6,
}

/// Direction relative to the interface: `in` = received on it, `out` = about to be sent on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dir {
    In,
    Out,
}

/// The match fields of one packet. IPv4 addresses are held in the low 32 bits of the u128
/// (host order), so one type serves both families; `af` tells which.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PacketKey {
    pub af: Af,
    pub dir: Dir,
    /// Port (interface) index as the dataplane numbers interfaces.
    pub iface: u16,
    pub proto: u8,
    pub src: u128,
    pub dst: u128,
    /// TCP/UDP ports; for ICMP/ICMPv6 `src_port` holds the type and `dst_port` the code
    /// (as pf matches `icmp-type`/`code`), 0 for other protocols.
    pub src_port: u16,
    pub dst_port: u16,
    /// TCP flags byte (FIN=0x01 SYN=0x02 RST=0x04 PSH=0x08 ACK=0x10 URG=0x20 ECE=0x40 CWR=0x80).
    pub tcp_flags: u8,
    /// Bytes of the IP packet (for per-rule byte counters).
    pub len: u16,
    /// The identifier of an ICMP / ICMPv6 query or reply (echo, timestamp, ...), 0 otherwise:
    /// pf keys query states by it, so that only the replies to a query match its state.
    pub icmp_id: u16,
    /// pf's "bad options": IPv4 options other than padding (EOL, NOP), or an IPv6 routing
    /// header or hop-by-hop options other than padding. pf blocks such a packet unless the
    /// rule (or state) that passes it has `allow-opts`.
    pub ip_opts: bool,
    /// What the FIB says of the addresses, for pf's `no-route` and `urpf-failed` hosts
    /// ([`route`] bits). Filled by the data plane only when the rule set has such hosts
    /// ([`RuleSet::route_bits_used`](crate::rules::RuleSet::route_bits_used)), else 0.
    pub route: u8,
    /// pf's packet tag (`tag` / `tagged`): the id of the tag the packet carries into this pass
    /// ([`RuleSet::tags`](crate::rules::RuleSet::tags)`[tag - 1]`), 0 for none. Set by the
    /// passes: the outbound pass sees what the inbound pass (its rules or its state) tagged.
    pub tag: u8,
}

/// The bits of [`PacketKey::route`].
pub mod route {
    /// No route covers the source address.
    pub const SRC_NO_ROUTE: u8 = 1;
    /// No route covers the destination address.
    pub const DST_NO_ROUTE: u8 = 2;
    /// The source fails pf's unicast reverse-path check: no route covers it, or its route
    /// (none of its paths) does not leave by the interface of the pass.
    pub const SRC_URPF_FAILED: u8 = 4;
}

impl PacketKey {
    /// A key with every field zero (IPv4, inbound): a base for `..` in literals.
    pub const ZERO: PacketKey = PacketKey {
        af: Af::Inet,
        dir: Dir::In,
        iface: 0,
        proto: 0,
        src: 0,
        dst: 0,
        src_port: 0,
        dst_port: 0,
        tcp_flags: 0,
        len: 0,
        icmp_id: 0,
        ip_opts: false,
        route: 0,
        tag: 0,
    };
}

/// IANA protocol numbers used by the rule language.
pub mod proto {
    pub const ICMP: u8 = 1;
    pub const TCP: u8 = 6;
    pub const UDP: u8 = 17;
    pub const ICMPV6: u8 = 58;
}
