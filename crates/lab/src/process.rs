//! Child processes of the lab and the tests: started and waited for until they say they are
//! ready, and always stopped (SIGTERM, then SIGKILL) so nothing outlives a failing run.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::error::LabError;

/// Stops `child`: SIGTERM (so linerate prints its counters and removes what it installed),
/// then SIGKILL if it has not exited within 3 s.
pub fn terminate(child: &mut Child) {
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Starts `cmd` (its stdout as the caller set it; stderr is read here) and waits until a line
/// of its stderr contains `ready`. Fails, stopping the child, if it exits first, if `timeout`
/// passes, or if `stop` is set.
pub fn wait_ready(
    mut cmd: Command,
    ready: &str,
    timeout: Duration,
    stop: &AtomicBool,
) -> Result<Child, LabError> {
    let mut child = cmd.stderr(Stdio::piped()).stdin(Stdio::null()).spawn()?;
    let stderr = child.stderr.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    let ready = ready.to_owned();
    std::thread::spawn(move || {
        let mut seen = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains(&ready) {
                let _ = tx.send(Ok(()));
            }
            seen.push_str(&line);
            seen.push('\n');
        }
        let _ = tx.send(Err(seen));
    });
    let what = format!("{cmd:?}").replace('"', "");
    let deadline = Instant::now() + timeout;
    loop {
        if stop.load(Ordering::Relaxed) {
            terminate(&mut child);
            return Err(LabError::Interrupted);
        }
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(Ok(())) => return Ok(child),
            Ok(Err(seen)) => {
                terminate(&mut child);
                return Err(LabError::Process {
                    what: format!("{what} exited before it was ready"),
                    detail: seen.trim().to_owned(),
                });
            }
            Err(_) if Instant::now() > deadline => {
                terminate(&mut child);
                return Err(LabError::Process {
                    what,
                    detail: format!("not ready after {} s", timeout.as_secs()),
                });
            }
            Err(_) => {}
        }
    }
}
