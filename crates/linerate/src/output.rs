//! Standard output that survives a closed pipe: `linerate show routes | head -1` must end
//! quietly, not panic as `println!` does on EPIPE (Rust ignores SIGPIPE, so the write fails).

use std::io::Write;

/// Writes `text` to stdout: `Ok(false)` if the reader went away (EPIPE), which is not an
/// error (the output is simply not wanted any more; a loop like `top`'s stops). Other write
/// errors are.
pub fn print(text: &str) -> anyhow::Result<bool> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(anyhow::Error::new(e).context("writing to stdout")),
    }
}
