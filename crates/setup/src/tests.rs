use std::net::{IpAddr, Ipv6Addr};
use std::path::Path;

use dataplane::punt::PuntPolicy;

use crate::*;

#[test]
fn punt_defaults_agree_with_the_config() {
    assert_eq!(punt_policy(&config::PuntSettings::default()), PuntPolicy::default());
}

#[test]
fn advert_settings_keep_the_ipv6_prefixes_and_cap_the_lifetime() {
    let ra = config::RouterAdvertSettings {
        max_interval: 600,
        min_interval: 200,
        default_lifetime: 1800,
        managed: false,
        other_config: true,
        mtu: Some(1400),
        hop_limit: 64,
        prefixes: vec![
            "2001:db8:a::/64".parse().unwrap(),
            "198.18.0.0/24".parse().unwrap(),
            "2001:db8:b::/64".parse().unwrap(),
        ],
        valid_lifetime: 86_400,
        preferred_lifetime: 14_400,
    };
    let s = advert_settings(&ra);
    assert_eq!((s.min_interval, s.max_interval), (200, 600));
    let a = &s.advert;
    assert_eq!(
        (a.router_lifetime, a.mtu, a.other_config, a.managed, a.hop_limit),
        (1800, Some(1400), true, false, 64)
    );
    let prefixes: Vec<(Ipv6Addr, u8, u32, u32)> = a
        .prefixes
        .iter()
        .map(|p| (p.prefix, p.len, p.valid_lifetime, p.preferred_lifetime))
        .collect();
    assert_eq!(
        prefixes,
        [
            ("2001:db8:a::".parse().unwrap(), 64, 86_400, 14_400),
            ("2001:db8:b::".parse().unwrap(), 64, 86_400, 14_400)
        ]
    );
    let long = advert_settings(&config::RouterAdvertSettings { default_lifetime: 70_000, ..ra });
    assert_eq!(long.advert.router_lifetime, u16::MAX);
}

/// The golden test's router: lr-a and lr-b, their sub-interfaces lr-a.5 and lr-b.7, three
/// static neighbours and four static routes.
fn golden_config() -> config::Config {
    config::Config::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/router.toml"))
        .unwrap()
}

#[test]
fn ports_number_physical_interfaces_and_give_sub_interfaces_their_parent() {
    let cfg = golden_config();
    let ports = ports(&cfg).unwrap();
    let view: Vec<_> = ports
        .iter()
        .map(|p| (p.name.as_str(), p.phys, p.vlan, p.mac.0, p.addresses.len()))
        .collect();
    let (a, b) = ([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
    assert_eq!(
        view,
        [
            ("lr-a", 0, None, a, 2),
            ("lr-b", 1, None, b, 2),
            ("lr-a.5", 0, Some(5), a, 1),
            ("lr-b.7", 1, Some(7), b, 1)
        ]
    );
    let routes = static_routes(&cfg, &ports).unwrap();
    assert_eq!(routes.len(), 4);
    assert_eq!((routes[0].prefix, routes[0].len), ("10.77.0.0".parse::<IpAddr>().unwrap(), 16));
    assert_eq!(
        routes[0].target,
        dataplane::fib::Target::Via(vec![("198.20.0.2".parse().unwrap(), 3)]),
        "through lr-b.7"
    );
    // Twice the neighbour limit, plus four routes, six addresses, three neighbours and 16.
    assert_eq!(next_hops_for(&cfg), 2 * 65_536 + 4 + 6 + 3 + 16);
    let (_, fib_ports) = fib(&cfg).unwrap();
    assert_eq!(fib_ports.len(), 4);
}
