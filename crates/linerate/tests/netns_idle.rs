//! An idle router gives its CPU back and still answers at once: with no traffic the worker
//! sleeps (`router.sleep_when_idle`, the default), and a ping across it wakes it.
//!
//! Needs root (CI has it); without root the test says "skipped" and passes.

use std::time::Duration;

use lab::topology::is_root;

mod common;

use common::{build, start_until, write_config};

/// CPU time (user + system, clock ticks) of the thread of `pid` named `name`.
fn thread_ticks(pid: u32, name: &str) -> Option<u64> {
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let dir = task.ok()?.path();
        if std::fs::read_to_string(dir.join("comm")).ok()?.trim() != name {
            continue;
        }
        let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
        // Fields after the parenthesised name: state is field 3, utime 14, stime 15.
        let rest: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        return Some(rest.get(11)?.parse::<u64>().ok()? + rest.get(12)?.parse::<u64>().ok()?);
    }
    None
}

fn idle_worker(backend: &str, tag: &str) {
    if !is_root() {
        lab::topology::skip_test("needs root");
        return;
    }
    let lab = build(tag);
    let cfg = write_config(&lab, backend, "");
    let mut cmd = lab.d.command(env!("CARGO_BIN_EXE_linerate"));
    cmd.args(["run", "-c"]).arg(&cfg).args(["--cpu", "1"]);
    let dut = start_until(cmd, "forwarding with");
    let pid = dut.0.as_ref().unwrap().id();
    // Once neighbours are resolved, nothing moves: the worker must be asleep.
    assert!(
        lab.a.exec("ping", &["-c", "2", "-i", "0.2", "-W", "2", "198.19.0.2"]).is_ok(),
        "{backend}: ping across linerate"
    );
    std::thread::sleep(Duration::from_millis(500));
    let before = thread_ticks(pid, "lr-worker-0").expect("worker thread");
    std::thread::sleep(Duration::from_secs(3));
    let used = thread_ticks(pid, "lr-worker-0").expect("worker thread") - before;
    // 300 ticks would be a spinning worker; a sleeping one wakes 100 times a second at most.
    assert!(used <= 30, "{backend}: the idle worker used {used} of 300 clock ticks in 3 s");
    // Asleep, it still forwards at once.
    let ping = lab.a.exec("ping", &["-c", "5", "-i", "0.5", "-W", "1", "198.19.0.2"]);
    assert!(ping.is_ok(), "{backend}: ping across a sleeping linerate failed: {ping:?}");
}

#[test]
fn idle_worker_sleeps_af_xdp() {
    idle_worker("af_xdp", "ix");
}

#[test]
fn idle_worker_sleeps_af_packet() {
    idle_worker("af_packet", "ip");
}
