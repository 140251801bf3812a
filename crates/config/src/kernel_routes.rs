//! `[router.kernel_routes]`: mirror one of the kernel's routing tables into linerate's FIB, so
//! that what a routing daemon (BIRD, FRR) learns on the host-stack TAPs is forwarded.
//!
//! ```toml
//! [router.kernel_routes]
//! table = "main"                      # or a number, 1..=4294967295 (default: main, 254)
//! protocols = ["bird", "bgp", 188]    # default: every protocol but "kernel"
//! ```

use serde::Deserialize;
use toml::Spanned;

use crate::ConfigError;
use crate::validate::Ctx;

/// `ip route ... proto kernel`: the routes the kernel makes for an interface's addresses
/// (linerate has those as its connected routes already).
pub const PROTO_KERNEL: u8 = 2;
/// The protocol linerate marks the routes it gives the host stack with (its static routes
/// on the TAPs): never mirrored back.
pub const PROTO_LINERATE: u8 = 250;

/// The protocol names of iproute2's `rt_protos` file, with their numbers.
const PROTOCOLS: &[(&str, u8)] = &[
    ("redirect", 1), ("kernel", 2), ("boot", 3), ("static", 4), ("gated", 8), ("ra", 9), ("mrt", 10),
    ("zebra", 11), ("bird", 12), ("dnrouted", 13), ("xorp", 14), ("ntk", 15), ("dhcp", 16),
    ("keepalived", 18), ("babel", 42), ("openr", 99), ("bgp", 186), ("isis", 187), ("ospf", 188),
    ("rip", 189), ("eigrp", 192),
];

/// The `[router.kernel_routes]` table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelRoutes {
    /// The kernel routing table to mirror (`ip route show table N`; default 254, main).
    pub table: u32,
    /// Route protocols (`rtm_protocol`) to mirror; empty: every one but `kernel` (2) and
    /// linerate's own (250).
    pub protocols: Vec<u8>,
}

impl KernelRoutes {
    /// Whether routes of protocol `proto` are mirrored.
    pub fn takes(&self, proto: u8) -> bool {
        if proto == PROTO_LINERATE {
            return false;
        }
        if self.protocols.is_empty() { proto != PROTO_KERNEL } else { self.protocols.contains(&proto) }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawKernelRoutes {
    table: Option<Spanned<toml::Value>>,
    protocols: Option<Spanned<Vec<toml::Value>>>,
}

pub(crate) fn settings(cx: &Ctx, raw: Option<Spanned<RawKernelRoutes>>, host_stack: bool) -> Result<Option<KernelRoutes>, ConfigError> {
    let Some(raw) = raw else { return Ok(None) };
    if !host_stack {
        return Err(cx.err(raw.span(), "router.kernel_routes needs router.host_stack = true: kernel routes reach linerate's ports through their TAPs"));
    }
    let raw = raw.into_inner();
    let table = match &raw.table {
        None => 254,
        Some(v) => match v.get_ref() {
            toml::Value::String(s) if s == "main" => 254,
            toml::Value::Integer(n) if (1..=i64::from(u32::MAX)).contains(n) && *n != 255 => *n as u32,
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
                other => return Err(cx.err(list.span(), format!("router.kernel_routes: protocol {other} is not a name or a number 0..=255"))),
            };
            if n == PROTO_LINERATE {
                return Err(cx.err(list.span(), format!("router.kernel_routes: protocol {PROTO_LINERATE} marks linerate's own routes on the TAPs and cannot be mirrored")));
            }
            protocols.push(n);
        }
        if protocols.is_empty() {
            return Err(cx.err(list.span(), "router.kernel_routes: protocols is empty (leave it out to take every protocol but kernel)"));
        }
    }
    Ok(Some(KernelRoutes { table, protocols }))
}
