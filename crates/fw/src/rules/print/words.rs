//! The words of a printed rule as pfctl prints them (pfctl_parser.c `print_addr`,
//! `print_port`, `print_flags`): addresses, tables, ports, protocols, ICMP names, TCP flags.
//! Ports are printed as numbers: service names depend on the host's /etc/services.

use crate::packet::{Af, route};
use crate::rules::{AddrItem, AddrMatch, AddrTarget, PortMatch, Prefix, RuleSet, tcp_flags};

/// The suffix of the tables linerate makes for host names (`rules/iface_addr.rs`).
const HOSTS_SUFFIX: &str = " (/etc/hosts)";

/// An address as pfctl prints it: the host alone, `/len` only for a network.
pub(crate) fn prefix(p: &Prefix) -> String {
    let host = match p.af {
        Af::Inet => std::net::Ipv4Addr::from(p.addr as u32).to_string(),
        Af::Inet6 => std::net::Ipv6Addr::from(p.addr).to_string(),
    };
    if p.len == Prefix::bits(p.af) { host } else { format!("{host}/{}", p.len) }
}

/// Table `i` as a host: `<name>`; a table linerate made for an interface's addresses is
/// written as pf's dynamic address (`(em0:network)`), one for a host name as that name.
pub(crate) fn table(rs: &RuleSet, i: usize) -> String {
    let Some(t) = rs.tables.get(i) else { return format!("<table{i}>") };
    if t.name.starts_with('(') {
        return t.name.clone();
    }
    match t.name.strip_suffix(HOSTS_SUFFIX) {
        Some(host) => host.to_owned(),
        None => format!("<{}>", t.name),
    }
}

/// Whether a table of this name is one linerate made (an interface's or a host name's
/// addresses): it is made again where a rule names it, not by a `table` line.
pub(crate) fn table_is_made(name: &str) -> bool {
    name.starts_with('(') || name.ends_with(HOSTS_SUFFIX)
}

/// One host of an address match, `! ` before a negated one.
pub(crate) fn addr_item(rs: &RuleSet, item: &AddrItem) -> String {
    let not = if item.negated { "! " } else { "" };
    match item.target {
        AddrTarget::Prefix(p) => format!("{not}{}", prefix(&p)),
        AddrTarget::Table(i) => format!("{not}{}", table(rs, i)),
    }
}

/// An address match of an expanded rule (one host); a list of several, braced, should a
/// rule that was not expanded be printed.
pub(crate) fn addr_match(rs: &RuleSet, m: &AddrMatch) -> String {
    match m {
        AddrMatch::Any => "any".into(),
        AddrMatch::List(items) if items.len() == 1 => addr_item(rs, &items[0]),
        AddrMatch::List(items) => format!(
            "{{ {} }}",
            items.iter().map(|i| addr_item(rs, i)).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// pf's `no-route` / `urpf-failed` host of the source (`src`) or destination, from a rule's
/// route bits, if it has one.
pub(crate) fn route_host(need: u8, refuse: u8, src: bool) -> Option<&'static str> {
    let bits: &[(u8, &'static str, &'static str)] = if src {
        &[
            (route::SRC_NO_ROUTE, "no-route", "! no-route"),
            (route::SRC_URPF_FAILED, "urpf-failed", "! urpf-failed"),
        ]
    } else {
        &[(route::DST_NO_ROUTE, "no-route", "! no-route")]
    };
    bits.iter().find_map(|&(bit, yes, no)| {
        if need & bit != 0 {
            Some(yes)
        } else if refuse & bit != 0 {
            Some(no)
        } else {
            None
        }
    })
}

/// The port ranges of one printed rule, grouped as one pf operator each: a pair `(0, a)`,
/// `(b, 65535)` is `a+1 <> b-1` (`!= p` when they leave one port out), any other range
/// alone. What [`port_op`] prints of each group parses back to the same ranges.
pub(crate) fn port_groups(ranges: &[(u16, u16)]) -> Vec<Vec<(u16, u16)>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < ranges.len() {
        let (lo, hi) = ranges[i];
        if let Some(&(b, top)) = ranges.get(i + 1)
            && lo == 0
            && top == u16::MAX
            && u32::from(b) > u32::from(hi) + 1
        {
            out.push(vec![(lo, hi), (b, top)]);
            i += 2;
            continue;
        }
        out.push(vec![(lo, hi)]);
        i += 1;
    }
    out
}

/// One group of [`port_groups`] after `port`: `= 80`, `>= 1024`, `<= 1023`, `1000:2000`,
/// `!= 25`, `10 <> 20`.
pub(crate) fn port_op(group: &[(u16, u16)]) -> String {
    // Widened: no bound of a group given by hand can overflow.
    let wide: Vec<(u32, u32)> =
        group.iter().map(|&(lo, hi)| (u32::from(lo), u32::from(hi))).collect();
    let top = u32::from(u16::MAX);
    match wide.as_slice() {
        [(0, hi), (lo, _)] if *lo == hi + 2 => format!("!= {}", hi + 1),
        [(0, hi), (lo, _)] if *lo > hi + 2 => format!("{} <> {}", hi + 1, lo - 1),
        [(lo, hi)] if lo == hi => format!("= {lo}"),
        [(0, hi)] if *hi < top => format!("<= {hi}"),
        [(lo, hi)] if *lo > 0 && *hi == top => format!(">= {lo}"),
        [(lo, hi)] => format!("{lo}:{hi}"),
        _ => wide.iter().map(|(lo, hi)| format!("{lo}:{hi}")).collect::<Vec<_>>().join(" "),
    }
}

/// A port group as pfctl's label macros `$srcport` / `$dstport` write it (`80`, `!=25`,
/// `>=1024`; a `lo:hi` range as nothing, as pfctl).
pub(crate) fn port_label(ports: &PortMatch) -> String {
    let PortMatch::Ranges(group) = ports else { return String::new() };
    let op = port_op(group);
    match op.split_once(' ') {
        Some(("=", p)) => p.to_owned(),
        Some((a, b)) if a.starts_with(['!', '<', '>']) => format!("{a}{b}"),
        Some(_) => op.replace(' ', ""),
        None => String::new(),
    }
}

/// Protocol names as pfctl prints them (getprotobynumber(3)), each one linerate reads back.
const PROTOCOLS: &[(u8, &str)] = &[
    (1, "icmp"),
    (2, "igmp"),
    (4, "ipencap"),
    (6, "tcp"),
    (17, "udp"),
    (41, "ipv6"),
    (47, "gre"),
    (50, "esp"),
    (51, "ah"),
    (58, "ipv6-icmp"),
    (89, "ospf"),
    (103, "pim"),
    (112, "carp"),
    (132, "sctp"),
    (240, "pfsync"),
];

/// A protocol's name, or its number.
pub(crate) fn proto(p: u8) -> String {
    PROTOCOLS
        .iter()
        .find(|&&(n, _)| n == p)
        .map_or_else(|| p.to_string(), |&(_, name)| name.to_owned())
}

/// An ICMP (ICMPv6 with `v6`) type's name, or its number.
pub(crate) fn icmp_type(ty: u8, v6: bool) -> String {
    crate::rules::icmp_names::type_name(ty, v6).map_or_else(|| ty.to_string(), str::to_owned)
}

/// A code of ICMP type `ty` by name, or its number.
pub(crate) fn icmp_code(ty: u8, code: u8, v6: bool) -> String {
    crate::rules::icmp_names::code_name(ty, code, v6)
        .map_or_else(|| code.to_string(), str::to_owned)
}

/// TCP flags `set/mask` (`S/SA`), in pfctl's letter order.
pub(crate) fn flags((set, mask): (u8, u8)) -> String {
    const LETTERS: [(u8, char); 8] = [
        (tcp_flags::FIN, 'F'),
        (tcp_flags::SYN, 'S'),
        (tcp_flags::RST, 'R'),
        (tcp_flags::PSH, 'P'),
        (tcp_flags::ACK, 'A'),
        (tcp_flags::URG, 'U'),
        (tcp_flags::ECE, 'E'),
        (tcp_flags::CWR, 'W'),
    ];
    let letters = |bits: u8| {
        LETTERS.iter().filter(|(b, _)| bits & b != 0).map(|(_, c)| *c).collect::<String>()
    };
    format!("{}/{}", letters(set), letters(mask))
}

/// A name pfctl prints bare (a tag): quoted when it is no single word to the lexer.
pub(crate) fn word(s: &str) -> String {
    if !s.is_empty() && s.chars().all(crate::rules::lexer::is_word_char) {
        s.to_owned()
    } else {
        format!("\"{s}\"")
    }
}

/// The interface of port `i` by name (`names` in port order).
pub(crate) fn iface(names: &[&str], i: u16) -> String {
    names.get(usize::from(i)).map_or_else(|| format!("port{i}"), |n| (*n).to_owned())
}
