//! `linerate install-service`: installs the binary and `dist/linerate.service` (with the
//! installed paths in `ExecStart`) and has systemd read it.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// The unit file of the repository, `ExecStart` naming the default paths.
pub const UNIT: &str = include_str!("../../../dist/linerate.service");
const DEFAULT_EXEC: &str = "ExecStart=/usr/local/bin/linerate run -c /etc/linerate/linerate.toml";

#[derive(clap::Args)]
pub struct InstallArgs {
    /// Configuration the service runs with.
    #[arg(short, long, default_value = "/etc/linerate/linerate.toml")]
    config: PathBuf,
    /// Where to install this linerate binary (the service cannot run one under /home or
    /// /root: ProtectHome).
    #[arg(long, default_value = "/usr/local/bin/linerate")]
    bin: PathBuf,
    /// Install under this directory instead of / (packaging, tests); systemd is then not told.
    #[arg(long, default_value = "/")]
    root: PathBuf,
}

/// The unit with `ExecStart` running `bin` on `config`.
pub fn unit_for(bin: &Path, config: &Path) -> String {
    UNIT.replace(DEFAULT_EXEC, &format!("ExecStart={} run -c {}", bin.display(), config.display()))
}

/// `path` (absolute) under `root`.
fn under(root: &Path, path: &Path) -> PathBuf {
    root.join(path.strip_prefix("/").unwrap_or(path))
}

pub fn install_main(args: InstallArgs) -> Result<()> {
    for (what, p) in [("--config", &args.config), ("--bin", &args.bin)] {
        if !p.is_absolute() {
            bail!("{what} {}: must be an absolute path", p.display());
        }
        if p.starts_with("/home") || p.starts_with("/root") {
            bail!(
                "{what} {}: the service cannot read under /home or /root (ProtectHome=yes)",
                p.display()
            );
        }
    }
    let exe = std::env::current_exe().context("finding this linerate binary")?;
    let bin = under(&args.root, &args.bin);
    if exe != bin {
        std::fs::create_dir_all(bin.parent().unwrap_or(Path::new("/")))
            .with_context(|| format!("creating the folder of {}", bin.display()))?;
        // A new file renamed over the old one: a running linerate keeps its binary.
        let tmp = bin.with_extension("new");
        std::fs::copy(&exe, &tmp)
            .with_context(|| format!("copying {} to {}", exe.display(), tmp.display()))?;
        std::fs::rename(&tmp, &bin).with_context(|| format!("installing {}", bin.display()))?;
    }
    let unit_path = under(&args.root, Path::new("/etc/systemd/system/linerate.service"));
    std::fs::create_dir_all(unit_path.parent().unwrap_or(Path::new("/")))
        .context("creating /etc/systemd/system")?;
    std::fs::write(&unit_path, unit_for(&args.bin, &args.config))
        .with_context(|| format!("writing {}", unit_path.display()))?;
    println!("installed {} and {}", bin.display(), unit_path.display());
    let config = under(&args.root, &args.config);
    match config::Config::load(&config) {
        Ok(cfg) if !cfg.router.control_socket.starts_with("/run/linerate/") => println!(
            "note: {}: set [router] control_socket = \"/run/linerate/control.sock\" (the service user can write only there)",
            config.display()
        ),
        Ok(_) => {}
        Err(e) => println!(
            "note: {}: {e}; write the configuration there before starting the service",
            config.display()
        ),
    }
    if args.root == Path::new("/") && Path::new("/run/systemd/system").exists() {
        let status = std::process::Command::new("systemctl")
            .arg("daemon-reload")
            .status()
            .context("running systemctl daemon-reload")?;
        if !status.success() {
            bail!("systemctl daemon-reload failed");
        }
        println!("start it with: systemctl enable --now linerate");
    } else {
        println!(
            "systemd is not running here: `systemctl daemon-reload` and `systemctl enable --now linerate` on the target"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_start_names_the_installed_paths() {
        assert!(
            UNIT.contains(DEFAULT_EXEC),
            "dist/linerate.service's ExecStart changed: update DEFAULT_EXEC"
        );
        let u = unit_for(Path::new("/opt/lr/linerate"), Path::new("/etc/lr.toml"));
        assert!(u.contains("\nExecStart=/opt/lr/linerate run -c /etc/lr.toml\n"), "{u}");
        assert!(
            u.contains("\nType=notify\n") && u.contains("\nExecReload=/bin/kill -HUP $MAINPID\n")
        );
    }
}
