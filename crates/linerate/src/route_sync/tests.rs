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
    nh_id: Option<u32>,
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
            hops: hops
                .iter()
                .map(|(g, i)| ((!g.is_empty()).then(|| g.parse().unwrap()), *i))
                .collect(),
            nh_id: None,
        }
    }

    /// A route through nexthop object `id` (`RTA_NH_ID`), listing `hops` as well (the
    /// kernel's `nexthop_compat_mode` 1) or not.
    fn nh(dst: &str, len: u8, id: u32, hops: &[(&str, u32)]) -> Msg {
        Msg { nh_id: Some(id), ..Msg::new(dst, len, hops) }
    }

    pub(super) fn bytes(&self) -> Vec<u8> {
        let v4 = self.dst.is_ipv4();
        let mut b = vec![
            if v4 { 2 } else { 10 },
            self.len,
            0,
            0,
            self.table,
            self.proto,
            0,
            self.kind,
            0,
            0,
            0,
            0,
        ];
        let ip = |a: IpAddr| match a {
            IpAddr::V4(a) => a.octets().to_vec(),
            IpAddr::V6(a) => a.octets().to_vec(),
        };
        push_attr(&mut b, 1, &ip(self.dst));
        push_attr(&mut b, 6, &self.metric.to_ne_bytes());
        if let Some(id) = self.nh_id {
            push_attr(&mut b, 30, &id.to_ne_bytes());
        }
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

/// A nexthop message as the kernel writes it (nhmsg, then attributes): `NHA_ID`, then
/// `NHA_GATEWAY` and `NHA_OIF`, `NHA_BLACKHOLE`, or `NHA_GROUP`.
fn nexthop(new: bool, id: u32, kind: &NexthopKind) -> Vec<u8> {
    let family = match kind {
        NexthopKind::One(RouteNextHop { gateway: Some(IpAddr::V6(_)), .. }) => 10,
        NexthopKind::Group(_) => 0,
        _ => 2,
    };
    let mut b = vec![family, 0, 11, 0, 0, 0, 0, 0];
    push_attr(&mut b, 1, &id.to_ne_bytes());
    match kind {
        NexthopKind::One(h) => {
            push_attr(&mut b, 5, &h.ifindex.to_ne_bytes());
            match h.gateway {
                Some(IpAddr::V4(g)) => push_attr(&mut b, 6, &g.octets()),
                Some(IpAddr::V6(g)) => push_attr(&mut b, 6, &g.octets()),
                None => {}
            }
        }
        NexthopKind::Blackhole => push_attr(&mut b, 4, &[]),
        NexthopKind::Group(members) => {
            let mut g = Vec::new();
            for &(id, weight) in members {
                g.extend_from_slice(&id.to_ne_bytes());
                g.extend_from_slice(&[(weight - 1) as u8, 0, 0, 0]);
            }
            push_attr(&mut b, 2, &g);
        }
        NexthopKind::Unsupported(_) => push_attr(&mut b, 8, &[]),
    }
    let mut m = message(if new { nexthop::RTM_NEWNEXTHOP } else { nexthop::RTM_DELNEXTHOP }, 0, &b);
    m[6] &= !1; // NLM_F_REQUEST
    m
}

fn one(gw: &str, ifindex: u32) -> NexthopKind {
    NexthopKind::One(RouteNextHop { gateway: Some(gw.parse().unwrap()), ifindex, weight: 1 })
}

pub(super) fn sync() -> RouteSync {
    RouteSync::new(
        KernelRoutes { table: 254, protocols: vec![] },
        HashMap::from([(TAP_A, 0), (TAP_B, 1)]),
    )
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
    s.handle(
        &Msg::new(
            "10.4.0.0",
            16,
            &[("198.18.0.2", TAP_A), ("198.18.1.2", TAP_B), ("192.0.2.1", 99)],
        )
        .bytes(),
    );
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
    assert_eq!(
        gateways(&ctl, "10.6.0.1"),
        vec![(ip("198.18.1.2"), 1)],
        "the next metric takes over"
    );
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
    assert_eq!(
        gateways(&ctl, "10.12.0.1"),
        vec![(ip("198.18.0.3"), 0)],
        "applied while the dump is read"
    );
    s.apply(&mut ctl, 100);
    assert_eq!(
        gateways(&ctl, "10.11.0.1"),
        vec![(ip("198.18.0.4"), 0)],
        "kept until the dump has been read"
    );
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

/// Routes through a single object and a group: a changed object moves both, a deleted group
/// member leaves the group (no route message from the kernel), a deleted object takes its
/// routes and the group it emptied with it.
#[test]
fn routes_follow_nexthop_objects() {
    let (mut s, mut ctl) = (sync(), fib());
    let base = ctl.next_hops();
    s.handle(&nexthop(true, 10, &one("198.18.0.2", TAP_A)));
    s.handle(&nexthop(true, 11, &one("198.18.1.2", TAP_B)));
    s.handle(&nexthop(true, 20, &NexthopKind::Group(vec![(10, 1), (11, 1)])));
    s.handle(&Msg::nh("10.30.0.0", 16, 10, &[]).bytes());
    // Listing the object's next hops, as the kernel does by default.
    s.handle(
        &Msg::nh("10.31.0.0", 16, 20, &[("198.18.0.2", TAP_A), ("198.18.1.2", TAP_B)]).bytes(),
    );
    s.apply(&mut ctl, 100);
    assert_eq!(gateways(&ctl, "10.30.0.1"), vec![(ip("198.18.0.2"), 0)]);
    assert!(matches!(lookup(&ctl, "10.31.0.1"), Some(Adjacency::Multipath { paths: 2, .. })));
    assert_eq!(gateways(&ctl, "10.31.0.1"), vec![(ip("198.18.0.2"), 0), (ip("198.18.1.2"), 1)]);

    s.handle(&nexthop(true, 10, &one("198.18.0.3", TAP_A)));
    assert_eq!(s.apply(&mut ctl, 100), 2, "both routes through object 10 follow it");
    assert_eq!(gateways(&ctl, "10.30.0.1"), vec![(ip("198.18.0.3"), 0)]);
    assert_eq!(gateways(&ctl, "10.31.0.1"), vec![(ip("198.18.0.3"), 0), (ip("198.18.1.2"), 1)]);
    s.handle(&nexthop(true, 10, &one("198.18.0.3", TAP_A)));
    assert_eq!(s.apply(&mut ctl, 100), 0, "an unchanged object changes nothing");

    s.handle(&nexthop(false, 11, &one("198.18.1.2", TAP_B)));
    s.apply(&mut ctl, 100);
    assert_eq!(
        gateways(&ctl, "10.31.0.1"),
        vec![(ip("198.18.0.3"), 0)],
        "the group lost its member"
    );
    // What the kernel sends next: the group as it now is (nothing changes).
    s.handle(&nexthop(true, 20, &NexthopKind::Group(vec![(10, 1)])));
    assert_eq!(s.apply(&mut ctl, 100), 0);

    s.handle(&nexthop(false, 10, &one("198.18.0.3", TAP_A)));
    s.apply(&mut ctl, 100);
    assert_eq!((lookup(&ctl, "10.30.0.1"), lookup(&ctl, "10.31.0.1")), (None, None));
    assert_eq!(ctl.next_hops(), base, "every id freed");
    assert!(
        s.nexthops.is_empty() && s.users.is_empty() && s.routes.is_empty(),
        "group 20 went with its last member"
    );
    assert_eq!(s.stats.routes.load(Relaxed), 0);
}

#[test]
fn nexthop_blackhole_unknown_objects_and_deleted_routes() {
    let (mut s, mut ctl) = (sync(), fib());
    s.handle(&nexthop(true, 13, &NexthopKind::Blackhole));
    let mut b = Msg::nh("10.32.0.0", 16, 13, &[]);
    b.kind = route::RTN_BLACKHOLE;
    s.handle(&b.bytes());
    // Objects the mirror has not heard of: the next hops listed, else nothing.
    s.handle(&Msg::nh("10.33.0.0", 16, 99, &[("198.18.0.2", TAP_A)]).bytes());
    s.handle(&Msg::nh("10.34.0.0", 16, 98, &[]).bytes());
    // An IPv4 route through an IPv6 gateway, and an encapsulation.
    s.handle(&nexthop(true, 14, &one("2001:db8:a::2", TAP_A)));
    s.handle(&Msg::nh("10.35.0.0", 16, 14, &[]).bytes());
    s.handle(&nexthop(true, 15, &NexthopKind::Unsupported("an encapsulation (NHA_ENCAP)")));
    s.handle(&Msg::nh("10.36.0.0", 16, 15, &[]).bytes());
    s.apply(&mut ctl, 100);
    assert_eq!(lookup(&ctl, "10.32.0.1"), Some(Adjacency::Blackhole));
    assert_eq!(gateways(&ctl, "10.33.0.1"), vec![(ip("198.18.0.2"), 0)]);
    assert_eq!(
        (lookup(&ctl, "10.34.0.1"), lookup(&ctl, "10.35.0.1"), lookup(&ctl, "10.36.0.1")),
        (None, None, None)
    );
    let skipped: HashMap<_, _> = s.stats.skipped().collect();
    assert_eq!(skipped["unsupported"], 3);
    // Once described, object 99 is what counts.
    s.handle(&nexthop(true, 99, &one("198.18.1.2", TAP_B)));
    s.apply(&mut ctl, 100);
    assert_eq!(gateways(&ctl, "10.33.0.1"), vec![(ip("198.18.1.2"), 1)]);
    // A deleted route no longer uses its object.
    s.handle(&Msg::nh("10.33.0.0", 16, 99, &[("198.18.1.2", TAP_B)]).del().bytes());
    s.apply(&mut ctl, 100);
    assert_eq!(lookup(&ctl, "10.33.0.1"), None);
    assert!(!s.users.contains_key(&99));
    // An IPv6 route deleted with its object: the kernel's RTM_DELROUTE comes after.
    s.handle(&nexthop(true, 12, &one("2001:db8:a::2", TAP_A)));
    s.handle(&Msg::nh("2001:db8:300::", 48, 12, &[("2001:db8:a::2", TAP_A)]).bytes());
    s.apply(&mut ctl, 100);
    assert_eq!(lookup(&ctl, "2001:db8:300::1"), Some(Adjacency::Unresolved { port: 0 }));
    s.handle(&nexthop(false, 12, &one("2001:db8:a::2", TAP_A)));
    s.handle(&Msg::nh("2001:db8:300::", 48, 12, &[("2001:db8:a::2", TAP_A)]).del().bytes());
    s.apply(&mut ctl, 100);
    assert_eq!(lookup(&ctl, "2001:db8:300::1"), None);
}

#[test]
fn a_new_dump_removes_vanished_nexthop_objects() {
    let (mut s, mut ctl) = (sync(), fib());
    s.handle(&nexthop(true, 10, &one("198.18.0.2", TAP_A)));
    s.handle(&nexthop(true, 11, &one("198.18.1.2", TAP_B)));
    s.handle(&Msg::nh("10.40.0.0", 16, 10, &[]).bytes());
    s.handle(&Msg::nh("10.41.0.0", 16, 11, &[]).bytes());
    s.apply(&mut ctl, 100);
    // Messages lost; the new dump has object 11 changed and no object 10 nor its route.
    s.start_dump(Instant::now());
    s.handle(&nexthop(true, 11, &one("198.18.1.3", TAP_B)));
    s.apply(&mut ctl, 100);
    assert_eq!(
        gateways(&ctl, "10.40.0.1"),
        vec![(ip("198.18.0.2"), 0)],
        "kept until the dump has been read"
    );
    assert_eq!(
        gateways(&ctl, "10.41.0.1"),
        vec![(ip("198.18.1.3"), 1)],
        "not yet in the dump: follows its object"
    );
    s.handle(&Msg::nh("10.41.0.0", 16, 11, &[]).bytes());
    s.finish_dump();
    s.apply(&mut ctl, 100);
    assert_eq!(lookup(&ctl, "10.40.0.1"), None);
    assert_eq!(gateways(&ctl, "10.41.0.1"), vec![(ip("198.18.1.3"), 1)]);
    assert_eq!(s.nexthops.keys().copied().collect::<Vec<_>>(), vec![11]);
    assert_eq!(s.users.keys().copied().collect::<Vec<_>>(), vec![11]);
}

/// The applier's CPU per route loaded and withdrawn, twice (not a test: `cargo test
/// --release -p linerate withdrawal_cost -- --ignored --nocapture`; under callgrind,
/// `--toggle-collect=*withdraw*` counts the changes alone, without making the messages). `LR_WITHDRAW_V4` routes (default 200,000) and a fifth as
/// many IPv6 ones, as `scripts/route-churn.sh` makes them.
#[test]
#[ignore]
fn withdrawal_cost() {
    let v4: u32 = std::env::var("LR_WITHDRAW_V4").map_or(200_000, |v| v.parse().unwrap());
    let v6 = v4 / 5;
    let mut add = Vec::new();
    let mut del = Vec::new();
    for i in 0..v4 {
        let a = std::net::Ipv4Addr::from(0x2000_0000 + (i << 8)).to_string();
        let m = Msg::new(&a, 24, &[("198.18.0.2", TAP_A)]);
        add.push(m.bytes());
        del.push(m.del().bytes());
    }
    for i in 0..v6 {
        let a =
            std::net::Ipv6Addr::new(0x2a00, (i >> 16) as u16, i as u16, 0, 0, 0, 0, 0).to_string();
        let m = Msg::new(&a, 48, &[("fe80::1", TAP_A)]);
        add.push(m.bytes());
        del.push(m.del().bytes());
    }
    let (mut s, mut ctl) = (sync(), fib());
    let n = f64::from(v4 + v6);
    let per = |d: std::time::Duration| d.as_nanos() as f64 / n;
    for round in 0..2 {
        let (taken, applied) = withdraw(&mut s, &mut ctl, &add);
        eprintln!(
            "load {round} of {n} routes: take {:.0} ns/route, apply {:.0} ns/route",
            per(taken),
            per(applied)
        );
        let (taken, applied) = withdraw(&mut s, &mut ctl, &del);
        eprintln!(
            "withdrawal {round} of {n} routes: take {:.0} ns/route, apply {:.0} ns/route",
            per(taken),
            per(applied)
        );
    }
    assert_eq!(ctl.kernel_counts(), (0, 0));
}

#[inline(never)]
fn withdraw(
    s: &mut RouteSync,
    ctl: &mut FibControl,
    del: &[Vec<u8>],
) -> (std::time::Duration, std::time::Duration) {
    let t = Instant::now();
    for m in del {
        s.handle(m);
    }
    let taken = t.elapsed();
    while s.apply(ctl, SLICE) > 0 {}
    (taken, t.elapsed() - taken)
}
