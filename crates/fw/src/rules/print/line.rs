//! One printed line per expanded rule, its words in the order of pfctl's `print_rule`
//! (pfctl_parser.c): filter rules, translation rules (FreeBSD's `nat` / `rdr` / `binat`
//! statements, which is how linerate holds OpenBSD's `nat-to` and `rdr-to` as well) and
//! scrub rules (likewise OpenBSD's `match ... scrub`).

use super::words;
use crate::rules::Tmo;
use crate::rules::{
    Action, AddrMatch, Af, BlockReturn, DEFAULT_FLAGS, DEFAULT_NAT_PORTS, Flush, LogMode, NatAddr,
    NatKind, NatRule, NatTarget, PoolMethod, PortMatch, Prefix, RouteOpt, Rule, RuleSet, ScrubRule,
    SrcTrack, StateMode, StatePolicy,
};

/// The state timeouts' names as pf.conf writes them, in pfctl's order.
const STATE_TIMEOUTS: [&str; 14] = [
    "tcp.first",
    "tcp.opening",
    "tcp.established",
    "tcp.closing",
    "tcp.finwait",
    "tcp.closed",
    "udp.first",
    "udp.single",
    "udp.multiple",
    "icmp.first",
    "icmp.error",
    "other.first",
    "other.single",
    "other.multiple",
];

/// A filter rule.
pub(crate) fn filter(rs: &RuleSet, r: &Rule, names: &[&str]) -> String {
    let mut w = vec![action(r)];
    w.extend(dir_word(r.dir));
    w.extend(log(r.log));
    w.extend(r.quick.then(|| "quick".to_owned()));
    w.extend(on(&r.ifaces, r.iface_neg, names));
    w.extend(r.route.map(|o| route(&o, names)));
    w.extend(matching(r.af, &r.protos));
    w.push(hosts(
        rs,
        (&r.src, &r.src_ports, words::route_host(r.route_need, r.route_refuse, true)),
        (&r.dst, &r.dst_ports, words::route_host(r.route_need, r.route_refuse, false)),
    ));
    w.extend(flags(r));
    w.extend(icmp(r));
    w.extend(state(rs, r));
    w.extend(r.allow_opts.then(|| "allow-opts".to_owned()));
    w.extend(r.label.as_ref().map(|l| format!("label \"{l}\"")));
    w.extend(r.ridentifier.map(|n| format!("ridentifier {n}")));
    w.extend(r.tag.map(|t| format!("tag {}", tag(rs, t))));
    w.extend(
        r.tagged.map(|(neg, t)| format!("{}tagged {}", if neg { "! " } else { "" }, tag(rs, t))),
    );
    w.join(" ")
}

/// A translation rule.
pub(crate) fn nat(rs: &RuleSet, r: &NatRule, names: &[&str]) -> String {
    if r.kind == NatKind::AfTo {
        return af_to(rs, r, names);
    }
    let mut w = vec![format!("{}{}", if r.negated { "no " } else { "" }, r.kind.name())];
    w.extend(r.pass.then(|| "pass".to_owned()));
    w.extend(on(&r.ifaces, r.iface_neg, names));
    w.extend(matching(r.af, &r.protos));
    let dst_iface = r.dst_iface.map(|i| format!("({})", words::iface(names, i)));
    w.push(hosts(rs, (&r.src, &r.src_ports, None), (&r.dst, &r.dst_ports, dst_iface.as_deref())));
    w.extend(r.target.as_ref().map(|t| format!("-> {}", target(rs, r.kind, t, names))));
    w.join(" ")
}

/// The pass rule an `af-to` translation stands for (its state and flags as pfctl prints
/// them), `quick`: linerate translates every packet it matches, which is what `quick` says.
fn af_to(rs: &RuleSet, r: &NatRule, names: &[&str]) -> String {
    let mut w = vec!["pass in quick".to_owned()];
    w.extend(on(&r.ifaces, r.iface_neg, names));
    w.extend(matching(r.af, &r.protos));
    w.push(hosts(rs, (&r.src, &r.src_ports, None), (&r.dst, &r.dst_ports, None)));
    w.push("flags S/SA keep state".to_owned());
    w.extend(r.target.as_ref().map(|t| match t.af_dst {
        Some(dst) => format!(
            "af-to inet6 from {} to {}",
            target(rs, NatKind::Nat, t, names),
            words::prefix(&dst)
        ),
        None => format!("af-to inet from {}", target(rs, NatKind::Nat, t, names)),
    }));
    w.join(" ")
}

/// A scrub rule.
pub(crate) fn scrub(rs: &RuleSet, r: &ScrubRule, names: &[&str]) -> String {
    let mut w = vec![if r.exempt { "no scrub" } else { "scrub" }.to_owned()];
    w.extend(dir_word(r.dir));
    w.extend(on(&r.ifaces, r.iface_neg, names));
    w.extend(matching(r.af, &r.protos));
    w.push(hosts(rs, (&r.src, &r.src_ports, None), (&r.dst, &r.dst_ports, None)));
    let o = &r.opts;
    w.extend(o.no_df.then(|| "no-df".to_owned()));
    w.extend(o.random_id.then(|| "random-id".to_owned()));
    w.extend((o.min_ttl > 0).then(|| format!("min-ttl {}", o.min_ttl)));
    w.extend((o.max_mss > 0).then(|| format!("max-mss {}", o.max_mss)));
    w.extend(o.set_tos.map(|t| format!("set-tos 0x{t:02x}")));
    w.join(" ")
}

/// `pass`, or `block` with what it answers (pfctl prints `drop` too).
fn action(r: &Rule) -> String {
    match r.action {
        Action::Pass => "pass".into(),
        Action::Block => format!("block {}", block_return(r.block_return, r.af)),
    }
}

fn block_return(ret: Option<BlockReturn>, af: Option<Af>) -> String {
    let Some(b) = ret else { return "drop".into() };
    let v4 = |c: u8| words::icmp_code(3, c, false);
    let v6 = |c: u8| words::icmp_code(1, c, true);
    match (b.rst, b.icmp, b.icmp6) {
        (true, Some(_), _) => "return".into(),
        (true, None, _) if b.rst_ttl == 64 => "return-rst".into(),
        (true, None, _) => format!("return-rst(ttl {})", b.rst_ttl),
        (false, Some(c), Some(4)) if af == Some(Af::Inet) => format!("return-icmp({})", v4(c)),
        (false, Some(3), Some(c6)) if af == Some(Af::Inet6) => format!("return-icmp6({})", v6(c6)),
        (false, Some(c), Some(c6)) => format!("return-icmp({}, {})", v4(c), v6(c6)),
        (false, _, _) => "drop".into(),
    }
}

fn dir_word(dir: Option<crate::rules::Dir>) -> Option<String> {
    dir.map(|d| if d == crate::rules::Dir::In { "in" } else { "out" }.to_owned())
}

fn log(mode: LogMode) -> Option<String> {
    match mode {
        LogMode::None => None,
        LogMode::Decided => Some("log".into()),
        LogMode::All => Some("log (all)".into()),
    }
}

/// `on IF`, `on ! IF`; a list (translation rules' `on ! { a b }`, which is not expanded)
/// braced.
fn on(ifaces: &[u16], neg: bool, names: &[&str]) -> Option<String> {
    let not = if neg { "! " } else { "" };
    match ifaces {
        [] => None,
        [i] => Some(format!("on {not}{}", words::iface(names, *i))),
        many => Some(format!(
            "on {not}{{ {} }}",
            many.iter().map(|&i| words::iface(names, i)).collect::<Vec<_>>().join(" ")
        )),
    }
}

fn route(o: &RouteOpt, names: &[&str]) -> String {
    let kw = if o.reply { "reply-to" } else { "route-to" };
    let gw = words::prefix(&Prefix::new(o.af, o.gateway, Prefix::bits(o.af)));
    match o.port {
        Some(p) => format!("{kw} ({} {gw})", words::iface(names, p)),
        None => format!("{kw} {gw}"),
    }
}

/// `inet`/`inet6` and `proto P` (one protocol in an expanded rule).
fn matching(af: Option<Af>, protos: &[u8]) -> Vec<String> {
    let mut w: Vec<String> =
        af.map(|a| if a == Af::Inet { "inet" } else { "inet6" }.to_owned()).into_iter().collect();
    match protos {
        [] => {}
        [p] => w.push(format!("proto {}", words::proto(*p))),
        many => w.push(format!(
            "proto {{ {} }}",
            many.iter().map(|&p| words::proto(p)).collect::<Vec<_>>().join(" ")
        )),
    }
    w
}

/// `all`, or `from SRC [port OP] to DST [port OP]`; each side's host is `host` when given
/// (`no-route`, `(em0)` of a translation rule's `to`).
fn hosts(
    rs: &RuleSet,
    src: (&AddrMatch, &PortMatch, Option<&str>),
    dst: (&AddrMatch, &PortMatch, Option<&str>),
) -> String {
    let side = |(m, ports, host): (&AddrMatch, &PortMatch, Option<&str>)| {
        let addr = host.map_or_else(|| words::addr_match(rs, m), str::to_owned);
        match ports {
            PortMatch::Any => addr,
            PortMatch::Ranges(r) => format!("{addr} port {}", words::port_op(r)),
        }
    };
    let any = |(m, ports, host): (&AddrMatch, &PortMatch, Option<&str>)| {
        *m == AddrMatch::Any && *ports == PortMatch::Any && host.is_none()
    };
    if any(src) && any(dst) {
        return "all".into();
    }
    format!("from {} to {}", side(src), side(dst))
}

/// `flags`: explicit where pf's default applies (`S/SA` on stateful TCP rules, `any` where
/// a stateful rule has none), left out on a rule for another protocol that has the
/// default, as pfctl does.
fn flags(r: &Rule) -> Option<String> {
    let stateful = r.keep_state != StateMode::None;
    let default = stateful.then_some(DEFAULT_FLAGS);
    let tcp = matches!(r.protos.as_slice(), [] | [crate::packet::proto::TCP]);
    if !tcp && r.flags == default {
        return None;
    }
    match r.flags {
        Some(f) => Some(format!("flags {}", words::flags(f))),
        None if stateful => Some("flags any".into()),
        None => None,
    }
}

fn icmp(r: &Rule) -> Option<String> {
    let v6 = r.protos == [crate::packet::proto::ICMPV6];
    let kw = if v6 { "icmp6-type" } else { "icmp-type" };
    let ty = match r.icmp_types.as_slice() {
        [] => return None,
        [t] => *t,
        many => {
            return Some(format!(
                "{kw} {{ {} }}",
                many.iter().map(|&t| words::icmp_type(t, v6)).collect::<Vec<_>>().join(" ")
            ));
        }
    };
    let code =
        r.icmp_code.map(|c| format!(" code {}", words::icmp_code(ty, c, v6))).unwrap_or_default();
    Some(format!("{kw} {}{code}", words::icmp_type(ty, v6)))
}

/// `no state` (a pass rule without), `keep state`, `modulate state` or `synproxy state`,
/// with the state options.
fn state(rs: &RuleSet, r: &Rule) -> Option<String> {
    let word = match (r.action, r.keep_state) {
        (Action::Block, _) => return None,
        (_, StateMode::None) => return Some("no state".into()),
        (_, StateMode::Keep | StateMode::KeepSloppy) => "keep state",
        (_, StateMode::Modulate) => "modulate state",
        (_, StateMode::Synproxy) => "synproxy state",
    };
    let opts = state_options(rs, r);
    Some(if opts.is_empty() { word.to_owned() } else { format!("{word} ({})", opts.join(", ")) })
}

/// The options inside `keep state ( ... )`, in pfctl's order.
fn state_options(rs: &RuleSet, r: &Rule) -> Vec<String> {
    let mut o: Vec<String> = r.max_states.map(|n| format!("max {n}")).into_iter().collect();
    if let Some(s) = &r.src_track {
        o.extend(src_track(rs, s));
    }
    match r.state_policy {
        Some(StatePolicy::IfBound) => o.push("if-bound".into()),
        Some(StatePolicy::Floating) => o.push("floating".into()),
        None => {}
    }
    if r.keep_state == StateMode::KeepSloppy {
        o.push("sloppy".into());
    }
    for &(t, secs) in &r.state_timeouts {
        o.extend(
            STATE_TIMEOUTS
                .iter()
                .find(|n| Tmo::from_name(n) == Some(t))
                .map(|n| format!("{n} {secs}")),
        );
    }
    if let Some((start, end)) = r.state_adaptive {
        o.push(format!("adaptive.start {start}"));
        o.push(format!("adaptive.end {end}"));
    }
    o
}

fn src_track(rs: &RuleSet, s: &SrcTrack) -> Vec<String> {
    let mut o = vec![format!("source-track {}", if s.global { "global" } else { "rule" })];
    o.extend(s.max_states.map(|n| format!("max-src-states {n}")));
    o.extend(s.max_conn.map(|n| format!("max-src-conn {n}")));
    o.extend(s.max_conn_rate.map(|(n, secs)| format!("max-src-conn-rate {n}/{secs}")));
    o.extend(s.max_nodes.map(|n| format!("max-src-nodes {n}")));
    o.extend(s.overload.map(|ov| {
        let flush = match ov.flush {
            Flush::None => "",
            Flush::Rule => " flush",
            Flush::Global => " flush global",
        };
        format!("overload {}{flush}", words::table(rs, ov.table))
    }));
    o
}

fn tag(rs: &RuleSet, id: u8) -> String {
    rs.tags
        .get(usize::from(id).wrapping_sub(1))
        .map_or_else(|| format!("tag{id}"), |n| words::word(n))
}

/// What follows `->`: the pool, its ports and options, as pfctl's `print_pool`.
fn target(rs: &RuleSet, kind: NatKind, t: &NatTarget, names: &[&str]) -> String {
    let mut w = vec![match &t.addr {
        NatAddr::Iface(i) => format!("({})", words::iface(names, *i)),
        NatAddr::Table(id) => {
            format!("<{}>", rs.tables.get(*id).map_or("?", |t| t.name.as_str()))
        }
        NatAddr::Pool(p) if p.len() == 1 => words::prefix(&p[0]),
        NatAddr::Pool(p) => {
            format!("{{ {} }}", p.iter().map(words::prefix).collect::<Vec<_>>().join(", "))
        }
    }];
    w.extend(target_ports(kind, t));
    let several =
        matches!(&t.addr, NatAddr::Pool(p) if p.len() > 1) || matches!(t.addr, NatAddr::Table(_));
    w.extend(
        match t.method {
            PoolMethod::RoundRobin if several => Some("round-robin"),
            PoolMethod::RoundRobin => None,
            PoolMethod::Random => Some("random"),
            PoolMethod::SourceHash => Some("source-hash"),
            PoolMethod::Bitmask => Some("bitmask"),
        }
        .map(str::to_owned),
    );
    w.extend(t.sticky.then(|| "sticky-address".to_owned()));
    w.extend(t.static_port.then(|| "static-port".to_owned()));
    w.join(" ")
}

/// The target's `port`: a `nat` rule's source ports unless pf's default (or all of them
/// with `static-port`), an `rdr` rule's destination port or range.
fn target_ports(kind: NatKind, t: &NatTarget) -> Option<String> {
    let (lo, hi) = t.ports?;
    let default = (kind == NatKind::Nat && (lo, hi) == DEFAULT_NAT_PORTS)
        || (t.static_port && (lo, hi) == (0, u16::MAX));
    match () {
        _ if default => None,
        _ if t.port_star => Some(format!("port {lo}:*")),
        _ if lo == hi => Some(format!("port {lo}")),
        _ => Some(format!("port {lo}:{hi}")),
    }
}
