//! `[router.kernel_routes]`: mirror one of the kernel's routing tables into linerate's FIB, so
//! that what a routing daemon (BIRD, FRR) learns on the host-stack TAPs is forwarded.
//!
//! ```toml
//! [router.kernel_routes]
//! table = "main"                      # or a number, 1..=4294967295 (default: main, 254)
//! protocols = ["bird", "bgp", 188]    # default: every protocol but "kernel", "ra", "redirect"
//! ```

use serde::Deserialize;
use toml::Spanned;

use crate::ConfigError;
use crate::context::Ctx;

/// `ip route ... proto kernel`: the routes the kernel makes for an interface's addresses
/// (linerate has those as its connected routes already).
pub const PROTO_KERNEL: u8 = 2;
/// Routes a host learns from ICMP redirects (`proto redirect`) and Router Advertisements
/// (`proto ra`): a router's host stack takes none (docs/router.md, "Host stack"), and a route
/// any neighbour on a link could announce is not mirrored unless listed.
pub const PROTO_REDIRECT: u8 = 1;
pub const PROTO_RA: u8 = 9;
/// The protocol linerate marks the routes it gives the host stack with (its static routes
/// on the TAPs): never mirrored back.
pub const PROTO_LINERATE: u8 = 250;

/// The protocol names of iproute2's `rt_protos` file, with their numbers.
const PROTOCOLS: &[(&str, u8)] = &[
    ("redirect", 1),
    ("kernel", 2),
    ("boot", 3),
    ("static", 4),
    ("gated", 8),
    ("ra", 9),
    ("mrt", 10),
    ("zebra", 11),
    ("bird", 12),
    ("dnrouted", 13),
    ("xorp", 14),
    ("ntk", 15),
    ("dhcp", 16),
    ("keepalived", 18),
    ("babel", 42),
    ("openr", 99),
    ("bgp", 186),
    ("isis", 187),
    ("ospf", 188),
    ("rip", 189),
    ("eigrp", 192),
];

/// The `[router.kernel_routes]` table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelRoutes {
    /// The kernel routing table to mirror (`ip route show table N`; default 254, main).
    pub table: u32,
    /// Route protocols (`rtm_protocol`) to mirror; empty: every one but `kernel` (2),
    /// `redirect` (1), `ra` (9) and linerate's own (250).
    pub protocols: Vec<u8>,
}

impl KernelRoutes {
    /// Whether routes of protocol `proto` are mirrored.
    pub fn takes(&self, proto: u8) -> bool {
        if proto == PROTO_LINERATE {
            return false;
        }
        if self.protocols.is_empty() {
            !matches!(proto, PROTO_KERNEL | PROTO_REDIRECT | PROTO_RA)
        } else {
            self.protocols.contains(&proto)
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawKernelRoutes {
    table: Option<Spanned<toml::Value>>,
    protocols: Option<Spanned<Vec<toml::Value>>>,
}

pub(crate) fn settings(
    cx: &Ctx,
    raw: Option<Spanned<RawKernelRoutes>>,
    host_stack: bool,
) -> Result<Option<KernelRoutes>, ConfigError> {
    let Some(raw) = raw else { return Ok(None) };
    if !host_stack {
        return Err(cx.err(raw.span(), "router.kernel_routes needs router.host_stack = true: kernel routes reach linerate's ports through their TAPs"));
    }
    let raw = raw.into_inner();
    let table = match &raw.table {
        None => 254,
        Some(v) => match v.get_ref() {
            toml::Value::String(s) if s == "main" => 254,
            toml::Value::Integer(n) if (1..=i64::from(u32::MAX)).contains(n) && *n != 255 => {
                *n as u32
            }
            other => {
                return Err(cx.err(v.span(), format!("router.kernel_routes: table {other} is not \"main\" or a table number 1..=4294967295 other than 255 (local)")));
            }
        },
    };
    let mut protocols = Vec::new();
    if let Some(list) = &raw.protocols {
        for v in list.get_ref() {
            let n = match v {
                toml::Value::Integer(n) if (0..=255).contains(n) => *n as u8,
                toml::Value::String(s) => match PROTOCOLS.iter().find(|(name, _)| name == s) {
                    Some(&(_, n)) => n,
                    None => {
                        let known: Vec<&str> = PROTOCOLS.iter().map(|p| p.0).collect();
                        return Err(cx.err(list.span(), format!("router.kernel_routes: protocol {s:?} is unknown (a number 0..=255 or one of {})", known.join(", "))));
                    }
                },
                other => return Err(cx.err(
                    list.span(),
                    format!(
                        "router.kernel_routes: protocol {other} is not a name or a number 0..=255"
                    ),
                )),
            };
            if n == PROTO_LINERATE {
                return Err(cx.err(list.span(), format!("router.kernel_routes: protocol {PROTO_LINERATE} marks linerate's own routes on the TAPs and cannot be mirrored")));
            }
            protocols.push(n);
        }
        if protocols.is_empty() {
            return Err(cx.err(list.span(), "router.kernel_routes: protocols is empty (leave it out to take every protocol but kernel, ra and redirect)"));
        }
    }
    Ok(Some(KernelRoutes { table, protocols }))
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;
    use std::path::Path;

    use super::{PROTO_RA, PROTO_REDIRECT};
    use crate::{Config, ConfigError, PROTO_KERNEL, PROTO_LINERATE};

    const BASE: &str = "[[interface]]\nname = \"lr-a\"\naddresses = [\"198.18.0.1/24\"]\n\n[[interface]]\nname = \"lr-b\"\naddresses = [\"198.19.0.1/24\"]\n";

    fn parse(extra: &str) -> Result<Config, ConfigError> {
        Config::parse(&format!("{BASE}{extra}"), Path::new("router.toml"))
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn kernel_routes_table_and_protocols() {
        assert_eq!(parse("").unwrap().router.kernel_routes, None);
        let k = parse("[router.kernel_routes]\n").unwrap().router.kernel_routes.unwrap();
        assert_eq!((k.table, k.protocols.clone()), (254, vec![]));
        assert!(k.takes(12) && k.takes(4) && !k.takes(PROTO_KERNEL) && !k.takes(PROTO_LINERATE));
        assert!(
            !k.takes(PROTO_RA) && !k.takes(PROTO_REDIRECT),
            "routes a neighbour could announce are not taken by default"
        );
        let k = parse("[router.kernel_routes]\nprotocols = [\"ra\"]\n")
            .unwrap()
            .router
            .kernel_routes
            .unwrap();
        assert!(k.takes(PROTO_RA), "unless listed");
        let k = parse("[router.kernel_routes]\ntable = 100\nprotocols = [\"bird\", \"bgp\", 42]\n")
            .unwrap()
            .router
            .kernel_routes
            .unwrap();
        assert_eq!((k.table, k.protocols.clone()), (100, vec![12, 186, 42]));
        assert!(k.takes(186) && !k.takes(4));
    }

    #[test]
    fn kernel_routes_errors_name_the_value() {
        let e = parse("[router.kernel_routes]\ntable = \"local\"\n").unwrap_err();
        assert_eq!((e.line, e.column), (9, 9), "{e}");
        assert!(e.message.contains("\"main\" or a table number"), "{e}");
        let e = parse("[router.kernel_routes]\nprotocols = [\"birdd\"]\n").unwrap_err();
        assert!(e.message.contains("protocol \"birdd\" is unknown"), "{e}");
        let e = parse("[router.kernel_routes]\nprotocols = [250]\n").unwrap_err();
        assert!(e.message.contains("linerate's own routes"), "{e}");
        let e = parse("[router.kernel_routes]\nprotocols = []\n").unwrap_err();
        assert!(e.message.contains("protocols is empty"), "{e}");
        let e = parse("[router.kernel_routes]\nfoo = 1\n").unwrap_err();
        assert!(e.message.contains("unknown field"), "{e}");
        let e = Config::parse(
            &format!("[router]\nhost_stack = false\n[router.kernel_routes]\n{BASE}"),
            Path::new("router.toml"),
        )
        .unwrap_err();
        assert!(e.message.contains("needs router.host_stack = true"), "{e}");
        assert_eq!(e.line, 3, "{e}");
    }

    #[test]
    fn via_lists_are_multipath_routes() {
        let cfg =
            parse("[[route]]\nprefix = \"10.0.0.0/8\"\nvia = [\"198.18.0.2\", \"198.19.0.2\"]\n")
                .unwrap();
        let r = &cfg.routes[0];
        assert_eq!((r.via, r.interface.as_str()), (Some(ip("198.18.0.2")), "lr-a"));
        assert_eq!(r.also_via, vec![(ip("198.19.0.2"), "lr-b".to_owned())]);
        assert_eq!(r.next_hops(), vec![(ip("198.18.0.2"), "lr-a"), (ip("198.19.0.2"), "lr-b")]);
        // One address in a list is a plain route; a string still works.
        let cfg = parse("[[route]]\nprefix = \"10.0.0.0/8\"\nvia = [\"198.18.0.2\"]\n[[route]]\nprefix = \"11.0.0.0/8\"\nvia = \"198.19.0.2\"\n").unwrap();
        assert!(cfg.routes.iter().all(|r| r.also_via.is_empty() && r.via.is_some()));
        // With `interface`, every next hop is on it.
        let cfg = parse("[[route]]\nprefix = \"10.0.0.0/8\"\nvia = [\"192.0.2.1\", \"192.0.2.2\"]\ninterface = \"lr-b\"\n").unwrap();
        assert_eq!(
            cfg.routes[0].next_hops(),
            vec![(ip("192.0.2.1"), "lr-b"), (ip("192.0.2.2"), "lr-b")]
        );
    }

    #[test]
    fn via_list_errors() {
        for (via, frag) in [
            ("[]", "via lists 0 next hops"),
            ("[\"198.18.0.2\", \"198.18.0.2\"]", "via lists 198.18.0.2 twice"),
            ("[\"198.18.0.2\", 7]", "via must be an address or a list of addresses"),
            ("[\"198.18.0.2\", \"2001:db8::1\"]", "is IPv6 but the prefix is IPv4"),
            ("[\"198.18.0.2\", \"192.0.2.1\"]", "via 192.0.2.1 is not on-link"),
            ("[\"198.18.0.2\", \"198.19.0.1\"]", "this router's own address"),
            ("7", "via must be an address or a list of addresses"),
        ] {
            let e =
                parse(&format!("[[route]]\nprefix = \"10.0.0.0/8\"\nvia = {via}\n")).unwrap_err();
            assert!(e.message.contains(frag), "{via}: {e}");
            assert_eq!((e.line, e.column), (10, 7), "{via}: {e}");
        }
        let seventeen: Vec<String> = (1..=17).map(|i| format!("\"198.18.0.{}\"", i + 1)).collect();
        let e = parse(&format!(
            "[[route]]\nprefix = \"10.0.0.0/8\"\nvia = [{}]\n",
            seventeen.join(", ")
        ))
        .unwrap_err();
        assert!(e.message.contains("via lists 17 next hops (1..=16)"), "{e}");
    }
}
