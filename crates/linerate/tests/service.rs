//! The systemd unit: `linerate install-service` into a scratch root installs the binary and
//! `dist/linerate.service` naming it, and `systemd-analyze verify` (package systemd, see
//! scripts/setup.sh) accepts the installed unit without a warning.

use std::path::Path;
use std::process::Command;

#[test]
fn installed_unit_verifies_cleanly() {
    let root = std::env::temp_dir().join(format!("lr-service-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let out = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(["install-service", "--root"])
        .arg(&root)
        .args(["--bin", "/usr/local/bin/linerate", "-c", "/etc/linerate/linerate.toml"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("write the configuration there"), "{stdout}");
    let bin = root.join("usr/local/bin/linerate");
    assert_eq!(
        std::fs::read(&bin).unwrap(),
        std::fs::read(env!("CARGO_BIN_EXE_linerate")).unwrap()
    );
    let unit = std::fs::read_to_string(root.join("etc/systemd/system/linerate.service")).unwrap();
    for line in [
        "Type=notify",
        "ExecStart=/usr/local/bin/linerate run -c /etc/linerate/linerate.toml",
        "ExecReload=/bin/kill -HUP $MAINPID",
        "RuntimeDirectory=linerate",
    ] {
        assert!(unit.lines().any(|l| l == line), "no {line:?} in the unit");
    }

    // systemd-analyze checks that ExecStart's program exists: point it at the installed copy.
    let checked = root.join("linerate.service");
    std::fs::write(
        &checked,
        unit.replace("ExecStart=/usr/local/bin/linerate", &format!("ExecStart={}", bin.display())),
    )
    .unwrap();
    let verify = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&checked)
        .output()
        .unwrap_or_else(|e| {
            panic!("systemd-analyze (Debian package systemd, installed by scripts/setup.sh): {e}")
        });
    let stderr = String::from_utf8_lossy(&verify.stderr);
    // It exits 0 on unknown keys and bad values, only warning: any line is a failure.
    assert!(
        verify.status.success() && stderr.trim().is_empty(),
        "systemd-analyze verify:\n{stderr}"
    );
    let _ = std::fs::remove_dir_all(&root);
    assert!(!Path::new(&root).exists());
}
