//! IP prefixes (`Prefix`, host bits zero) and interface addresses (`IfAddr`,
//! host bits allowed), both written in CIDR form.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// Maximum prefix length for the family of `addr` (32 or 128).
pub const fn max_len(addr: &IpAddr) -> u8 {
    match addr {
        IpAddr::V4(_) => 32,
        IpAddr::V6(_) => 128,
    }
}

fn family(addr: &IpAddr) -> &'static str {
    match addr {
        IpAddr::V4(_) => "IPv4",
        IpAddr::V6(_) => "IPv6",
    }
}

/// `addr` with everything after the first `len` bits cleared.
/// `len` must be `<= max_len(addr)`.
fn mask(addr: IpAddr, len: u8) -> IpAddr {
    match addr {
        IpAddr::V4(a) => {
            let m = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from(u32::from(a) & m))
        }
        IpAddr::V6(a) => {
            let m = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(u128::from(a) & m))
        }
    }
}

fn covers(net: &IpAddr, len: u8, ip: &IpAddr) -> bool {
    match (net, ip) {
        (IpAddr::V4(_), IpAddr::V4(_)) | (IpAddr::V6(_), IpAddr::V6(_)) => mask(*ip, len) == *net,
        _ => false,
    }
}

/// Why a CIDR string was rejected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PrefixError {
    /// No `/LEN` part.
    MissingLength,
    /// The part before `/` is not an IP address.
    BadAddress(String),
    /// The part after `/` is not a decimal number.
    BadLength(String),
    /// The length exceeds 32 (IPv4) or 128 (IPv6).
    LengthTooLong { len: String, max: u8 },
    /// Bits beyond the prefix length are set (only for `Prefix`).
    HostBitsSet { addr: IpAddr, len: u8, correct: Prefix },
}

impl fmt::Display for PrefixError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PrefixError::MissingLength => {
                f.write_str("missing prefix length (expected ADDRESS/LEN, e.g. 198.18.0.0/15)")
            }
            PrefixError::BadAddress(a) => write!(f, "`{a}` is not an IPv4 or IPv6 address"),
            PrefixError::BadLength(l) => write!(f, "prefix length `{l}` is not a number"),
            PrefixError::LengthTooLong { len, max } => write!(
                f,
                "prefix length {len} is too long for {} (maximum {max})",
                if *max == 32 { "IPv4" } else { "IPv6" }
            ),
            PrefixError::HostBitsSet { addr, len, correct } => {
                write!(f, "{addr}/{len} has host bits set (did you mean {correct}?)")
            }
        }
    }
}

impl std::error::Error for PrefixError {}

/// Splits `ADDR/LEN`. On error also returns the byte offset in `s` of the
/// offending part (address at 0, length just after the `/`).
pub(crate) fn split_cidr(s: &str) -> Result<(IpAddr, u8), (PrefixError, usize)> {
    let Some(slash) = s.find('/') else {
        return Err((PrefixError::MissingLength, 0));
    };
    let (a, l) = (&s[..slash], &s[slash + 1..]);
    let addr: IpAddr = a.parse().map_err(|_| (PrefixError::BadAddress(a.to_owned()), 0))?;
    let lo = slash + 1;
    if l.is_empty() || !l.bytes().all(|c| c.is_ascii_digit()) {
        return Err((PrefixError::BadLength(l.to_owned()), lo));
    }
    let max = max_len(&addr);
    match l.parse::<u32>() {
        Ok(n) if n <= u32::from(max) => Ok((addr, n as u8)),
        _ => Err((PrefixError::LengthTooLong { len: l.to_owned(), max }, lo)),
    }
}

/// A network prefix: `addr` has all bits after `len` zero (normalized).
/// Displays as `198.18.0.0/15` / `2001:db8::/32`. Ordered by family,
/// then address, then length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Prefix {
    pub addr: IpAddr,
    pub len: u8,
}

impl Prefix {
    /// Strict: errors if `len` is too long or host bits are set.
    pub fn new(addr: IpAddr, len: u8) -> Result<Prefix, PrefixError> {
        let p = Prefix::truncating(addr, len)?;
        if p.addr != addr {
            return Err(PrefixError::HostBitsSet { addr, len, correct: p });
        }
        Ok(p)
    }

    /// Lenient: clears host bits. Errors only if `len` is too long.
    pub fn truncating(addr: IpAddr, len: u8) -> Result<Prefix, PrefixError> {
        let max = max_len(&addr);
        if len > max {
            return Err(PrefixError::LengthTooLong { len: len.to_string(), max });
        }
        Ok(Prefix { addr: mask(addr, len), len })
    }

    /// True if `ip` is of the same family and inside this prefix.
    pub fn contains(&self, ip: &IpAddr) -> bool {
        covers(&self.addr, self.len, ip)
    }

    pub fn is_ipv4(&self) -> bool {
        self.addr.is_ipv4()
    }

    pub fn is_ipv6(&self) -> bool {
        self.addr.is_ipv6()
    }

    /// "IPv4" or "IPv6".
    pub fn family(&self) -> &'static str {
        family(&self.addr)
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl FromStr for Prefix {
    type Err = PrefixError;
    /// Strict `ADDR/LEN`; host bits must be zero.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (addr, len) = split_cidr(s).map_err(|e| e.0)?;
        Prefix::new(addr, len)
    }
}

/// An address assigned to an interface, with its on-link prefix length.
/// Host bits are (of course) allowed: `198.18.0.1/24`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IfAddr {
    pub addr: IpAddr,
    pub prefix_len: u8,
}

impl IfAddr {
    /// The on-link network, e.g. `198.18.0.0/24` for `198.18.0.1/24`.
    pub fn network(&self) -> Prefix {
        Prefix { addr: mask(self.addr, self.prefix_len), len: self.prefix_len }
    }

    /// The IPv4 broadcast address of `network()` (/30 and wider: /31 and /32 have none, RFC
    /// 3021; IPv6 has none).
    pub fn broadcast(&self) -> Option<IpAddr> {
        match self.addr {
            IpAddr::V4(v) if self.prefix_len <= 30 => {
                Some(IpAddr::V4((u32::from(v) | (u32::MAX >> self.prefix_len)).into()))
            }
            _ => None,
        }
    }

    /// True if `ip` is on-link (inside `network()`).
    pub fn contains(&self, ip: &IpAddr) -> bool {
        covers(&mask(self.addr, self.prefix_len), self.prefix_len, ip)
    }
}

impl fmt::Display for IfAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix_len)
    }
}

impl FromStr for IfAddr {
    type Err = PrefixError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (addr, prefix_len) = split_cidr(s).map_err(|e| e.0)?;
        Ok(IfAddr { addr, prefix_len })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn broadcast_addresses() {
        let b = |s: &str| s.parse::<IfAddr>().unwrap().broadcast();
        assert_eq!(b("198.18.0.1/24"), Some(ip("198.18.0.255")));
        assert_eq!(b("198.18.1.7/23"), Some(ip("198.18.1.255")));
        assert_eq!(b("198.18.0.1/30"), Some(ip("198.18.0.3")));
        assert_eq!(
            (b("198.18.0.1/31"), b("198.18.0.1/32"), b("2001:db8::1/64")),
            (None, None, None)
        );
    }

    #[test]
    fn parse_and_display() {
        let p: Prefix = "198.18.0.0/15".parse().unwrap();
        assert_eq!((p.addr, p.len), (ip("198.18.0.0"), 15));
        assert_eq!(p.to_string(), "198.18.0.0/15");
        let p: Prefix = "2001:db8::/32".parse().unwrap();
        assert_eq!(p.to_string(), "2001:db8::/32");
        assert_eq!("0.0.0.0/0".parse::<Prefix>().unwrap().len, 0);
        assert_eq!("::/0".parse::<Prefix>().unwrap().len, 0);
        assert_eq!("10.1.2.3/32".parse::<Prefix>().unwrap().len, 32);
        assert_eq!("2001:db8::1/128".parse::<Prefix>().unwrap().len, 128);
    }

    #[test]
    fn errors() {
        assert_eq!("10.0.0.0".parse::<Prefix>(), Err(PrefixError::MissingLength));
        assert!(matches!("10.0.0/8".parse::<Prefix>(), Err(PrefixError::BadAddress(_))));
        assert!(matches!("10.0.0.0/+8".parse::<Prefix>(), Err(PrefixError::BadLength(_))));
        assert!(matches!("10.0.0.0/".parse::<Prefix>(), Err(PrefixError::BadLength(_))));
        let e = "10.0.0.0/33".parse::<Prefix>().unwrap_err();
        assert_eq!(e.to_string(), "prefix length 33 is too long for IPv4 (maximum 32)");
        let e = "::/129".parse::<Prefix>().unwrap_err();
        assert_eq!(e.to_string(), "prefix length 129 is too long for IPv6 (maximum 128)");
        assert!("10.0.0.0/99999999999999".parse::<Prefix>().is_err());
        let e = "198.19.1.0/16".parse::<Prefix>().unwrap_err();
        assert_eq!(e.to_string(), "198.19.1.0/16 has host bits set (did you mean 198.19.0.0/16?)");
        let e = "2001:db8::1/32".parse::<Prefix>().unwrap_err();
        assert!(e.to_string().contains("did you mean 2001:db8::/32?"));
    }

    #[test]
    fn contains() {
        let p: Prefix = "198.18.0.0/15".parse().unwrap();
        assert!(p.contains(&ip("198.19.255.255")));
        assert!(!p.contains(&ip("198.20.0.0")));
        assert!(!p.contains(&ip("::1")));
        let all: Prefix = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains(&ip("1.2.3.4")) && !all.contains(&ip("::")));
        let a: IfAddr = "2001:db8:a::1/64".parse().unwrap();
        assert_eq!(a.network().to_string(), "2001:db8:a::/64");
        assert!(a.contains(&ip("2001:db8:a::ffff")));
        assert!(!a.contains(&ip("2001:db8:b::1")));
        assert_eq!(a.to_string(), "2001:db8:a::1/64");
        assert_eq!(Prefix::truncating(ip("10.1.2.3"), 8).unwrap().to_string(), "10.0.0.0/8");
    }
}
