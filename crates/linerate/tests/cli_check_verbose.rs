//! `linerate check -v`: after the summary, the rule set as linerate read it, in the format
//! of `pfctl -nvf` (no namespaces needed: `check` only reads the config).

use std::path::Path;
use std::process::Command;

fn check(args: &[&str], cfg: &Path) -> (String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .arg("check")
        .args(args)
        .arg("-c")
        .arg(cfg)
        .output()
        .expect("runs");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(out.status.success(), "{stdout}{stderr}");
    (stdout, stderr)
}

/// OpenBSD's usual router: `match` rules print as the scrub and nat rules linerate makes,
/// `antispoof` as its block rules, `egress` as the interface it stands for.
#[test]
fn check_v_prints_the_rule_set_as_pfctl_nvf() {
    let cfg = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fw/tests/fixtures/openbsd/c.toml");
    let (stdout, _) = check(&["-v"], &cfg);
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].ends_with(": 9 rules)"), "{stdout}");
    assert_eq!(
        lines[1..],
        [
            "table <martians> { 0.0.0.0/8 10.0.0.0/8 127.0.0.0/8 169.254.0.0/16 172.16.0.0/12 192.0.0.0/24 192.0.2.0/24 224.0.0.0/3 192.168.0.0/16 198.51.100.0/24 203.0.113.0/24 }",
            "scrub in all no-df random-id max-mss 1440",
            "nat on lr-ext inet from ! (egress:network) to any -> (lr-ext)",
            "block drop in quick on ! lr-ext inet from 198.18.0.0/24 to any",
            "block drop in quick inet from 198.18.0.1 to any",
            "block drop in quick on ! lr-lan inet from 192.168.1.0/24 to any",
            "block drop in quick inet from 192.168.1.1 to any",
            "block drop in quick on lr-ext from <martians> to any",
            "block return out quick on lr-ext from any to <martians>",
            "block drop all",
            "pass out quick inet all flags S/SA keep state",
            "pass in on lr-lan inet all flags S/SA keep state",
        ],
        "{stdout}"
    );
    let (plain, _) = check(&[], &cfg);
    assert_eq!(plain.lines().count(), 1, "without -v only the summary: {plain}");
}

/// pfSense's file: its anchors print where they stand, lists expanded.
#[test]
fn check_v_prints_anchors_and_expanded_lists() {
    let cfg = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fw/tests/fixtures/pfsense/c.toml");
    let (stdout, _) = check(&["--verbose"], &cfg);
    for want in [
        "nat-anchor \"natearly/*\" all",
        "anchor \"userrules/*\" all",
        "pass in quick on lr-lan proto tcp from any to (lr-lan) port = 443 flags S/SA keep state label \"anti-lockout rule\" ridentifier 10000",
        "pass in quick on lr-lan proto tcp from any to (lr-lan) port = 80 flags S/SA keep state label \"anti-lockout rule\" ridentifier 10000",
    ] {
        assert!(stdout.lines().any(|l| l == want), "no {want:?} in\n{stdout}");
    }
}

/// NAT66: the family pfctl settles (written, or the pool's) printed; `(IFACE)` in an `inet6`
/// rule needs a global IPv6 address on the interface.
#[test]
fn check_v_prints_nat66_and_refuses_an_interface_without_ipv6() {
    let dir = std::env::temp_dir().join(format!("lr-check-nat66-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rules = dir.join("rules.conf");
    std::fs::write(
        &rules,
        "nat on lr-ext inet6 from fd00::/64 to any -> (lr-ext)\n\
         rdr on lr-ext proto tcp to 2001:db8::1 port 80 -> fd00::10 port 8080\n\
         pass all\n",
    )
    .unwrap();
    let config = |ext: &str| {
        format!(
            "[[interface]]\nname = \"lr-lan\"\naddresses = [\"fd00::1/64\"]\n\n\
             [[interface]]\nname = \"lr-ext\"\naddresses = [{ext}]\n\n\
             [firewall]\nrules = \"{}\"\n",
            rules.display()
        )
    };
    let cfg = dir.join("router.toml");
    std::fs::write(&cfg, config("\"2001:db8::1/64\"")).unwrap();
    let (stdout, _) = check(&["-v"], &cfg);
    assert!(
        stdout.contains("\nnat on lr-ext inet6 from fd00::/64 to any -> (lr-ext)\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("\nrdr on lr-ext inet6 proto tcp from any to 2001:db8::1 port = 80 -> fd00::10 port 8080\n"),
        "{stdout}"
    );
    std::fs::write(&cfg, config("\"192.0.2.1/24\", \"fe80::1/64\"")).unwrap();
    let out =
        Command::new(env!("CARGO_BIN_EXE_linerate")).arg("check").arg("-c").arg(&cfg).output();
    let err = String::from_utf8_lossy(&out.unwrap().stderr).into_owned();
    assert!(
        err.contains(
            "rules.conf:1:1: `nat` translates to (lr-ext), which has no global IPv6 address"
        ),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
