//! Filter rules: `pass` / `block` with their hosts, ports, protocols and options.

use super::hosts::{Hosts, check_families, check_ports_need_tcp_udp};
use super::*;

/// A filter rule's options after its hosts, as written (defaults are applied by the caller).
#[derive(Default)]
struct FilterOptions {
    /// `flags`: `Some(None)` for `flags any`.
    flags: Option<Option<(u8, u8)>>,
    /// `keep state` / `no state`, with its token for errors.
    keep: Option<(StateMode, Token)>,
    label: Option<String>,
    allow_opts: Option<Token>,
    state_policy: Option<StatePolicy>,
    /// `keep state (max N)`.
    max_states: Option<u32>,
    /// `keep state (max-src-conn N, ...)`.
    src_track: Option<SrcTrack>,
    icmp_types: Vec<u8>,
    icmp_code: Option<u8>,
    /// The `icmp-type` / `icmp6-type` keyword and the protocol it needs.
    icmp_tok: Option<(Token, u8)>,
    /// `ridentifier N` / `tracker N`.
    ridentifier: Option<u32>,
    /// `keep state (tcp.established 3600, ...)`.
    state_timeouts: Vec<(crate::rules::Tmo, u32)>,
    /// `keep state (adaptive.start N, adaptive.end M)`, each if given.
    adaptive: (Option<u32>, Option<u32>),
    /// `tag NAME`.
    tag: Option<u8>,
    /// `[!] tagged NAME`, with its token for errors.
    tagged: Option<(bool, u8, Token)>,
    /// `route-to` / `reply-to` among the options (OpenBSD's place).
    route: Option<(RouteOpt, Token)>,
    /// `rdr-to` / `nat-to` (OpenBSD's translation on a pass rule), the last option.
    translate: Option<(NatKind, NatTarget, Token)>,
}

/// `set state-defaults`: the state options every later rule that keeps state starts from.
#[derive(Debug, Default)]
pub(super) struct StateDefaults {
    sloppy: bool,
    policy: Option<StatePolicy>,
    max: Option<u32>,
    timeouts: Vec<(crate::rules::Tmo, u32)>,
    adaptive: (Option<u32>, Option<u32>),
}

/// A rule's adaptive timeouts (pf's parse.y): as written if either is; else, for a rule
/// with `max N`, 60% and 120% of N. Only a non-zero start makes them the rule's own
/// (pf_state_expires); otherwise the rule set's apply.
fn rule_adaptive((start, end): (Option<u32>, Option<u32>), max: Option<u32>) -> Option<(u32, u32)> {
    let (start, end) = match (start, end, max) {
        (None, None, Some(m)) => ((m / 10) * 6, (m / 10).saturating_mul(12)),
        (s, e, _) => (s.unwrap_or(0), e.unwrap_or(0)),
    };
    (start != 0).then_some((start, end))
}

/// `icmp-type` needs `proto icmp` alone, `icmp6-type` `proto icmp6`.
fn check_icmp_proto(icmp_tok: Option<&(Token, u8)>, protos: &[u8]) -> PResult<()> {
    if let Some((t, want)) = icmp_tok
        && protos != [*want]
    {
        let kw = if *want == crate::packet::proto::ICMP {
            "icmp-type requires proto icmp"
        } else {
            "icmp6-type requires proto icmp6"
        };
        return here(t, kw);
    }
    Ok(())
}

/// pf's defaults: `pass` keeps state, `block` never does; a stateful rule gets `flags S/SA`.
/// `keep state` and `allow-opts` on a `block` rule are errors.
/// What [`Parser::rule_body`] reads of a filter rule.
struct RuleBody {
    af: Option<Af>,
    protos: Vec<u8>,
    hosts: Hosts,
    opts: FilterOptions,
    keep_state: StateMode,
    flags: Option<(u8, u8)>,
}

fn state_and_flags(action: Action, opts: &FilterOptions) -> PResult<(StateMode, Option<(u8, u8)>)> {
    let keep_state = match (&opts.keep, action) {
        (Some((m, t)), Action::Block) if *m != StateMode::None => {
            let what = match m {
                StateMode::Modulate => "modulate state",
                StateMode::Synproxy => "synproxy state",
                _ => "keep state",
            };
            return here(t, format!("{what} only applies to pass rules"));
        }
        (Some((m, _)), _) => *m,
        (None, Action::Pass) => StateMode::Keep,
        (None, Action::Block) => StateMode::None,
    };
    if let Some(t) = &opts.allow_opts
        && action == Action::Block
    {
        return here(t, "allow-opts only applies to pass rules");
    }
    let flags = match opts.flags {
        Some(f) => f,
        None if keep_state != StateMode::None => Some(DEFAULT_FLAGS),
        None => None,
    };
    Ok((keep_state, flags))
}

impl Parser<'_> {
    /// At the end of the file: `synproxy state` and translation rules do not go together
    /// (the proxy's handshake packets are built with the addresses the rules saw, and
    /// would leave untranslated), so a file with both is refused at the first synproxy.
    pub(super) fn check_synproxy_without_nat(&self) -> PResult<()> {
        match (&self.synproxy_at, self.rs.nat.first()) {
            (Some(t), Some(n)) => here(
                t,
                format!(
                    "synproxy state is not supported together with nat, rdr or binat rules (line {})",
                    n.line
                ),
            ),
            _ => Ok(()),
        }
    }

    pub(super) fn rule(&mut self) -> PResult<()> {
        let (a, at) = self.word("pass or block")?;
        let action = if a == "pass" { Action::Pass } else { Action::Block };
        let block_return =
            if action == Action::Block { self.block_return()? } else { self.refuse_return()? };
        let dir = self.rule_dir()?;
        let mut log = self.log_mode()?;
        self.refuse_unsupported("")?;
        let quick = self.eat_word("quick")?;
        // pf's `logquick`: `log quick` or `quick log`.
        if quick && log == LogMode::None {
            log = self.log_mode()?;
        }
        let on = self.peek()?.clone();
        let Some((ifaces, iface_neg)) = self.filter_rule_ifaces()? else {
            // `on lo0` alone: pfSense's loopback rules. linerate never sees loopback
            // traffic, so the rule matches nothing; it is read, checked and left out.
            self.rule_body(action)?;
            self.notice(&on, "a rule on the loopback interface only: linerate never sees loopback traffic, the rule matches nothing and is left out");
            return Ok(());
        };
        // FreeBSD's place for `route-to`: after the interfaces.
        let route_first = self.route_option()?;
        let RuleBody { af, protos, hosts, mut opts, mut keep_state, flags } =
            self.rule_body(action)?;
        self.apply_state_defaults(&mut keep_state, &mut opts);
        let route = match (route_first, opts.route.take()) {
            (Some(_), Some((_, t))) => return here(&t, "a second `route-to` or `reply-to`"),
            (first, last) => first.or(last),
        };
        let translate = opts.translate.take();
        if keep_state == StateMode::Synproxy
            && let Some((_, t)) = &opts.keep
        {
            // pfctl accepts it on any rule; pf proxies TCP and keeps plain state for the rest
            // (so do the states of other protocols here, `fw::state`).
            if dir == Some(Dir::Out) {
                return here(
                    t,
                    "synproxy state only applies to in rules (it answers the SYNs that arrive)",
                );
            }
            self.synproxy_at.get_or_insert_with(|| t.clone());
        }
        let mut rule = Rule {
            action,
            block_return,
            dir,
            quick,
            ifaces,
            iface_neg,
            af,
            protos,
            src: hosts.src,
            src_ports: hosts.src_ports,
            dst: hosts.dst,
            dst_ports: hosts.dst_ports,
            icmp_types: opts.icmp_types,
            icmp_code: opts.icmp_code,
            flags,
            route_need: hosts.route_need,
            route_refuse: hosts.route_refuse,
            keep_state,
            max_states: opts.max_states,
            src_track: opts.src_track,
            state_policy: opts.state_policy,
            allow_opts: opts.allow_opts.is_some(),
            label: opts.label,
            ridentifier: opts.ridentifier,
            state_timeouts: opts.state_timeouts,
            state_adaptive: rule_adaptive(opts.adaptive, opts.max_states),
            tag: opts.tag,
            tagged: opts.tagged.as_ref().map(|&(neg, id, _)| (neg, id)),
            log,
            route: route.as_ref().map(|(r, _)| *r),
            line: at.line,
        };
        if let Some(r) = &route {
            self.check_route_option(&mut rule, r)?;
        }
        self.check_tag_order(&rule, opts.tagged.as_ref().map(|(_, _, t)| t))?;
        if let Some(tr) = translate {
            return self.pass_translation(rule, tr);
        }
        self.rs.rules.push(rule);
        Ok(())
    }

    /// `on IFACE`, `on ! IFACE`, `on { ... }`, or nothing: the interfaces and whether they are
    /// negated.
    /// `inet` or `inet6`, if next.
    /// `in`, `out` or neither.
    pub(super) fn rule_dir(&mut self) -> PResult<Option<Dir>> {
        Ok(if self.eat_word("in")? {
            Some(Dir::In)
        } else if self.eat_word("out")? {
            Some(Dir::Out)
        } else {
            None
        })
    }

    pub(super) fn rule_af(&mut self) -> PResult<Option<Af>> {
        if self.eat_word("inet")? {
            Ok(Some(Af::Inet))
        } else if self.eat_word("inet6")? {
            Ok(Some(Af::Inet6))
        } else {
            Ok(None)
        }
    }

    /// `proto P` / `proto { P ... }`, if next: sorted, without repeats (empty: any).
    pub(super) fn rule_protos(&mut self) -> PResult<Vec<u8>> {
        if !self.eat_word("proto")? {
            return Ok(Vec::new());
        }
        let mut protos = self.proto_list()?;
        protos.sort_unstable();
        protos.dedup();
        Ok(protos)
    }

    /// A filter rule after its interfaces (family, protocols, hosts, options), checked with
    /// pf's defaults applied: what a rule that is left out is parsed for, too.
    fn rule_body(&mut self, action: Action) -> PResult<RuleBody> {
        self.refuse_unsupported_filter_option()?;
        let af = self.rule_af()?;
        let protos = self.rule_protos()?;
        self.refuse_unsupported_filter_option()?;
        let hosts = self.hosts(None)?;
        let opts = self.filter_options()?;
        check_families(af, &hosts)?;
        check_ports_need_tcp_udp(hosts.port_tok.as_ref(), &protos)?;
        check_icmp_proto(opts.icmp_tok.as_ref(), &protos)?;
        let (keep_state, flags) = state_and_flags(action, &opts)?;
        Ok(RuleBody { af, protos, hosts, opts, keep_state, flags })
    }

    /// A filter rule's interfaces ([`Self::rule_ifaces`]) where the loopback names `lo`
    /// and `lo0` are taken: left out of a list; `None` when the rule is on loopback alone.
    fn filter_rule_ifaces(&mut self) -> PResult<Option<(Vec<u16>, bool)>> {
        if !self.eat_word("on")? {
            return Ok(Some((Vec::new(), false)));
        }
        let iface_neg = self.eat_punct("!")?;
        if iface_neg && self.is_punct("{")? {
            let t = self.peek()?.clone();
            return here(
                &t,
                "`on ! { ... }` is not supported by linerate (negate a single interface)",
            );
        }
        let (list, loopbacks) = self.iface_list_skipping(true)?;
        Ok(match (list.is_empty() && loopbacks > 0, iface_neg) {
            // `on ! lo0`: every interface linerate has.
            (true, true) => Some((Vec::new(), false)),
            (true, false) => None,
            (false, _) => Some((list, iface_neg)),
        })
    }

    pub(super) fn rule_ifaces(&mut self) -> PResult<(Vec<u16>, bool)> {
        if !self.eat_word("on")? {
            return Ok((Vec::new(), false));
        }
        let iface_neg = self.eat_punct("!")?;
        if iface_neg && self.is_punct("{")? {
            let t = self.peek()?.clone();
            return here(
                &t,
                "`on ! { ... }` is not supported by linerate (negate a single interface)",
            );
        }
        Ok((self.iface_list()?, iface_neg))
    }

    /// The options after the hosts, up to the end of the line. A parser's match over the
    /// keywords: each arm reads one option.
    fn filter_options(&mut self) -> PResult<FilterOptions> {
        let mut opts = FilterOptions::default();
        loop {
            let t = self.peek()?.clone();
            match &t.tok {
                // `}` ends the last rule of an inline anchor written on one line.
                Tok::Newline | Tok::Eof | Tok::Punct("}") => return Ok(opts),
                Tok::Word(w) if w == "flags" => {
                    self.next()?;
                    opts.flags = Some(self.tcp_flags()?);
                }
                Tok::Word(w) if w == "keep" => {
                    self.next()?;
                    self.expect_word("state")?;
                    let mode = self.state_options(&mut opts)?;
                    opts.keep = Some((mode, t));
                }
                Tok::Word(w) if w == "modulate" || w == "synproxy" => {
                    let (mode, sloppy_refused) = if w == "modulate" {
                        (
                            StateMode::Modulate,
                            "modulate state does not take sloppy (use keep state (sloppy))",
                        )
                    } else {
                        (
                            StateMode::Synproxy,
                            "synproxy state does not take sloppy (the proxy checks the handshake's numbers)",
                        )
                    };
                    self.next()?;
                    self.expect_word("state")?;
                    if self.state_options(&mut opts)? == StateMode::KeepSloppy {
                        return here(&t, sloppy_refused);
                    }
                    opts.keep = Some((mode, t));
                }
                Tok::Word(w) if w == "no" => {
                    self.next()?;
                    self.expect_word("state")?;
                    opts.keep = Some((StateMode::None, t));
                }
                Tok::Word(w) if w == "allow-opts" => {
                    self.next()?;
                    opts.allow_opts = Some(t);
                }
                Tok::Word(w) if w == "label" => {
                    self.next()?;
                    opts.label = Some(self.label_text()?);
                }
                Tok::Word(w) if w == "ridentifier" || w == "tracker" => {
                    self.next()?;
                    opts.ridentifier = Some(self.ridentifier()?);
                }
                Tok::Word(w) if w == "tag" => {
                    self.next()?;
                    opts.tag = Some(self.tag_name()?);
                }
                Tok::Word(w) if w == "tagged" => {
                    self.next()?;
                    opts.tagged = Some((false, self.tag_name()?, t));
                }
                Tok::Word(w) if w == "rdr-to" || w == "nat-to" => {
                    opts.translate = Some(self.translate_option(&t)?);
                }
                Tok::Word(w) if w == "af-to" => {
                    opts.translate = Some(self.af_to_option(&t)?);
                }
                Tok::Word(w) if w == "route-to" || w == "reply-to" => {
                    if opts.route.is_some() {
                        return here(&t, "a second `route-to` or `reply-to`");
                    }
                    opts.route = self.route_option()?;
                }
                Tok::Punct("!") => {
                    self.next()?;
                    let tt = self.expect_word("tagged")?;
                    opts.tagged = Some((true, self.tag_name()?, tt));
                }
                Tok::Word(w) if w == "icmp-type" || w == "icmp6-type" => {
                    let want = if w == "icmp-type" {
                        crate::packet::proto::ICMP
                    } else {
                        crate::packet::proto::ICMPV6
                    };
                    self.next()?;
                    let v6 = want == crate::packet::proto::ICMPV6;
                    if self.eat_punct("{")? {
                        opts.icmp_types = self.icmp_type_list(v6)?;
                    } else {
                        let ty = self.icmp_type(v6)?;
                        opts.icmp_types = vec![ty];
                        if self.eat_word("code")? {
                            opts.icmp_code = Some(self.icmp_code(
                                ty,
                                v6,
                                "an ICMP code (a number 0-255 or a name: needfrag, port-unr, ...)",
                            )?);
                        }
                    }
                    opts.icmp_tok = Some((t, want));
                }
                _ => {
                    self.refuse_unsupported_option("")?;
                    return self.fail(
                        "flags, keep state, modulate state, synproxy state, no state, allow-opts, label, ridentifier, tag, tagged, icmp-type, icmp6-type, route-to, reply-to, rdr-to, nat-to, af-to or end of line",
                    );
                }
            }
        }
    }

    /// After `flags`: `set/mask`, `/mask` or `any` (`None`).
    fn tcp_flags(&mut self) -> PResult<Option<(u8, u8)>> {
        if self.eat_word("any")? {
            return Ok(None);
        }
        let ft = self.peek()?.clone();
        match &ft.tok {
            Tok::Word(w) if parse_flags(w).is_some() => {
                let flags = parse_flags(w);
                self.next()?;
                Ok(flags)
            }
            _ => self.fail("TCP flags set/mask (e.g. S/SA, /SA) or \"any\""),
        }
    }

    /// After `keep state` (or `modulate state`): the optional `( sloppy, if-bound, floating,
    /// max N, max-src-conn N, ... )`. Returns the state mode; a binding, a limit and source
    /// tracking go to `opts`.
    fn state_options(&mut self, opts: &mut FilterOptions) -> PResult<StateMode> {
        let mut mode = StateMode::Keep;
        let mut src = super::src_track::SrcOptions::default();
        if self.eat_punct("(")? {
            loop {
                self.state_option(opts, &mut mode, &mut src)?;
                if self.eat_punct(")")? {
                    break;
                }
                self.expect_punct(",", "\",\" or \")\"")?;
            }
        }
        opts.src_track = Self::src_track_of(src)?;
        Ok(mode)
    }

    /// One state option, into `opts`, `mode` (`sloppy`) and `src` (source tracking).
    fn state_option(
        &mut self,
        opts: &mut FilterOptions,
        mode: &mut StateMode,
        src: &mut super::src_track::SrcOptions,
    ) -> PResult<()> {
        if self.eat_word("sloppy")? {
            *mode = StateMode::KeepSloppy;
        } else if self.eat_word("if-bound")? {
            opts.state_policy = Some(StatePolicy::IfBound);
        } else if self.eat_word("floating")? {
            opts.state_policy = Some(StatePolicy::Floating);
        } else if self.eat_word("no-sync")? {
            // pfsync's: keeps the states off the sync interface; linerate has no pfsync.
        } else if self.eat_word("max")? {
            let t = self.peek()?.clone();
            let n = self.number("a number of states", u64::from(u32::MAX))?;
            if n == 0 {
                return here(&t, "max needs at least 1 state");
            }
            opts.max_states = Some(n as u32);
        } else if self.state_timeout(opts)? {
        } else if !self.src_track_option(src)? {
            self.refuse_unsupported_option("")?;
            return self.fail("a state option (sloppy, if-bound, floating, max, max-src-conn, max-src-conn-rate, max-src-states, max-src-nodes, overload, source-track, adaptive.start, adaptive.end, no-sync, or a timeout such as tcp.established 3600)");
        }
        Ok(())
    }

    /// After `set state-defaults`: pf's state options every later rule that keeps state
    /// starts from (its own `keep state (...)` options override them). Source tracking is
    /// refused there: write it on the rules.
    pub(super) fn state_defaults(&mut self) -> PResult<()> {
        let (mut opts, mut mode) = (FilterOptions::default(), StateMode::Keep);
        loop {
            let t = self.peek()?.clone();
            let mut src = super::src_track::SrcOptions::default();
            self.state_option(&mut opts, &mut mode, &mut src)?;
            if Self::src_track_of(src)?.is_some() {
                return here(
                    &t,
                    "source tracking in `set state-defaults` is not supported by linerate (write it on the rules)",
                );
            }
            if !self.eat_punct(",")? {
                break;
            }
        }
        self.state_defaults = Some(StateDefaults {
            sloppy: mode == StateMode::KeepSloppy,
            policy: opts.state_policy,
            max: opts.max_states,
            timeouts: opts.state_timeouts,
            adaptive: opts.adaptive,
        });
        Ok(())
    }

    /// `set state-defaults` under a rule's own state options (see [`Self::state_defaults`]).
    fn apply_state_defaults(&self, keep: &mut StateMode, opts: &mut FilterOptions) {
        let Some(d) = &self.state_defaults else {
            return;
        };
        if *keep == StateMode::None {
            return;
        }
        if d.sloppy && *keep == StateMode::Keep {
            *keep = StateMode::KeepSloppy;
        }
        opts.state_policy = opts.state_policy.or(d.policy);
        opts.max_states = opts.max_states.or(d.max);
        for &(k, v) in &d.timeouts {
            if !opts.state_timeouts.iter().any(|&(o, _)| o == k) {
                opts.state_timeouts.push((k, v));
            }
        }
        opts.adaptive = (opts.adaptive.0.or(d.adaptive.0), opts.adaptive.1.or(d.adaptive.1));
    }

    /// After `ridentifier` (or `tracker`): the rule's number (pf's `u_int32_t`).
    pub(super) fn ridentifier(&mut self) -> PResult<u32> {
        Ok(self.number("a rule identifier (a number 0-4294967295)", u64::from(u32::MAX))? as u32)
    }

    /// A timeout among a rule's state options (`tcp.established 3600`): pf's per-rule
    /// timeouts, which its states use instead of the rule set's. False if the next word is
    /// no timeout name.
    fn state_timeout(&mut self, opts: &mut FilterOptions) -> PResult<bool> {
        let t = self.peek()?.clone();
        let Tok::Word(w) = &t.tok else {
            return Ok(false);
        };
        if matches!(w.as_str(), "adaptive.start" | "adaptive.end") {
            let start = w == "adaptive.start";
            self.next()?;
            let n = self.number("a number of states", u64::from(u32::MAX))? as u32;
            if start {
                opts.adaptive.0 = Some(n)
            } else {
                opts.adaptive.1 = Some(n)
            }
            return Ok(true);
        }
        if matches!(w.as_str(), "interval" | "src.track") {
            return here(&t, format!("`{w}` is not a state timeout (it belongs to `set timeout`)"));
        }
        let Some(kind) = crate::rules::Tmo::from_name(w) else {
            return Ok(false);
        };
        self.next()?;
        let secs = self.number("a number of seconds", u64::from(u32::MAX))? as u32;
        opts.state_timeouts.retain(|&(k, _)| k != kind);
        opts.state_timeouts.push((kind, secs));
        Ok(true)
    }

    /// After `proto`: one protocol or a `{ ... }` list.
    pub(super) fn proto_list(&mut self) -> PResult<Vec<u8>> {
        if !self.eat_punct("{")? {
            return Ok(vec![self.proto()?]);
        }
        let mut protos = Vec::new();
        loop {
            self.skip_newlines()?;
            if !protos.is_empty() && self.eat_punct("}")? {
                return Ok(protos);
            }
            protos.push(self.proto()?);
            self.eat_punct(",")?;
        }
    }

    pub(super) fn proto(&mut self) -> PResult<u8> {
        let t = self.peek()?.clone();
        if let Tok::Word(w) = &t.tok {
            let p = match w.as_str() {
                "tcp" => Some(6),
                "udp" => Some(17),
                "icmp" => Some(1),
                "icmp6" | "ipv6-icmp" => Some(58),
                "gre" => Some(47),
                "esp" => Some(50),
                "ah" => Some(51),
                "sctp" => Some(132),
                "igmp" => Some(2),
                "ipencap" | "ipip" => Some(4),
                "ipv6" => Some(41),
                "ospf" => Some(89),
                "pim" => Some(103),
                "carp" | "vrrp" => Some(112),
                "pfsync" => Some(240),
                w => w.parse::<u8>().ok(),
            };
            if let Some(p) = p {
                self.next()?;
                return Ok(p);
            }
        }
        self.fail(
            "a protocol (tcp, udp, icmp, icmp6, gre, esp, ah, sctp, carp, ... or a number 0-255)",
        )
    }

    pub(super) fn icmp_type(&mut self, v6: bool) -> PResult<u8> {
        let t = self.peek()?.clone();
        if let Tok::Word(w) = &t.tok {
            let named = super::icmp_names::icmp_type(w, v6);
            if let Some(n) = named.or_else(|| w.parse::<u8>().ok()) {
                self.next()?;
                return Ok(n);
            }
        }
        self.fail(
            "an ICMP type (a number 0-255 or echoreq, echorep, unreach, timex, paramprob, ...)",
        )
    }

    /// A code of ICMP (ICMPv6 with `v6`) type `ty`: a number, or one of pfctl's names for a
    /// code of that type (`needfrag`, `port-unr`, `notnbr-unr`, ...); else fails expecting
    /// `what`.
    pub(super) fn icmp_code(&mut self, ty: u8, v6: bool, what: &str) -> PResult<u8> {
        let t = self.peek()?.clone();
        if let Tok::Word(w) = &t.tok {
            if let Ok(n) = w.parse::<u8>() {
                self.next()?;
                return Ok(n);
            }
            if let Some(n) = super::icmp_names::icmp_code(ty, w, v6) {
                self.next()?;
                return Ok(n);
            }
            if super::icmp_names::is_code_name(w, v6) {
                return here(&t, format!("ICMP code `{w}` is not a code of type {ty}"));
            }
        }
        self.fail(what)
    }

    /// A `label`'s text: quoted, or one word as pfctl reads it (`label foo_bar`).
    pub(super) fn label_text(&mut self) -> PResult<String> {
        let t = self.peek()?.clone();
        let text = match &t.tok {
            Tok::Str(s) | Tok::Word(s) => s.clone(),
            _ => return self.fail("a label (a word or a quoted string)"),
        };
        self.next()?;
        Ok(text)
    }
}
