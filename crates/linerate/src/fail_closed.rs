//! `router.fail_closed`: the kernel does not forward while linerate runs, nor after it
//! stops or crashes. linerate forwards in user space and needs none of the kernel's
//! forwarding (the host stack on its TAPs only sends and receives its own packets); with
//! forwarding on, every frame that reaches the kernel instead of a worker (linerate not
//! running, a queue without a socket, an AF_PACKET copy nothing dropped) would be routed
//! unfiltered. The sysctls are per network namespace and are not restored at exit: that is
//! what makes the setting hold after a crash. See docs/router.md, "Failing closed".

use std::path::Path;

/// The namespace's forwarding switches.
pub const SYSCTLS: &[&str] =
    &["/proc/sys/net/ipv4/ip_forward", "/proc/sys/net/ipv6/conf/all/forwarding"];

/// The switches that are on (a missing one, IPv6 disabled, counts as off).
pub fn forwarding_on() -> Vec<&'static str> {
    SYSCTLS
        .iter()
        .copied()
        .filter(|p| std::fs::read_to_string(p).is_ok_and(|v| v.trim() != "0"))
        .collect()
}

/// Turns every switch off, warning for each that was on.
pub fn apply() -> anyhow::Result<()> {
    for p in forwarding_on() {
        eprintln!(
            "linerate: warning: {p} was on: the kernel forwarded what reached it unfiltered; set to 0 (router.fail_closed), and left so at exit"
        );
        write(Path::new(p))?;
    }
    Ok(())
}

fn write(p: &Path) -> anyhow::Result<()> {
    use anyhow::Context;
    std::fs::write(p, "0").with_context(|| {
        format!("router.fail_closed: writing 0 to {} (needs CAP_NET_ADMIN)", p.display())
    })
}
