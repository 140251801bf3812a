//! The texts the lab hands its parties: the generators' address ranges, the DUT's nftables
//! rule sets, linerate's rules and configuration.

use std::net::{Ipv4Addr, Ipv6Addr};

/// The parties' MAC addresses: the generator's, the DUT's two ports', the receiver's.
pub(crate) const GEN_MAC: &str = "02:00:00:00:01:01";
pub(crate) const DUT0_MAC: &str = "02:00:00:00:02:00";
pub(crate) const DUT1_MAC: &str = "02:00:00:00:02:01";
pub(crate) const RCV_MAC: &str = "02:00:00:00:03:01";

/// Generator ranges for `flows` flows: up to 20 sources (the study's 198.18.10.1-20) times
/// enough destinations from 198.19.10.1 (IPv6: 2001:2:0:10::/64 and 2001:2:0:20::/64).
pub fn ranges(flows: u32, ipv6: bool) -> (String, String) {
    ranges_part(flows, ipv6, 0, 1)
}

/// [`ranges`] for generator `part` of `parts`: every source, and its contiguous share of the
/// destinations, so that each flow comes from one generator (and one queue) only.
pub fn ranges_part(flows: u32, ipv6: bool, part: u32, parts: u32) -> (String, String) {
    let srcs = flows.clamp(1, 20);
    let dsts = flows.div_ceil(srcs).max(1);
    let share = dsts.div_ceil(parts.max(1));
    let first = (1 + part * share).min(dsts);
    let last = ((part + 1) * share).clamp(first, dsts);
    if ipv6 {
        let s = |i: u32| {
            Ipv6Addr::from(
                u128::from(Ipv6Addr::new(0x2001, 2, 0, 0x10, 0, 0, 0, 0)) + u128::from(i),
            )
        };
        let d = |i: u32| {
            Ipv6Addr::from(
                u128::from(Ipv6Addr::new(0x2001, 2, 0, 0x20, 0, 0, 0, 0)) + u128::from(i),
            )
        };
        (format!("{}-{}", s(1), s(srcs)), format!("{}-{}", d(first), d(last)))
    } else {
        let s = |i: u32| Ipv4Addr::from(u32::from(Ipv4Addr::new(198, 18, 10, 0)) + i);
        let d = |i: u32| Ipv4Addr::from(u32::from(Ipv4Addr::new(198, 19, 10, 0)) + i);
        (format!("{}-{}", s(1), s(srcs)), format!("{}-{}", d(first), d(last)))
    }
}

/// An nftables forward chain: optionally a conntrack rule (which makes conntrack track every
/// packet without matching any), `rules` rules that never match the lab's traffic, then
/// accept: the study's "N non-matching rules before the pass", evaluated linearly.
pub fn nft_ruleset(rules: u32, conntrack: bool) -> String {
    let mut s = String::from(
        "table inet lrlab {\n  chain forward {\n    type filter hook forward priority 0; policy accept;\n",
    );
    if conntrack {
        s.push_str("    ct state invalid drop\n");
    }
    for i in 0..rules {
        let a = Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 0, 0, 0)) + i);
        s.push_str(&format!("    ip saddr {a} udp dport 9 drop\n"));
    }
    s.push_str("    accept\n  }\n}\n");
    s
}

/// A set's outbound NAT in nftables: every flow leaving by the DUT's output takes its
/// address (`masquerade`, so conntrack tracks every flow), as a Linux router's LAN NAT does.
pub const NFT_MASQUERADE: &str = "table ip lrlabnat {\n  chain postrouting {\n    type nat hook postrouting priority srcnat; policy accept;\n    oifname \"lrd1\" masquerade\n  }\n}\n";

/// The same NAT in pf syntax, before linerate's filter rules (pf's order: translation, then
/// filtering); [`linerate_rules`] then keeps state, as conntrack does for the masquerade.
pub const PF_NAT: &str = "nat on lrd1 from any to any -> (lrd1)\n";

/// The same rules as [`nft_ruleset`] as an nftables expert writes them: the addresses in one
/// set, matched by a single rule (a hash lookup whatever the count).
pub fn nft_set_ruleset(rules: u32, conntrack: bool) -> String {
    let mut s = String::from("table inet lrlab {\n");
    if rules > 0 {
        s.push_str("  set blocked {\n    type ipv4_addr\n    elements = {");
        let addrs: Vec<String> = (0..rules)
            .map(|i| Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 0, 0, 0)) + i).to_string())
            .collect();
        s.push_str(&addrs.join(", "));
        s.push_str("}\n  }\n");
    }
    s.push_str("  chain forward {\n    type filter hook forward priority 0; policy accept;\n");
    if conntrack {
        s.push_str("    ct state invalid drop\n");
    }
    if rules > 0 {
        s.push_str("    ip saddr @blocked udp dport 9 drop\n");
    }
    s.push_str("    accept\n  }\n}\n");
    s
}

/// linerate's rule file for a set with `rules` rules: the nftables set's rules in pf syntax
/// (`ip saddr A udp dport 9 drop` becomes `block in quick proto udp from A to any port 9`),
/// then a pass that keeps state only when the set asks for conntrack, as the nftables set
/// tracks connections only then.
pub fn linerate_rules(rules: u32, conntrack: bool) -> String {
    let mut s = String::new();
    for i in 0..rules {
        let a = Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 0, 0, 0)) + i);
        s.push_str(&format!("block in quick proto udp from {a} to any port 9\n"));
    }
    s.push_str(if conntrack { "pass all keep state\n" } else { "pass all no state\n" });
    s
}

/// linerate's config for the lab's DUT namespace.
/// With `fast_path` false, every frame goes through the pipeline.
pub fn linerate_config(backend: &str, fast_path: bool) -> String {
    let (backend, mode) = match backend {
        "auto" => ("auto", "auto"),
        "af_xdp_native" => ("af_xdp", "native"),
        "af_xdp" => ("af_xdp", "generic"),
        other => (other, "auto"),
    };
    format!(
        r#"[router]
batch_size = 64
fast_path = {fast_path}
# The lab measures forwarding; the DUT namespace's kernel keeps the addresses (as it does
# for the kernel sets) instead of linerate's host-stack TAPs.
host_stack = false

[[interface]]
name = "lrd0"
mac = "{DUT0_MAC}"
addresses = ["198.18.0.1/24", "2001:2:0:1::1/64"]
backend = "{backend}"
xdp_mode = "{mode}"

[[interface]]
name = "lrd1"
mac = "{DUT1_MAC}"
addresses = ["198.19.0.1/24", "2001:2:0:2::1/64"]
backend = "{backend}"
xdp_mode = "{mode}"

[[route]]
prefix = "198.19.0.0/16"
via = "198.19.0.2"

[[route]]
prefix = "198.18.0.0/16"
via = "198.18.0.2"

[[route]]
prefix = "2001:2:0:20::/64"
via = "2001:2:0:2::2"

[[route]]
prefix = "2001:2:0:10::/64"
via = "2001:2:0:1::2"

[[neighbour]]
address = "198.19.0.2"
mac = "{RCV_MAC}"

[[neighbour]]
address = "198.18.0.2"
mac = "{GEN_MAC}"

[[neighbour]]
address = "2001:2:0:2::2"
mac = "{RCV_MAC}"

[[neighbour]]
address = "2001:2:0:1::2"
mac = "{GEN_MAC}"
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_match_the_study() {
        assert_eq!(
            ranges(2000, false),
            ("198.18.10.1-198.18.10.20".into(), "198.19.10.1-198.19.10.100".into())
        );
        assert_eq!(
            ranges(1, false),
            ("198.18.10.1-198.18.10.1".into(), "198.19.10.1-198.19.10.1".into())
        );
        assert_eq!(
            ranges(40, true),
            ("2001:2:0:10::1-2001:2:0:10::14".into(), "2001:2:0:20::1-2001:2:0:20::2".into())
        );
        // Four generators share the 100 destinations of 2000 flows, 25 each.
        assert_eq!(ranges_part(2000, false, 0, 4).1, "198.19.10.1-198.19.10.25");
        assert_eq!(ranges_part(2000, false, 3, 4).1, "198.19.10.76-198.19.10.100");
        // More generators than destinations: the last ones repeat the last destination.
        assert_eq!(ranges_part(20, false, 2, 4).1, "198.19.10.1-198.19.10.1");
    }

    #[test]
    fn nft_ruleset_is_linear_and_ends_in_accept() {
        let r = nft_ruleset(3, true);
        assert_eq!(r.matches(" drop\n").count(), 4);
        assert!(
            r.contains("ct state invalid drop")
                && r.trim_end().ends_with("}\n}")
                && r.contains("    accept\n")
        );
    }

    #[test]
    fn nft_set_ruleset_has_one_lookup() {
        let r = nft_set_ruleset(3, false);
        assert!(r.contains("elements = {10.0.0.0, 10.0.0.1, 10.0.0.2}"), "{r}");
        assert_eq!(r.matches(" drop\n").count(), 1);
        assert!(r.contains("ip saddr @blocked udp dport 9 drop") && r.contains("    accept\n"));
        assert!(!nft_set_ruleset(0, false).contains("@blocked"));
    }

    #[test]
    fn linerate_rules_mirror_the_nft_rules() {
        let r = linerate_rules(2, false);
        assert_eq!(
            r,
            "block in quick proto udp from 10.0.0.0 to any port 9\nblock in quick proto udp from 10.0.0.1 to any port 9\npass all no state\n"
        );
        assert!(linerate_rules(0, true).ends_with("pass all keep state\n"));
    }

    #[test]
    fn linerate_config_validates() {
        for b in ["auto", "af_xdp", "af_xdp_native", "af_packet"] {
            config_ok(&linerate_config(b, true));
            config_ok(&linerate_config(b, false));
        }
    }

    fn config_ok(text: &str) {
        // The lab crate does not depend on the config crate; check the TOML shape here and
        // leave full validation to the integration test that runs it.
        let v: toml::Value = toml::from_str(text).unwrap();
        assert_eq!(v["interface"].as_array().unwrap().len(), 2);
        assert_eq!(v["neighbour"].as_array().unwrap().len(), 4);
    }
}
