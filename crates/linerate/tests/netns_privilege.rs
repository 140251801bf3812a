//! Least privilege end to end: `linerate run` started as `nobody` with only the documented
//! capabilities (util-linux setpriv) forwards, drops every capability once set up, turns the
//! namespace's forwarding off (`fail_closed`), and its control socket refuses a user outside
//! `router.control_group`, lets a member `show` but not `reload`. A missing capability is
//! named before anything is touched. Needs root (skips without). Namespaces are named
//! `lr<pid>p<host>` and removed on drop.

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use lab::topology::is_root;

mod common;

use common::{Lab, build, start_until, write_config};

/// The capabilities docs/router.md lists for a non-root `run` with NAPI threads on.
const CAPS: &str = "+net_admin,+net_raw,+bpf,+ipc_lock,+sys_nice,+dac_override";

/// setpriv as `uid`/`gid` with `groups` (none: cleared) and `caps` in every set that
/// survives exec.
fn setpriv(uid: u32, gid: u32, groups: Option<&str>, caps: &str) -> Vec<String> {
    let mut v = vec![format!("--reuid={uid}"), format!("--regid={gid}")];
    v.push(groups.map_or("--clear-groups".into(), |g| format!("--groups={g}")));
    if !caps.is_empty() {
        v.push(format!("--inh-caps={caps}"));
        v.push(format!("--ambient-caps={caps}"));
    }
    v.push("--".into());
    v
}

fn config(lab: &Lab, backend: &str, router: &str) -> PathBuf {
    let path = write_config(lab, backend, "");
    let text = std::fs::read_to_string(&path).unwrap().replacen(
        "[router]\n",
        &format!("[router]\n{router}"),
        1,
    );
    std::fs::write(&path, text).unwrap();
    // nobody reads the config and creates the control socket here.
    std::fs::set_permissions(&lab.dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    path
}

/// `linerate ARGS` as `uid` with supplementary `groups` and `caps`, in the root namespace.
fn linerate_as(uid: u32, groups: Option<&str>, caps: &str, args: &[&str], cfg: &Path) -> Output {
    Command::new("setpriv")
        .args(setpriv(uid, uid, groups, caps))
        .arg(env!("CARGO_BIN_EXE_linerate"))
        .args(args)
        .arg("-c")
        .arg(cfg)
        .output()
        .unwrap()
}

fn status_field(pid: u32, tid: &str, field: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/status")).unwrap();
    let v = s.lines().find_map(|l| l.strip_prefix(field)).unwrap().trim();
    u64::from_str_radix(v, 16).unwrap()
}

#[test]
fn nobody_with_capabilities_forwards_and_the_socket_checks_peers() {
    if !is_root() {
        lab::topology::skip_test("needs root");
        return;
    }
    // AF_XDP (XDP program, UMEM) and AF_PACKET (fanout program, tc program).
    for backend in ["af_xdp", "af_packet"] {
        unprivileged_run(backend);
    }
}

fn unprivileged_run(backend: &str) {
    let lab = build(if backend == "af_xdp" { "p" } else { "r" });
    // nogroup is the control group: a member may show, nobody else may connect.
    // Two workers on AF_PACKET: the fanout group's Toeplitz program is loaded too (a veth
    // has one queue, AF_XDP one worker).
    let workers = if backend == "af_packet" { 2 } else { 1 };
    let cfg = config(
        &lab,
        backend,
        &format!("fail_closed = true\ncontrol_group = \"nogroup\"\nworkers = {workers}\n"),
    );
    lab.d.sysctl("net.ipv4.ip_forward=1").unwrap();
    // Its stderr also into a file, for the messages after it is ready (same pid: exec).
    let log = lab.dir.join("run.err");
    let mut cmd = lab.d.command("bash");
    cmd.args(["-c", "exec \"$@\" 2> >(tee \"$LR_LOG\" >&2)", "bash", "setpriv"])
        .env("LR_LOG", &log)
        .args(setpriv(65534, 65534, None, CAPS))
        .arg(env!("CARGO_BIN_EXE_linerate"))
        .args(["run", "-c"])
        .arg(&cfg)
        .args(["--cpu", "0"]);
    let mut dut = start_until(cmd, "forwarding with");
    let pid = dut.0.as_ref().unwrap().id();

    // Forwarding works with the capabilities dropped.
    assert!(
        lab.a.exec("ping", &["-c", "3", "-i", "0.2", "-W", "2", "198.19.0.2"]).is_ok(),
        "ping through linerate run as nobody"
    );
    let fwd = lab.d.exec("cat", &["/proc/sys/net/ipv4/ip_forward"]).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&fwd.stdout).trim(),
        "0",
        "fail_closed turned the kernel's forwarding off"
    );

    // Every thread: no effective, inheritable or ambient capability; the permitted set only
    // holds what the clean-up at exit needs (CAP_DAC_OVERRIDE 1, CAP_SYS_NICE 23), and what
    // rebuilding a port needs (`router.rebuild_ports`: CAP_NET_ADMIN 12, CAP_NET_RAW 13,
    // CAP_IPC_LOCK 14, CAP_BPF 39).
    let rebuild: u64 = (1 << 12) | (1 << 13) | (1 << 14) | (1 << 39);
    let tasks: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(tasks.len() >= 3, "workers, slow path and control threads: {tasks:?}");
    for t in &tasks {
        assert_eq!(status_field(pid, t, "CapEff:"), 0, "thread {t}: effective");
        assert_eq!(status_field(pid, t, "CapInh:"), 0, "thread {t}: inheritable");
        assert_eq!(status_field(pid, t, "CapAmb:"), 0, "thread {t}: ambient");
        let permitted = (1 << 1) | (1 << 23) | rebuild;
        assert_eq!(status_field(pid, t, "CapPrm:"), permitted, "thread {t}: permitted");
        assert_eq!(status_field(pid, t, "NoNewPrivs:"), 1, "thread {t}");
    }

    // The socket: 0660, group nogroup, created so (no chmod race).
    let sock = lab.dir.join("control.sock");
    let meta = std::fs::metadata(&sock).unwrap();
    assert_eq!(
        (meta.permissions().mode() & 0o777, std::os::unix::fs::MetadataExt::gid(&meta)),
        (0o660, 65534)
    );
    // Root and the router's own uid may do everything.
    let out = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(["show", "interfaces", "-c"])
        .arg(&cfg)
        .output()
        .unwrap();
    assert!(out.status.success(), "root: {}", String::from_utf8_lossy(&out.stderr));
    // A member of the control group may show, not reload.
    let member = linerate_as(65533, Some("65534"), "", &["show", "routes"], &cfg);
    assert!(member.status.success(), "member: {}", String::from_utf8_lossy(&member.stderr));
    let member = linerate_as(65533, Some("65534"), "", &["reload"], &cfg);
    let err = String::from_utf8_lossy(&member.stderr);
    assert!(
        !member.status.success()
            && err.contains("permission denied: reload needs root or uid 65534"),
        "{err}"
    );
    // Outside the group: the file's mode keeps it out.
    let outsider = linerate_as(65533, None, "", &["show", "routes"], &cfg);
    let err = String::from_utf8_lossy(&outsider.stderr);
    assert!(!outsider.status.success() && err.contains("Permission denied"), "{err}");
    // ... and a process that can pass the file's mode (CAP_DAC_OVERRIDE) is refused by its
    // credentials.
    let outsider = linerate_as(65533, None, "+dac_override", &["show", "routes"], &cfg);
    let err = String::from_utf8_lossy(&outsider.stderr);
    assert!(
        !outsider.status.success()
            && err.contains("permission denied: uid 65533 may not use this socket"),
        "{err}"
    );

    {
        // Its port rebuilt on an interface created again, with only the kept capabilities
        // (raised by the workers' threads) and another MAC on the new interface.
        lab.d.ip(&["link", "del", "lrd1"]).unwrap();
        common::b_side(&lab.d, &lab.b, "02:00:00:00:0d:99", 1);
        let start = std::time::Instant::now();
        while lab.a.exec("ping", &["-c", "1", "-W", "1", "198.19.0.2"]).is_err() {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(5),
                "no ping across the port rebuilt as nobody: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
    }

    let mut linerate = dut.terminate().unwrap();
    let mut stdout = String::new();
    linerate.stdout.take().unwrap().read_to_string(&mut stdout).unwrap();
    let status = linerate.wait().unwrap();
    assert!(status.success(), "{stdout}");
    let fwd = lab.d.exec("cat", &["/proc/sys/net/ipv4/ip_forward"]).unwrap();
    assert_eq!(String::from_utf8_lossy(&fwd.stdout).trim(), "0", "fail_closed holds after exit");
}

#[test]
fn a_missing_capability_is_named_before_anything_is_touched() {
    if !is_root() {
        lab::topology::skip_test("needs root");
        return;
    }
    let lab = build("q");
    let cfg = config(&lab, "af_xdp", "");
    let mut cmd = lab.d.command("setpriv");
    cmd.args(setpriv(65534, 65534, None, "+net_admin,+net_raw,+ipc_lock,+sys_nice,+dac_override"))
        .arg(env!("CARGO_BIN_EXE_linerate"))
        .args(["run", "-c"])
        .arg(&cfg);
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains(
            "linerate run needs CAP_BPF (create linerate's eBPF maps and load its programs)"
        ),
        "{err}"
    );
    assert!(!err.contains("CAP_NET_ADMIN"), "only the missing one is named: {err}");
    let link = lab.d.exec("ip", &["-o", "link", "show"]).unwrap();
    assert!(!String::from_utf8_lossy(&link.stdout).contains("lrh"), "no TAP was created");
}
