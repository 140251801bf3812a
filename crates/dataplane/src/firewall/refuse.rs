//! What a `block return` rule sends back about a packet it blocks, as pf's `pf_return`
//! decides it: a TCP reset for TCP (`return`, `return-rst`), else the ICMP or ICMPv6
//! destination unreachable of the packet's family (`return`, `return-icmp`,
//! `return-icmp6`). The slow path builds it ([`wire::tcp_reset`], [`wire::icmp_reply`]),
//! after the worker's ICMP rate limit; it never answers a reset, an ICMP error, a fragment,
//! or a packet to a broadcast or multicast address.

use fw::packet::{Af, PacketKey, proto};
use fw::rules::{BlockReturn, tcp_flags};
use wire::icmp_reply::IcmpError;

use crate::punt::Punt;

/// An answer to a blocked packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// A TCP reset with this TTL / hop limit.
    Reset { ttl: u8 },
    /// ICMP destination unreachable with these codes (the packet's family picks one).
    Unreachable { code: u8, code6: u8 },
}

impl Refusal {
    /// The answer of `answer` to the packet of `key`, if it gets one.
    pub fn of(answer: &BlockReturn, key: &PacketKey) -> Option<Refusal> {
        if key.proto == proto::TCP && answer.rst {
            return (key.tcp_flags & tcp_flags::RST == 0)
                .then_some(Refusal::Reset { ttl: answer.rst_ttl });
        }
        let (code, code6) = (answer.icmp.unwrap_or(3), answer.icmp6.unwrap_or(4));
        let wanted = match key.af {
            Af::Inet => answer.icmp.is_some(),
            Af::Inet6 => answer.icmp6.is_some(),
        };
        wanted.then_some(Refusal::Unreachable { code, code6 })
    }

    /// What the slow path is asked to send.
    pub fn punt(self) -> Punt {
        match self {
            Refusal::Unreachable { code, code6 } => Punt::Error(IcmpError::Refused { code, code6 }),
            Refusal::Reset { ttl } => Punt::Reset { ttl },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(af: Af, proto: u8, flags: u8) -> PacketKey {
        PacketKey { af, proto, tcp_flags: flags, ..PacketKey::ZERO }
    }

    #[test]
    fn as_pf_return_decides() {
        let ret = BlockReturn::RETURN;
        let rst_only = BlockReturn { rst: true, rst_ttl: 9, icmp: None, icmp6: None };
        let icmp = BlockReturn { rst: false, rst_ttl: 64, icmp: Some(13), icmp6: Some(1) };
        let syn = key(Af::Inet, proto::TCP, tcp_flags::SYN);
        let udp6 = key(Af::Inet6, proto::UDP, 0);
        assert_eq!(Refusal::of(&ret, &syn), Some(Refusal::Reset { ttl: 64 }));
        assert_eq!(Refusal::of(&ret, &udp6), Some(Refusal::Unreachable { code: 3, code6: 4 }));
        assert_eq!(
            Refusal::of(&ret, &key(Af::Inet, proto::TCP, tcp_flags::RST | tcp_flags::ACK)),
            None,
            "no reset for a reset"
        );
        assert_eq!(Refusal::of(&rst_only, &syn), Some(Refusal::Reset { ttl: 9 }));
        assert_eq!(Refusal::of(&rst_only, &udp6), None, "return-rst answers TCP only");
        // return-icmp answers TCP with ICMP too.
        assert_eq!(Refusal::of(&icmp, &syn), Some(Refusal::Unreachable { code: 13, code6: 1 }));
        let only6 = BlockReturn { icmp: None, ..icmp };
        assert_eq!(Refusal::of(&only6, &key(Af::Inet, proto::UDP, 0)), None);
        assert_eq!(
            Refusal::of(&only6, &udp6).map(Refusal::punt),
            Some(Punt::Error(IcmpError::Refused { code: 3, code6: 1 }))
        );
        assert_eq!(Refusal::Reset { ttl: 9 }.punt(), Punt::Reset { ttl: 9 });
    }
}
