//! The router's own addresses in rules: `self` (every address of every interface), an
//! interface as a host (`em0` or `(em0)`: its addresses; `em0:network`: its networks;
//! `em0:broadcast`: its IPv4 broadcast addresses; `:0`: the first address of each family
//! only, no aliases), and pf's `antispoof for IFACE`, which expands into block rules.
//!
//! linerate's interface addresses come from its config and change only with it (a reload
//! re-reads them), so `(em0)`, which pf re-evaluates when the interface's addresses change,
//! is the same as `em0` here. Each such host is a table of those addresses, built when the
//! file is parsed: as for pf's dynamic addresses, `! em0` matches what is none of them
//! (where pfctl expands an unparenthesized interface of several addresses into a list whose
//! negation matches everything).

use std::net::IpAddr;

use super::{
    Action, AddrItem, AddrMatch, AddrTarget, Af, Dir, PResult, Parser, PortMatch, Prefix, Rule,
    StateMode, Table, TableEntry, Token, here,
};

/// `antispoof for { ... }` lists nest (macros holding lists); deeper is an error rather than
/// a parser that recurses until the stack runs out.
const MAX_ANTISPOOF_LIST_DEPTH: usize = 16;

/// A router address as a prefix of `len` bits (its host address with `len` = the family's
/// width).
fn prefix(addr: IpAddr, len: u8) -> Prefix {
    match addr {
        IpAddr::V4(a) => Prefix::new(Af::Inet, u128::from(u32::from(a)), len),
        IpAddr::V6(a) => Prefix::new(Af::Inet6, u128::from(a), len),
    }
}

fn host(addr: IpAddr) -> Prefix {
    prefix(addr, if addr.is_ipv4() { 32 } else { 128 })
}

impl Parser<'_> {
    /// The addresses of one interface (`t`: where it is named, for errors).
    fn addresses_of(&self, t: &Token, name: &str) -> PResult<Vec<(IpAddr, u8)>> {
        let Some(all) = self.addresses else {
            return here(
                t,
                format!(
                    "`{name}` as an address needs the interfaces' addresses, which only `linerate run`, `check` and `reload` know"
                ),
            );
        };
        if (self.ifaces)(name).is_none() {
            return here(t, format!("unknown interface \"{name}\""));
        }
        Ok(all.iter().find(|(n, _)| n == name).map(|(_, a)| a.clone()).unwrap_or_default())
    }

    /// The table of host name `name`'s addresses, as pfctl resolves a name when it loads the
    /// file, made on first use; `None` if `name` is not in the hosts file. linerate reads
    /// /etc/hosts only: a name only DNS knows is an error (a rule set must not wait on, or
    /// change with, a name server).
    pub(super) fn host_name(&mut self, t: &Token, name: &str) -> PResult<Option<AddrTarget>> {
        if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
            || name.parse::<f64>().is_ok()
        {
            return Ok(None);
        }
        let key = format!("{name} (/etc/hosts)");
        if let Some(&i) = self.table_idx.get(&key) {
            return Ok(Some(AddrTarget::Table(i)));
        }
        let text = std::fs::read_to_string(HOSTS_FILE).unwrap_or_default();
        let addrs = hosts_file_addresses(&text, name);
        if addrs.is_empty() {
            return here(
                t,
                format!(
                    "unknown host \"{name}\": not an address, an interface or a name in {HOSTS_FILE} (linerate resolves no name by DNS: write the address)"
                ),
            );
        }
        let entries =
            addrs.into_iter().map(|a| TableEntry { negated: false, prefix: host(a) }).collect();
        self.table_idx.insert(key.clone(), self.rs.tables.len());
        self.rs.tables.push(Table { name: key, entries, constant: true });
        Ok(Some(AddrTarget::Table(self.rs.tables.len() - 1)))
    }

    /// The table standing for `spec` (`self`, `em0`, `em0:network`, `em0/24`, ...), named
    /// `(spec)`, made on first use.
    pub(super) fn iface_hosts(&mut self, t: &Token, spec: &str) -> PResult<AddrTarget> {
        let name = format!("({spec})");
        if let Some(&i) = self.table_idx.get(&name) {
            return Ok(AddrTarget::Table(i));
        }
        // `em0/24`: the interface's addresses as prefixes of that length.
        let (spec_mods, len) = match spec.split_once('/') {
            Some((head, l)) => match l.parse::<u8>() {
                Ok(l) => (head, Some(l)),
                Err(_) => return here(t, format!("`{spec}`: expected a prefix length after `/`")),
            },
            None => (spec, None),
        };
        let mut parts = spec_mods.split(':');
        let ifname = parts.next().unwrap_or("");
        let (mut network, mut broadcast, mut first_only) = (false, false, false);
        for m in parts {
            match m {
                "network" => network = true,
                "broadcast" => broadcast = true,
                "0" => first_only = true,
                "peer" => {
                    return here(
                        t,
                        format!(
                            "`{ifname}:peer` is not supported by linerate (no point-to-point interfaces)"
                        ),
                    );
                }
                _ => {
                    return here(
                        t,
                        format!(
                            "`{ifname}:{m}`: expected {ifname}:network, {ifname}:broadcast or {ifname}:0"
                        ),
                    );
                }
            }
        }
        let addrs: Vec<(IpAddr, u8)> = if ifname == "self" {
            if network || broadcast || first_only {
                return here(t, "`self` takes no modifier");
            }
            let Some(all) = self.addresses else {
                return here(
                    t,
                    "`self` needs the interfaces' addresses, which only `linerate run`, `check` and `reload` know",
                );
            };
            all.iter().flat_map(|(_, a)| a.iter().copied()).collect()
        } else {
            self.addresses_of(t, ifname)?
        };
        let mut seen_af = Vec::new();
        let mut entries = Vec::new();
        for (a, own_len) in addrs {
            if first_only {
                if seen_af.contains(&a.is_ipv4()) {
                    continue;
                }
                seen_af.push(a.is_ipv4());
            }
            let p = if let Some(l) = len {
                if l > if a.is_ipv4() { 32 } else { 128 } {
                    continue;
                }
                prefix(a, l)
            } else if network {
                prefix(a, own_len)
            } else if broadcast {
                if !a.is_ipv4() || own_len >= 31 {
                    continue;
                }
                Prefix::new(Af::Inet, prefix(a, own_len).last(), 32)
            } else {
                host(a)
            };
            entries.push(TableEntry { negated: false, prefix: p });
        }
        self.table_idx.insert(name.clone(), self.rs.tables.len());
        self.rs.tables.push(Table { name, entries, constant: true });
        Ok(AddrTarget::Table(self.rs.tables.len() - 1))
    }

    /// `antispoof [quick] for IFACE|{ IFACE ... } [inet|inet6] [label "..."]`, as pfctl
    /// expands it, per interface: `block in [quick] on ! IFACE [af] from IFACE:network`
    /// (its networks seen on another interface) and `block in [quick] [af] from IFACE` (its
    /// own addresses as a source, on any interface). Blocked packets are dropped silently.
    /// An interface name or a `{ ... }` list of them, lists inside it flattened (a macro
    /// holding one: `antispoof for { egress $int_if }`), as pfctl does.
    /// `depth`: the lists this one is inside.
    fn antispoof_names(&mut self, names: &mut Vec<(String, Token)>, depth: usize) -> PResult<()> {
        let t = self.peek()?.clone();
        if !self.eat_punct("{")? {
            names.push(self.word("an interface name")?);
            return Ok(());
        }
        if depth > MAX_ANTISPOOF_LIST_DEPTH {
            return here(
                &t,
                format!("interface lists nested more than {MAX_ANTISPOOF_LIST_DEPTH} deep"),
            );
        }
        let mut n = 0;
        loop {
            self.skip_newlines()?;
            if n > 0 && self.eat_punct("}")? {
                return Ok(());
            }
            self.antispoof_names(names, depth + 1)?;
            n += 1;
            self.eat_punct(",")?;
        }
    }

    pub(super) fn antispoof(&mut self) -> PResult<()> {
        let at = self.expect_word("antispoof")?;
        let log = self.log_mode()?;
        self.refuse_unsupported("")?;
        let quick = self.eat_word("quick")?;
        self.expect_word("for")?;
        let mut names: Vec<(String, Token)> = Vec::new();
        self.antispoof_names(&mut names, 0)?;
        let af = if self.eat_word("inet")? {
            Some(Af::Inet)
        } else if self.eat_word("inet6")? {
            Some(Af::Inet6)
        } else {
            None
        };
        // pf's antispoof options, in any order (pfSense writes a `ridentifier`).
        let (mut label, mut ridentifier) = (None, None);
        loop {
            if self.eat_word("label")? {
                label = Some(self.label_text()?);
            } else if self.eat_word("ridentifier")? || self.eat_word("tracker")? {
                ridentifier = Some(self.ridentifier()?);
            } else {
                break;
            }
        }
        for (name, t) in names {
            // pfctl's `antispoof for lo0` blocks 127.0.0.0/8 and ::1 from any other interface:
            // the classify pass drops those sources on every port already (martian sources).
            if (self.ifaces)(&name).is_none() && matches!(name.as_str(), "lo" | "lo0") {
                self.notice(&t, format!("`antispoof for {name}`: linerate drops loopback sources (127.0.0.0/8, ::1) on every interface already, as martians"));
                continue;
            }
            let index = (self.ifaces)(&name)
                .map_or_else(|| here(&t, format!("unknown interface \"{name}\"")), Ok)?;
            let addrs: Vec<(IpAddr, u8)> = self
                .addresses_of(&t, &name)?
                .into_iter()
                .filter(|(a, _)| af.is_none_or(|f| (f == Af::Inet) == a.is_ipv4()))
                .collect();
            if addrs.is_empty() {
                continue;
            }
            let item = |p: Prefix| AddrItem { negated: false, target: AddrTarget::Prefix(p) };
            let nets: Vec<AddrItem> = addrs.iter().map(|&(a, l)| item(prefix(a, l))).collect();
            let hosts: Vec<AddrItem> = addrs.iter().map(|&(a, _)| item(host(a))).collect();
            let rule = |ifaces: Vec<u16>, src: Vec<AddrItem>| Rule {
                action: Action::Block,
                block_return: None,
                dir: Some(Dir::In),
                quick,
                iface_neg: !ifaces.is_empty(),
                ifaces,
                af,
                protos: Vec::new(),
                src: AddrMatch::List(src),
                src_ports: PortMatch::Any,
                dst: AddrMatch::Any,
                dst_ports: PortMatch::Any,
                icmp_types: Vec::new(),
                icmp_code: None,
                flags: None,
                route_need: 0,
                route_refuse: 0,
                keep_state: StateMode::None,
                max_states: None,
                src_track: None,
                state_policy: None,
                allow_opts: false,
                label: label.clone(),
                ridentifier,
                state_timeouts: Vec::new(),
                state_adaptive: None,
                tag: None,
                tagged: None,
                log,
                route: None,
                line: at.line,
            };
            self.rs.rules.push(rule(vec![index], nets));
            self.rs.rules.push(rule(Vec::new(), hosts));
        }
        Ok(())
    }
}

/// Where host names come from.
const HOSTS_FILE: &str = "/etc/hosts";

/// The addresses hosts(5) text gives `name` (as a canonical name or an alias), in order.
fn hosts_file_addresses(text: &str, name: &str) -> Vec<IpAddr> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("");
        let mut fields = line.split_whitespace();
        let Some(addr) = fields.next() else { continue };
        let addr = addr.split('%').next().unwrap_or(addr);
        if fields.any(|n| n.eq_ignore_ascii_case(name))
            && let Ok(a) = addr.parse::<IpAddr>()
            && !out.contains(&a)
        {
            out.push(a);
        }
    }
    out
}

#[cfg(test)]
mod hosts_file_tests {
    use super::*;

    #[test]
    fn names_and_aliases_of_a_hosts_file() {
        let text = "127.0.0.1 localhost\n::1 localhost ip6-localhost # both\nfe80::1%eth0 router\n10.0.0.5 db db.example.org\n";
        let a = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(hosts_file_addresses(text, "localhost"), vec![a("127.0.0.1"), a("::1")]);
        assert_eq!(hosts_file_addresses(text, "DB.example.org"), vec![a("10.0.0.5")]);
        assert_eq!(hosts_file_addresses(text, "router"), vec![a("fe80::1")]);
        assert!(hosts_file_addresses(text, "both").is_empty(), "a comment is no name");
    }
}
