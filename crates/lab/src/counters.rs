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

    /// The counters that grew since `before`, by how much (a counter that went backwards,
    /// reset by a driver, counts from zero).
    pub fn grown_since(&self, before: &Snapshot) -> Snapshot {
        let grown = self.0.iter().filter_map(|(name, &after)| {
            let start = before.0.get(name).copied().unwrap_or(0);
            let delta = if after >= start { after - start } else { after };
            (delta > 0).then(|| (name.clone(), delta))
        });
        Snapshot(grown.collect())
    }

    /// `name=value` in name order.
    pub fn listed(&self) -> Vec<String> {
        self.0.iter().map(|(name, v)| format!("{name}={v}")).collect()
    }

    /// The sum of interface `iface`'s counters named `prefix...suffix` (one per queue).
    fn sum(&self, iface: &str, prefix: &str, suffix: &str) -> u64 {
        let head = format!("{iface}.{prefix}");
        self.0
            .iter()
            .filter(|(n, _)| n.starts_with(&head) && n.ends_with(suffix))
            .map(|(_, v)| v)
            .sum()
    }
}

/// Where a run's frames were lost, from the lab's counters that grew in it ([`Snapshot`]):
/// generator `lrg0` -> DUT input `lrd0` ... DUT output `lrd1` -> receiver `lrr0`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Losses {
    /// Refused by the DUT's input: the generator's XDP transmits its veth peer's ring had
    /// no room for.
    pub input: u64,
    /// Taken by the DUT's input and neither sent on nor dropped at its output: what the DUT
    /// dropped itself.
    pub inside: u64,
    /// Of `inside`: dropped in the DUT's input queue (veth: an XDP redirect to an AF_XDP
    /// socket whose ring was full, or no buffer on its fill ring).
    pub socket: u64,
    /// Sent by the DUT and dropped on the way to the receiver (its output's ring full).
    pub output: u64,
}

impl Losses {
    /// From the counters that grew in a run; `None` without the DUT input's counters.
    pub fn of(grown: &Snapshot) -> Option<Losses> {
        let xdp_in = grown.sum("lrd0", "rx_queue_", "_xdp_packets");
        let taken = if xdp_in > 0 { xdp_in } else { *grown.0.get("lrd0.rx_packets")? };
        let sent_on = grown.0.get("lrd1.tx_packets").copied().unwrap_or(0);
        let output = grown.0.get("lrd1.tx_dropped").copied().unwrap_or(0);
        Some(Losses {
            input: grown.sum("lrg0", "tx_queue_", "_xdp_xmit_errors"),
            inside: taken.saturating_sub(sent_on + output),
            socket: grown.sum("lrd0", "rx_queue_", "_drops").saturating_sub(grown.sum(
                "lrd0",
                "rx_queue_",
                "_xdp_drops",
            )),
            output,
        })
    }

    pub fn add(&mut self, o: &Losses) {
        self.input += o.input;
        self.inside += o.inside;
        self.socket += o.socket;
        self.output += o.output;
    }

    /// "input 35.1% / inside 0.9% (socket 0.9%) / output 0.4%" of `offered` frames.
    pub fn shares(&self, offered: u64) -> String {
        let pct = |n: u64| {
            if offered == 0 { 0.0 } else { n as f64 * 100.0 / offered as f64 }
        };
        format!(
            "input {:.1}% / inside {:.1}% (socket {:.1}%) / output {:.1}%",
            pct(self.input),
            pct(self.inside),
            pct(self.socket),
            pct(self.output)
        )
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
            after.grown_since(&before).listed(),
            vec!["lrd0.rx_packets=300", "lrd1.tx_packets=50"]
        );
    }

    /// A linerate run of the 16-CPU lab (results/2026-11-26-16cpu-losses/1-paced, linerate
    /// paced at 0.5x), its refusals split over two queues: per-queue counters are summed.
    #[test]
    fn losses_follow_the_frames() {
        let grown = parse(
            "lrg0.tx_queue_0_xdp_xmit:891840\nlrg0.tx_queue_0_xdp_xmit_errors:400000\n\
             lrg0.tx_queue_1_xdp_xmit_errors:77248\nlrd0.rx_queue_0_xdp_packets:891840\n\
             lrd0.rx_queue_0_xdp_redirect:879376\nlrd0.rx_queue_0_drops:12464\n\
             lrd1.tx_packets:874519\nlrd1.tx_dropped:4858\nlrr0.rx_packets:874519\n",
        );
        let l = Losses::of(&grown).unwrap();
        let want = Losses { input: 477248, inside: 12463, socket: 12464, output: 4858 };
        assert_eq!(l, want);
        assert_eq!(l.shares(1369088), "input 34.9% / inside 0.9% (socket 0.9%) / output 0.4%");
        assert_eq!(Losses::of(&parse("lrg0.tx_packets:5\n")), None);
    }

    #[test]
    fn the_script_reads_a_real_interface() {
        // `lo` exists in every namespace this test can run in; no root needed.
        let out =
            std::process::Command::new("sh").args(["-c", &script(&["lo"])]).output().expect("sh");
        let s = parse(&String::from_utf8_lossy(&out.stdout));
        assert!(s.0.contains_key("lo.rx_packets"), "{s:?}");
    }
}
