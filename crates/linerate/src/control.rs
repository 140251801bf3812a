//! The control socket of `linerate run`, and `linerate reload`, its client.
//!
//! `run` listens on the config's `router.control_socket` (a Unix stream socket, mode 0600, so
//! only root and the owner can talk to it). The protocol is one line per connection:
//! `reload\n` re-reads the rule file named in the running config, compiles it off the fast
//! path and publishes it to the workers, answering `ok: N rules\n`, or
//! `error: file:line:col: problem\n` with the old rules left in place.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use config::Config;
use dataplane::filter::RulesSlot;

/// The listening socket; its file is removed when this is dropped (at `run`'s exit).
pub struct Server {
    path: PathBuf,
}

impl Server {
    /// Binds the socket (replacing a stale file no process listens on) and serves it on a
    /// thread of its own. `slot` is `None` when the config has no firewall.
    pub fn start(cfg: &Config, slot: Option<Arc<RulesSlot>>) -> Result<Server> {
        let path = cfg.router.control_socket.clone();
        if std::fs::symlink_metadata(&path).is_ok() {
            if UnixStream::connect(&path).is_ok() {
                bail!("another process is listening on it");
            }
            std::fs::remove_file(&path).context("removing the stale socket file")?;
        }
        let listener = UnixListener::bind(&path).context("binding")?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).context("setting mode 0600")?;
        let cfg = cfg.clone();
        std::thread::Builder::new()
            .name("lr-control".into())
            .spawn(move || {
                for conn in listener.incoming().flatten() {
                    serve(conn, &cfg, slot.as_deref());
                }
            })
            .context("starting the control thread")?;
        Ok(Server { path })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn serve(conn: UnixStream, cfg: &Config, slot: Option<&RulesSlot>) {
    // A client that never sends its line must not block the next one for long.
    let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
    let mut line = String::new();
    let mut reader = BufReader::new(&conn);
    let answer = match reader.read_line(&mut line) {
        Ok(_) if line.trim() == "reload" => reload(cfg, slot),
        Ok(_) => format!("error: unknown command {:?} (expected \"reload\")", line.trim()),
        Err(e) => format!("error: reading the command: {e}"),
    };
    let mut conn = &conn;
    let _ = conn.write_all(format!("{}\n", answer.replace('\n', "; ")).as_bytes());
}

fn reload(cfg: &Config, slot: Option<&RulesSlot>) -> String {
    let (Some(slot), Some(fw)) = (slot, &cfg.firewall) else {
        return format!("error: {}: no [firewall] table in the running config", cfg.path.display());
    };
    match crate::run::load_rules(cfg, &fw.rules) {
        Ok(rules) => {
            let n = rules.rule_count();
            slot.publish(Arc::new(rules));
            eprintln!("linerate: firewall reloaded: {n} rules from {}", fw.rules.display());
            format!("ok: {n} rules")
        }
        Err(e) => {
            eprintln!("linerate: firewall reload refused, old rules kept: {e:#}");
            format!("error: {e:#}")
        }
    }
}

#[derive(clap::Args)]
pub struct ReloadArgs {
    /// Configuration file of the running linerate (for `router.control_socket`)
    /// [default: the default socket, /run/linerate.sock].
    #[arg(short, long)]
    config: Option<PathBuf>,
}

/// `linerate reload`: asks the running linerate to re-read its rule file; prints the answer,
/// fails if the rules were refused.
pub fn reload_main(args: ReloadArgs) -> Result<()> {
    let socket = match &args.config {
        Some(path) => Config::load(path)?.router.control_socket,
        None => config::RouterSettings::default().control_socket,
    };
    let mut conn = UnixStream::connect(&socket)
        .with_context(|| format!("connecting to {} (is linerate run listening?)", socket.display()))?;
    conn.set_read_timeout(Some(Duration::from_secs(120)))?;
    conn.write_all(b"reload\n")?;
    let mut answer = String::new();
    BufReader::new(&conn).read_line(&mut answer).context("reading the answer")?;
    let answer = answer.trim_end();
    if let Some(err) = answer.strip_prefix("error: ") {
        bail!("reload refused: {err}");
    }
    if !answer.starts_with("ok") {
        bail!("unexpected answer {answer:?}");
    }
    println!("{answer}");
    Ok(())
}
