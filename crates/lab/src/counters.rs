//! Where a run's frames went: every counter of the lab's veths (sysfs `statistics/` and
//! `ethtool -S`), read before and after the generator runs, and what changed. With the
//! generator's refusals and the DUT's own report this says at which ring a lost frame was
//! dropped: the DUT's input (veth's 256-frame ring), the DUT itself, or its output.

use std::collections::BTreeMap;

use crate::topology::Namespace;

/// Counter values by `interface.counter`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot(pub BTreeMap<String, u64>);

/// The shell script that prints `IFACE.counter:value` lines for `ifaces`: sysfs statistics
/// (`rx_packets`, `tx_dropped`, ...) and the driver's statistics (veth: per-queue XDP
/// counters). A tool or file that is missing prints nothing.
fn script(ifaces: &[&str]) -> String {
    let list = ifaces.join(" ");
    format!(
        "for i in {list}; do (cd /sys/class/net/$i/statistics 2>/dev/null && grep -H . * | sed \"s/^/$i./\"); \
         ethtool -S $i 2>/dev/null | sed -n \"s/^ *\\([a-z0-9_]*\\): *\\([0-9]*\\)$/$i.\\1:\\2/p\"; done"
    )
}

/// Parses `script`'s output; lines that are not `name:number` are skipped.
pub fn parse(text: &str) -> Snapshot {
    let values = text
        .lines()
        .filter_map(|l| {
            let (name, value) = l.rsplit_once(':')?;
            Some((name.trim().to_owned(), value.trim().parse::<u64>().ok()?))
        })
        .filter(|(name, _)| !name.ends_with("peer_ifindex"))
        .collect();
    Snapshot(values)
}

/// Reads the counters of `ifaces` inside `ns`; empty if the script cannot run.
pub fn read(ns: &Namespace, ifaces: &[&str]) -> Snapshot {
    match ns.exec("sh", &["-c", &script(ifaces)]) {
        Ok(out) => parse(&String::from_utf8_lossy(&out.stdout)),
        Err(_) => Snapshot::default(),
    }
}

impl Snapshot {
    pub fn extend(&mut self, other: Snapshot) {
        self.0.extend(other.0);
    }

    /// The counters that grew since `before`, as `name=delta` in name order (a counter
    /// that went backwards, reset by a driver, counts from zero).
    pub fn grown_since(&self, before: &Snapshot) -> Vec<String> {
        self.0
            .iter()
            .filter_map(|(name, &after)| {
                let start = before.0.get(name).copied().unwrap_or(0);
                let delta = if after >= start { after - start } else { after };
                (delta > 0).then(|| format!("{name}={delta}"))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the script prints for a veth (Linux 6.18), abridged.
    const SAMPLE: &str = "lrd0.rx_packets:1200\nlrd0.tx_dropped:0\nlrd0.peer_ifindex:7\n\
        lrd0.rx_queue_0_xdp_packets:1180\nlrd0.rx_queue_0_xdp_redirect:1170\nlrd0.rx_queue_0_drops:4\n\
        garbage line\nlrd1.tx_packets:99\n";

    #[test]
    fn parses_counters_and_skips_the_rest() {
        let s = parse(SAMPLE);
        assert_eq!(s.0.len(), 6);
        assert_eq!(s.0["lrd0.rx_queue_0_xdp_redirect"], 1170);
        assert!(!s.0.contains_key("lrd0.peer_ifindex"));
    }

    #[test]
    fn lists_what_grew() {
        let before = parse(SAMPLE);
        let after = parse(
            &SAMPLE
                .replace("rx_packets:1200", "rx_packets:1500")
                .replace("tx_packets:99", "tx_packets:50"),
        );
        assert_eq!(
            after.grown_since(&before),
            vec!["lrd0.rx_packets=300", "lrd1.tx_packets=50"]
        );
    }

    #[test]
    fn the_script_reads_a_real_interface() {
        // `lo` exists in every namespace this test can run in; no root needed.
        let out = std::process::Command::new("sh")
            .args(["-c", &script(&["lo"])])
            .output()
            .expect("sh");
        let s = parse(&String::from_utf8_lossy(&out.stdout));
        assert!(s.0.contains_key("lo.rx_packets"), "{s:?}");
    }
}
