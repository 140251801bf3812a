//! `[ha]`: state synchronisation with a peer box (issue 43, `docs/ha.md`): where the sync
//! thread listens and sends over UDP, the key that authenticates its datagrams, and which of
//! the peer's interface names are which of ours.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use crate::ConfigError;
use crate::context::Ctx;

/// The `[ha]` table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HaSettings {
    /// The UDP address the sync thread receives on (an address of the sync link, in the
    /// router's network namespace).
    pub listen: SocketAddr,
    /// The peer's sync address: where this box's states go.
    pub peer: SocketAddr,
    /// A file holding the shared secret (at least 16 bytes; trailing newlines ignored),
    /// resolved against the config file's directory; `None`: datagrams go unauthenticated.
    pub key_file: Option<PathBuf>,
    /// The box's creator id on the wire (non-zero; default: from the listen address), so that
    /// the peer tells its states from ours.
    pub creator: u32,
    /// The peer's interface names that differ from ours: peer name -> our name.
    pub interfaces: BTreeMap<String, String>,
    /// A file for keepalived's `track_file`: 1 while this box's table is not complete (the
    /// peer's bulk update is pending), 0 after; resolved against the config's directory.
    pub track_file: Option<PathBuf>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawHa {
    listen: Spanned<String>,
    peer: Spanned<String>,
    key_file: Option<Spanned<String>>,
    creator: Option<Spanned<i64>>,
    #[serde(default)]
    interfaces: BTreeMap<String, String>,
    track_file: Option<Spanned<String>>,
}

pub(crate) fn settings(
    cx: &Ctx,
    path: &Path,
    raw: Option<RawHa>,
    firewall: bool,
) -> Result<Option<HaSettings>, ConfigError> {
    let Some(r) = raw else { return Ok(None) };
    if !firewall {
        let why = "ha: state sync needs a [firewall]: without rules there are no states to share";
        return Err(cx.err(r.listen.span(), why));
    }
    let addr = |s: &Spanned<String>, key: &str| {
        s.get_ref().parse::<SocketAddr>().map_err(|_| {
            cx.err(
                s.span(),
                format!(
                    "ha: {key} {:?} is not an address and port (IP:PORT, [IPv6]:PORT)",
                    s.get_ref()
                ),
            )
        })
    };
    let (listen, peer) = (addr(&r.listen, "listen")?, addr(&r.peer, "peer")?);
    if listen == peer {
        return Err(cx.err(r.peer.span(), "ha: peer is the listen address: name the other box's"));
    }
    let file = |f: Option<Spanned<String>>, key: &str| match f {
        None => Ok(None),
        Some(f) if f.get_ref().is_empty() || f.get_ref().contains('\0') => {
            Err(cx.err(f.span(), format!("ha: {key} must be a non-empty path without NUL bytes")))
        }
        Some(f) => Ok(Some(path.parent().unwrap_or(Path::new("")).join(f.get_ref()))),
    };
    let key_file = file(r.key_file, "key_file")?;
    let track_file = file(r.track_file, "track_file")?;
    let creator = cx.int(&r.creator, "ha: ", "creator", 1, i64::from(u32::MAX), 0)? as u32;
    let creator = if creator == 0 { creator_of(&listen) } else { creator };
    Ok(Some(HaSettings { listen, peer, key_file, creator, interfaces: r.interfaces, track_file }))
}

/// A creator id from the listen address (its bits folded, never 0): the two boxes' sync
/// addresses differ, so do their ids.
fn creator_of(listen: &SocketAddr) -> u32 {
    let bits: u128 = match listen.ip() {
        std::net::IpAddr::V4(a) => a.to_bits().into(),
        std::net::IpAddr::V6(a) => a.to_bits(),
    };
    let folded =
        (bits as u32) ^ ((bits >> 32) as u32) ^ ((bits >> 64) as u32) ^ ((bits >> 96) as u32);
    (folded ^ u32::from(listen.port()) << 16).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Config;

    const IFACE: &str = "[[interface]]\nname = \"lr-a\"\naddresses = [\"10.0.0.1/24\"]\n[firewall]\nrules = \"r.conf\"\n";

    fn parse(extra: &str) -> Result<Config, String> {
        Config::parse(&format!("{IFACE}[ha]\n{extra}\n"), Path::new("/etc/linerate/r.toml"))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn addresses_key_and_names() {
        let c = parse("listen = \"10.9.0.1:8384\"\npeer = \"10.9.0.2:8384\"\nkey_file = \"ha.key\"\ninterfaces = { eth1 = \"lr-a\" }").unwrap();
        let ha = c.ha.unwrap();
        assert_eq!(ha.peer, "10.9.0.2:8384".parse().unwrap());
        assert_eq!(ha.key_file, Some(PathBuf::from("/etc/linerate/ha.key")));
        assert_eq!(ha.track_file, None);
        assert_eq!(ha.interfaces.get("eth1").map(String::as_str), Some("lr-a"));
        assert_ne!(ha.creator, 0);
        let other = parse("listen = \"10.9.0.2:8384\"\npeer = \"10.9.0.1:8384\"").unwrap();
        assert_ne!(other.ha.unwrap().creator, ha.creator, "the two boxes' ids differ");
        assert!(Config::parse(IFACE, Path::new("r.toml")).unwrap().ha.is_none());
    }

    #[test]
    fn errors_name_the_key() {
        let e = parse("listen = \"10.9.0.1\"\npeer = \"10.9.0.2:8384\"").unwrap_err();
        assert!(e.contains("ha: listen \"10.9.0.1\" is not an address and port"), "{e}");
        let e = parse("listen = \"10.9.0.1:1\"\npeer = \"10.9.0.1:1\"").unwrap_err();
        assert!(e.contains("ha: peer is the listen address"), "{e}");
        let e = parse("listen = \"10.9.0.1:1\"\npeer = \"10.9.0.2:1\"\ncreator = 0").unwrap_err();
        assert!(e.contains("creator 0 is out of range"), "{e}");
        let e = parse("listen = \"10.9.0.1:1\"").unwrap_err();
        assert!(e.contains("missing field `peer`"), "{e}");
        let bare = "[[interface]]\nname = \"lr-a\"\naddresses = [\"10.0.0.1/24\"]\n";
        let text = format!("{bare}[ha]\nlisten = \"10.9.0.1:1\"\npeer = \"10.9.0.2:1\"\n");
        let e = Config::parse(&text, Path::new("r.toml")).unwrap_err().to_string();
        assert!(e.contains("state sync needs a [firewall]"), "{e}");
    }
}
