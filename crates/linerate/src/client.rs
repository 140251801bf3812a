//! The client side of the control socket ([`crate::control`]): which socket to talk to, and
//! one command line sent, one line answered. `reload`, `show`, `top`, `kill` and `flush` go
//! through it; `log` and `capture` keep the connection for a stream ([`crate::stream`]).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};

#[derive(clap::Args)]
pub struct SocketArgs {
    /// Configuration file of the running linerate: only its `router.control_socket` is read
    /// [default: the default socket, /run/linerate.sock].
    #[arg(short, long, conflicts_with = "socket")]
    config: Option<PathBuf>,
    /// The control socket itself.
    #[arg(long)]
    socket: Option<PathBuf>,
}

impl SocketArgs {
    /// The socket to talk to. The config is not validated (nor its route file read): the
    /// running router validated it, and a large table would take seconds.
    pub fn socket(&self) -> Result<PathBuf> {
        Ok(match (&self.socket, &self.config) {
            (Some(socket), _) => socket.clone(),
            (None, Some(path)) => config::control_socket(path)?,
            (None, None) => config::RouterSettings::default().control_socket,
        })
    }
}

/// Sends `command` as one line on the connection `r` reads, and returns the first line of
/// the answer. A peer the router refuses is answered before its line is read and the socket
/// closed: the write may then fail while the refusal waits to be read, which is returned.
pub fn send_command(r: &mut BufReader<UnixStream>, command: &str) -> Result<String> {
    let sent = r.get_ref().write_all(format!("{command}\n").as_bytes());
    let mut line = String::new();
    let read = r.read_line(&mut line);
    if line.is_empty() {
        sent?;
        read.context("reading the answer")?;
    }
    Ok(line)
}

/// Sends one command line, returns the one-line answer (`error: ...` answers become errors).
pub fn request(socket: &std::path::Path, command: &str, timeout: Duration) -> Result<String> {
    let conn = UnixStream::connect(socket).with_context(|| {
        format!("connecting to {} (is linerate run listening?)", socket.display())
    })?;
    conn.set_read_timeout(Some(timeout))?;
    let answer = send_command(&mut BufReader::new(conn), command)?;
    let answer = answer.trim_end().to_owned();
    if let Some(err) = answer.strip_prefix("error: ") {
        bail!("{command}: {err}");
    }
    Ok(answer)
}
