//! A short real lab: kernel forwarding vs linerate in namespaces, 3 runs of 3 s each plus a
//! small zero-loss search, checking that every results file is written and that the figures
//! are real (packets flowed; a run cannot pass with zero). Needs root; "skipped" otherwise.

use std::sync::Mutex;

/// The lab's namespaces have fixed names (`lrlab-*`): one lab at a time.
static ONE_LAB: Mutex<()> = Mutex::new(());

/// A finished `linerate lab` run of `toml` (in a folder of its own, `tag`): its last JSON
/// line, its results folder and its whole stdout. The folder is removed on drop.
struct LabRun {
    dir: std::path::PathBuf,
    out_dir: std::path::PathBuf,
    stdout: String,
    json: serde_json::Value,
}

impl Drop for LabRun {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn run_lab(tag: &str, toml: &str, args: &[&str]) -> LabRun {
    let dir = std::env::temp_dir().join(format!("lr-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("lab.toml");
    std::fs::write(&file, toml).unwrap();
    let out_dir = dir.join("results");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_linerate"))
        .arg("lab")
        .arg(&file)
        .args(args)
        .args(["--json", "--out"])
        .arg(&out_dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "stderr: {}\nstdout: {stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    LabRun { dir, out_dir, stdout, json }
}

#[test]
fn short_lab_writes_sane_results() {
    if !lab::topology::is_root() {
        lab::topology::skip_test("needs root");
        return;
    }
    let _one = ONE_LAB.lock().unwrap_or_else(|e| e.into_inner());
    let run = run_lab(
        "lab-test",
        "runs = 3\nseconds = 3\n[traffic]\nflows = 200\n[[set]]\nname = \"kernel\"\ndut = \"kernel\"\n[[set]]\nname = \"linerate\"\ndut = \"linerate\"\nbackend = \"af_packet\"\n",
        &["--search", "--max-trials", "2"],
    );
    let (v, out_dir, stdout) = (&run.json, &run.out_dir, &run.stdout);
    let sets = v["sets"].as_array().unwrap();
    assert_eq!(sets.len(), 2);
    for s in sets {
        let runs = s["runs_pps"].as_array().unwrap();
        assert_eq!(runs.len(), 3, "{s}");
        assert!(
            runs.iter().all(|r| r.as_f64().unwrap() > 1000.0),
            "a run forwarded (almost) nothing: {s}"
        );
        assert!(s["median_pps"].as_f64().unwrap() > 1000.0);
        assert!(s["generator_capacity_pps"].as_f64().unwrap() > 1000.0);
        assert!(s["zero_loss_pps"].as_f64().is_some(), "{s}");
    }
    let names: Vec<_> = sets.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["kernel", "linerate"]);

    for f in ["runs.csv", "sets.csv", "results.json", "plot.svg", "summary.txt", "counters.txt"] {
        assert!(out_dir.join(f).is_file(), "{f} missing");
    }
    // Every run (3 per set, and the search's trials) says where its frames went: the veths'
    // counters that grew, and linerate's own report for its runs.
    let counters = std::fs::read_to_string(out_dir.join("counters.txt")).unwrap();
    let blocks: Vec<&str> = counters.split("== ").skip(1).collect();
    assert!(blocks.len() >= 6, "{counters}");
    // ... and the summary sums it up per set.
    let summary_text = std::fs::read_to_string(out_dir.join("summary.txt")).unwrap();
    assert!(summary_text.contains("where the lost frames were dropped"), "{summary_text}");
    for set in ["kernel", "linerate"] {
        let line = format!("\n  {set}: input ");
        assert!(summary_text.contains(&line), "{summary_text}");
    }
    for b in &blocks {
        assert!(b.contains("lrg0.tx_packets=") && b.contains("lrr0.rx_packets="), "{b}");
        if b.starts_with("linerate") {
            assert!(b.lines().any(|l| l.starts_with("dut: packets: rx ")), "{b}");
        }
    }
    let runs_csv = std::fs::read_to_string(out_dir.join("runs.csv")).unwrap();
    assert_eq!(runs_csv.lines().count(), 1 + 6, "{runs_csv}");
    assert!(std::fs::read_to_string(out_dir.join("plot.svg")).unwrap().starts_with("<svg"));
    let summary = std::fs::read_to_string(out_dir.join("summary.txt")).unwrap();
    assert!(
        summary.contains("Difference at 95.0% confidence")
            || summary.contains("No difference proven at 95.0% confidence"),
        "{summary}"
    );
    assert!(stdout.contains("zero-loss throughput of kernel"), "{stdout}");
    // The namespaces are gone.
    let ns = std::process::Command::new("ip").args(["netns", "list"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&ns.stdout).contains("lrlab-"));
}

/// The NAT sets: nftables masquerade against linerate's `nat`, both forwarding, with their
/// ratio in the summary.
#[test]
fn short_nat_lab_compares_masquerade_and_nat() {
    if !lab::topology::is_root() {
        lab::topology::skip_test("needs root");
        return;
    }
    let _one = ONE_LAB.lock().unwrap_or_else(|e| e.into_inner());
    let run = run_lab(
        "lab-nat-test",
        "runs = 3\nseconds = 3\n[traffic]\nflows = 200\n[[set]]\nname = \"masq\"\ndut = \"kernel-nft\"\nnat = true\n[[set]]\nname = \"lrnat\"\ndut = \"linerate\"\nbackend = \"af_packet\"\nnat = true\n",
        &[],
    );
    let (v, out_dir) = (&run.json, &run.out_dir);
    for s in v["sets"].as_array().unwrap() {
        assert!(s["nat"].as_bool().unwrap(), "{s}");
        assert!(
            s["median_pps"].as_f64().unwrap() > 1000.0,
            "a NAT set forwarded (almost) nothing: {s}"
        );
    }
    let summary = std::fs::read_to_string(out_dir.join("summary.txt")).unwrap();
    assert!(summary.contains("lrnat / masq: "), "{summary}");
}

/// `--workers 2`: two queues per veth, two generators, linerate with two workers and the
/// kernel with two NAPI threads; both forward and the results say how many workers ran.
#[test]
fn two_worker_lab_forwards() {
    if !lab::topology::is_root() {
        lab::topology::skip_test("needs root");
        return;
    }
    let _one = ONE_LAB.lock().unwrap_or_else(|e| e.into_inner());
    let toml = "runs = 1\nseconds = 3\n[traffic]\nflows = 200\n[[set]]\nname = \"kernel\"\ndut = \"kernel\"\n[[set]]\nname = \"linerate\"\ndut = \"linerate\"\n";
    let run = run_lab(
        "lab-workers",
        toml,
        &["--workers", "2", "--gen-cpu", "0", "--dut-cpu", "0", "--rcv-cpu", "0"],
    );
    assert_eq!(run.json["workers"], 2, "{}", run.json);
    for s in run.json["sets"].as_array().unwrap() {
        assert!(
            s["median_pps"].as_f64().unwrap() > 1000.0,
            "a set forwarded (almost) nothing: {s}"
        );
    }
    assert!(run.stdout.contains("2 workers: 2 queues per veth"), "{}", run.stdout);
}

/// A second `linerate lab` started while one runs is refused at once, naming the first, and
/// leaves the first's namespaces alone: the first finishes with real figures.
#[test]
fn a_second_lab_is_refused_and_the_first_goes_on() {
    if !lab::topology::is_root() {
        lab::topology::skip_test("needs root");
        return;
    }
    let _one = ONE_LAB.lock().unwrap_or_else(|e| e.into_inner());
    let dir = std::env::temp_dir().join(format!("lr-lab-second-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("lab.toml");
    std::fs::write(&file, "runs = 1\nseconds = 4\n[traffic]\nflows = 200\n[[set]]\nname = \"kernel\"\ndut = \"kernel\"\n").unwrap();
    let lab = |out: &str| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_linerate"));
        c.arg("lab").arg(&file).args(["--json", "--out"]).arg(dir.join(out));
        c
    };
    let first = lab("first")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The first holds the lock once its pid is in the file, before it builds anything.
    let holds = || {
        std::fs::read_to_string(lab::one_lab::LOCK_FILE)
            .is_ok_and(|t| t.trim() == first.id().to_string())
    };
    let t0 = std::time::Instant::now();
    while !holds() {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(20),
            "the first lab never took the lock"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    let second = lab("second").output().unwrap();
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success(), "the second lab ran: {err}");
    assert!(
        err.contains(&format!("another `linerate lab` is running (pid {}", first.id())),
        "{err}"
    );
    let out = first.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the first lab failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    let pps = json["sets"][0]["median_pps"].as_f64().unwrap();
    assert!(pps > 1000.0, "the first lab forwarded (almost) nothing: {json}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A lab killed with SIGKILL (which it cannot catch) leaves no `linerate run` behind: the
/// DUT it started in its namespace gets SIGTERM from the kernel when the lab dies
/// (`io::child::stop_with_parent`). Before, the DUT forwarded on in a namespace nobody could
/// name any more. The next lab removes the namespaces left behind.
#[test]
fn a_killed_lab_leaves_no_router_running() {
    if !lab::topology::is_root() {
        lab::topology::skip_test("needs root");
        return;
    }
    let _one = ONE_LAB.lock().unwrap_or_else(|e| e.into_inner());
    let dir = std::env::temp_dir().join(format!("lr-lab-killed-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("lab.toml");
    std::fs::write(&file, "runs = 1\nseconds = 8\n[traffic]\nflows = 200\n[[set]]\nname = \"lr\"\ndut = \"linerate\"\nbackend = \"af_packet\"\n").unwrap();
    let mut lab = std::process::Command::new(env!("CARGO_BIN_EXE_linerate"))
        .arg("lab")
        .arg(&file)
        .args(["--json", "--out"])
        .arg(dir.join("out"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The DUT is the `linerate run` whose config is in the lab's folder.
    let dut_config = format!("/tmp/lrlab-{}/router.toml", lab.id());
    let duts = || -> Vec<u32> {
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| {
                let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
                String::from_utf8_lossy(&cmd).contains(&dut_config) && !stat.contains(") Z ")
            })
            .collect()
    };
    let t0 = std::time::Instant::now();
    while duts().is_empty() {
        assert!(t0.elapsed() < std::time::Duration::from_secs(60), "the lab never started its DUT");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    lab.kill().unwrap();
    lab.wait().unwrap();
    let t0 = std::time::Instant::now();
    while !duts().is_empty() && t0.elapsed() < std::time::Duration::from_secs(10) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let left = duts();
    for pid in &left {
        let _ = std::process::Command::new("kill").args(["-9", &pid.to_string()]).status();
    }
    for ns in ["lrlab-g", "lrlab-d", "lrlab-r"] {
        let _ = std::process::Command::new("ip").args(["netns", "del", ns]).status();
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(left.is_empty(), "linerate run {left:?} outlived the killed lab");
}
