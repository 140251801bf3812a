//! pf's inbound and outbound passes over forwarded packets: the compiled classifier, the
//! state table and `fw::passes`, driven as the data plane drives them (one lookup, settled
//! hits skip the passes), against `fw::reference::Pf` (linear rules, linear list of pf
//! states) on random rule sets and random traffic between hosts on three interfaces.
//!
//! `FW_STATE_SEED=<u64>` replays a failing seed.

mod common;

use std::path::Path;

use common::{Rng, seed};
use fw::classifier::{BuildOptions, Classifier, Engine, VerdictCache};
use fw::packet::{Af, Dir, PacketKey, proto};
use fw::passes::{Drop, Hit, Passes};
use fw::reference::Pf;
use fw::rules::RuleSet;
use fw::state::{
    Flow, IcmpErrorMatch, StateLookup, StateTable, StateVerdict, Timeouts, is_icmp_error,
};

const IFACES: [&str; 3] = ["a", "b", "c"];
/// Hosts 10.0.I.H sit behind interface I.
const HOSTS: [u32; 6] =
    [0x0a00_0001, 0x0a00_0002, 0x0a00_0101, 0x0a00_0102, 0x0a00_0201, 0x0a00_0202];

fn iface_of(addr: u128) -> u16 {
    ((addr >> 8) & 0xff) as u16
}

fn pick<'a, T>(rng: &mut Rng, v: &'a [T]) -> &'a T {
    &v[rng.below(v.len() as u64) as usize]
}

fn host_text(h: u32) -> String {
    std::net::Ipv4Addr::from(h).to_string()
}

/// One random rule: direction, quick, interface, protocol, hosts, state and options.
fn rand_rule(rng: &mut Rng) -> String {
    let mut r = String::from(if rng.below(3) == 0 { "block" } else { "pass" });
    r += *pick(rng, &["", " in", " out", " in", " out"]);
    if rng.below(4) == 0 {
        r += " quick";
    }
    match rng.below(6) {
        0..=2 => r += &format!(" on {}", pick(rng, &IFACES)),
        3 => r += &format!(" on {{ {}, {} }}", pick(rng, &IFACES), pick(rng, &IFACES)),
        _ => {}
    }
    let p = *pick(rng, &["", "", " proto udp", " proto icmp", " proto 47"]);
    r += p;
    for kw in ["from", "to"] {
        match rng.below(6) {
            0 | 1 => r += &format!(" {kw} {}", host_text(*pick(rng, &HOSTS))),
            2 => r += &format!(" {kw} {} - {}", host_text(HOSTS[1]), host_text(HOSTS[3])),
            _ => {}
        }
    }
    if p == " proto icmp" && rng.below(3) == 0 {
        r += *pick(
            rng,
            &[
                " icmp-type echoreq",
                " icmp-type echorep",
                " icmp-type unreach",
                " icmp-type { echorep, unreach }",
            ],
        );
    }
    if r.starts_with("pass") {
        r += *pick(
            rng,
            &[
                "",
                "",
                " no state",
                " keep state",
                " keep state (if-bound)",
                " keep state (floating)",
            ],
        );
        if rng.below(3) == 0 {
            r += " allow-opts";
        }
    }
    // pf's tags: set inbound, tested outbound (a tag set and tested in one pass is refused).
    if r.contains(" in") && rng.below(3) == 0 {
        r += *pick(rng, &[" tag T0", " tag T1"]);
    } else if r.contains(" out") && rng.below(3) == 0 {
        r += *pick(rng, &[" tagged T0", " tagged T1", " ! tagged T0"]);
    }
    r
}

fn rand_rules(rng: &mut Rng) -> String {
    let mut t = String::new();
    if rng.below(3) == 0 {
        t += "set state-policy if-bound\n";
    }
    if rng.below(6) == 0 {
        t += &format!("set skip on {}\n", pick(rng, &IFACES));
    }
    if rng.below(2) == 0 {
        t += "block all\n";
    }
    for _ in 0..1 + rng.below(6) {
        t += &rand_rule(rng);
        t.push('\n');
    }
    t
}

/// A packet between two hosts: UDP on a few ports, ICMP echo requests and replies with a few
/// identifiers, ICMP errors quoting a UDP packet sent the other way, GRE; sometimes with IP
/// options. The error's quoted packet comes second.
fn rand_packet(rng: &mut Rng) -> (PacketKey, Option<PacketKey>) {
    let (src, dst) = (u128::from(*pick(rng, &HOSTS)), u128::from(*pick(rng, &HOSTS)));
    let base = PacketKey {
        src,
        dst,
        iface: iface_of(src),
        len: 60,
        ip_opts: rng.below(10) == 0,
        ..PacketKey::ZERO
    };
    match rng.below(5) {
        0 | 1 => (
            PacketKey {
                proto: proto::UDP,
                src_port: *pick(rng, &[53, 1000, 1001]),
                dst_port: *pick(rng, &[53, 1000]),
                ..base
            },
            None,
        ),
        2 => {
            let t = *pick(rng, &[8u16, 0]);
            (
                PacketKey {
                    proto: proto::ICMP,
                    src_port: t,
                    icmp_id: *pick(rng, &[1, 2, 8]),
                    ..base
                },
                None,
            )
        }
        3 => {
            let q = PacketKey {
                proto: proto::UDP,
                src: dst,
                dst: src,
                src_port: *pick(rng, &[53, 1000, 1001]),
                dst_port: *pick(rng, &[53, 1000]),
                ..PacketKey::ZERO
            };
            (PacketKey { proto: proto::ICMP, src_port: 3, dst_port: 3, ..base }, Some(q))
        }
        _ => (PacketKey { proto: 47, ..base }, None),
    }
}

/// The implementation under test, as the data plane uses it.
struct Impl {
    rules: RuleSet,
    classifier: Classifier,
    /// In front of the classifier where it is the tree (a small one: entries get evicted).
    cache: VerdictCache,
    states: StateTable,
    has_out: bool,
}

impl Impl {
    fn new(rules: RuleSet) -> Impl {
        Impl::with_engine(rules, Engine::Auto)
    }

    fn with_engine(rules: RuleSet, engine: Engine) -> Impl {
        let classifier =
            Classifier::build_with(&rules, &BuildOptions { engine, ..BuildOptions::default() })
                .unwrap();
        let mut states = StateTable::new(4096, Timeouts::default(), 5);
        states.set_passes(rules.acts_on(Dir::In), rules.acts_on(Dir::Out));
        let has_out = rules.acts_on(Dir::Out);
        Impl { rules, classifier, cache: VerdictCache::new(16, 3), states, has_out }
    }

    fn forward(
        &mut self,
        key: &PacketKey,
        quoted: Option<&PacketKey>,
        out: u16,
    ) -> Result<(), Drop> {
        let hit = match quoted.filter(|_| is_icmp_error(key.proto, key.src_port)) {
            Some(q) => match self.states.match_icmp_error(q, None, 1) {
                IcmpErrorMatch::Pass(id) => Some(Hit { id, from_a: !Flow::of(q).from_a() }),
                _ => None,
            },
            None => match self.states.lookup(key, None, 1) {
                StateLookup::Hit { id, verdict: StateVerdict::Pass, .. } => Some(Hit::of(id, key)),
                StateLookup::Hit { .. } => unreachable!("no TCP here"),
                StateLookup::Miss => None,
            },
        };
        if hit.is_some_and(|h| self.states.settled(h.id, h.from_a)) && !key.ip_opts {
            return Ok(());
        }
        let mut p = Passes {
            rules: &self.rules,
            classifier: &self.classifier,
            cache: Some(&mut self.cache),
            states: &mut self.states,
            now: 1,
            limits: None,
        };
        let ticket = p.inbound(key, None, hit).0?;
        if ticket.out_settled || (!self.has_out && !key.ip_opts) {
            return Ok(());
        }
        p.outbound(key, out, None, ticket).0
    }
}

fn check(seed: u64) {
    let mut rng = Rng(seed | 1);
    let text = rand_rules(&mut rng);
    let ifaces = |n: &str| IFACES.iter().position(|i| *i == n).map(|i| i as u16);
    let rules = fw::rules::parse(&text, Path::new("r.conf"), &ifaces)
        .unwrap_or_else(|e| panic!("{e}\n{text}"));
    let mut model = Pf::new();
    // Every other seed with the tree engine, so that its verdicts go through the cache.
    let engine = if seed.is_multiple_of(2) { Engine::Auto } else { Engine::Tree };
    let mut imp = Impl::with_engine(rules.clone(), engine);
    for n in 0..300 {
        let (key, quoted) = rand_packet(&mut rng);
        let out = iface_of(key.dst);
        let want = model.forward(&rules, &key, quoted.as_ref(), out);
        let got = imp.forward(&key, quoted.as_ref(), out);
        assert_eq!(
            got, want,
            "seed {seed}, packet {n}: {key:?} quoting {quoted:?} out {out}\n{text}"
        );
    }
}

#[test]
fn passes_match_the_reference() {
    let base = seed(0x9a55);
    for i in 0..2000 {
        check(base.wrapping_add(i));
    }
}

/// A forwarded flow gets pf's two states, and the out rules of the output interface apply to
/// new flows whose inbound pass created a state (the case issue 17 names).
#[test]
fn out_rules_apply_to_flows_passed_in() {
    let text =
        "block all\npass in on a\npass out on b\nblock out quick on b proto udp to port 8099\n";
    let ifaces = |n: &str| IFACES.iter().position(|i| *i == n).map(|i| i as u16);
    let rules = fw::rules::parse(text, Path::new("r.conf"), &ifaces).unwrap();
    let mut imp = Impl::new(rules.clone());
    let mut model = Pf::new();
    let udp = |dport| PacketKey {
        af: Af::Inet,
        proto: proto::UDP,
        src: HOSTS[0].into(),
        dst: HOSTS[2].into(),
        src_port: 1000,
        dst_port: dport,
        ..PacketKey::ZERO
    };
    for _ in 0..2 {
        assert_eq!(imp.forward(&udp(8099), None, 1), Err(Drop::Blocked));
        assert_eq!(model.forward(&rules, &udp(8099), None, 1), Err(Drop::Blocked));
        assert_eq!(imp.forward(&udp(53), None, 1), Ok(()));
    }
    let reply = PacketKey {
        src: HOSTS[2].into(),
        dst: HOSTS[0].into(),
        src_port: 53,
        dst_port: 1000,
        iface: 1,
        ..udp(0)
    };
    assert_eq!(imp.forward(&reply, None, 0), Ok(()));
    assert_eq!(model.forward(&rules, &udp(53), None, 1), Ok(()));
    assert_eq!(model.len(), 3, "in and out states of the port-53 flow, the in state of port 8099");
}

/// pf's tags across the passes and through states: the in pass tags LAN traffic (its state
/// remembers the tag), and the out rules, stateless so that they judge every packet, let
/// only tagged packets out, also those the in state passes without rules.
#[test]
fn tags_travel_from_the_in_pass_and_with_states() {
    let text = "pass in on a tag LAN keep state\npass in on c no state\nblock out on b\npass out on b tagged LAN no state\n";
    let ifaces = |n: &str| IFACES.iter().position(|i| *i == n).map(|i| i as u16);
    let rules = fw::rules::parse(text, Path::new("r.conf"), &ifaces).unwrap();
    let mut imp = Impl::new(rules.clone());
    let mut model = Pf::new();
    let udp = |src: u32| PacketKey {
        af: Af::Inet,
        proto: proto::UDP,
        src: src.into(),
        dst: HOSTS[2].into(),
        src_port: 1000,
        dst_port: 53,
        iface: iface_of(src.into()),
        ..PacketKey::ZERO
    };
    for n in 0..3 {
        assert_eq!(
            imp.forward(&udp(HOSTS[0]), None, 1),
            Ok(()),
            "packet {n} from a: tagged LAN (by the state after the first)"
        );
        assert_eq!(model.forward(&rules, &udp(HOSTS[0]), None, 1), Ok(()));
        assert_eq!(
            imp.forward(&udp(HOSTS[4]), None, 1),
            Err(Drop::Blocked),
            "packet {n} from c: untagged"
        );
        assert_eq!(model.forward(&rules, &udp(HOSTS[4]), None, 1), Err(Drop::Blocked));
    }
    assert_eq!(model.len(), 1, "the in state of the flow from a only");
}
