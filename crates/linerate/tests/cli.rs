//! The command-line interface as other tools rely on it: `bench --json` and `check`.

use std::path::Path;
use std::process::Command;

fn linerate() -> Command {
    Command::new(env!("CARGO_BIN_EXE_linerate"))
}

fn examples() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

#[test]
fn bench_json_is_the_last_line_with_the_documented_keys() {
    let out = linerate()
        .args([
            "bench",
            "--routes",
            "2000",
            "--flows",
            "50",
            "--runs",
            "3",
            "--seconds",
            "0.1",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let last = stdout.lines().last().unwrap();
    let v: serde_json::Value = serde_json::from_str(last).unwrap();
    assert!(v["mpps"].as_f64().unwrap() > 0.0);
    assert!(v["ns_per_packet"].as_f64().unwrap() > 0.0);
    assert_eq!(v["runs"].as_array().unwrap().len(), 3);
    // Per run, the shares of its CPU that other work took (read from procfs on Linux).
    let other = v["runs_interference"].as_array().unwrap();
    assert_eq!(other.len(), 3);
    assert!(
        other.iter().all(|i| (0.0..=1.0).contains(&i["waited"].as_f64().unwrap())
            && (0.0..=1.0).contains(&i["stolen"].as_f64().unwrap())),
        "{other:?}"
    );
    let drops = v["drops"].as_object().unwrap();
    assert!(drops.contains_key("no_route") && drops.contains_key("bad_checksum"));
    assert_eq!(v["forwarded"], v["rx"], "every generated flow has a route: {last}");
}

#[test]
fn bench_ipv6_and_route_file() {
    let out = linerate()
        .args([
            "bench",
            "--ipv6",
            "--routes",
            "3000",
            "--flows",
            "20",
            "--runs",
            "1",
            "--seconds",
            "0.1",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let routes = examples().join("routes.txt");
    let out = linerate()
        .args([
            "bench",
            "--routes-file",
            routes.to_str().unwrap(),
            "--runs",
            "1",
            "--seconds",
            "0.1",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let v: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert!(v["forwarded"].as_u64().unwrap() > 0);
}

#[test]
fn bench_pcap_replays_a_capture() {
    let pcap = Path::new(env!("CARGO_MANIFEST_DIR")).join("../setup/tests/golden/input.pcap");
    let out = linerate()
        .args([
            "bench",
            "--pcap",
            pcap.to_str().unwrap(),
            "--routes",
            "100",
            "--runs",
            "1",
            "--seconds",
            "0.1",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let v: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    // The golden capture holds one frame of each malformed kind.
    for reason in ["truncated", "bad_checksum", "bad_version", "unknown_vlan", "not_for_us"] {
        assert!(v["drops"][reason].as_u64().unwrap() > 0, "{reason}: {v}");
    }
}

#[test]
fn bench_rejects_bad_route_file_with_line() {
    let dir = std::env::temp_dir().join(format!("lr-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("routes.txt");
    std::fs::write(&file, "# ok\n10.0.0.0/8 198.19.0.2\n10.0.0.0/33 198.19.0.2\n").unwrap();
    let out = linerate().args(["bench", "--routes-file", file.to_str().unwrap()]).output().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("routes.txt:3:"), "{err}");
}

#[test]
fn check_accepts_the_example_and_rejects_with_position() {
    let ok = linerate().args(["check", "-c"]).arg(examples().join("router.toml")).output().unwrap();
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    let dir = std::env::temp_dir().join(format!("lr-cli-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bad.toml");
    std::fs::write(&file, "[[interface]]\nname = \"lr-a\"\nmtu = 20\n").unwrap();
    let bad = linerate().args(["check", "-c"]).arg(&file).output().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(bad.status.code(), Some(1));
    let err = String::from_utf8(bad.stderr).unwrap();
    assert!(err.contains("bad.toml:3:7:"), "{err}");
}

#[test]
fn check_compiles_the_firewall_rules_and_reports_their_position() {
    let ok = linerate().args(["check", "-c"]).arg(examples().join("router.toml")).output().unwrap();
    let stdout = String::from_utf8_lossy(&ok.stdout);
    assert!(stdout.contains("firewall") && stdout.contains("rules"), "{stdout}");
    let dir = std::env::temp_dir().join(format!("lr-cli-fw-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("router.toml");
    std::fs::write(&cfg, "[[interface]]\nname = \"lr-a\"\n\n[firewall]\nrules = \"r.conf\"\n")
        .unwrap();
    std::fs::write(dir.join("r.conf"), "block all\npass in on lr-a\npass out on lr-b\n").unwrap();
    let bad = linerate().args(["check", "-c"]).arg(&cfg).output().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(bad.status.code(), Some(1));
    let err = String::from_utf8(bad.stderr).unwrap();
    assert!(err.contains("r.conf:3:13:") && err.contains("lr-b"), "{err}");
}

/// `[ha]`'s key is read at check time, as at run time: a short key is refused by name.
#[test]
fn check_reads_the_state_sync_key() {
    let dir = std::env::temp_dir().join(format!("lr-cli-ha-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("router.toml");
    std::fs::write(&cfg, "[[interface]]\nname = \"lr-a\"\n\n[firewall]\nrules = \"r.conf\"\n\n[ha]\nlisten = \"10.9.0.1:8384\"\npeer = \"10.9.0.2:8384\"\nkey_file = \"ha.key\"\n").unwrap();
    std::fs::write(dir.join("r.conf"), "pass all\n").unwrap();
    std::fs::write(dir.join("ha.key"), "short\n").unwrap();
    let short = linerate().args(["check", "-c"]).arg(&cfg).output().unwrap();
    std::fs::write(dir.join("ha.key"), "a secret of thirty-two bytes....\n").unwrap();
    let ok = linerate().args(["check", "-c"]).arg(&cfg).output().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let err = String::from_utf8_lossy(&short.stderr);
    assert!(!short.status.success() && err.contains("ha.key") && err.contains("16"), "{err}");
    let out = String::from_utf8_lossy(&ok.stdout);
    assert!(out.contains("state sync with 10.9.0.2:8384 (authenticated)"), "{out}");
}

/// `self`, interface hosts and `antispoof` take the addresses of the config's interfaces.
#[test]
fn check_gives_the_rules_the_interface_addresses() {
    let dir = std::env::temp_dir().join(format!("lr-cli-self-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("router.toml");
    std::fs::write(&cfg, "[[interface]]\nname = \"lr-a\"\naddresses = [\"198.18.0.1/24\", \"2001:db8:a::1/64\"]\n\n[[interface]]\nname = \"lr-b\"\n\n[firewall]\nrules = \"r.conf\"\n").unwrap();
    std::fs::write(
        dir.join("r.conf"),
        "antispoof for lr-a inet\npass in to self\nblock in to lr-a:network\n",
    )
    .unwrap();
    let ok = linerate().args(["check", "-c"]).arg(&cfg).output().unwrap();
    std::fs::write(dir.join("r.conf"), "pass in to lr-b:peer\n").unwrap();
    let bad = linerate().args(["check", "-c"]).arg(&cfg).output().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let stdout = String::from_utf8_lossy(&ok.stdout);
    assert!(
        ok.status.success() && stdout.contains(": 4 rules"),
        "{stdout}{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let err = String::from_utf8(bad.stderr).unwrap();
    assert!(err.contains("r.conf:1:12: `lr-b:peer` is not supported by linerate"), "{err}");
}

/// OpenBSD's `egress` group resolves to the interface of the static default route, for
/// interfaces, their addresses and `antispoof`; without one the error says why.
#[test]
fn check_resolves_egress_from_the_default_route() {
    let dir = std::env::temp_dir().join(format!("lr-cli-egress-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ifaces = "[[interface]]\nname = \"lr-a\"\naddresses = [\"198.18.0.1/24\"]\n\n[[interface]]\nname = \"lr-b\"\naddresses = [\"198.19.0.1/24\"]\n\n";
    let (with, without) = (dir.join("with.toml"), dir.join("without.toml"));
    std::fs::write(&with, format!("{ifaces}[[route]]\nprefix = \"0.0.0.0/0\"\nvia = \"198.19.0.254\"\n\n[firewall]\nrules = \"r.conf\"\n")).unwrap();
    std::fs::write(&without, format!("{ifaces}[firewall]\nrules = \"r.conf\"\n")).unwrap();
    std::fs::write(dir.join("r.conf"), "block in on egress\nantispoof for egress inet\npass in on egress proto tcp to (egress) port 22\npass out on egress from egress:network\n").unwrap();
    let ok = linerate().args(["check", "-c"]).arg(&with).output().unwrap();
    let bad = linerate().args(["check", "-c"]).arg(&without).output().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let stdout = String::from_utf8_lossy(&ok.stdout);
    assert!(
        ok.status.success() && stdout.contains(": 5 rules"),
        "{stdout}{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let err = String::from_utf8(bad.stderr).unwrap();
    assert!(err.contains("r.conf:1:13: unknown interface \"egress\" (pf's `egress` group: no static default route"), "{err}");
}

/// The usual OpenBSD router (match rules for scrub and NAT, `egress`) passes `check`.
#[test]
fn check_accepts_an_openbsd_router() {
    let cfg = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fw/tests/fixtures/openbsd/c.toml");
    let out = linerate().args(["check", "-c"]).arg(&cfg).output().unwrap();
    let (stdout, stderr) =
        (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && stdout.contains(": 9 rules"), "{stdout}{stderr}");
}

#[test]
fn bench_with_rules_reports_the_firewall() {
    let out = linerate()
        .args([
            "bench",
            "--routes",
            "2000",
            "--flows",
            "50",
            "--runs",
            "1",
            "--seconds",
            "0.1",
            "--rules",
            "20",
            "--states",
            "10",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let v: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(v["forwarded"], v["rx"]);
    assert_eq!(v["firewall"]["rules"], 21);
    assert_eq!(v["firewall"]["prefilled_states"], 10);
    assert_eq!(v["firewall"]["states"]["inserts"], 60);
}

#[test]
fn bench_workers_spread_flows_by_rss() {
    let out = linerate()
        .args([
            "bench",
            "--workers",
            "2",
            "--routes",
            "2000",
            "--flows",
            "200",
            "--runs",
            "1",
            "--seconds",
            "0.1",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let v: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(v["workers"], 2);
    let shares = v["flows_per_worker"].as_array().unwrap();
    assert_eq!(shares.len(), 2);
    assert!(shares.iter().all(|s| s.as_u64().unwrap() > 0), "{v}");
    assert_eq!(v["forwarded"], v["rx"]);
    let bad = linerate().args(["bench", "--workers", "0"]).output().unwrap();
    assert!(!bad.status.success());
}

/// The state commands check their arguments before asking the router anything, and say
/// which option is wrong; a config with a bad `metrics_listen` is refused with its position.
#[test]
fn state_filters_and_metrics_address_are_checked() {
    let fails = |args: &[&str], want: &str| {
        let out = linerate().args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(want), "{args:?}: {err}");
    };
    fails(&["show", "states", "--src", "10.0.0.300"], "--src");
    fails(&["show", "states", "--dst", "10.0.0.0/40"], "prefix length must be 0..=32");
    fails(&["show", "states", "--proto", "sctp"], "--proto");
    fails(&["show", "routes", "--port", "53"], "use them with `show states`");
    fails(&["show", "rules", "--host", "10.0.0.1"], "use them with `show states`");
    fails(&["kill", "states"], "--src");
    fails(&["--log-level", "loud", "flush", "states"], "invalid value 'loud'");

    let dir = std::env::temp_dir().join(format!("lr-cli-metrics-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("router.toml");
    std::fs::write(
        &cfg,
        "[router]\nmetrics_listen = \"127.0.0.1\"\n\n[[interface]]\nname = \"lo\"\n",
    )
    .unwrap();
    let out = linerate().args(["check", "-c"]).arg(&cfg).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && err.contains(
                "router.toml:2:18: router: metrics_listen \"127.0.0.1\" is not an address and port"
            ),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The lab's DUT configuration and its NAT set's rules (`nat = true`, 1000 rules) are what
/// `linerate check` accepts: a lab set cannot fail only when it runs.
#[test]
fn check_accepts_the_labs_config_and_nat_rules() {
    let dir = std::env::temp_dir().join(format!("lr-cli-lab-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("router.toml");
    let mut text = lab::configs::linerate_config("auto", true);
    text.push_str("\n[firewall]\nrules = \"r.conf\"\n");
    std::fs::write(&cfg, text).unwrap();
    std::fs::write(
        dir.join("r.conf"),
        format!("{}{}", lab::configs::PF_NAT, lab::configs::linerate_rules(1000, true)),
    )
    .unwrap();
    let out = linerate().args(["check", "-c"]).arg(&cfg).output().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1001 rules"),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The rule files pfSense and OPNsense write (fw's fixtures, whole) pass `check`, which says
/// what in them does nothing here or differs from pf.
#[test]
fn check_accepts_the_pfsense_and_opnsense_rule_files() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fw/tests/fixtures");
    for (product, rules) in [("pfsense", 49), ("opnsense", 39)] {
        let out = linerate()
            .args(["check", "-c"])
            .arg(fixtures.join(product).join("c.toml"))
            .output()
            .unwrap();
        let (stdout, stderr) =
            (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "{product}: {stdout}{stderr}");
        assert!(stdout.contains(&format!(": {rules} rules")), "{product}: {stdout}");
        assert!(
            stderr.contains("rules.debug:32:13: `set skip on pfsync0`") || product == "opnsense",
            "{stderr}"
        );
        assert!(
            stderr
                .contains("rules.debug:38:24: `fragment reassemble`: linerate does not reassemble")
                || product == "opnsense",
            "{stderr}"
        );
        assert!(
            stderr.contains("linerate: notice: ")
                && stderr.contains("anchor \"relayd/*\" holds no rules"),
            "{product}: {stderr}"
        );
    }
}
