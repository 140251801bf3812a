//! Flow affinity: each worker has its own state table, so with `keep state` and several
//! workers both directions of a flow must reach the same worker, or the replies miss the
//! state the first packet created and the rules drop them.
//!
//! - AF_PACKET: the fanout group's hash is symmetric (linerate's Toeplitz program with the
//!   symmetric key, or the kernel's `PACKET_FANOUT_HASH`): always kept together.
//! - AF_XDP: worker w owns queue w, and the NIC's RSS picks the queue. Kept together only if
//!   the NIC hashes symmetrically (`ethtool -X IF xfrm symmetric-xor`, or a Toeplitz key of
//!   period 16: `ethtool -X IF hkey 6d:5a:6d:5a:...`); on veth the queue is the sender's
//!   transmit queue, per socket, never symmetric. linerate does not change a NIC's RSS
//!   itself: with `backend = "auto"` it uses AF_PACKET on such an interface, with
//!   `backend = "af_xdp"` it refuses to start (and a reload that adds `keep state` is refused).

use config::{Backend, Interface};
use fw::rules::{RuleSet, StateMode};

/// Whether the rules create states (some rule keeps state).
pub fn keeps_state(rules: &RuleSet) -> bool {
    rules.rules.iter().any(|r| r.keep_state != StateMode::None)
}

/// Why AF_XDP on `ifname` would split flows between queues, or `None` if its RSS is
/// symmetric.
pub fn xdp_split_reason(ifname: &str) -> Option<String> {
    match io::ethtool::rss_config(ifname) {
        Ok(rss) if rss.is_symmetric() => None,
        Ok(_) => Some(format!(
            "the RSS hash of {ifname} is not symmetric (replies may reach another queue); make it so with `ethtool -X {ifname} xfrm symmetric-xor` or `ethtool -X {ifname} hkey {}`",
            symmetric_hkey()
        )),
        Err(e) => Some(format!(
            "{ifname} has no RSS that linerate can check ({e}): its queues may split a flow's two directions"
        )),
    }
}

/// [`io::rss::SYMMETRIC_KEY`] as `ethtool -X hkey` writes it.
fn symmetric_hkey() -> String {
    io::rss::SYMMETRIC_KEY.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

/// The backend of each interface, given flow affinity: with several workers and `keep
/// state`, `auto` becomes AF_PACKET where AF_XDP would split flows (said on stderr), and
/// `af_xdp` there is an error.
pub fn backends(
    ifaces: &[Interface],
    workers: usize,
    keep_state: bool,
) -> Result<Vec<Backend>, String> {
    let mut out = Vec::new();
    for iface in ifaces {
        let split =
            (workers > 1 && keep_state && matches!(iface.backend, Backend::Auto | Backend::AfXdp))
                .then(|| xdp_split_reason(&iface.name))
                .flatten();
        out.push(match (iface.backend, split) {
            (Backend::AfXdp, Some(why)) => {
                return Err(format!("{}: `keep state` with {workers} workers needs both directions of a flow on one worker, and AF_XDP cannot promise it: {why}; or use backend = \"af_packet\" (symmetric fanout) or one worker", iface.name));
            }
            (Backend::Auto, Some(why)) => {
                eprintln!("linerate: {}: AF_PACKET rather than AF_XDP, for `keep state` with {workers} workers: {why}", iface.name);
                Backend::AfPacket
            }
            (b, _) => b,
        });
    }
    Ok(out)
}

/// Why a reload must not bring `keep state` to this run (AF_XDP on an interface whose
/// queues may split flows, several workers), or `None`.
pub fn reload_refusal(
    ifaces: &[Interface],
    backends: &[Backend],
    workers: usize,
) -> Option<String> {
    if workers < 2 {
        return None;
    }
    ifaces.iter().zip(backends).filter(|(_, b)| **b == Backend::AfXdp).find_map(|(i, _)| {
        xdp_split_reason(&i.name).map(|why| format!("`keep state` with {workers} workers on AF_XDP: {why}; restart with backend = \"af_packet\" or one worker"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hkey_is_ethtool_syntax() {
        assert!(symmetric_hkey().starts_with("6d:5a:6d:5a:"));
        assert_eq!(symmetric_hkey().len(), 40 * 3 - 1);
    }
}
