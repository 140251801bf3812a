//! What an interface's RSS does with a flow's two directions (`ETHTOOL_GRSSH`, the ioctl
//! behind `ethtool -x`; linux/ethtool.h `struct ethtool_rxfh`): a router that keeps per-queue
//! connection state needs A->B and B->A on the same receive queue.
//!
//! The hash is symmetric if the NIC applies a symmetric input transform (`input_xfrm`
//! `symmetric-xor` or `symmetric-or-xor`, Linux 6.8+: `ethtool -X IF xfrm symmetric-xor`), or
//! hashes with Toeplitz and a key whose bits repeat every 16 (`ethtool -X IF hkey 6d:5a:...`,
//! see [`crate::rss::SYMMETRIC_KEY`]).

use std::io;
use std::os::fd::AsRawFd;

use crate::tap::{cvt, ifreq, ioctl_socket};

const ETHTOOL_GRSSH: u32 = 0x46;
/// `ETH_RSS_HASH_TOP`: hash function Toeplitz.
const HASH_TOP: u8 = 1 << 0;
/// `RXH_XFRM_SYM_XOR`, `RXH_XFRM_SYM_OR_XOR`.
const XFRM_SYMMETRIC: u8 = (1 << 0) | (1 << 1);
/// `struct ethtool_rxfh` up to `rss_config[]`: cmd, rss_context, indir_size, key_size (u32),
/// hfunc, input_xfrm, rsvd8[2] (u8), rsvd32 (u32).
const HEADER: usize = 24;

/// An interface's RSS configuration, as far as flow symmetry goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RssConfig {
    /// `ETH_RSS_HASH_*` bits (Toeplitz: bit 0).
    pub hfunc: u8,
    /// `RXH_XFRM_*` bits.
    pub input_xfrm: u8,
    pub key: Vec<u8>,
}

impl RssConfig {
    /// Whether both directions of a flow get the same hash.
    pub fn is_symmetric(&self) -> bool {
        if self.input_xfrm & XFRM_SYMMETRIC != 0 {
            return true;
        }
        // Toeplitz XORs one 32-bit key window per input bit: with a key of period 16,
        // swapping source and destination (16-bit aligned fields) swaps equal windows.
        self.hfunc == HASH_TOP
            && self.key.len() >= 4
            && self.key.chunks_exact(2).all(|w| w == &self.key[..2])
    }
}

/// Reads `ifname`'s RSS hash function, input transform and key. Fails with `EOPNOTSUPP`
/// where the driver has no RSS (veth, loopback).
pub fn rss_config(ifname: &str) -> io::Result<RssConfig> {
    let sock = ioctl_socket()?;
    // First the sizes (indir_size = key_size = 0 asks for them), then everything.
    let head = rxfh(&sock, ifname, vec![0u8; HEADER])?;
    let word = |b: &[u8], at: usize| u32::from_ne_bytes(b[at..at + 4].try_into().expect("4 bytes"));
    let (indir, key_len) = (word(&head, 8) as usize, word(&head, 12) as usize);
    let mut buf = vec![0u8; HEADER + 4 * indir + key_len];
    buf[8..12].copy_from_slice(&(indir as u32).to_ne_bytes());
    buf[12..16].copy_from_slice(&(key_len as u32).to_ne_bytes());
    let full = rxfh(&sock, ifname, buf)?;
    Ok(RssConfig {
        hfunc: full[16],
        input_xfrm: full[17],
        key: full[HEADER + 4 * indir..].to_vec(),
    })
}

/// One `ETHTOOL_GRSSH` with `buf` as the `struct ethtool_rxfh` (its sizes filled in).
fn rxfh(sock: &impl AsRawFd, ifname: &str, mut buf: Vec<u8>) -> io::Result<Vec<u8>> {
    buf[0..4].copy_from_slice(&ETHTOOL_GRSSH.to_ne_bytes());
    let mut req = ifreq(ifname);
    req.ifr_ifru.ifru_data = buf.as_mut_ptr().cast();
    // SAFETY: SIOCETHTOOL reads the command and sizes from `buf` and writes at most the
    // header plus `indir_size` words and `key_size` bytes, which `buf` holds; `req` is a
    // valid ifreq whose data pointer lives as long as the call.
    cvt(unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCETHTOOL, &mut req) })?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rss::{MICROSOFT_KEY, SYMMETRIC_KEY};

    #[test]
    fn symmetric_keys_and_transforms() {
        let cfg =
            |hfunc, input_xfrm, key: &[u8]| RssConfig { hfunc, input_xfrm, key: key.to_vec() };
        assert!(cfg(HASH_TOP, 0, &SYMMETRIC_KEY).is_symmetric());
        assert!(!cfg(HASH_TOP, 0, &MICROSOFT_KEY).is_symmetric());
        assert!(cfg(HASH_TOP, 1, &MICROSOFT_KEY).is_symmetric());
        assert!(cfg(HASH_TOP, 2, &MICROSOFT_KEY).is_symmetric());
        // Another hash function (xor, crc32) with a periodic key: not known to be symmetric.
        assert!(!cfg(1 << 1, 0, &SYMMETRIC_KEY).is_symmetric());
        assert!(!cfg(HASH_TOP, 0, &[]).is_symmetric());
    }

    #[test]
    fn loopback_has_no_rss() {
        assert!(rss_config("lo").is_err());
    }
}
