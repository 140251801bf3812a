//! Authentication with a pre-shared key: HMAC-SHA256 (RFC 2104, FIPS 180-4) over the whole
//! datagram, header included, its 32 bytes appended untruncated. pfsync has none and relies
//! on a dedicated link or IPsec; a forged INS or CLR on the sync link would otherwise open or
//! drop any connection through the pair.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::KeyError;

/// Bytes of the tag: SHA-256's output, not truncated.
pub const TAG_LEN: usize = 32;
/// The shortest secret accepted: 128 bits. RFC 2104 section 3 advises keys of at least the
/// hash's output (32 bytes); a random 32-byte secret is what the docs tell operators to make.
pub const MIN_KEY_LEN: usize = 16;

/// The pre-shared key both boxes of a pair are configured with. Holds the HMAC state with the
/// key already absorbed, so that each datagram costs two compression blocks less.
#[derive(Clone)]
pub struct Key {
    mac: Hmac<Sha256>,
}

impl std::fmt::Debug for Key {
    /// Never prints the secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(..)")
    }
}

impl Key {
    pub fn new(secret: &[u8]) -> Result<Key, KeyError> {
        let too_short = KeyError::TooShort { len: secret.len() };
        if secret.len() < MIN_KEY_LEN {
            return Err(too_short);
        }
        // HMAC takes keys of any length; the error case cannot happen.
        let mac = <Hmac<Sha256> as Mac>::new_from_slice(secret).map_err(|_| too_short)?;
        Ok(Key { mac })
    }

    /// The tag of `bytes`.
    pub(crate) fn tag(&self, bytes: &[u8]) -> [u8; TAG_LEN] {
        let mut mac = self.mac.clone();
        mac.update(bytes);
        mac.finalize().into_bytes().into()
    }

    /// Whether `tag` is the tag of `bytes`, compared in constant time (hmac's `verify_slice`
    /// uses `subtle`): an early exit would tell a forger how many leading bytes were right.
    pub(crate) fn verify(&self, bytes: &[u8], tag: &[u8]) -> bool {
        let mut mac = self.mac.clone();
        mac.update(bytes);
        mac.verify_slice(tag).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(tag: &[u8]) -> String {
        tag.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn rfc_4231_test_cases_1_and_6() {
        // 4.2: a 20-byte key. 4.7: a 131-byte key, longer than SHA-256's block (hashed first).
        let key = Key::new(&[0x0b; 20]).unwrap();
        let want = "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7";
        assert_eq!(hex(&key.tag(b"Hi There")), want);
        let key = Key::new(&[0xaa; 131]).unwrap();
        let data = b"Test Using Larger Than Block-Size Key - Hash Key First";
        let want = "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54";
        assert_eq!(hex(&key.tag(data)), want);
        assert_eq!(Key::new(b"Jefe").err(), Some(KeyError::TooShort { len: 4 }));
    }

    #[test]
    fn verify_refuses_another_tag_and_another_length() {
        let key = Key::new(&[7; 32]).unwrap();
        let tag = key.tag(b"abc");
        assert!(key.verify(b"abc", &tag));
        assert!(!key.verify(b"abd", &tag));
        assert!(!key.verify(b"abc", &tag[..31]));
        assert_eq!(format!("{key:?}"), "Key(..)");
    }
}
