//! Overload far past capacity: the in-kernel generator offers several times what linerate
//! forwards, and linerate keeps forwarding (no receive livelock: its input's receive work
//! runs in a thread below the worker, io::napi), then still forwards a ping. Over AF_XDP
//! ports and over AF_PACKET ones (whose decided flows go by the fast path at tc ingress:
//! B's end has GRO on, so lrd1 takes them).
//!
//! Needs root (CI has it); without root the test says "skipped" and passes.

use lab::topology::is_root;

mod common;

use common::{B_MAC, D0_MAC, build, start_until, write_config};

fn summary(out: &[u8]) -> serde_json::Value {
    let text = String::from_utf8_lossy(out);
    text.lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("no JSON summary in {text}"))
}

#[test]
fn forwards_under_overload() {
    if !is_root() {
        lab::topology::skip_test("needs root");
        return;
    }
    overload_through("ov", "af_xdp");
}

#[test]
fn forwards_under_overload_over_af_packet() {
    if !is_root() {
        lab::topology::skip_test("needs root");
        return;
    }
    overload_through("ow", "af_packet");
}

fn overload_through(name: &str, backend: &str) {
    let lab = build(name);
    if backend == "af_packet" {
        assert!(lab.b.exec("ethtool", &["-K", "lrb0", "gro", "on"]).is_ok());
    }
    let extra = format!(
        "[[route]]\nprefix = \"198.19.10.0/24\"\nvia = \"198.19.0.2\"\n\n[[neighbour]]\naddress = \"198.19.0.2\"\nmac = \"{B_MAC}\"\n"
    );
    let cfg = write_config(&lab, backend, &extra);
    let mut cmd = lab.d.command(env!("CARGO_BIN_EXE_linerate"));
    cmd.args(["run", "-c"]).arg(&cfg).args(["--cpu", "1"]);
    let _dut = start_until(cmd, "forwarding with");

    let bin = env!("CARGO_BIN_EXE_linerate");
    let mut rcv = lab.b.command(bin);
    rcv.args(["rcv", "-i", "lrb0", "--backend", "xdp-sink", "--json", "-t", "7"])
        .stdout(std::process::Stdio::piped());
    let rcv = rcv.spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let gen_args = [
        "gen",
        "--backend",
        "xdp-live",
        "-i",
        "lra0",
        "-D",
        D0_MAC,
        "-s",
        "198.18.10.1-198.18.10.20",
        "-d",
        "198.19.10.1-198.19.10.100",
        "-t",
        "5",
        "--cpu",
        "0",
        "--json",
    ];
    let g = lab.a.command(bin).args(gen_args).output().unwrap();
    assert!(g.status.success(), "gen: {}", String::from_utf8_lossy(&g.stderr));
    let r = rcv.wait_with_output().unwrap();
    let (g, r) = (summary(&g.stdout), summary(&r.stdout));
    let offered = (g["sent"].as_f64().unwrap() + g["dropped"].as_f64().unwrap())
        / g["seconds"].as_f64().unwrap();
    let rates: Vec<f64> =
        r["per_second"].as_array().unwrap().iter().filter_map(|v| v.as_f64()).collect();
    let busy: Vec<f64> = rates.iter().copied().filter(|&pps| pps > 1000.0).collect();
    eprintln!("offered {offered:.0} pps; delivered per second {rates:?}");
    assert!(busy.len() >= 3, "traffic flowed in fewer than 3 seconds: {rates:?}");
    let inner = &busy[1..busy.len() - 1];
    let delivered = inner.iter().sum::<f64>() / inner.len() as f64;
    // The point of the test: offered far more than it forwards...
    assert!(
        offered >= 3.0 * delivered,
        "offered {offered:.0} pps is not 3x the {delivered:.0} pps delivered: no overload to test"
    );
    // ...it keeps forwarding in every second (a livelocked router delivers a few kpps).
    assert!(
        inner.iter().all(|&pps| pps >= 20_000.0),
        "linerate starved under overload: {rates:?} pps delivered, {offered:.0} offered"
    );
    assert!(
        lab.a.exec("ping", &["-c", "3", "-i", "0.2", "-W", "2", "198.19.0.2"]).is_ok(),
        "ping across linerate after the overload"
    );
}
