//! Builds linerate's eBPF programs (`bpf/*.bpf.c`) with clang (`scripts/setup.sh` installs it
//! with libbpf's headers) into OUT_DIR, where `include_bytes!` takes them.

use std::path::{Path, PathBuf};
use std::process::Command;

const PROGRAMS: &[&str] = &["fastpath", "tools", "kernel_copy"];

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let clang = std::env::var("LINERATE_BPF_CLANG").unwrap_or_else(|_| "clang".to_owned());
    println!("cargo:rerun-if-env-changed=LINERATE_BPF_CLANG");
    for name in PROGRAMS {
        let src = Path::new("bpf").join(format!("{name}.bpf.c"));
        println!("cargo:rerun-if-changed={}", src.display());
        build(&clang, &src, &out.join(format!("{name}.bpf.o")));
    }
}

fn build(clang: &str, src: &Path, obj: &Path) {
    // The multiarch directory holds <asm/types.h>, which <linux/bpf.h> includes.
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let multiarch = format!("/usr/include/{arch}-linux-gnu");
    let status = Command::new(clang)
        .args(["-O2", "-g", "-Wall", "-Werror", "-target", "bpf", "-I", &multiarch, "-c"])
        .arg(src)
        .arg("-o")
        .arg(obj)
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => panic!("clang failed ({s}) building {}", src.display()),
        Err(e) => panic!(
            "cannot run `{clang}` to build {} ({e}): install clang and libbpf-dev \
             (scripts/setup.sh does), or set LINERATE_BPF_CLANG",
            src.display()
        ),
    }
}
