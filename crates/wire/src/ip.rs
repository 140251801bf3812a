//! IP protocol numbers (IANA "Assigned Internet Protocol Numbers"; the IPv4
//! Protocol field, RFC 791 section 3.1, and the IPv6 Next Header field,
//! RFC 8200 section 3).

/// An IPv4 protocol / IPv6 next-header number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpProtocol {
    /// IPv6 Hop-by-Hop Options (0).
    HopByHop,
    /// ICMP for IPv4 (1).
    Icmp,
    /// TCP (6).
    Tcp,
    /// UDP (17).
    Udp,
    /// IPv6 Routing header (43).
    Ipv6Route,
    /// IPv6 Fragment header (44).
    Ipv6Frag,
    /// Encapsulating Security Payload (50).
    Esp,
    /// Authentication Header (51).
    Ah,
    /// ICMPv6 (58).
    Icmpv6,
    /// IPv6 No Next Header (59).
    Ipv6NoNxt,
    /// IPv6 Destination Options (60).
    Ipv6Opts,
    /// Anything else.
    Unknown(u8),
}

impl From<u8> for IpProtocol {
    #[inline]
    fn from(v: u8) -> Self {
        match v {
            0 => IpProtocol::HopByHop,
            1 => IpProtocol::Icmp,
            6 => IpProtocol::Tcp,
            17 => IpProtocol::Udp,
            43 => IpProtocol::Ipv6Route,
            44 => IpProtocol::Ipv6Frag,
            50 => IpProtocol::Esp,
            51 => IpProtocol::Ah,
            58 => IpProtocol::Icmpv6,
            59 => IpProtocol::Ipv6NoNxt,
            60 => IpProtocol::Ipv6Opts,
            other => IpProtocol::Unknown(other),
        }
    }
}

impl From<IpProtocol> for u8 {
    #[inline]
    fn from(p: IpProtocol) -> u8 {
        match p {
            IpProtocol::HopByHop => 0,
            IpProtocol::Icmp => 1,
            IpProtocol::Tcp => 6,
            IpProtocol::Udp => 17,
            IpProtocol::Ipv6Route => 43,
            IpProtocol::Ipv6Frag => 44,
            IpProtocol::Esp => 50,
            IpProtocol::Ah => 51,
            IpProtocol::Icmpv6 => 58,
            IpProtocol::Ipv6NoNxt => 59,
            IpProtocol::Ipv6Opts => 60,
            IpProtocol::Unknown(v) => v,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_all() {
        for v in 0..=255u8 {
            assert_eq!(u8::from(IpProtocol::from(v)), v);
        }
        assert_eq!(IpProtocol::from(58), IpProtocol::Icmpv6);
        assert_eq!(IpProtocol::from(200), IpProtocol::Unknown(200));
    }
}
