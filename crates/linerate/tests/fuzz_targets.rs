//! The fuzz targets (`fuzz/`, a workspace of its own) build, and each runs once over its
//! starting corpus (`fuzz/seeds.py`) without a failure: so that a change to an API they use
//! fails here rather than leaving them broken until someone fuzzes. Built without the
//! sanitizer and coverage flags (those need `cargo fuzz` and `RUSTC_BOOTSTRAP`): libFuzzer's
//! `main` runs the files it is given and exits.

use std::path::{Path, PathBuf};
use std::process::Command;

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

/// The `[[bin]]` names of the fuzz workspace's manifest.
fn targets(manifest: &str) -> Vec<String> {
    manifest
        .lines()
        .filter_map(|l| l.strip_prefix("name = \"fuzz_"))
        .map(|rest| format!("fuzz_{}", rest.trim_end_matches('"')))
        .collect()
}

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn fuzz_targets_build_and_pass_their_seeds() {
    let fuzz = fuzz_dir();
    let names = targets(&std::fs::read_to_string(fuzz.join("Cargo.toml")).unwrap());
    assert!(names.len() >= 15, "fuzz targets found: {names:?}");
    let corpus = std::env::temp_dir().join(format!("lr-fuzz-seeds-{}", std::process::id()));
    run(Command::new("python3").arg(fuzz.join("seeds.py")).arg(&corpus));
    // Its own target directory and flags: not the ones this test was built with.
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    run(Command::new(cargo)
        .args(["build", "--locked", "--bins", "--manifest-path"])
        .arg(fuzz.join("Cargo.toml"))
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env("CARGO_PROFILE_DEV_OPT_LEVEL", "1"));
    for name in &names {
        let dir = corpus.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        // `-runs=0`: run the corpus (an empty one runs the empty input) and stop.
        run(Command::new(fuzz.join("target/debug").join(name)).arg("-runs=0").arg(&dir));
    }
    std::fs::remove_dir_all(&corpus).unwrap();
}

#[test]
fn every_target_file_is_in_the_manifest() {
    let fuzz = fuzz_dir();
    let names = targets(&std::fs::read_to_string(fuzz.join("Cargo.toml")).unwrap());
    let run_all = std::fs::read_to_string(fuzz.join("run-all.sh")).unwrap();
    for entry in std::fs::read_dir(fuzz.join("fuzz_targets")).unwrap() {
        let file = entry.unwrap().file_name().into_string().unwrap();
        let name = file.trim_end_matches(".rs");
        assert!(names.iter().any(|n| n == name), "{file} has no [[bin]] in fuzz/Cargo.toml");
        assert!(run_all.contains(name), "fuzz/run-all.sh does not run {name}");
    }
}
