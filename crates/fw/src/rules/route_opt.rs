//! pf's `route-to` and `reply-to` on `pass` rules: policy routing (pfSense's and
//! OPNsense's gateway on a LAN rule, `reply-to` on a WAN rule of a multi-WAN router).
//!
//! pf.conf(5): the packets of a state made by a rule with `route-to` leave towards its
//! gateway rather than where the routing table sends them; with `reply-to`, the packets in
//! the other direction (the replies) do. Two spellings of the gateway are read:
//! `(IFACE ADDRESS)` (FreeBSD, pfSense, OpenBSD before 6.9: the interface is named) and
//! `ADDRESS` (OpenBSD since 6.9: the interface is the route's to the gateway). They are
//! accepted after the rule's interfaces (FreeBSD's place) and among its options (OpenBSD's).
//! On `pass out` rules `route-to` re-routes the packets the rule passes (pfSense's "let out
//! anything from firewall host itself" on a second WAN: the router's own traffic from that
//! WAN's address leaves by its gateway). Refused by name: pools of gateways, `(IFACE)`
//! alone, `dup-to`, and the options on rules whose packets linerate could not route that
//! way (`reply-to` on `out` rules, `no state`, `out` rules with if-bound states).

use super::lexer::{Tok, Token};
use super::parser::{Parser, here};
use super::*;

const NO_POOLS: &str =
    "a pool of gateways is not supported by linerate (one `(IFACE ADDRESS)` or `ADDRESS`)";
/// Why a pool type after the one gateway is refused.
const NO_POOLS_WHY: &str = "it takes one gateway, which a pool type would not change";

/// A rule's `route-to` or `reply-to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RouteOpt {
    /// `reply-to`: the replies (the packets its responder sends) are routed; `route-to`: the
    /// packets its initiator sends.
    pub reply: bool,
    /// The gateway's family and address.
    pub af: Af,
    pub gateway: u128,
    /// `(IFACE ADDRESS)`: the packets leave by this port, and are dropped (`route_to`) when
    /// the routing table reaches the gateway through another. `None`: the routing table's
    /// interface to the gateway.
    pub port: Option<u16>,
}

impl Parser<'_> {
    /// `route-to GATEWAY` or `reply-to GATEWAY` if next, with the keyword's token.
    pub(super) fn route_option(&mut self) -> PResult<Option<(RouteOpt, Token)>> {
        let t = self.peek()?.clone();
        let reply = match &t.tok {
            Tok::Word(w) if w == "route-to" => false,
            Tok::Word(w) if w == "reply-to" => true,
            _ => return Ok(None),
        };
        self.next()?;
        let at = self.peek()?.clone();
        if self.is_punct("{")? {
            return here(&at, NO_POOLS);
        }
        let named = self.eat_punct("(")?;
        let port = if named { Some(self.route_iface()?) } else { None };
        let (af, gateway) = self.gateway()?;
        if named {
            self.expect_punct(")", "\")\" closing `(IFACE ADDRESS)`")?;
        }
        // pf's pool options after the gateway: with one gateway, none changes anything.
        let pt = self.peek()?.clone();
        if let Tok::Word(w) = &pt.tok
            && matches!(
                w.as_str(),
                "round-robin"
                    | "random"
                    | "source-hash"
                    | "bitmask"
                    | "sticky-address"
                    | "least-states"
            )
        {
            return here(
                &pt,
                format!(
                    "`{w}` after `route-to`/`reply-to` is not supported by linerate ({NO_POOLS_WHY})"
                ),
            );
        }
        Ok(Some((RouteOpt { reply, af, gateway, port }, t)))
    }

    /// The interface of `(IFACE ADDRESS)`.
    fn route_iface(&mut self) -> PResult<u16> {
        let at = self.peek()?.clone();
        match self.iface_list()?.as_slice() {
            [i] => Ok(*i),
            _ => here(&at, NO_POOLS),
        }
    }

    /// One host address: the gateway.
    fn gateway(&mut self) -> PResult<(Af, u128)> {
        let at = self.peek()?.clone();
        let iface_alone = matches!(&at.tok, Tok::Word(w) if (self.ifaces)(w).is_some());
        if matches!(at.tok, Tok::Punct(")")) || iface_alone {
            return here(
                &at,
                "`(IFACE)` without a gateway is not supported by linerate (name the gateway: `(IFACE ADDRESS)`)",
            );
        }
        let (mut toks, mut items) = (Vec::new(), Vec::new());
        self.addr_item(&mut toks, false, &mut items)?;
        match items.as_slice() {
            [AddrItem { negated: false, target: AddrTarget::Prefix(p) }]
                if p.len == Prefix::bits(p.af) =>
            {
                Ok((p.af, p.addr))
            }
            _ => here(&at, "a gateway is one address"),
        }
    }

    /// Where pf's rule can carry the option, linerate can route by it: a `pass` rule that
    /// keeps state, `in` (either option) or `out` (`route-to`: pfSense's rule for the
    /// router's own traffic on a second WAN, OPNsense's forced gateway), floating, of the
    /// gateway's family, written (`inet`) or implied by the rule's addresses (pfSense writes
    /// `from 198.18.0.1 to !198.18.0.0/24`: pfctl takes the family from them, and so does
    /// the rule here).
    pub(super) fn check_route_option(
        &self,
        rule: &mut Rule,
        (opt, t): &(RouteOpt, Token),
    ) -> PResult<()> {
        let kw = if opt.reply { "reply-to" } else { "route-to" };
        if rule.action != Action::Pass {
            return here(t, format!("`{kw}` only applies to pass rules"));
        }
        match (rule.dir, opt.reply) {
            (Some(Dir::In), _) | (Some(Dir::Out), false) => {}
            (Some(Dir::Out), true) => {
                return here(
                    t,
                    "`reply-to` on an `out` rule is not supported by linerate (write it on the `pass in` rule of the interface the flows arrive on)",
                );
            }
            (None, _) => {
                return here(
                    t,
                    format!(
                        "`{kw}` on a rule for both directions is not supported by linerate (add `in` or `out`)"
                    ),
                );
            }
        }
        if rule.keep_state == StateMode::None {
            return here(
                t,
                format!(
                    "`{kw}` with `no state` is not supported by linerate (the state carries the route)"
                ),
            );
        }
        let if_bound = rule.state_policy.unwrap_or(self.rs.state_policy) == StatePolicy::IfBound;
        if rule.dir == Some(Dir::Out) && if_bound {
            return here(
                t,
                "`route-to` on an `out` rule with if-bound states is not supported by linerate (its state is made on the interface the routing table chose, and its packets leave by another: use floating states)",
            );
        }
        rule.af = rule.af.or_else(|| hosts_family(rule));
        match rule.af {
            Some(af) if af == opt.af => Ok(()),
            Some(_) => here(t, format!("`{kw}` with a gateway of the other address family")),
            None => here(
                t,
                format!(
                    "`{kw}` on a rule for both address families: add `{}`",
                    values::af_name(opt.af)
                ),
            ),
        }
    }
}

/// The family every address the rule names is of, if it names some and they agree: the
/// family pfctl gives a rule written without `inet` or `inet6`.
fn hosts_family(rule: &Rule) -> Option<Af> {
    let items = [&rule.src, &rule.dst].into_iter().flat_map(|m| match m {
        AddrMatch::Any => &[][..],
        AddrMatch::List(l) => l.as_slice(),
    });
    let mut fams = items.filter_map(|i| match &i.target {
        AddrTarget::Prefix(p) => Some(p.af),
        _ => None,
    });
    let first = fams.next()?;
    fams.all(|f| f == first).then_some(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ifaces(name: &str) -> Option<u16> {
        ["lr-lan", "lr-wan1", "lr-wan2"].iter().position(|n| *n == name).map(|i| i as u16)
    }

    fn route_of(text: &str) -> Result<Option<RouteOpt>, String> {
        parse(text, Path::new("r.conf"), &ifaces)
            .map(|rs| rs.rules[0].route)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn freebsd_and_openbsd_spellings() {
        let lan = "pass in quick on lr-lan route-to (lr-wan2 192.0.2.1) inet from 10.0.0.0/24 to any keep state\n";
        assert_eq!(
            route_of(lan),
            Ok(Some(RouteOpt { reply: false, af: Af::Inet, gateway: 0xc000_0201, port: Some(2) }))
        );
        let wan = "pass in on lr-wan2 reply-to (lr-wan2 192.0.2.1) inet proto tcp to port 22\n";
        assert_eq!(
            route_of(wan),
            Ok(Some(RouteOpt { reply: true, af: Af::Inet, gateway: 0xc000_0201, port: Some(2) }))
        );
        let openbsd =
            "gw = \"2001:db8::1\"\npass in on lr-lan inet6 from any to any route-to $gw\n";
        assert_eq!(
            route_of(openbsd),
            Ok(Some(RouteOpt {
                reply: false,
                af: Af::Inet6,
                gateway: 0x2001_0db8 << 96 | 1,
                port: None
            }))
        );
        assert_eq!(route_of("pass in on lr-lan inet keep state\n"), Ok(None));
    }

    /// pfSense's rule for the router's own traffic on a second WAN: `out`, and no `inet`
    /// (the family is its addresses').
    #[test]
    fn route_to_on_pass_out_takes_the_family_of_its_addresses() {
        let text = "pass out route-to ( lr-wan2 192.0.2.1 ) from 192.0.2.5 to !192.0.2.0/24 ridentifier 1000005715 keep state allow-opts label \"let out anything from firewall host itself\"\n";
        let rs = parse(text, Path::new("r.conf"), &ifaces).unwrap();
        let r = &rs.rules[0];
        assert_eq!((r.dir, r.af), (Some(Dir::Out), Some(Af::Inet)));
        assert_eq!(
            r.route,
            Some(RouteOpt { reply: false, af: Af::Inet, gateway: 0xc000_0201, port: Some(2) })
        );
        let any = "pass out route-to (lr-wan2 192.0.2.1) from any to any\n";
        assert!(route_of(any).unwrap_err().contains("add `inet`"));
    }

    #[test]
    fn refusals_name_the_problem() {
        let cases = [
            (
                "pass out on lr-wan1 reply-to (lr-wan2 192.0.2.1) inet\n",
                "r.conf:1:21: `reply-to` on an `out` rule is not supported by linerate",
            ),
            (
                "pass on lr-wan1 route-to (lr-wan2 192.0.2.1) inet\n",
                "r.conf:1:17: `route-to` on a rule for both directions is not supported by linerate (add `in` or `out`)",
            ),
            (
                "pass out route-to (lr-wan2 192.0.2.1) inet keep state (if-bound)\n",
                "r.conf:1:10: `route-to` on an `out` rule with if-bound states is not supported by linerate",
            ),
            (
                "set state-policy if-bound\npass out route-to (lr-wan2 192.0.2.1) inet\n",
                "r.conf:2:10: `route-to` on an `out` rule with if-bound states is not supported by linerate",
            ),
            (
                "pass out route-to (lr-wan2 192.0.2.1) inet\nset state-policy if-bound\n",
                "r.conf:2:18: if-bound states with a `route-to` on an `out` rule above are not supported by linerate",
            ),
            ("pass out route-to (lr-wan2 192.0.2.1) from 192.0.2.5 to 2001:db8::/32\n", "r.conf:1"),
            (
                "pass in on lr-lan route-to (lr-wan2 192.0.2.1) inet no state\n",
                "r.conf:1:19: `route-to` with `no state` is not supported by linerate",
            ),
            (
                "block in on lr-lan route-to (lr-wan2 192.0.2.1) inet\n",
                "r.conf:1:20: `route-to` only applies to pass rules",
            ),
            (
                "pass in on lr-lan route-to (lr-wan2 192.0.2.1)\n",
                "r.conf:1:19: `route-to` on a rule for both address families: add `inet`",
            ),
            (
                "pass in on lr-lan inet6 reply-to 192.0.2.1\n",
                "r.conf:1:25: `reply-to` with a gateway of the other address family",
            ),
            (
                "pass in on lr-lan route-to { (lr-wan1 192.0.2.1), (lr-wan2 198.51.100.1) } inet\n",
                "r.conf:1:28: a pool of gateways is not supported by linerate",
            ),
            (
                "pass in on lr-lan route-to (lr-wan2) inet\n",
                "r.conf:1:36: `(IFACE)` without a gateway is not supported by linerate",
            ),
            (
                "pass in on lr-lan route-to (lr-wan2 192.0.2.0/24) inet\n",
                "r.conf:1:37: a gateway is one address",
            ),
            (
                "pass in on lr-lan inet route-to lr-wan2\n",
                "r.conf:1:33: `(IFACE)` without a gateway is not supported by linerate",
            ),
            (
                "pass in on lr-lan dup-to (lr-wan2 192.0.2.1) inet\n",
                "`dup-to` is not supported by linerate",
            ),
        ];
        for (text, want) in cases {
            let got = route_of(text).expect_err(text);
            assert!(got.contains(want), "{text}: {got}");
        }
    }
}
