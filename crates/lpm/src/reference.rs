//! Plain reference implementations, the oracle for the fast tables' tests (and for other
//! crates' tests): one hash map per prefix length; a lookup tries lengths from the longest
//! down. Deliberately independent of the DIR-24-8 code (own masking, no expansion).

use std::collections::HashMap;

use crate::hash::IntBuild;
use crate::{LpmError, MAX_NEXT_HOP, NextHop};

macro_rules! reference {
    ($(#[$doc:meta])* $name:ident, $addr:ty) => {
        $(#[$doc])*
        #[derive(Debug, Clone)]
        pub struct $name {
            by_len: Vec<HashMap<$addr, NextHop, IntBuild>>,
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl $name {
            const BITS: u8 = <$addr>::BITS as u8;

            /// Empty table.
            pub fn new() -> Self {
                $name { by_len: (0..=Self::BITS).map(|_| HashMap::default()).collect() }
            }

            fn mask(addr: $addr, len: u8) -> $addr {
                match len {
                    0 => 0,
                    l => addr & (<$addr>::MAX << (Self::BITS - l)),
                }
            }

            /// Adds or replaces `prefix/len`; returns the replaced next hop.
            pub fn insert(&mut self, prefix: $addr, len: u8, nh: NextHop) -> Result<Option<NextHop>, LpmError> {
                if len > Self::BITS {
                    return Err(LpmError::InvalidPrefixLen(len));
                }
                if nh > MAX_NEXT_HOP {
                    return Err(LpmError::NextHopTooLarge(nh));
                }
                Ok(self.by_len[len as usize].insert(Self::mask(prefix, len), nh))
            }

            /// Removes `prefix/len`; returns its next hop.
            pub fn remove(&mut self, prefix: $addr, len: u8) -> Result<Option<NextHop>, LpmError> {
                if len > Self::BITS {
                    return Err(LpmError::InvalidPrefixLen(len));
                }
                Ok(self.by_len[len as usize].remove(&Self::mask(prefix, len)))
            }

            /// The next hop of the longest prefix containing `addr`.
            pub fn lookup(&self, addr: $addr) -> Option<NextHop> {
                (0..=Self::BITS).rev().find_map(|len| {
                    let m = &self.by_len[len as usize];
                    if m.is_empty() { None } else { m.get(&Self::mask(addr, len)).copied() }
                })
            }

            /// Next hop of exactly `prefix/len`, if present.
            pub fn get(&self, prefix: $addr, len: u8) -> Option<NextHop> {
                self.by_len.get(len as usize)?.get(&Self::mask(prefix, len)).copied()
            }

            /// Number of prefixes.
            pub fn len(&self) -> usize {
                self.by_len.iter().map(HashMap::len).sum()
            }

            /// Whether the table is empty.
            pub fn is_empty(&self) -> bool {
                self.len() == 0
            }

            /// All `(prefix, len, next hop)`, in no particular order.
            pub fn iter(&self) -> impl Iterator<Item = ($addr, u8, NextHop)> + '_ {
                self.by_len
                    .iter()
                    .enumerate()
                    .flat_map(|(len, m)| m.iter().map(move |(&p, &nh)| (p, len as u8, nh)))
            }
        }
    };
}

reference!(
    /// Reference IPv4 LPM (host-order `u32` addresses, lengths 0-32).
    Ipv4Reference,
    u32
);
reference!(
    /// Reference IPv6 LPM (host-order `u128` addresses, lengths 0-128).
    Ipv6Reference,
    u128
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basics() {
        let mut r = Ipv4Reference::new();
        assert_eq!(r.insert(0, 0, 1), Ok(None));
        assert_eq!(r.insert(0x0a00_00ff, 8, 2), Ok(None));
        assert_eq!(r.insert(0x0a01_0203, 32, 3), Ok(None));
        assert_eq!(r.insert(0x0a00_0000, 8, 4), Ok(Some(2)));
        assert_eq!(r.lookup(0x0a01_0203), Some(3));
        assert_eq!(r.lookup(0x0a01_0204), Some(4));
        assert_eq!(r.lookup(0x0b00_0000), Some(1));
        assert_eq!(r.remove(0, 0), Ok(Some(1)));
        assert_eq!(r.lookup(0x0b00_0000), None);
        assert_eq!(r.insert(0, 33, 1), Err(LpmError::InvalidPrefixLen(33)));
        assert_eq!(r.len(), 2);
        let mut r6 = Ipv6Reference::new();
        r6.insert(0x2001_0db8 << 96, 32, 7).unwrap();
        r6.insert(u128::MAX, 128, 8).unwrap();
        assert_eq!(r6.lookup((0x2001_0db8 << 96) | 5), Some(7));
        assert_eq!(r6.lookup(u128::MAX), Some(8));
        assert_eq!(r6.lookup(u128::MAX - 1), None);
    }
}
