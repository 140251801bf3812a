//! Fault injection (issue 46): what production does to a router besides traffic.
//!
//! - `kill -9` under load with `fail_closed`: D's kernel holds the router's addresses with
//!   forwarding on (a box that would forward unfiltered); once linerate is killed, nothing
//!   crosses D, neither what the rules pass nor what they block, until it runs again;
//! - a full disk under the pflog file: records are lost and counted, forwarding and the
//!   control socket go on, and `linerate log` still gets every record;
//! - clients that vanish mid-stream: metrics scrapes cut after a few bytes and `linerate log`
//!   clients killed while records flow cost nothing;
//! - the kernel's route netlink socket overflowing during route churn (a 4 KiB receive
//!   buffer, `LINERATE_ROUTE_RCVBUF`, against 20,000 route changes): the table is dumped
//!   again and linerate's kernel routes end up those of the kernel.
//!
//! Needs root. Namespaces `lr<pid><tag>{a,d,b}`.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use lab::topology::{Namespace, is_root};

mod common;

use common::{Guard, Lab, build, start_until, stats, text, write_config};

/// Sends `argv[2]` datagrams to 198.19.0.2:`argv[1]` at about 2,000 a second.
const SEND: &str = "import socket,sys,time\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\nport,n=int(sys.argv[1]),int(sys.argv[2])\nfor i in range(n):\n  s.sendto(b'x'*18,('198.19.0.2',port))\n  if i%20==19: time.sleep(0.01)\n";
/// Counts the datagrams reaching B's ports 9000 and 9001 until 1 s passes without one;
/// prints both counts.
const RECEIVE: &str = "import socket,select,sys\nss=[]\nfor p in (9000,9001):\n  s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.bind(('0.0.0.0',p)); ss.append(s)\nprint('ready',file=sys.stderr,flush=True)\nn=[0,0]; wait=4\nwhile True:\n  r,_,_=select.select(ss,[],[],wait)\n  if not r: break\n  wait=1\n  for s in r:\n    s.recv(64); n[ss.index(s)]+=1\nprint(n[0],n[1])\n";

fn linerate(args: &[&str], cfg: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_linerate")).args(args).arg("-c").arg(cfg).output().unwrap()
}

fn run(lab: &Lab, cfg: &Path) -> Guard {
    let mut cmd = lab.d.command(env!("CARGO_BIN_EXE_linerate"));
    cmd.args(["run", "-c"]).arg(cfg).args(["--cpu", "1"]);
    start_until(cmd, "forwarding with")
}

/// Datagrams to B's ports 9000 and 9001 that arrive, of `n` sent to each.
fn delivered(lab: &Lab, n: u32) -> (u32, u32) {
    let mut rx = lab.b.command("python3");
    rx.args(["-c", RECEIVE]);
    let rx = start_until(rx, "ready");
    for port in ["9000", "9001"] {
        let out = lab.a.command("python3").args(["-c", SEND, port, &n.to_string()]).output();
        assert!(out.unwrap().status.success());
    }
    let got = common::finish(rx);
    let v: Vec<u32> = got.split_whitespace().map(|x| x.parse().unwrap()).collect();
    (v[0], v[1])
}

fn sysctl(ns: &Namespace, key: &str) -> String {
    let out = ns.exec("cat", &[&format!("/proc/sys/{}", key.replace('.', "/"))]).unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[test]
fn killed_under_load_with_fail_closed_nothing_crosses_until_it_runs_again() {
    assert!(is_root(), "needs root (namespaces): run the suite as root");
    let lab = build("xk");
    // D's kernel could forward: the router's addresses, forwarding on.
    lab.d.addr("lrd0", "198.18.0.1/24").unwrap();
    lab.d.addr("lrd1", "198.19.0.1/24").unwrap();
    lab.d.sysctl("net.ipv4.ip_forward=1").unwrap();
    let rules = lab.dir.join("rules.conf");
    std::fs::write(&rules, "pass all no state\nblock in quick proto udp to port 9000\n").unwrap();
    let fw = format!("[firewall]\nrules = \"{}\"\n", rules.display());
    let cfg = write_config(&lab, "af_xdp", &fw);
    let text_cfg = std::fs::read_to_string(&cfg).unwrap().replacen(
        "[router]\n",
        "[router]\nfail_closed = true\nhost_stack = false\n",
        1,
    );
    std::fs::write(&cfg, text_cfg).unwrap();
    let mut dut = run(&lab, &cfg);
    let _ = lab.a.exec("ping", &["-c", "1", "-W", "1", "198.19.0.2"]);
    assert_eq!(delivered(&lab, 200), (0, 200), "the rules decide while linerate runs");

    // Killed while a flood runs.
    let mut flood = lab.a.command("python3");
    flood.args(["-c", SEND, "9001", "20000"]);
    let _flood = Guard(Some(flood.spawn().unwrap()));
    std::thread::sleep(Duration::from_millis(500));
    let mut child = dut.0.take().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    drop(_flood);
    assert_eq!(sysctl(&lab.d, "net.ipv4.ip_forward"), "0", "fail_closed turned it off");
    assert_eq!(delivered(&lab, 200), (0, 0), "nothing crosses D while linerate is down");

    let _again = run(&lab, &cfg);
    let _ = lab.a.exec("ping", &["-c", "1", "-W", "1", "198.19.0.2"]);
    assert_eq!(delivered(&lab, 200), (0, 200), "the rules decide again");
}

/// A tmpfs of 64 KiB under the pflog file: the file fills, its records are lost and
/// counted, and the router forwards and answers as before.
#[test]
fn a_full_disk_under_the_pflog_file_loses_records_not_the_router() {
    assert!(is_root(), "needs root (namespaces, mount): run the suite as root");
    let lab = build("xd");
    let full = lab.dir.join("full");
    std::fs::create_dir_all(&full).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "lrfull"])
        .arg(&full)
        .status()
        .unwrap();
    assert!(mounted.success(), "mount a small tmpfs");
    struct Unmount<'a>(&'a Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(self.0).status();
        }
    }
    let _unmount = Unmount(&full);
    let rules = lab.dir.join("rules.conf");
    std::fs::write(
        &rules,
        "pass all no state\npass in log quick proto udp to port 9000 no state\n",
    )
    .unwrap();
    let extra = format!(
        "[firewall]\nrules = \"{}\"\n\n[log]\nfile = \"{}\"\nmax_size = 100000000\nrate = 100000\n",
        rules.display(),
        full.join("pflog.pcap").display()
    );
    let cfg = write_config(&lab, "af_packet", &extra);
    let mut dut = run(&lab, &cfg);
    let _ = lab.a.exec("ping", &["-c", "1", "-W", "1", "198.19.0.2"]);
    // 4,000 records of ~170 bytes: far more than 64 KiB.
    assert_eq!(delivered(&lab, 4000), (4000, 4000), "every datagram forwarded");
    let shown = linerate(&["show", "drops", "--json"], &cfg);
    assert!(shown.status.success(), "the control socket answers: {}", text(&shown));
    let child = dut.terminate().unwrap();
    let out = child.wait_with_output().unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{report}{stderr}");
    let errors = report
        .lines()
        .find(|l| l.starts_with("log: "))
        .unwrap_or_else(|| panic!("no log line in the report:\n{report}"));
    assert!(!errors.ends_with("file write errors 0"), "the lost records are counted: {errors}");
}

/// Metrics scrapes cut after a few bytes, and `linerate log` clients killed mid-stream:
/// the router forwards, answers and logs as before.
#[test]
fn clients_that_vanish_mid_stream_cost_nothing() {
    assert!(is_root(), "needs root (namespaces): run the suite as root");
    let lab = build("xc");
    let rules = lab.dir.join("rules.conf");
    std::fs::write(
        &rules,
        "pass all no state\npass in log quick proto udp to port 9000 no state\n",
    )
    .unwrap();
    let extra = format!("[firewall]\nrules = \"{}\"\n", rules.display());
    let cfg = write_config(&lab, "af_packet", &extra);
    let text_cfg = std::fs::read_to_string(&cfg).unwrap().replacen(
        "[router]\n",
        "[router]\nmetrics_listen = \"127.0.0.1:9419\"\n",
        1,
    );
    std::fs::write(&cfg, text_cfg).unwrap();
    let mut dut = run(&lab, &cfg);
    let _ = lab.a.exec("ping", &["-c", "1", "-W", "1", "198.19.0.2"]);
    let mut flood = lab.a.command("python3");
    flood.args(["-c", SEND, "9000", "20000"]);
    let _flood = Guard(Some(flood.spawn().unwrap()));
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(3) {
        // A log client that reads a little and is killed.
        let mut log = lab.d.command(env!("CARGO_BIN_EXE_linerate"));
        log.args(["log", "-c"]).arg(&cfg).stdout(Stdio::piped()).stderr(Stdio::null());
        let mut client = log.spawn().unwrap();
        let mut first = [0u8; 64];
        let _ = client.stdout.take().unwrap().read(&mut first);
        client.kill().unwrap();
        client.wait().unwrap();
        // A scrape cut after the request and a few bytes of the answer.
        let scrape = lab.d.command("python3").args(["-c", "import socket\ns=socket.create_connection(('127.0.0.1',9419))\ns.sendall(b'GET /metrics HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')\ns.recv(16)\ns.close()\n"]).output().unwrap();
        assert!(scrape.status.success(), "scrape: {}", text(&scrape));
    }
    drop(_flood);
    let full = lab.d.command("python3").args(["-c", "import urllib.request\nprint(len(urllib.request.urlopen('http://127.0.0.1:9419/metrics').read()))\n"]).output().unwrap();
    assert!(full.status.success(), "a whole scrape after the cut ones: {}", text(&full));
    assert_eq!(delivered(&lab, 500), (500, 500), "forwarding as before");
    let child = dut.terminate().unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
}

/// The kernel's route socket overflows (a 4 KiB buffer against 20,000 route changes at
/// once): linerate dumps the table again, and ends with the kernel's routes.
#[test]
fn route_churn_that_overflows_netlink_ends_with_the_kernels_routes() {
    assert!(is_root(), "needs root (namespaces): run the suite as root");
    let lab = build("xr");
    let cfg = write_config(&lab, "af_packet", "[router.kernel_routes]\ntable = \"main\"\n");
    let mut cmd = lab.d.command(env!("CARGO_BIN_EXE_linerate"));
    cmd.env("LINERATE_ROUTE_RCVBUF", "4096").args(["run", "-c"]).arg(&cfg).args(["--cpu", "1"]);
    let mut dut = start_until(cmd, "forwarding with");
    // 10,000 routes added, then every other one deleted, as fast as `ip -batch` goes.
    let batch = lab.dir.join("routes.batch");
    let mut b = std::fs::File::create(&batch).unwrap();
    for i in 0..10_000u32 {
        writeln!(b, "route add 10.{}.{}.0/24 via 198.19.0.2", 100 + i / 256, i % 256).unwrap();
    }
    for i in (0..10_000u32).step_by(2) {
        writeln!(b, "route del 10.{}.{}.0/24", 100 + i / 256, i % 256).unwrap();
    }
    drop(b);
    let added = lab.d.command("ip").arg("-batch").arg(&batch).output().unwrap();
    assert!(added.status.success(), "ip -batch: {}", text(&added));
    let kernel = || stats(&lab.dir.join("control.sock"))["kernel_routes"].clone();
    let started = Instant::now();
    loop {
        let k = kernel();
        if k["routes"] == 5000 && k["pending"] == 0 {
            assert!(k["overruns"].as_u64() >= Some(1), "the buffer overflowed: {k}");
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "not converged: {k}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let child = dut.terminate().unwrap();
    assert!(child.wait_with_output().unwrap().status.success());
}
