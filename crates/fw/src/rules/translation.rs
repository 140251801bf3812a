//! The translation rules' types (`nat`, `rdr`, `binat`: pf.conf(5), "TRANSLATION"), as the
//! parser (`rules/nat.rs`) makes them; matching and the translations themselves are in
//! [`crate::nat`].

use super::{AddrMatch, PortMatch, Prefix};
use crate::packet::Af;

/// Which translation a rule does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NatKind {
    /// Outbound source translation (`nat on IF ... -> ADDR`).
    Nat,
    /// Inbound destination translation (`rdr on IF ... -> ADDR [port P]`).
    Rdr,
    /// A bidirectional 1:1 mapping of one inside address to one outside address.
    Binat,
    /// OpenBSD's `af-to`. NAT64, `pass in inet6 ... to PREFIX/96 af-to inet from ADDR`:
    /// IPv6 packets to the prefix become IPv4 packets (RFC 7915) from the pool's address and
    /// a port of its range, to the IPv4 address in the destination's last 32 bits (RFC
    /// 6052). NAT46, `pass in inet ... af-to inet6 from ADDR6 to PREFIX6` (the rule's family
    /// is `inet`, [`NatTarget::af_dst`] is set): IPv4 packets become IPv6 packets from ADDR6
    /// and a port, to the IPv4 destination within the /96 (or to one IPv6 address).
    AfTo,
}

impl NatKind {
    pub fn name(self) -> &'static str {
        match self {
            NatKind::Nat => "nat",
            NatKind::Rdr => "rdr",
            NatKind::Binat => "binat",
            NatKind::AfTo => "af-to",
        }
    }
}

/// How an address is picked from a pool of several (pf.conf(5), "POOL OPTIONS").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PoolMethod {
    /// `round-robin`: the default for a list of addresses.
    #[default]
    RoundRobin,
    /// `random`.
    Random,
    /// `source-hash`: a hash of the source address picks the pool address, so a host keeps
    /// its address.
    SourceHash,
    /// `bitmask`: the pool's network part with the source's host part (the default for a
    /// single prefix).
    Bitmask,
}

/// The addresses a translation maps to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum NatAddr {
    /// `<TABLE>`: the table's addresses of the rule's family (index into
    /// [`super::RuleSet::tables`]), round-robin; read again whenever the table changes (a
    /// change publishes the rules anew, `linerate table`).
    Table(usize),
    /// `(IFACE)`: the interface's (first IPv4) address, resolved by the dataplane.
    Iface(u16),
    /// Addresses and prefixes (a prefix stands for all its addresses).
    Pool(Vec<Prefix>),
}

/// The right-hand side of `->`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NatTarget {
    pub addr: NatAddr,
    /// `nat`: the source ports to allocate from (pf's default 50001:65535). `rdr`: the
    /// destination port, or the first of the range the matched ports map onto.
    pub ports: Option<(u16, u16)>,
    /// `rdr ... port P:*`: the matched destination port range maps onto `P..`.
    pub port_star: bool,
    pub method: PoolMethod,
    pub sticky: bool,
    /// `static-port`: `nat` keeps the source port.
    pub static_port: bool,
    /// NAT46 (`af-to inet6 from ... to PREFIX`): the IPv6 destination, a /96 whose last 32
    /// bits take the IPv4 destination (RFC 6052), or one address.
    pub af_dst: Option<super::Prefix>,
}

/// One translation rule with its effective options.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NatRule {
    pub kind: NatKind,
    /// `no nat` / `no rdr` / `no binat`: a match means "do not translate".
    pub negated: bool,
    /// `nat pass` / `rdr pass` / `binat pass`: the packets the rule translates skip the filter
    /// rules of the pass they were translated in (out for `nat`, in for `rdr`, both for
    /// `binat`), and a state is kept so that their replies pass (pf.conf(5), TRANSLATION).
    pub pass: bool,
    /// `on IFACE` (empty: any interface; pf requires one for binat).
    pub ifaces: Vec<u16>,
    pub iface_neg: bool,
    pub af: Option<Af>,
    pub protos: Vec<u8>,
    pub src: AddrMatch,
    pub src_ports: PortMatch,
    pub dst: AddrMatch,
    pub dst_ports: PortMatch,
    /// `to (IFACE)`: the destination must be the interface's address (resolved when a packet
    /// is matched; `dst` is then `any`).
    pub dst_iface: Option<u16>,
    /// `None` for `no ...` rules.
    pub target: Option<NatTarget>,
    /// 1-based position of the rule's first word.
    pub line: usize,
    pub column: usize,
}

impl NatRule {
    /// Whether the rule translates packets of direction `dir` (on its interface): `nat`
    /// outbound, `rdr` and `af-to` inbound, `binat` both.
    pub fn translates(&self, dir: crate::packet::Dir) -> bool {
        match self.kind {
            NatKind::Nat => dir == crate::packet::Dir::Out,
            NatKind::Rdr | NatKind::AfTo => dir == crate::packet::Dir::In,
            NatKind::Binat => true,
        }
    }
}

/// pf's default source port range for `nat` (`PF_NAT_PROXY_PORT_LOW` .. `_HIGH`).
pub const DEFAULT_NAT_PORTS: (u16, u16) = (50001, 65535);

/// The most addresses a translation pool may hold (a /16): pools are expanded into a list.
pub const MAX_POOL_ADDRS: u128 = 1 << 16;
