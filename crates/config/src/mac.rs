//! A minimal Ethernet MAC address type (kept local so `config` has no
//! dependency on `wire`; convert with `MacAddr.0`).

use std::fmt;
use std::str::FromStr;

/// A 48-bit Ethernet address. Parses and displays as `aa:bb:cc:dd:ee:ff`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);
    pub const ZERO: MacAddr = MacAddr([0; 6]);

    pub const fn octets(&self) -> [u8; 6] {
        self.0
    }
    /// Group bit set (includes broadcast).
    pub const fn is_multicast(&self) -> bool {
        self.0[0] & 1 != 0
    }
    pub const fn is_broadcast(&self) -> bool {
        matches!(self.0, [0xff, 0xff, 0xff, 0xff, 0xff, 0xff])
    }
    pub const fn is_zero(&self) -> bool {
        matches!(self.0, [0, 0, 0, 0, 0, 0])
    }
    /// A usable station address: not multicast/broadcast, not all-zero.
    pub const fn is_unicast(&self) -> bool {
        !self.is_multicast() && !self.is_zero()
    }
}

impl From<[u8; 6]> for MacAddr {
    fn from(b: [u8; 6]) -> Self {
        MacAddr(b)
    }
}

impl From<MacAddr> for [u8; 6] {
    fn from(m: MacAddr) -> Self {
        m.0
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &self.0;
        write!(f, "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", b[0], b[1], b[2], b[3], b[4], b[5])
    }
}

/// Error for a string that is not `xx:xx:xx:xx:xx:xx`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MacParseError;

impl fmt::Display for MacParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("expected six hex bytes like 02:00:00:00:00:01")
    }
}

impl std::error::Error for MacParseError {}

impl FromStr for MacAddr {
    type Err = MacParseError;

    /// Exactly six two-digit hex groups separated by `:` (either case).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let b = s.as_bytes();
        if b.len() != 17 {
            return Err(MacParseError);
        }
        let hex = |c: u8| -> Result<u8, MacParseError> {
            match c {
                b'0'..=b'9' => Ok(c - b'0'),
                b'a'..=b'f' => Ok(c - b'a' + 10),
                b'A'..=b'F' => Ok(c - b'A' + 10),
                _ => Err(MacParseError),
            }
        };
        let mut out = [0u8; 6];
        for (i, o) in out.iter_mut().enumerate() {
            let p = i * 3;
            if i > 0 && b[p - 1] != b':' {
                return Err(MacParseError);
            }
            *o = hex(b[p])? << 4 | hex(b[p + 1])?;
        }
        Ok(MacAddr(out))
    }
}

#[cfg(test)]
mod tests {
    use super::MacAddr;

    #[test]
    fn round_trip() {
        let m: MacAddr = "02:00:0A:bc:00:FF".parse().unwrap();
        assert_eq!(m.0, [2, 0, 0x0a, 0xbc, 0, 0xff]);
        assert_eq!(m.to_string(), "02:00:0a:bc:00:ff");
        assert!(m.is_unicast());
        assert!(MacAddr::BROADCAST.is_broadcast() && MacAddr::BROADCAST.is_multicast());
        assert!(!MacAddr::ZERO.is_unicast());
    }

    #[test]
    fn rejects_garbage() {
        for s in [
            "",
            "02:00:00:00:00",
            "02:00:00:00:00:01:02",
            "zz:00:00:00:00:01",
            "02-00-00-00-00-01",
            "2:00:00:00:00:001",
            "02:00:00:00:00:0g",
            "020000000001",
            " 02:00:00:00:00:01",
        ] {
            assert!(s.parse::<MacAddr>().is_err(), "{s:?} should not parse");
        }
    }
}
