use super::*;
use dataplane::adjacency::Adjacency;
use io::netlink::{message, push_attr};

pub(super) const TAP_A: u32 = 7;
const TAP_B: u32 = 9;

/// A route message as the kernel writes it (rtmsg, then attributes).
pub(super) struct Msg {
    new: bool,
    flags: u16,
    dst: IpAddr,
    len: u8,
    table: u8,
    proto: u8,
    kind: u8,
    metric: u32,
    hops: Vec<(Option<IpAddr>, u32)>,
}

impl Msg {
    pub(super) fn new(dst: &str, len: u8, hops: &[(&str, u32)]) -> Msg {
        Msg {
            new: true,
            flags: 0,
            dst: dst.parse().unwrap(),
            len,
            table: 254,
            proto: 12,
            kind: route::RTN_UNICAST,
            metric: 32,
            hops: hops.iter().map(|(g, i)| ((!g.is_empty()).then(|| g.parse().unwrap()), *i)).collect(),
        }
    }

    pub(super) fn bytes(&self) -> Vec<u8> {
        let v4 = self.dst.is_ipv4();
        let mut b = vec![if v4 { 2 } else { 10 }, self.len, 0, 0, self.table, self.proto, 0, self.kind, 0, 0, 0, 0];
        let ip = |a: IpAddr| match a {
            IpAddr::V4(a) => a.octets().to_vec(),
            IpAddr::V6(a) => a.octets().to_vec(),
        };
        push_attr(&mut b, 1, &ip(self.dst));
        push_attr(&mut b, 6, &self.metric.to_ne_bytes());
        match &self.hops[..] {
            [] => {}
            [(gw, ifindex)] => {
                if let Some(gw) = gw {
                    push_attr(&mut b, 5, &ip(*gw));
                }
                push_attr(&mut b, 4, &ifindex.to_ne_bytes());
            }
            hops => {
                let mut mp = Vec::new();
                for (gw, ifindex) in hops {
                    let mut attrs = Vec::new();
                    if let Some(gw) = gw {
                        push_attr(&mut attrs, 5, &ip(*gw));
                    }
                    mp.extend_from_slice(&((8 + attrs.len()) as u16).to_ne_bytes());
                    mp.extend_from_slice(&[0, 0]);
                    mp.extend_from_slice(&ifindex.to_ne_bytes());
                    mp.extend_from_slice(&attrs);
                }
                push_attr(&mut b, 9, &mp);
            }
        }
        let ty = if self.new { route::RTM_NEWROUTE } else { route::RTM_DELROUTE };
        let mut m = message(ty, self.flags, &b);
        // The kernel's notifications carry no NLM_F_REQUEST.
        m[6] &= !1; // NLM_F_REQUEST
        m
    }

    pub(super) fn del(mut self) -> Msg {
        self.new = false;
        self
    }
}

pub(super) fn sync() -> RouteSync {
    RouteSync::new(KernelRoutes { table: 254, protocols: vec![] }, HashMap::from([(TAP_A, 0), (TAP_B, 1)]))
}

pub(super) fn fib() -> FibControl {
    FibControl::new(1024)
}

pub(super) fn lookup(ctl: &FibControl, a: &str) -> Option<Adjacency> {
    let fib = ctl.fib();
    let id = match a.parse::<IpAddr>().unwrap() {
        IpAddr::V4(a) => fib.v4.lookup(u32::from(a)),
        IpAddr::V6(a) => fib.v6.lookup(u128::from(a)),
    }?;
    Some(fib.adj.get(id))
}

pub(super) fn gateways(ctl: &FibControl, a: &str) -> Vec<(IpAddr, u16)> {
    let fib = ctl.fib();
    let IpAddr::V4(addr) = a.parse::<IpAddr>().unwrap() else { panic!() };
    let Some(id) = fib.v4.lookup(u32::from(addr)) else { return vec![] };
    let mut g = match ctl.gateway_of(id) {
        Some(gw) => vec![(gw, ctl.routes().find(|r| matches!(r.2, dataplane::fib::RouteKind::Via { gateway, .. } if gateway == gw)).map_or(0, |r| match r.2 {
            dataplane::fib::RouteKind::Via { port, .. } => port,
            _ => 0,
        }))],
        None => ctl.group_members(id),
    };
    g.sort();
    g
}

pub(super) fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn routes_on_taps_are_mirrored_and_withdrawn() {
    let (mut s, mut ctl) = (sync(), fib());
    s.handle(&Msg::new("10.1.0.0", 16, &[("198.18.0.2", TAP_A)]).bytes());
    assert_eq!(s.apply(&mut ctl, 100), 1);
    assert_eq!(lookup(&ctl, "10.1.2.3"), Some(Adjacency::Unresolved { port: 0 }));
    assert_eq!(gateways(&ctl, "10.1.2.3"), vec![(ip("198.18.0.2"), 0)]);
    s.handle(&Msg::new("10.1.0.0", 16, &[("198.18.0.2", TAP_A)]).del().bytes());
    s.apply(&mut ctl, 100);
    assert_eq!(lookup(&ctl, "10.1.2.3"), None);
    assert_eq!(ctl.next_hops(), 3, "the gateway's id is freed");
}

#[test]
fn changes_are_coalesced_per_prefix() {
    let (mut s, mut ctl) = (sync(), fib());
    for i in 0..10 {
        s.handle(&Msg::new("10.2.0.0", 24, &[(&format!("198.18.0.{}", 10 + i), TAP_A)]).bytes());
    }
    s.handle(&Msg::new("10.3.0.0", 24, &[("198.18.0.2", TAP_A)]).bytes());
    s.handle(&Msg::new("10.3.0.0", 24, &[("198.18.0.2", TAP_A)]).del().bytes());
    assert_eq!(s.apply(&mut ctl, 100), 2, "two prefixes, eleven changes");
    assert_eq!(gateways(&ctl, "10.2.0.1"), vec![(ip("198.18.0.19"), 0)]);
    assert_eq!(lookup(&ctl, "10.3.0.1"), None);
    assert_eq!(ctl.next_hops(), 4, "only the last gateway holds an id");
}

#[test]
fn multipath_over_two_taps_and_unknown_interfaces() {
    let (mut s, mut ctl) = (sync(), fib());
    s.handle(&Msg::new("10.4.0.0", 16, &[("198.18.0.2", TAP_A), ("198.18.1.2", TAP_B), ("192.0.2.1", 99)]).bytes());
    s.handle(&Msg::new("10.5.0.0", 16, &[("192.0.2.1", 99)]).bytes());
    s.apply(&mut ctl, 100);
    assert!(matches!(lookup(&ctl, "10.4.0.1"), Some(Adjacency::Multipath { paths: 2, .. })));
    assert_eq!(gateways(&ctl, "10.4.0.1"), vec![(ip("198.18.0.2"), 0), (ip("198.18.1.2"), 1)]);
    assert_eq!(lookup(&ctl, "10.5.0.1"), None);
    let skipped: HashMap<_, _> = s.stats.skipped().collect();
    assert_eq!(skipped["unknown_interface"], 2);
}

#[test]
fn lowest_metric_wins_and_other_tables_and_protocols_are_ignored() {
    let (mut s, mut ctl) = (sync(), fib());
    let mut far = Msg::new("10.6.0.0", 16, &[("198.18.1.2", TAP_B)]);
    far.metric = 100;
    s.handle(&far.bytes());
    s.handle(&Msg::new("10.6.0.0", 16, &[("198.18.0.2", TAP_A)]).bytes());
    let mut other = Msg::new("10.7.0.0", 16, &[("198.18.0.2", TAP_A)]);
    other.table = 100;
    s.handle(&other.bytes());
    let mut connected = Msg::new("198.18.0.0", 24, &[("", TAP_A)]);
    connected.proto = 2;
    s.handle(&connected.bytes());
    s.apply(&mut ctl, 100);
    assert_eq!(gateways(&ctl, "10.6.0.1"), vec![(ip("198.18.0.2"), 0)]);
    assert_eq!((lookup(&ctl, "10.7.0.1"), lookup(&ctl, "198.18.0.9")), (None, None));
    s.handle(&Msg::new("10.6.0.0", 16, &[("198.18.0.2", TAP_A)]).del().bytes());
    s.apply(&mut ctl, 100);
    assert_eq!(gateways(&ctl, "10.6.0.1"), vec![(ip("198.18.1.2"), 1)], "the next metric takes over");
}

#[test]
fn ipv6_appends_and_deletes_one_next_hop_at_a_time() {
    let (mut s, mut ctl) = (sync(), fib());
    s.handle(&Msg::new("2001:db8:100::", 48, &[("fe80::1", TAP_A)]).bytes());
    let mut append = Msg::new("2001:db8:100::", 48, &[("fe80::2", TAP_B)]);
    append.flags = NLM_F_APPEND;
    s.handle(&append.bytes());
    s.apply(&mut ctl, 100);
    assert!(matches!(lookup(&ctl, "2001:db8:100::1"), Some(Adjacency::Multipath { paths: 2, .. })));
    s.handle(&Msg::new("2001:db8:100::", 48, &[("fe80::1", TAP_A)]).del().bytes());
    s.apply(&mut ctl, 100);
    assert_eq!(lookup(&ctl, "2001:db8:100::1"), Some(Adjacency::Unresolved { port: 1 }));
    s.handle(&Msg::new("2001:db8:100::", 48, &[("fe80::2", TAP_B)]).del().bytes());
    s.apply(&mut ctl, 100);
    assert_eq!(lookup(&ctl, "2001:db8:100::1"), None);
}

#[test]
fn blackhole_unreachable_and_other_types() {
    let (mut s, mut ctl) = (sync(), fib());
    let mut b = Msg::new("10.8.0.0", 16, &[]);
    b.kind = route::RTN_BLACKHOLE;
    let mut u = Msg::new("10.9.0.0", 16, &[]);
    u.kind = route::RTN_PROHIBIT;
    let mut l = Msg::new("10.10.0.0", 16, &[]);
    l.kind = 3; // RTN_BROADCAST
    for m in [b, u, l] {
        s.handle(&m.bytes());
    }
    s.apply(&mut ctl, 100);
    assert_eq!(lookup(&ctl, "10.8.0.1"), Some(Adjacency::Blackhole));
    assert_eq!(lookup(&ctl, "10.9.0.1"), Some(Adjacency::Unreachable));
    assert_eq!(lookup(&ctl, "10.10.0.1"), None);
    assert_eq!(s.stats.skipped().find(|s| s.0 == "route_type").unwrap().1, 1);
}

#[test]
fn a_new_dump_removes_what_vanished() {
    let (mut s, mut ctl) = (sync(), fib());
    for p in ["10.11.0.0", "10.12.0.0", "10.13.0.0"] {
        s.handle(&Msg::new(p, 16, &[("198.18.0.2", TAP_A)]).bytes());
    }
    s.apply(&mut ctl, 100);
    // A change read but not applied yet when messages are lost.
    s.handle(&Msg::new("10.11.0.0", 16, &[("198.18.0.4", TAP_A)]).bytes());
    // The new dump names only two of the three prefixes.
    s.start_dump(Instant::now());
    s.handle(&Msg::new("10.12.0.0", 16, &[("198.18.0.3", TAP_A)]).bytes());
    assert_eq!(s.apply(&mut ctl, 1), 1, "applied in slices");
    assert_eq!(gateways(&ctl, "10.12.0.1"), vec![(ip("198.18.0.3"), 0)], "applied while the dump is read");
    s.apply(&mut ctl, 100);
    assert_eq!(gateways(&ctl, "10.11.0.1"), vec![(ip("198.18.0.4"), 0)], "kept until the dump has been read");
    assert_eq!(s.dump_report(), None, "the dump is still being read");
    s.handle(&Msg::new("10.13.0.0", 16, &[("198.18.0.2", TAP_A)]).bytes());
    s.finish_dump();
    assert_eq!(s.dump_report(), None, "the vanished prefix is not applied yet");
    s.apply(&mut ctl, 100);
    assert_eq!(lookup(&ctl, "10.11.0.1"), None);
    assert_eq!(gateways(&ctl, "10.12.0.1"), vec![(ip("198.18.0.3"), 0)]);
    assert_eq!(gateways(&ctl, "10.13.0.1"), vec![(ip("198.18.0.2"), 0)]);
    assert_eq!(ctl.kernel_counts(), (2, 2));
    assert!(s.dump_report().unwrap().contains("2 routes in the FIB"));
    assert_eq!(s.stats.pending(), 0);
}
