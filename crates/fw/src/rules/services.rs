//! Service names in port positions (`port ssh`, `port { isakmp, ipsec-nat-t }`), as pfctl
//! resolves them: by `getservbyname(3)`, that is /etc/services, TCP's entry before UDP's.
//! The names rule sets commonly use are built in, so that they mean the same port on a host
//! without /etc/services (Debian's `netbase`); any other name is looked up in that file, read
//! once per process.

use std::collections::HashMap;
use std::sync::OnceLock;

/// IANA's ports of the service names rule sets commonly write (names as in /etc/services).
const WELL_KNOWN: &[(&str, u16)] = &[
    ("ftp-data", 20),
    ("ftp", 21),
    ("ssh", 22),
    ("telnet", 23),
    ("smtp", 25),
    ("domain", 53),
    ("bootps", 67),
    ("bootpc", 68),
    ("tftp", 69),
    ("finger", 79),
    ("www", 80),
    ("http", 80),
    ("kerberos", 88),
    ("pop3", 110),
    ("sunrpc", 111),
    ("auth", 113),
    ("ident", 113),
    ("nntp", 119),
    ("ntp", 123),
    ("netbios-ns", 137),
    ("netbios-dgm", 138),
    ("netbios-ssn", 139),
    ("imap", 143),
    ("imap2", 143),
    ("snmp", 161),
    ("snmp-trap", 162),
    ("bgp", 179),
    ("ldap", 389),
    ("https", 443),
    ("microsoft-ds", 445),
    ("isakmp", 500),
    ("syslog", 514),
    ("dhcpv6-client", 546),
    ("dhcpv6-server", 547),
    ("rtsp", 554),
    ("submission", 587),
    ("ldaps", 636),
    ("domain-s", 853),
    ("imaps", 993),
    ("pop3s", 995),
    ("openvpn", 1194),
    ("ms-sql-s", 1433),
    ("l2tp", 1701),
    ("pptp", 1723),
    ("radius", 1812),
    ("radius-acct", 1813),
    ("nfs", 2049),
    ("mysql", 3306),
    ("ms-wbt-server", 3389),
    ("ipsec-nat-t", 4500),
    ("sip", 5060),
    ("sip-tls", 5061),
    ("postgresql", 5432),
    ("http-alt", 8080),
];

/// The system's table, at most this big (a larger /etc/services is not read).
const MAX_SERVICES_BYTES: u64 = 4 << 20;

/// The port of service `name`: built in, else /etc/services (`None` if neither names it).
pub(super) fn service_port(name: &str) -> Option<u16> {
    if let Some(&(_, port)) = WELL_KNOWN.iter().find(|(n, _)| *n == name) {
        return Some(port);
    }
    static SYSTEM: OnceLock<HashMap<String, u16>> = OnceLock::new();
    SYSTEM.get_or_init(|| read_services("/etc/services")).get(name).copied()
}

/// /etc/services as [`parse_services`] reads it; empty if the file is missing, not a regular
/// file or larger than [`MAX_SERVICES_BYTES`].
fn read_services(path: &str) -> HashMap<String, u16> {
    super::text_file::read_bounded(std::path::Path::new(path), MAX_SERVICES_BYTES)
        .map(|text| parse_services(&text))
        .unwrap_or_default()
}

/// Names and aliases of services(5) lines (`name port/protocol [aliases ...] [# comment]`)
/// to their ports: TCP and UDP entries only, TCP's first when both name one (pfctl asks
/// `getservbyname(name, "tcp")` first), else the first line's.
fn parse_services(text: &str) -> HashMap<String, u16> {
    let mut ports: HashMap<String, (u16, bool)> = HashMap::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("");
        let mut words = line.split_whitespace();
        let (Some(name), Some(port_proto)) = (words.next(), words.next()) else { continue };
        let Some((port, proto)) = port_proto.split_once('/') else { continue };
        let (Ok(port), true) = (port.parse::<u16>(), matches!(proto, "tcp" | "udp")) else {
            continue;
        };
        let tcp = proto == "tcp";
        for n in std::iter::once(name).chain(words) {
            let e = ports.entry(n.to_string()).or_insert((port, tcp));
            if tcp && !e.1 {
                *e = (port, tcp);
            }
        }
    }
    ports.into_iter().map(|(n, (p, _))| (n, p)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn services_lines_give_names_and_aliases_tcp_first() {
        let text = "# comment\nauth\t\t113/tcp\t\tauthentication tap ident\nsyslog\t\t514/udp\n\
                    biff\t\t512/udp\t\tcomsat\nexec\t\t512/tcp\nodd\t\t7/udp\nodd\t\t9/tcp\n\
                    sctp-only\t9900/sctp\nbroken 70000/tcp\nnoproto 80\nx 81/tcp # y 82/tcp\n";
        let t = parse_services(text);
        assert_eq!(t.get("auth"), Some(&113));
        assert_eq!(t.get("ident"), Some(&113), "aliases");
        assert_eq!(t.get("syslog"), Some(&514), "UDP-only names");
        assert_eq!(
            (t.get("biff"), t.get("comsat"), t.get("exec")),
            (Some(&512), Some(&512), Some(&512))
        );
        assert_eq!(
            t.get("odd"),
            Some(&9),
            "TCP's entry wins, as getservbyname(name, \"tcp\") first"
        );
        assert_eq!(t.get("sctp-only"), None);
        assert_eq!(t.get("broken"), None);
        assert_eq!(t.get("noproto"), None);
        assert_eq!((t.get("x"), t.get("y")), (Some(&81), None), "comments end the line");
    }

    /// The built-in names agree with the host's /etc/services where it names them.
    #[test]
    fn built_in_names_agree_with_the_system_table() {
        let system = read_services("/etc/services");
        for (name, port) in WELL_KNOWN {
            if let Some(p) = system.get(*name) {
                assert_eq!(p, port, "{name}");
            }
        }
        assert!(read_services("/dev/zero").is_empty() && read_services("/nonexistent").is_empty());
    }
}
