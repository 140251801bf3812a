//! The signals a subcommand handles itself, as flags it polls: SIGINT and SIGTERM to stop
//! cleanly, SIGHUP for `run` to reload.

/// A flag set by SIGINT or SIGTERM, for the subcommands that stop cleanly (print their
/// counters, remove what they installed) instead of dying.
pub fn stop_on_signals() -> anyhow::Result<std::sync::Arc<std::sync::atomic::AtomicBool>> {
    use anyhow::Context;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for s in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(s, std::sync::Arc::clone(&stop))
            .context("installing signal handlers")?;
    }
    Ok(stop)
}

/// A flag set by SIGHUP: `run` reloads (rule file, static neighbours) when it sees it (the
/// default action would end the process).
pub fn reload_on_sighup() -> anyhow::Result<std::sync::Arc<std::sync::atomic::AtomicBool>> {
    use anyhow::Context;
    let hup = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGHUP, std::sync::Arc::clone(&hup))
        .context("installing the SIGHUP handler")?;
    Ok(hup)
}
