use super::*;
use std::net::Ipv4Addr;

#[test]
fn neighbour_resolves_existing_gateway_in_place() {
    let mut ctl = FibControl::new(16);
    let gw = IpAddr::V4(Ipv4Addr::new(198, 19, 0, 2));
    let id = ctl.add_route(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 0)), 8, gw, 1).unwrap();
    let fib = ctl.fib();
    assert_eq!(fib.v4.lookup(0x0a01_0203), Some(id));
    assert_eq!(fib.adj.get(id), Adjacency::Unresolved { port: 1 });
    let mac = MacAddr([2, 0, 0, 0, 0, 9]);
    ctl.set_neighbour(gw, 1, mac).unwrap();
    assert_eq!(fib.adj.get(id), Adjacency::Forward { port: 1, mac });
    assert_eq!(fib.v4.lookup(u32::from(Ipv4Addr::new(198, 19, 0, 2))), Some(id));
}

#[test]
fn local_and_connected() {
    let mut ctl = FibControl::new(16);
    let me = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1));
    ctl.add_connected(IpAddr::V4(Ipv4Addr::new(198, 18, 0, 0)), 24, 0).unwrap();
    ctl.add_local(me).unwrap();
    let fib = ctl.fib();
    assert_eq!(fib.v4.lookup(u32::from(Ipv4Addr::new(198, 18, 0, 1))), Some(LOCAL_ID));
    let other = fib.v4.lookup(u32::from(Ipv4Addr::new(198, 18, 0, 7))).unwrap();
    assert_eq!(fib.adj.get(other), Adjacency::Unresolved { port: 0 });
}

#[test]
fn neighbours_free_their_host_route_and_id_configured_gateways_keep_theirs() {
    let mut ctl = FibControl::new(8);
    let fib = ctl.fib();
    let gw = IpAddr::V4(Ipv4Addr::new(198, 19, 0, 2));
    let gw_id = ctl.add_route(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 0)), 8, gw, 1).unwrap();
    let mac = MacAddr([2, 0, 0, 0, 0, 9]);
    let base = ctl.next_hops();
    for i in 0..100u32 {
        // Far more neighbours than ids, one at a time: ids come back.
        let a = IpAddr::V4(Ipv4Addr::from(0xc612_0000 + i));
        ctl.set_neighbour(a, 0, mac).unwrap();
        assert_eq!(ctl.next_hops(), base + 1);
        ctl.unset_neighbour(a);
        assert_eq!(fib.v4.lookup(0xc612_0000 + i), None, "host route withdrawn");
    }
    assert_eq!(ctl.next_hops(), base);
    ctl.set_neighbour(gw, 1, mac).unwrap();
    assert_eq!(fib.adj.get(gw_id), Adjacency::Forward { port: 1, mac });
    ctl.unset_neighbour(gw);
    assert_eq!(fib.adj.get(gw_id), Adjacency::Unresolved { port: 1 });
    assert_eq!(fib.v4.lookup(0x0a01_0101), Some(gw_id), "the configured route stays");
    assert_eq!(ctl.gateway_of(gw_id), Some(gw));
    assert_eq!((ctl.next_hops(), ctl.routes().count()), (base, 1));
}

#[test]
fn freed_ids_wait_for_the_readers() {
    let mut ctl = FibControl::new(5);
    let fib = ctl.fib();
    let reader = fib.v4.reader();
    let mac = MacAddr([2, 0, 0, 0, 0, 9]);
    let (a, b) = (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)));
    ctl.set_neighbour(a, 0, mac).unwrap();
    let id_a = fib.v4.lookup(0x0a00_0001).unwrap();
    ctl.unset_neighbour(a);
    // The reader may still hold id_a: b gets a fresh id, and then there are none left.
    ctl.set_neighbour(b, 0, mac).unwrap();
    assert_ne!(fib.v4.lookup(0x0a00_0002), Some(id_a));
    assert!(matches!(ctl.set_neighbour(a, 0, mac), Err(FibError::NextHopsExhausted(5))));
    assert_eq!(ctl.neighbour(a), None, "nothing of a failed install is left");
    reader.quiescent();
    ctl.set_neighbour(a, 0, mac).unwrap();
    assert_eq!(fib.v4.lookup(0x0a00_0001), Some(id_a));
}

#[test]
fn exhausting_next_hops_is_an_error() {
    let mut ctl = FibControl::new(4);
    let p = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 0));
    ctl.add_route(p, 8, IpAddr::V4(Ipv4Addr::new(1, 1, 1, 1)), 0).unwrap();
    let err = ctl.add_route(p, 8, IpAddr::V4(Ipv4Addr::new(1, 1, 1, 2)), 0).unwrap_err();
    assert!(matches!(err, FibError::NextHopsExhausted(4)));
}

fn v4(a: [u8; 4]) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(a))
}

#[test]
fn multipath_groups_are_shared_and_freed_with_their_last_route() {
    let mut ctl = FibControl::new(64);
    let fib = ctl.fib();
    let (a, b) = (v4([198, 19, 0, 2]), v4([198, 19, 1, 2]));
    let two = Target::Via(vec![(a, 1), (b, 2)]);
    let base = ctl.next_hops();
    ctl.set_kernel(v4([10, 0, 0, 0]), 8, &two).unwrap();
    // Same set in another order: the same group.
    ctl.set_kernel(v4([11, 0, 0, 0]), 8, &Target::Via(vec![(b, 2), (a, 1)])).unwrap();
    assert_eq!(ctl.group_count(), 1);
    assert_eq!(ctl.next_hops(), base + 3, "two gateways and one group");
    let group = fib.v4.lookup(0x0a01_0101).unwrap();
    assert_eq!(fib.v4.lookup(0x0b01_0101), Some(group));
    let Adjacency::Multipath { members, paths: 2 } = fib.adj.get(group) else {
        panic!("{:?}", fib.adj.get(group))
    };
    let ids = [fib.adj.member(members, 0), fib.adj.member(members, 1)];
    assert_eq!(fib.adj.get(ids[0]), Adjacency::Unresolved { port: 1 });
    assert_eq!(fib.adj.get(ids[1]), Adjacency::Unresolved { port: 2 });
    let mut listed = ctl.group_members(group);
    listed.sort();
    assert_eq!(listed, vec![(a, 1), (b, 2)]);
    // Resolving a gateway resolves it in every group at once.
    let mac = MacAddr([2, 0, 0, 0, 0, 7]);
    ctl.set_neighbour(a, 1, mac).unwrap();
    assert_eq!(fib.adj.get(ids[0]), Adjacency::Forward { port: 1, mac });
    ctl.remove_kernel(v4([10, 0, 0, 0]), 8).unwrap();
    assert_eq!(ctl.group_count(), 1);
    ctl.remove_kernel(v4([11, 0, 0, 0]), 8).unwrap();
    assert_eq!(ctl.group_count(), 0);
    // b's id is gone; a's stays for its neighbour (and its host route).
    assert_eq!(ctl.next_hops(), base + 1);
    assert_eq!(fib.v4.lookup(0x0a01_0101), None);
}

#[test]
fn static_and_interface_routes_win_over_kernel_routes() {
    let mut ctl = FibControl::new(64);
    let fib = ctl.fib();
    ctl.add_connected(v4([198, 18, 0, 0]), 24, 0).unwrap();
    let gw = v4([198, 18, 0, 9]);
    let kernel = Target::Via(vec![(gw, 0)]);
    // The kernel's copy of a connected prefix is remembered, not installed.
    ctl.set_kernel(v4([198, 18, 0, 0]), 24, &kernel).unwrap();
    let glean = fib.v4.lookup(0xc612_0005).unwrap();
    assert!(fib.adj.is_glean(glean));
    assert_eq!(ctl.kernel_counts(), (1, 0));
    // A static route and a kernel route for the same prefix: the static one forwards; when
    // it is removed the kernel's takes its place.
    ctl.set_kernel(v4([10, 0, 0, 0]), 8, &kernel).unwrap();
    let kid = fib.v4.lookup(0x0a00_0001).unwrap();
    ctl.set_static(v4([10, 0, 0, 0]), 8, Target::Blackhole).unwrap();
    assert_eq!(fib.v4.lookup(0x0a00_0001), Some(BLACKHOLE_ID));
    ctl.set_kernel(v4([10, 0, 0, 0]), 8, &Target::Unreachable).unwrap();
    assert_eq!(
        fib.v4.lookup(0x0a00_0001),
        Some(BLACKHOLE_ID),
        "a kernel update does not beat the static route"
    );
    ctl.set_kernel(v4([10, 0, 0, 0]), 8, &kernel).unwrap();
    assert!(ctl.remove_static(v4([10, 0, 0, 0]), 8).unwrap());
    assert_eq!(fib.v4.lookup(0x0a00_0001), Some(kid));
    let sources: Vec<RouteSource> =
        ctl.routes_by_source().filter(|r| r.0 == v4([10, 0, 0, 0])).map(|r| r.3).collect();
    assert_eq!(sources, vec![RouteSource::Kernel]);
    // A kernel /32 to a neighbour's address loses to its host route, and comes back after.
    let n = v4([198, 18, 0, 7]);
    ctl.set_kernel(n, 32, &Target::Unreachable).unwrap();
    assert_eq!(fib.v4.lookup(0xc612_0007), Some(UNREACHABLE_ID));
    ctl.set_neighbour(n, 0, MacAddr([2, 0, 0, 0, 0, 1])).unwrap();
    assert_ne!(fib.v4.lookup(0xc612_0007), Some(UNREACHABLE_ID));
    ctl.unset_neighbour(n);
    assert_eq!(fib.v4.lookup(0xc612_0007), Some(UNREACHABLE_ID));
}

#[test]
fn static_route_sets_change_only_what_changed() {
    let mut ctl = FibControl::new(64);
    let fib = ctl.fib();
    let (a, b) = (v4([198, 19, 0, 2]), v4([198, 19, 0, 3]));
    let set = |routes: &[([u8; 4], u8, Target)]| {
        routes
            .iter()
            .map(|(p, l, t)| StaticRoute { prefix: v4(*p), len: *l, target: t.clone() })
            .collect::<Vec<_>>()
    };
    let first = set(&[
        ([10, 0, 0, 0], 8, Target::Via(vec![(a, 1)])),
        ([20, 0, 0, 0], 8, Target::Via(vec![(a, 1)])),
        ([30, 0, 0, 0], 8, Target::Connected(1)),
    ]);
    let c = ctl.set_static_routes(&first).unwrap();
    assert_eq!((c.added, c.changed, c.removed, c.unchanged), (3, 0, 0, 0));
    let id_a = fib.v4.lookup(0x0a00_0001).unwrap();
    ctl.set_kernel(v4([30, 0, 0, 0]), 8, &Target::Blackhole).unwrap();
    let second = set(&[
        ([10, 0, 0, 0], 8, Target::Via(vec![(a, 1)])),
        ([20, 0, 0, 0], 8, Target::Via(vec![(a, 1), (b, 1)])),
        ([40, 0, 0, 0], 8, Target::Unreachable),
    ]);
    let c = ctl.set_static_routes(&second).unwrap();
    assert_eq!((c.added, c.changed, c.removed, c.unchanged), (1, 1, 1, 1));
    assert_eq!(fib.v4.lookup(0x0a00_0001), Some(id_a));
    assert!(matches!(
        fib.adj.get(fib.v4.lookup(0x1400_0001).unwrap()),
        Adjacency::Multipath { paths: 2, .. }
    ));
    assert_eq!(
        fib.v4.lookup(0x1e00_0001),
        Some(BLACKHOLE_ID),
        "the kernel's route took the removed static's place"
    );
    assert_eq!(fib.v4.lookup(0x2800_0001), Some(UNREACHABLE_ID));
    // Back to nothing: every id but the fixed ones is released.
    ctl.set_static_routes(&[]).unwrap();
    ctl.remove_kernel(v4([30, 0, 0, 0]), 8).unwrap();
    assert_eq!((ctl.route_count(), ctl.group_count()), (0, 0));
    assert_eq!(ctl.next_hops(), 3 + 1, "local, blackhole, unreachable and port 1's connected id");
}

mod props {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    #[derive(Debug, Clone)]
    enum Op {
        Kernel(u8, u8, u8),
        KernelDel(u8, u8),
        Static(u8, u8, u8),
        StaticDel(u8, u8),
        Neighbour(u8, bool),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u8..8, 0u8..4, 0u8..6).prop_map(|(p, l, t)| Op::Kernel(p, l, t)),
            (0u8..8, 0u8..4).prop_map(|(p, l)| Op::KernelDel(p, l)),
            (0u8..8, 0u8..4, 0u8..6).prop_map(|(p, l, t)| Op::Static(p, l, t)),
            (0u8..8, 0u8..4).prop_map(|(p, l)| Op::StaticDel(p, l)),
            (0u8..4, any::<bool>()).prop_map(|(g, up)| Op::Neighbour(g, up)),
        ]
    }

    /// Prefixes nest: 10.p.0.0/16, /20, /24, /32 (host routes of the gateways' range).
    fn prefix(p: u8, l: u8) -> (IpAddr, u8) {
        let len = [16, 20, 24, 32][l as usize];
        (v4([10, p % 4, if len >= 24 { p } else { 0 }, if len == 32 { 1 } else { 0 }]), len)
    }

    fn gw(g: u8) -> IpAddr {
        v4([198, 19, 0, 10 + g])
    }

    /// Targets: 0-3 gateways, 4 two of them (ECMP), 5 blackhole.
    fn target(t: u8) -> Target {
        match t {
            0..=3 => Target::Via(vec![(gw(t), 1)]),
            4 => Target::Via(vec![(gw(0), 1), (gw(t % 3 + 1), 1)]),
            _ => Target::Blackhole,
        }
    }

    /// What an address's packets meet: the gateways they may take, or a kind of drop.
    fn meets(ctl: &FibControl, addr: u32) -> Option<Vec<IpAddr>> {
        let fib = ctl.fib();
        let id = fib.v4.lookup(addr)?;
        Some(match fib.adj.get(id) {
            Adjacency::Multipath { .. } => {
                let mut m: Vec<IpAddr> = ctl.group_members(id).into_iter().map(|g| g.0).collect();
                m.sort();
                m
            }
            Adjacency::Blackhole => vec![],
            _ => vec![ctl.gateway_of(id).expect("a gateway id")],
        })
    }

    proptest! {
        /// The FIB forwards every address as a plain model says (static over kernel routes,
        /// longest prefix first), and releases every id once nothing uses it.
        #[test]
        fn matches_a_plain_model(ops in proptest::collection::vec(op(), 1..60)) {
            let mut ctl = FibControl::new(256);
            let mut statics: HashMap<(IpAddr, u8), Target> = HashMap::new();
            let mut kernel: HashMap<(IpAddr, u8), Target> = HashMap::new();
            let mac = MacAddr([2, 0, 0, 0, 0, 1]);
            for op in ops {
                match op {
                    Op::Kernel(p, l, t) => {
                        let (p, l) = prefix(p, l);
                        ctl.set_kernel(p, l, &target(t)).unwrap();
                        kernel.insert((p, l), target(t));
                    }
                    Op::KernelDel(p, l) => {
                        let (p, l) = prefix(p, l);
                        prop_assert_eq!(ctl.remove_kernel(p, l).unwrap(), kernel.remove(&(p, l)).is_some());
                    }
                    Op::Static(p, l, t) => {
                        let (p, l) = prefix(p, l);
                        ctl.set_static(p, l, target(t)).unwrap();
                        statics.insert((p, l), target(t));
                    }
                    Op::StaticDel(p, l) => {
                        let (p, l) = prefix(p, l);
                        prop_assert_eq!(ctl.remove_static(p, l).unwrap(), statics.remove(&(p, l)).is_some());
                    }
                    // Gateways' neighbours come and go (they are outside the 10/8 prefixes).
                    Op::Neighbour(g, true) => ctl.set_neighbour(gw(g), 1, mac).unwrap(),
                    Op::Neighbour(g, false) => ctl.unset_neighbour(gw(g)),
                }
                for p in 0..8u8 {
                    for l in 0..4u8 {
                        let (a, _) = prefix(p, l);
                        let addr = u32::from(match a { IpAddr::V4(a) => a, IpAddr::V6(_) => unreachable!() }) | 1;
                        let best = [32u8, 24, 20, 16].iter().find_map(|&len| {
                            let key = (super::routes::masked(IpAddr::V4(Ipv4Addr::from(addr)), len), len);
                            statics.get(&key).or_else(|| kernel.get(&key))
                        });
                        let want = best.map(|t| match t {
                            Target::Via(v) => { let mut g: Vec<IpAddr> = v.iter().map(|x| x.0).collect(); g.sort(); g }
                            _ => vec![],
                        });
                        prop_assert_eq!(meets(&ctl, addr), want, "address {}", Ipv4Addr::from(addr));
                    }
                }
            }
            ctl.set_static_routes(&[]).unwrap();
            for (p, l) in ctl.kernel_prefixes() {
                ctl.remove_kernel(p, l).unwrap();
            }
            for g in 0..4 {
                ctl.unset_neighbour(gw(g));
            }
            prop_assert_eq!(ctl.route_count(), 0);
            prop_assert_eq!(ctl.group_count(), 0);
            prop_assert_eq!(ctl.next_hops(), 3);
        }
    }
}

/// The interfaces' own routes (a connected prefix, the router's address) are not the
/// config's to replace: a static route for exactly one of them is refused.
#[test]
fn static_routes_never_replace_connected_or_local_routes() {
    let mut ctl = FibControl::new(64);
    let fib = ctl.fib();
    ctl.add_connected(v4([198, 18, 0, 0]), 24, 0).unwrap();
    ctl.add_local(v4([198, 18, 0, 1])).unwrap();
    for (prefix, len) in [(v4([198, 18, 0, 0]), 24), (v4([198, 18, 0, 1]), 32)] {
        let e = ctl.set_static(prefix, len, Target::Blackhole).unwrap_err();
        assert!(matches!(e, FibError::InterfaceRoute { .. }), "{e}");
        let routes = [StaticRoute { prefix, len, target: Target::Blackhole }];
        assert!(matches!(ctl.set_static_routes(&routes), Err(FibError::InterfaceRoute { .. })));
        assert!(!ctl.remove_static(prefix, len).unwrap(), "nothing to remove");
    }
    // Before, each was installed, and its removal (a reload) withdrew the prefix: the
    // router's address went unanswered and its link's hosts unreachable until a restart.
    assert_eq!(fib.v4.lookup(0xc612_0001), Some(LOCAL_ID));
    let glean = fib.v4.lookup(0xc612_0005).unwrap();
    assert!(fib.adj.is_glean(glean));
    // More specific routes inside a connected prefix are the config's to add.
    ctl.set_static(v4([198, 18, 0, 128]), 25, Target::Blackhole).unwrap();
    assert_eq!(fib.v4.lookup(0xc612_0081), Some(BLACKHOLE_ID));
}

/// A connected IPv4 subnet's broadcast address takes the local exit (never forwarded, RFC
/// 2644), and neither a neighbour nor a kernel route replaces it.
#[test]
fn broadcast_addresses_are_local() {
    let mut ctl = FibControl::new(64);
    let fib = ctl.fib();
    ctl.add_connected(v4([198, 18, 0, 0]), 24, 0).unwrap();
    ctl.add_broadcast(v4([198, 18, 0, 255]), 0).unwrap();
    assert_eq!(fib.v4.lookup(0xc612_00ff), Some(LOCAL_ID));
    ctl.set_neighbour(v4([198, 18, 0, 255]), 0, MacAddr([2, 0, 0, 0, 0, 9])).unwrap();
    ctl.set_kernel(v4([198, 18, 0, 255]), 32, &Target::Unreachable).unwrap();
    assert_eq!(fib.v4.lookup(0xc612_00ff), Some(LOCAL_ID));
    assert!(
        ctl.routes()
            .any(|r| r.0 == v4([198, 18, 0, 255]) && r.2 == RouteKind::Broadcast { port: 0 })
    );
}

/// A port's link down: its connected route and the static routes through it withdrawn (a
/// multipath route keeps its other path, a backup default takes the rest), all put back
/// when the link returns.
#[test]
fn a_port_down_withdraws_its_routes_until_it_is_back() {
    let mut ctl = FibControl::new(64);
    let fib = ctl.fib();
    let (a, b) = (v4([198, 18, 0, 2]), v4([198, 19, 0, 2]));
    ctl.add_connected(v4([198, 19, 0, 0]), 24, 1).unwrap();
    ctl.set_static(v4([0, 0, 0, 0]), 0, Target::Via(vec![(a, 0)])).unwrap();
    ctl.set_static(v4([10, 0, 0, 0]), 8, Target::Via(vec![(b, 1)])).unwrap();
    ctl.set_static(v4([11, 0, 0, 0]), 8, Target::Via(vec![(a, 0), (b, 1)])).unwrap();
    let default = fib.v4.lookup(0x0808_0808).unwrap();
    assert_eq!(fib.adj.get(fib.v4.lookup(0x0a00_0001).unwrap()), Adjacency::Unresolved { port: 1 });
    let group = fib.v4.lookup(0x0b00_0001).unwrap();
    assert!(matches!(fib.adj.get(group), Adjacency::Multipath { paths: 2, .. }));

    assert_eq!(ctl.set_port_running(1, false).unwrap(), 3);
    assert!(ctl.port_down(1));
    assert_eq!(fib.v4.lookup(0x0a00_0001), Some(default), "the backup default takes over");
    assert_eq!(fib.v4.lookup(0xc613_0005), Some(default), "the connected route is gone");
    assert_eq!(fib.v4.lookup(0x0b00_0001), Some(default), "one path left: via a");
    assert_eq!(ctl.set_port_running(1, false).unwrap(), 0, "nothing more to do");
    // The withdrawn interface route still holds its prefix against a static route.
    let taken = ctl.set_static(v4([198, 19, 0, 0]), 24, Target::Via(vec![(a, 0)]));
    assert!(matches!(taken, Err(FibError::InterfaceRoute { .. })), "{taken:?}");
    // A route added while the port is down waits for it.
    ctl.set_static(v4([12, 0, 0, 0]), 8, Target::Via(vec![(b, 1)])).unwrap();
    assert_eq!(fib.v4.lookup(0x0c00_0001), Some(default));

    assert_eq!(ctl.set_port_running(1, true).unwrap(), 4);
    // The ids may be new ones (the old were freed with their last route): by what they are.
    let via_b = |dst| fib.adj.get(fib.v4.lookup(dst).unwrap());
    assert_eq!(via_b(0x0a00_0001), Adjacency::Unresolved { port: 1 });
    assert!(matches!(via_b(0x0b00_0001), Adjacency::Multipath { paths: 2, .. }), "both paths");
    assert_eq!(via_b(0x0c00_0001), Adjacency::Unresolved { port: 1 });
    let glean = fib.v4.lookup(0xc613_0005).unwrap();
    assert_eq!(fib.adj.get(glean), Adjacency::Unresolved { port: 1 });
}
