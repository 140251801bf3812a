//! Operating a running linerate, end to end (host A -> linerate in D -> host B):
//! - the metrics endpoint: after N datagrams through and some deliberately blocked, a scrape
//!   counts them (interfaces, the drop reason, the rule), `promtool check metrics` accepts
//!   the Prometheus text and Debian's Python client parses the OpenMetrics text; a fifth
//!   connection while four are open gets 503;
//! - systemd's notification protocol: READY=1 once forwarding, RELOADING=1 (with
//!   MONOTONIC_USEC) then READY=1 on SIGHUP, STOPPING=1 at the end, on a test socket;
//! - `show rules`, `show states`, `kill states`, `flush states` under `block all` with a
//!   keep-state pass: a killed flow's reply is blocked, not passed.
//!
//! Needs root and python3 (skips without). Namespaces `lr<pid><tag><host>` are removed on
//! drop.

use std::io::Read;
use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use lab::topology::is_root;
use serde_json::Value;

mod common;

use common::{Lab, build, start_until, write_config};

const METRICS_PORT: u16 = 9111;

fn can_run() -> bool {
    let ok = is_root()
        && Command::new("python3").args(["-c", "pass"]).status().is_ok_and(|s| s.success());
    if !ok {
        lab::topology::skip_test("needs root and python3");
    }
    ok
}

fn linerate(args: &[&str], cfg: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_linerate")).args(args).arg("-c").arg(cfg).output().unwrap()
}

fn stdout_of(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A raw HTTP exchange with the metrics endpoint in D's namespace (bash's /dev/tcp).
fn http(lab: &Lab, headers: &str) -> String {
    let script = format!(
        "exec 3<>/dev/tcp/127.0.0.1/{METRICS_PORT}; printf 'GET /metrics HTTP/1.1\\r\\nHost: lr\\r\\n{headers}\\r\\n' >&3; cat <&3"
    );
    let out = lab.d.exec("bash", &["-c", &script]).unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The sum of the samples of `name` whose labels contain every one of `labels`.
fn metric(body: &str, name: &str, labels: &[&str]) -> f64 {
    body.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once(' '))
        .filter(|(series, _)| {
            series.split('{').next() == Some(name)
                && labels.iter().all(|want| series.contains(want))
        })
        .map(|(_, v)| v.parse::<f64>().unwrap())
        .sum()
}

/// Sends `count` datagrams from A to B's `port`.
fn udp_burst(lab: &Lab, port: u16, count: usize) {
    let script = format!("for i in $(seq {count}); do echo x > /dev/udp/198.19.0.2/{port}; done");
    lab.a.exec("bash", &["-c", &script]).unwrap();
}

fn receive(sock: &UnixDatagram) -> String {
    let mut buf = [0u8; 1024];
    let n = sock.recv(&mut buf).expect("no notification from linerate within the timeout");
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

#[test]
fn metrics_count_the_traffic_and_systemd_is_notified() {
    if !can_run() {
        return;
    }
    let lab = build("om");
    let cfg = write_config(&lab, "af_packet", "[firewall]\nrules = \"rules.conf\"\n");
    let text = std::fs::read_to_string(&cfg).unwrap().replace(
        "[router]\n",
        &format!("[router]\nmetrics_listen = \"127.0.0.1:{METRICS_PORT}\"\n"),
    );
    std::fs::write(&cfg, text).unwrap();
    std::fs::write(
        lab.dir.join("rules.conf"),
        "block in quick proto udp to port 9999 label \"no9999\"\n",
    )
    .unwrap();
    let notify_path = lab.dir.join("notify.sock");
    let notify = UnixDatagram::bind(&notify_path).unwrap();
    notify.set_read_timeout(Some(Duration::from_secs(20))).unwrap();

    let mut cmd = lab.d.command(env!("CARGO_BIN_EXE_linerate"));
    cmd.args(["run", "-c"]).arg(&cfg).args(["--cpu", "0"]).env("NOTIFY_SOCKET", &notify_path);
    let mut dut = start_until(cmd, "forwarding with");
    let ready = receive(&notify);
    assert!(ready.starts_with("READY=1\n") && ready.contains("STATUS=forwarding"), "{ready:?}");

    assert!(
        lab.a.exec("ping", &["-c", "2", "-i", "0.2", "-W", "2", "198.19.0.2"]).is_ok(),
        "ping through linerate"
    );
    const PASSED: usize = 200;
    const BLOCKED: usize = 20;
    udp_burst(&lab, 7000, PASSED);
    udp_burst(&lab, 9999, BLOCKED);
    std::thread::sleep(Duration::from_millis(300));

    let answer = http(&lab, "");
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    assert!(
        head.starts_with("HTTP/1.1 200 OK") && head.contains("text/plain; version=0.0.4"),
        "{head}"
    );
    let rx = metric(body, "linerate_interface_rx_packets_total", &["interface=\"lrd0\""]);
    let tx = metric(body, "linerate_interface_tx_packets_total", &["interface=\"lrd1\""]);
    let blocked = metric(body, "linerate_drops_total", &["reason=\"filter_blocked\""]);
    let rule = metric(body, "linerate_rule_packets_total", &["label=\"no9999\""]);
    let all = (PASSED + BLOCKED) as f64;
    assert!(rx >= all && tx >= PASSED as f64, "rx {rx} tx {tx}\n{body}");
    assert!(
        blocked >= BLOCKED as f64 && rule >= BLOCKED as f64,
        "blocked {blocked} rule {rule}\n{body}"
    );
    assert!(metric(body, "linerate_worker_rx_packets_total", &["worker=\"0\""]) >= all, "{body}");
    assert!(
        body.contains("# TYPE linerate_state_table_limit gauge")
            && body.contains("linerate_punt_drops_total{class="),
        "{body}"
    );
    assert!(body.contains("linerate_neighbours{state=\"reachable\"}"), "{body}");

    let prom = lab.dir.join("metrics.prom");
    std::fs::write(&prom, body).unwrap();
    let check = Command::new("bash")
        .args(["-c", &format!("promtool check metrics < {}", prom.display())])
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );

    let answer = http(&lab, "Accept: application/openmetrics-text; version=1.0.0\\r\\n");
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    assert!(head.contains("application/openmetrics-text; version=1.0.0"), "{head}");
    assert!(body.ends_with("# EOF\n"), "{body}");
    let om = lab.dir.join("metrics.om");
    std::fs::write(&om, body).unwrap();
    let parse = "import sys\nfrom prometheus_client.openmetrics.parser import text_string_to_metric_families as parse\nfams = list(parse(open(sys.argv[1]).read()))\nprint(len(fams))\n";
    let parsed = Command::new("/usr/bin/python3").args(["-c", parse]).arg(&om).output().unwrap();
    assert!(
        parsed.status.success(),
        "OpenMetrics parser: {}",
        String::from_utf8_lossy(&parsed.stderr)
    );
    assert!(String::from_utf8_lossy(&parsed.stdout).trim().parse::<usize>().unwrap() > 30);

    // Four connections that send nothing hold every handler: the fifth is turned away.
    let busy = format!(
        "for fd in 3 4 5 6; do eval \"exec $fd<>/dev/tcp/127.0.0.1/{METRICS_PORT}\"; done; sleep 0.3; exec 7<>/dev/tcp/127.0.0.1/{METRICS_PORT}; printf 'GET /metrics HTTP/1.1\\r\\n\\r\\n' >&7; head -1 <&7"
    );
    let out = lab.d.exec("bash", &["-c", &busy]).unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("HTTP/1.1 503"), "{out:?}");

    // The control socket: peers that send a byte now and then, or ask for the stats and
    // never read them, hold up nobody (each is served on a thread of its own, within its
    // deadlines). Before, one such peer held every `show` back for as long as it liked.
    let socket = lab.dir.join("control.sock");
    let slow = format!(
        "import socket,time\nss=[socket.socket(socket.AF_UNIX) for _ in range(3)]\n\
         [s.connect('{}') for s in ss]\nss[2].send(b'stats\\n')\n\
         for _ in range(8):\n  [s.send(b'x') for s in ss[:2]]\n  time.sleep(0.5)",
        socket.display()
    );
    let mut slow = Command::new("python3").args(["-c", &slow]).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let t0 = std::time::Instant::now();
    let shown = linerate(&["show", "interfaces"], &cfg);
    assert!(
        shown.status.success() && t0.elapsed() < Duration::from_secs(2),
        "show behind slow peers: {:?} {}",
        t0.elapsed(),
        stdout_of(&shown)
    );
    assert!(slow.wait().unwrap().success());

    // SIGHUP: RELOADING=1 with the monotonic clock, then READY=1 with the reload's answer.
    let pid = dut.0.as_ref().unwrap().id().to_string();
    assert!(Command::new("kill").args(["-HUP", &pid]).status().unwrap().success());
    let reloading = receive(&notify);
    assert!(reloading.starts_with("RELOADING=1\n"), "{reloading:?}");
    let usec: u64 =
        reloading.lines().find_map(|l| l.strip_prefix("MONOTONIC_USEC=")).unwrap().parse().unwrap();
    assert!(usec > 0);
    let ready = receive(&notify);
    assert!(ready.starts_with("READY=1\n") && ready.contains("ok: 1 rules"), "{ready:?}");

    let mut child = dut.terminate().unwrap();
    let mut out = String::new();
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    assert!(child.wait().unwrap().success(), "{out}");
    assert!(receive(&notify).starts_with("STOPPING=1\n"));
}

/// Sends one datagram from `from`'s `sport` to `dst:dport`.
fn send_from(ns: &lab::topology::Namespace, sport: u16, dst: &str, dport: u16, payload: &str) {
    let code = "import socket, sys\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\ns.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\ns.bind(('', int(sys.argv[1])))\ns.sendto(sys.argv[4].encode(), (sys.argv[2], int(sys.argv[3])))\n";
    ns.exec("python3", &["-c", code, &sport.to_string(), dst, &dport.to_string(), payload])
        .unwrap();
}

/// Whether A, listening on `port`, receives B's reply from 198.19.0.2:`from_port`.
fn reply_arrives(lab: &Lab, port: u16, from_port: u16) -> bool {
    let listen = "import socket, sys\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\ns.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\ns.bind(('', int(sys.argv[1])))\ns.settimeout(1.5)\nprint('ready', file=sys.stderr, flush=True)\ntry:\n    print(s.recv(64).decode())\nexcept OSError:\n    print('timeout')\n";
    let mut rx = lab.a.command("python3");
    rx.args(["-c", listen, &port.to_string()]);
    let mut guard = start_until(rx, "ready");
    send_from(&lab.b, from_port, "198.18.0.2", port, "reply");
    let mut child = guard.0.take().unwrap();
    let mut out = String::new();
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    child.wait().unwrap();
    out.trim() == "reply"
}

fn states(cfg: &Path, filter: &[&str]) -> Value {
    let mut args = vec!["show", "states", "--json"];
    args.extend_from_slice(filter);
    serde_json::from_str(&stdout_of(&linerate(&args, cfg))).unwrap()
}

fn blocked(cfg: &Path) -> u64 {
    let drops: Value =
        serde_json::from_str(&stdout_of(&linerate(&["show", "drops", "--json"], cfg))).unwrap();
    drops["filter_blocked"].as_u64().unwrap()
}

#[test]
fn states_are_listed_killed_and_flushed() {
    if !can_run() {
        return;
    }
    let lab = build("os");
    lab.b.addr("lrb0", "198.19.0.3/24").unwrap();
    let cfg = write_config(&lab, "af_packet", "[firewall]\nrules = \"rules.conf\"\n");
    let rules = "block all\npass proto udp from 198.18.0.0/24 keep state label \"from-a\"\npass proto icmp no state\n";
    std::fs::write(lab.dir.join("rules.conf"), rules).unwrap();
    let mut cmd = lab.d.command(env!("CARGO_BIN_EXE_linerate"));
    cmd.args(["run", "-c"]).arg(&cfg).args(["--cpu", "0"]);
    let mut dut = start_until(cmd, "forwarding with");
    // Neighbours resolved first, so that the flows' first datagrams are not held.
    for b in ["198.19.0.2", "198.19.0.3"] {
        assert!(lab.a.exec("ping", &["-c", "1", "-W", "2", b]).is_ok(), "ping {b}");
    }

    send_from(&lab.a, 40001, "198.19.0.2", 7001, "one");
    send_from(&lab.a, 40002, "198.19.0.3", 7002, "two");
    let v = states(&cfg, &["--proto", "udp", "--src", "198.18.0.2"]);
    assert_eq!(v["matched"], 2, "{v}");
    let mut flows: Vec<String> = v["states"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| format!("{}:{}->{}:{}", s["src"], s["sport"], s["dst"], s["dport"]))
        .collect();
    flows.sort();
    assert_eq!(
        flows,
        ["\"198.18.0.2\":40001->\"198.19.0.2\":7001", "\"198.18.0.2\":40002->\"198.19.0.3\":7002"]
    );
    let table = stdout_of(&linerate(&["show", "states", "--port", "7001"], &cfg));
    assert!(
        table.contains("198.18.0.2:40001")
            && table.contains("198.19.0.2:7001")
            && table.contains("1 of 1 matching"),
        "{table}"
    );
    assert!(!table.contains("7002"), "{table}");

    // The state lets B's reply through.
    assert!(reply_arrives(&lab, 40001, 7001), "the reply of a tracked flow must pass");

    let killed =
        stdout_of(&linerate(&["kill", "states", "-s", "198.18.0.2", "-d", "198.19.0.2"], &cfg));
    assert_eq!(killed.trim(), "killed 1 states from 198.18.0.2 to 198.19.0.2");
    let v = states(&cfg, &["--proto", "udp"]);
    assert_eq!(v["matched"], 1, "{v}");
    assert_eq!(v["states"][0]["dport"], 7002, "{v}");

    // Without its state, the reply meets `block all`.
    let before = blocked(&cfg);
    assert!(!reply_arrives(&lab, 40001, 7001), "the reply of a killed flow must be blocked");
    assert!(blocked(&cfg) > before, "counted as filter_blocked");
    assert_eq!(states(&cfg, &["--port", "7001"])["matched"], 0);

    let rules_out = stdout_of(&linerate(&["show", "rules"], &cfg));
    assert!(
        rules_out.contains("@0 block all")
            && rules_out.contains("@1 pass proto udp from 198.18.0.0/24 keep state"),
        "{rules_out}"
    );
    let rules_json: Value =
        serde_json::from_str(&stdout_of(&linerate(&["show", "rules", "--json"], &cfg))).unwrap();
    assert!(
        rules_json[1]["packets"].as_u64().unwrap() >= 3
            && rules_json[1]["states"].as_u64().unwrap() >= 2,
        "{rules_json}"
    );
    assert!(rules_json[0]["packets"].as_u64().unwrap() >= 1, "{rules_json}");

    let flushed = stdout_of(&linerate(&["flush", "states"], &cfg));
    assert!(flushed.trim().ends_with("states cleared") && !flushed.starts_with('0'), "{flushed}");
    let v = states(&cfg, &[]);
    assert_eq!((v["matched"].as_u64(), v["in_use"].as_u64()), (Some(0), Some(0)), "{v}");

    let mut child = dut.terminate().unwrap();
    assert!(child.wait().unwrap().success());
}
