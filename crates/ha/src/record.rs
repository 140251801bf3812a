//! A full state record, what INS and UPD carry: everything the receiver needs to install a
//! state that passes the flow's next packet as the sender's would. Its layout is in
//! `record_wire.rs`.

use std::net::IpAddr;

use crate::{FieldError, Peer, StateId, TimeoutClass};

/// A state's address family, sent as 4 or 6 rather than as an `AF_INET*` value (AF_INET6
/// is 10 on Linux, 24 on OpenBSD, 28 on FreeBSD).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    V4,
    V6,
}

impl Family {
    pub(crate) fn code(self) -> u8 {
        match self {
            Family::V4 => 4,
            Family::V6 => 6,
        }
    }

    pub(crate) fn from_code(code: u8) -> Result<Family, FieldError> {
        match code {
            4 => Ok(Family::V4),
            6 => Ok(Family::V6),
            c => Err(FieldError::Family(c)),
        }
    }

    fn holds(self, addr: &IpAddr) -> bool {
        matches!((self, addr), (Family::V4, IpAddr::V4(_)) | (Family::V6, IpAddr::V6(_)))
    }
}

/// An end of the flow: address and port (for ICMP, pf's mapping: the query's identifier on
/// the querier's side, its type on the other; 0 for protocols without ports).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Endpoint {
    pub addr: IpAddr,
    pub port: u16,
}

/// Which end NAT rewrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// `nat` / `binat`: the initiator's source.
    Initiator,
    /// `rdr`: the responder's destination.
    Responder,
}

/// A translated state: the rewritten end's address and port on the far side of the box
/// (pf's two state keys differ in exactly this end). A NAT state synchronised without it
/// would send replies to the untranslated address after a takeover.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Translation {
    pub side: Side,
    pub addr: IpAddr,
    pub port: u16,
}

/// The rule that created the state. `index` means the same rule on the receiver only when
/// `digest` is the receiver's too (pfsync compares its ruleset's MD5 likewise); otherwise
/// the receiver installs the state without a rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RuleRef {
    /// The sender's rule set hashed to 64 bits.
    pub digest: u64,
    pub index: u32,
}

/// One of pf's two states of a flow (`in` on the interface the flow entered, `out` on the
/// one it left by; see `crates/fw/src/state/sub.rs`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PfState {
    /// The interface it is bound to (`if-bound`), by name: the boxes may name theirs
    /// differently and the receiver's config maps them (opnsense/docs#100). `None` floats.
    pub interface: Option<String>,
    /// `allow-opts`: packets with IP options pass under it.
    pub allow_opts: bool,
    /// The tag it gives the packets it passes (0: none). A tag number, meaningful where the
    /// rule-set digests agree, as pfsync's.
    pub tag: u16,
}

/// A state as INS and UPD carry it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StateRecord {
    pub id: StateId,
    pub family: Family,
    /// IP protocol number; 6 (TCP) means both peers carry TCP tracking.
    pub proto: u8,
    /// The end that sent the flow's first packet.
    pub initiator: Endpoint,
    pub responder: Endpoint,
    pub translation: Option<Translation>,
    pub rule: RuleRef,
    /// The pf state keyed from the initiator's packets (for a forwarded flow, the `in` state
    /// on the interface it entered by), and the one keyed from the responder's (its `out`
    /// state). At least one is present.
    pub from_initiator: Option<PfState>,
    pub from_responder: Option<PfState>,
    /// The initiator's and the responder's tracking.
    pub peers: [Peer; 2],
    /// Seconds until the state expires, relative: the two boxes' clocks need not agree.
    pub expire_in: u32,
    pub timeout: TimeoutClass,
    /// pf's `sloppy`: no window checks (for asymmetric paths).
    pub sloppy: bool,
    /// Packets and bytes from the initiator, then from the responder.
    pub packets: [u64; 2],
    pub bytes: [u64; 2],
}

/// TCP's protocol number: the protocol whose peers carry windows.
pub(crate) const TCP: u8 = 6;

impl StateRecord {
    /// The receiver's checks, run by the sender too.
    pub(crate) fn check(&self) -> Result<(), FieldError> {
        self.id.check()?;
        let translated = self.translation.as_ref().map(|t| &t.addr);
        let addrs = [Some(&self.initiator.addr), Some(&self.responder.addr), translated];
        if !addrs.into_iter().flatten().all(|a| self.family.holds(a)) {
            return Err(FieldError::FamilyMismatch);
        }
        let tcp = self.proto == TCP;
        if self.peers.iter().any(|p| p.window.is_some() != tcp) {
            return Err(FieldError::TcpWindow);
        }
        self.peers.iter().try_for_each(Peer::check)?;
        self.check_pf_states()
    }

    fn check_pf_states(&self) -> Result<(), FieldError> {
        let states = [&self.from_initiator, &self.from_responder];
        if states.iter().all(|s| s.is_none()) {
            return Err(FieldError::NoPfState);
        }
        let mut names = states.into_iter().flatten().filter_map(|s| s.interface.as_deref());
        names.try_for_each(check_interface)
    }
}

/// The longest interface name: Linux's `IFNAMSIZ` (16) less its NUL, as BSD's.
pub(crate) const IFNAME_MAX: usize = 15;

/// A name the receiver's config can hold: 1 to 15 bytes of printable ASCII, no `/`.
pub(crate) fn check_interface(name: &str) -> Result<(), FieldError> {
    let printable = |b: &u8| b.is_ascii_graphic() && *b != b'/';
    let ok = (1..=IFNAME_MAX).contains(&name.len()) && name.bytes().all(|b| printable(&b));
    if ok { Ok(()) } else { Err(FieldError::InterfaceName) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interface_names_are_short_printable_ascii() {
        assert_eq!(check_interface("eth0.10"), Ok(()));
        assert_eq!(check_interface("a234567890abcde"), Ok(()));
        for bad in ["", "a234567890abcdef", "eth 0", "a/b", "é", "x\0"] {
            assert_eq!(check_interface(bad), Err(FieldError::InterfaceName), "{bad:?}");
        }
    }
}
