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
        prefixes: vec!["2001:db8:a::/64".parse().unwrap(), "198.18.0.0/24".parse().unwrap(), "2001:db8:b::/64".parse().unwrap()],
        valid_lifetime: 86_400,
        preferred_lifetime: 14_400,
    };
    let s = advert_settings(&ra);
    assert_eq!((s.min_interval, s.max_interval), (200, 600));
    let a = &s.advert;
    assert_eq!((a.router_lifetime, a.mtu, a.other_config, a.managed, a.hop_limit), (1800, Some(1400), true, false, 64));
    let prefixes: Vec<(Ipv6Addr, u8, u32, u32)> = a.prefixes.iter().map(|p| (p.prefix, p.len, p.valid_lifetime, p.preferred_lifetime)).collect();
    assert_eq!(prefixes, [("2001:db8:a::".parse().unwrap(), 64, 86_400, 14_400), ("2001:db8:b::".parse().unwrap(), 64, 86_400, 14_400)]);
    let long = advert_settings(&config::RouterAdvertSettings { default_lifetime: 70_000, ..ra });
    assert_eq!(long.advert.router_lifetime, u16::MAX);
}

const CONFIG: &str = r#"
[[interface]]
name = "lr-a"
mac = "02:00:00:00:00:01"
addresses = ["198.18.0.1/24"]

[[interface]]
name = "lr-b"
mac = "02:00:00:00:00:02"
addresses = ["198.19.0.1/24", "2001:db8:b::1/64"]

[[interface]]
name = "lr-b.7"
parent = "lr-b"
vlan = 7
addresses = ["198.20.0.1/24"]

[[neighbour]]
address = "198.19.0.2"
mac = "02:00:00:00:00:b2"

[[route]]
prefix = "10.0.0.0/8"
via = "198.20.0.2"
"#;

#[test]
fn ports_number_physical_interfaces_and_give_sub_interfaces_their_parent() {
    let cfg = config::Config::parse(CONFIG, Path::new("t.toml")).unwrap();
    let ports = ports(&cfg).unwrap();
    let view: Vec<(&str, u16, Option<u16>, [u8; 6], usize)> = ports.iter().map(|p| (p.name.as_str(), p.phys, p.vlan, p.mac.0, p.addresses.len())).collect();
    assert_eq!(view, [("lr-a", 0, None, [2, 0, 0, 0, 0, 1], 1), ("lr-b", 1, None, [2, 0, 0, 0, 0, 2], 2), ("lr-b.7", 1, Some(7), [2, 0, 0, 0, 0, 2], 1)]);
    let routes = static_routes(&cfg, &ports).unwrap();
    assert_eq!(routes.len(), 1);
    assert_eq!((routes[0].prefix, routes[0].len), ("10.0.0.0".parse::<IpAddr>().unwrap(), 8));
    assert_eq!(routes[0].target, dataplane::fib::Target::Via(vec![("198.20.0.2".parse().unwrap(), 2)]));
    // Twice the neighbour limit, plus a route, four addresses, a neighbour and 16 spare.
    assert_eq!(next_hops_for(&cfg), 2 * 65_536 + 1 + 4 + 1 + 16);
    let (ctl, fib_ports) = fib(&cfg).unwrap();
    assert_eq!(fib_ports.len(), 3);
    drop(ctl);
}
