//! The names pfctl gives ICMP and ICMPv6 types and codes (`icmp-type unreach code needfrag`),
//! as its `icmp_type` and `icmp_code` tables list them (pfctl_parser.c; RFC 792, RFC 1191,
//! RFC 1812 for IPv4; RFC 4443, RFC 4861 for ICMPv6).

/// ICMP types by name.
const TYPES_V4: &[(&str, u8)] = &[
    ("echoreq", 8),
    ("echorep", 0),
    ("unreach", 3),
    ("squench", 4),
    ("redir", 5),
    ("althost", 6),
    ("routeradv", 9),
    ("routersol", 10),
    ("timex", 11),
    ("paramprob", 12),
    ("timereq", 13),
    ("timerep", 14),
    ("inforeq", 15),
    ("inforep", 16),
    ("maskreq", 17),
    ("maskrep", 18),
    ("trace", 30),
    ("dataconv", 31),
    ("mobredir", 32),
    ("ipv6-where", 33),
    ("ipv6-here", 34),
    ("mobregreq", 35),
    ("mobregrep", 36),
    ("skip", 39),
    ("photuris", 40),
];

/// ICMPv6 types by name (several names for one type, as pfctl has them).
const TYPES_V6: &[(&str, u8)] = &[
    ("unreach", 1),
    ("toobig", 2),
    ("timex", 3),
    ("paramprob", 4),
    ("echoreq", 128),
    ("echorep", 129),
    ("groupqry", 130),
    ("listqry", 130),
    ("grouprep", 131),
    ("listenrep", 131),
    ("groupterm", 132),
    ("listendone", 132),
    ("routersol", 133),
    ("routeradv", 134),
    ("neighbrsol", 135),
    ("neighbradv", 136),
    ("redir", 137),
    ("routrrenum", 138),
    ("wrureq", 139),
    ("wrurep", 140),
    ("fqdnreq", 139),
    ("fqdnrep", 140),
    ("niqry", 139),
    ("nirep", 140),
    ("listenrepv2", 143),
    ("mtraceresp", 200),
    ("mtrace", 201),
];

/// ICMP codes: (name, type, code).
const CODES_V4: &[(&str, u8, u8)] = &[
    ("net-unr", 3, 0),
    ("host-unr", 3, 1),
    ("proto-unr", 3, 2),
    ("port-unr", 3, 3),
    ("needfrag", 3, 4),
    ("srcfail", 3, 5),
    ("net-unk", 3, 6),
    ("host-unk", 3, 7),
    ("isolate", 3, 8),
    ("net-prohib", 3, 9),
    ("host-prohib", 3, 10),
    ("net-tos", 3, 11),
    ("host-tos", 3, 12),
    ("filter-prohib", 3, 13),
    ("host-preced", 3, 14),
    ("cutoff-preced", 3, 15),
    ("redir-net", 5, 0),
    ("redir-host", 5, 1),
    ("redir-tos-net", 5, 2),
    ("redir-tos-host", 5, 3),
    ("normal-adv", 9, 0),
    ("common-adv", 9, 16),
    ("transit", 11, 0),
    ("reassemb", 11, 1),
    ("badhead", 12, 0),
    ("optmiss", 12, 1),
    ("badlen", 12, 2),
    ("unknown-ind", 40, 1),
    ("auth-fail", 40, 2),
    ("decrypt-fail", 40, 3),
];

/// ICMPv6 codes: (name, type, code).
const CODES_V6: &[(&str, u8, u8)] = &[
    ("admin-unr", 1, 1),
    ("noroute-unr", 1, 0),
    ("notnbr-unr", 1, 2),
    ("beyond-unr", 1, 2),
    ("addr-unr", 1, 3),
    ("port-unr", 1, 4),
    ("transit", 3, 0),
    ("reassemb", 3, 1),
    ("badhead", 4, 0),
    ("nxthdr", 4, 1),
    ("redironlink", 137, 0),
    ("redirrouter", 137, 1),
];

/// The type named `name` (ICMPv6 with `v6`).
pub(super) fn icmp_type(name: &str, v6: bool) -> Option<u8> {
    let table = if v6 { TYPES_V6 } else { TYPES_V4 };
    table.iter().find(|(n, _)| *n == name).map(|&(_, t)| t)
}

/// The code named `name` of type `ty`.
pub(super) fn icmp_code(ty: u8, name: &str, v6: bool) -> Option<u8> {
    let table = if v6 { CODES_V6 } else { CODES_V4 };
    table.iter().find(|(n, t, _)| *n == name && *t == ty).map(|&(_, _, c)| c)
}

/// pfctl's name of type `ty` (the first its table lists), for printing rules.
pub(super) fn type_name(ty: u8, v6: bool) -> Option<&'static str> {
    let table = if v6 { TYPES_V6 } else { TYPES_V4 };
    table.iter().find(|&&(_, t)| t == ty).map(|&(n, _)| n)
}

/// pfctl's name of code `code` of type `ty` (the first its table lists).
pub(super) fn code_name(ty: u8, code: u8, v6: bool) -> Option<&'static str> {
    let table = if v6 { CODES_V6 } else { CODES_V4 };
    table.iter().find(|&&(_, t, c)| t == ty && c == code).map(|&(n, _, _)| n)
}

/// Whether `name` names a code of some type (to say which type it belongs to).
pub(super) fn is_code_name(name: &str, v6: bool) -> bool {
    let table = if v6 { CODES_V6 } else { CODES_V4 };
    table.iter().any(|(n, _, _)| *n == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_pfctls() {
        assert_eq!(icmp_type("unreach", false), Some(3));
        assert_eq!(icmp_type("unreach", true), Some(1));
        assert_eq!(icmp_type("listqry", true), icmp_type("groupqry", true));
        assert_eq!(icmp_code(3, "needfrag", false), Some(4), "RFC 1191's fragmentation needed");
        assert_eq!(icmp_code(1, "notnbr-unr", true), Some(2));
        assert_eq!(icmp_code(1, "port-unr", true), Some(4));
        assert_eq!(icmp_code(3, "port-unr", false), Some(3));
        assert_eq!(icmp_code(11, "needfrag", false), None, "a code of another type");
        assert!(is_code_name("needfrag", false));
        assert_eq!(icmp_type("bogus", false), None);
    }
}
