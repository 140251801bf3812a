//! Keeps the kernel from processing the frames linerate forwards over AF_PACKET.
//!
//! An AF_PACKET socket receives a copy of each frame; the kernel then goes on with the
//! original (IP input, a route lookup, an ICMP error since its forwarding is off) on the same
//! CPU as linerate's worker, taking that CPU from it (docs/performance.md). tc ingress and
//! netfilter's netdev ingress hook run after the packet taps (`__netif_receive_skb_core`:
//! taps, then tc ingress, then nf ingress), so a program or rule there drops the kernel's
//! copy after linerate has its own. Packets addressed to the router itself, multicast,
//! broadcast and IPv6 link-local traffic still reach the kernel (ping, ssh, NDP keep
//! working); ARP is untouched. With the host stack on, the kernel gets what is for it through
//! linerate's TAPs instead, so its copy of every frame on the interface is dropped.
//!
//! The drop is a tc program (`io::xdp::kernel_copy`, tcx, Linux 6.6); on older kernels, the
//! same rules as an nftables netdev table, whose set lookups cost more per frame.

use std::io::Write;
use std::net::IpAddr;
use std::process::Stdio;

/// The nftables table linerate owns in its namespace.
const TABLE: &str = "linerate_bypass";

/// An installed bypass; detaches its programs or removes its table when dropped.
pub enum KernelBypass {
    /// Held for its drop, which detaches the programs.
    Tc {
        _programs: io::xdp::kernel_copy::KernelCopyDrop,
    },
    Nftables(NftTable),
}

/// linerate's nftables table, removed on drop.
pub struct NftTable;

/// The ruleset for `ifaces`: (name, the router's addresses on it); `everything`: drop every
/// frame (host stack on TAPs).
pub fn ruleset(ifaces: &[(String, Vec<IpAddr>)], everything: bool) -> String {
    let mut s = format!("table netdev {TABLE} {{\n");
    for (i, (name, addrs)) in ifaces.iter().enumerate() {
        if everything {
            s.push_str(&format!("  chain in{i} {{\n    type filter hook ingress device \"{name}\" priority 0; policy drop;\n  }}\n"));
            continue;
        }
        let v4: Vec<String> = addrs
            .iter()
            .filter(|a| a.is_ipv4())
            .map(|a| a.to_string())
            .chain(["224.0.0.0/4".into(), "255.255.255.255".into()])
            .collect();
        let v6: Vec<String> = addrs
            .iter()
            .filter(|a| a.is_ipv6())
            .map(|a| a.to_string())
            .chain(["fe80::/10".into(), "ff00::/8".into()])
            .collect();
        s.push_str(&format!(
            "  chain in{i} {{\n    type filter hook ingress device \"{name}\" priority 0; policy accept;\n    ip daddr != {{ {} }} drop\n    ip6 daddr != {{ {} }} drop\n  }}\n",
            v4.join(", "),
            v6.join(", ")
        ));
    }
    s.push_str("}\n");
    s
}

fn nft(script: &str) -> Result<(), String> {
    let mut child = crate::tools::command("nft")?
        .args(["-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run nft: {e}"))?;
    child.stdin.take().expect("piped").write_all(script.as_bytes()).map_err(|e| e.to_string())?;
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
    }
}

impl KernelBypass {
    /// Attaches the tc programs or, if the kernel cannot, installs the nftables table
    /// (replacing a stale one left by a crashed linerate). A stale table is removed either way.
    pub fn install(
        ifaces: &[(String, Vec<IpAddr>)],
        everything: bool,
    ) -> Result<KernelBypass, String> {
        let _ = nft(&format!("delete table netdev {TABLE}\n"));
        let tc_error = match io::xdp::kernel_copy::KernelCopyDrop::attach(ifaces, everything) {
            Ok(tc) => return Ok(KernelBypass::Tc { _programs: tc }),
            Err(e) => e,
        };
        nft(&ruleset(ifaces, everything)).map_err(|e| format!("tc: {tc_error}; nftables: {e}"))?;
        Ok(KernelBypass::Nftables(NftTable))
    }

    /// What drops the kernel's copies, for the start-up log.
    pub fn describe(&self) -> String {
        match self {
            KernelBypass::Tc { .. } => {
                format!("a tc ingress program ({})", io::xdp::kernel_copy::PROG_NAME)
            }
            KernelBypass::Nftables(_) => format!("nftables table netdev {TABLE}"),
        }
    }
}

impl Drop for NftTable {
    fn drop(&mut self) {
        let _ = nft(&format!("delete table netdev {TABLE}\n"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ruleset_keeps_local_and_group_traffic() {
        let r = ruleset(
            &[("lrd0".into(), vec!["198.18.0.1".parse().unwrap(), "2001:db8::1".parse().unwrap()])],
            false,
        );
        assert!(r.contains("device \"lrd0\""));
        assert!(r.contains("ip daddr != { 198.18.0.1, 224.0.0.0/4, 255.255.255.255 } drop"));
        assert!(r.contains("ip6 daddr != { 2001:db8::1, fe80::/10, ff00::/8 } drop"));
        let all = ruleset(&[("lrd0".into(), vec![])], true);
        assert!(all.contains("policy drop;"));
    }
}
