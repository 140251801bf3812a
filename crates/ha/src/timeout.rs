//! Which of pf's timeouts a state is under, so that the receiver keeps expiring it by the
//! same rule after a takeover (pfsync sends `timeout` with every update).

use crate::FieldError;

/// pf's `PFTM_*` classes of a state, numbered on the wire in pf's order (OpenBSD `pfvar.h`:
/// `PFTM_TCP_FIRST_PACKET` = 0 .. `PFTM_OTHER_MULTIPLE` = 13), the pf.conf names in the
/// comments. The seconds each stands for are the receiver's own `set timeout` (or the rule's,
/// found by the rule index when the rule-set digests agree).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimeoutClass {
    /// `tcp.first`
    TcpFirst,
    /// `tcp.opening`
    TcpOpening,
    /// `tcp.established`
    TcpEstablished,
    /// `tcp.closing`
    TcpClosing,
    /// `tcp.finwait`
    TcpFinWait,
    /// `tcp.closed`
    TcpClosed,
    /// `udp.first`
    UdpFirst,
    /// `udp.single`
    UdpSingle,
    /// `udp.multiple`
    UdpMultiple,
    /// `icmp.first`
    IcmpFirst,
    /// `icmp.error`
    IcmpError,
    /// `other.first`
    OtherFirst,
    /// `other.single`
    OtherSingle,
    /// `other.multiple`
    OtherMultiple,
}

impl TimeoutClass {
    /// Every class, in wire order: `ALL[c.code()] == c`.
    pub const ALL: [TimeoutClass; 14] = [
        TimeoutClass::TcpFirst,
        TimeoutClass::TcpOpening,
        TimeoutClass::TcpEstablished,
        TimeoutClass::TcpClosing,
        TimeoutClass::TcpFinWait,
        TimeoutClass::TcpClosed,
        TimeoutClass::UdpFirst,
        TimeoutClass::UdpSingle,
        TimeoutClass::UdpMultiple,
        TimeoutClass::IcmpFirst,
        TimeoutClass::IcmpError,
        TimeoutClass::OtherFirst,
        TimeoutClass::OtherSingle,
        TimeoutClass::OtherMultiple,
    ];

    /// The byte sent for it.
    pub fn code(self) -> u8 {
        self as u8
    }

    pub fn from_code(code: u8) -> Result<TimeoutClass, FieldError> {
        Self::ALL.get(usize::from(code)).copied().ok_or(FieldError::TimeoutClass(code))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_follow_pf_order_and_stop_at_13() {
        for (i, c) in TimeoutClass::ALL.iter().enumerate() {
            assert_eq!(usize::from(c.code()), i);
            assert_eq!(TimeoutClass::from_code(c.code()), Ok(*c));
        }
        assert_eq!(TimeoutClass::TcpEstablished.code(), 2);
        assert_eq!(TimeoutClass::from_code(14), Err(FieldError::TimeoutClass(14)));
    }
}
