//! Lab files: which configuration sets to run, against which DUT, with what traffic.
//!
//! ```toml
//! runs = 5            # runs per set (the study's 5)
//! seconds = 5         # length of one run; its value is the median of the per-second
//!                     # receiver rates, first and last seconds left out
//! workers = 1         # queues per veth and workers per DUT (linerate's workers, the
//!                     # kernel's NAPI threads), each on its own CPU (`linerate lab --workers`)
//!
//! [traffic]           # defaults for every set
//! flows = 2000        # 20 sources x 100 destinations, as the study
//! frame_size = 60     # Ethernet bytes without FCS; or imix = true
//! ipv6 = false
//! rate = 0            # offered pps; 0 = as fast as the generator goes
//! generator = "xdp-live"  # xdp-live (default: the kernel sends, BPF_PROG_RUN live frames,
//!                     # several Mpps from one core) | af-packet (a TX ring, about 1 Mpps)
//! paced_step = 256    # xdp-live, paced runs: most frames offered at once (1..=256; veth's
//!                     # ring holds 256, so smaller steps leave the DUT room for jitter)
//!
//! [[set]]
//! name = "kernel"
//! dut = "kernel"      # kernel | kernel-nft | linerate
//!
//! [[set]]
//! name = "nft-1000"
//! dut = "kernel-nft"
//! rules = 1000        # non-matching rules before the final accept
//! conntrack = false   # add a conntrack (ct state) rule first
//! nft_set = false     # true: the rules' addresses in one nftables set, one rule (as an
//!                     # nftables expert writes them) instead of a linear chain
//! nat = false         # true: outbound NAT of every flow to the DUT's output address:
//!                     # nftables `masquerade` (conntrack) here, pf's `nat on lrd1 ... ->
//!                     # (lrd1)` with `keep state` for dut = "linerate"
//!
//! [[set]]
//! name = "linerate"
//! dut = "linerate"
//! fast_path = true    # linerate: the kernel fast path for decided flows (false: the
//!                     # pipeline alone)
//! backend = "auto"    # auto (default: AF_XDP, native where the driver can) | af_xdp
//!                     # (generic XDP) | af_xdp_native | af_packet
//! rules = 1000        # linerate too: the same rules in pf syntax, then `pass all no state`
//!                     # (`keep state` with conntrack = true); 0 = no firewall
//! overload = [0.5, 1, 1.5, 2, 3]  # after the runs, offer these multiples of the set's
//!                     # median rate (its zero-loss rate with --search), one run each, and
//!                     # plot delivered against offered (results/overload.svg)
//! ping = 10           # then ping across the DUT once a second, this many times, and
//!                     # report the median round-trip time (an idle router's latency)
//!
//! [[set]]             # a sweep expands into one set per value, plotted as a line
//! name = "nft"
//! dut = "kernel-nft"
//! sweep = { param = "rules", values = [1, 10, 100, 1000] }
//!
//! [[tcp]]             # TCP through a DUT: iperf3 from the generator's namespace to the
//! name = "kernel-tcp" # receiver's, every veth offload on, `runs` tests of `seconds`
//! dut = "kernel"      # alternated with the other [[tcp]] entries; Gbit/s received. Takes
//!                     # dut, backend, fast_path, rules, conntrack, nft_set, nat as a set.
//! ```

use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Dut {
    Kernel,
    KernelNft,
    Linerate,
}

impl Dut {
    pub fn name(self) -> &'static str {
        match self {
            Dut::Kernel => "kernel",
            Dut::KernelNft => "kernel-nft",
            Dut::Linerate => "linerate",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Traffic {
    pub flows: u32,
    pub frame_size: usize,
    pub imix: bool,
    pub ipv6: bool,
    pub rate: f64,
    /// `linerate gen`'s backend: "xdp-live" (the kernel sends, several Mpps from one core)
    /// or "af-packet".
    pub generator: String,
    /// xdp-live, paced: most frames per BPF_PROG_RUN call (`linerate gen --paced-step`).
    pub paced_step: u32,
}

impl Default for Traffic {
    fn default() -> Self {
        Traffic {
            flows: 2000,
            frame_size: 60,
            imix: false,
            ipv6: false,
            rate: 0.0,
            generator: "xdp-live".into(),
            paced_step: 256,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sweep {
    /// `rules`, `flows` or `frame_size`.
    pub param: String,
    pub values: Vec<u64>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct SetSpec {
    name: String,
    dut: Dut,
    #[serde(default)]
    rules: u32,
    #[serde(default)]
    conntrack: bool,
    #[serde(default)]
    nft_set: bool,
    #[serde(default)]
    nat: bool,
    #[serde(default)]
    backend: Option<String>,
    #[serde(default)]
    fast_path: Option<bool>,
    #[serde(default)]
    overload: Vec<f64>,
    #[serde(default)]
    ping: u32,
    #[serde(default)]
    traffic: Option<TrafficOverride>,
    #[serde(default)]
    sweep: Option<Sweep>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct TrafficOverride {
    flows: Option<u32>,
    frame_size: Option<usize>,
    imix: Option<bool>,
    ipv6: Option<bool>,
    rate: Option<f64>,
    paced_step: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSpec {
    #[serde(default)]
    runs: Option<Spanned<usize>>,
    #[serde(default)]
    seconds: Option<Spanned<u32>>,
    #[serde(default)]
    workers: Option<Spanned<usize>>,
    #[serde(default)]
    traffic: Traffic,
    #[serde(default)]
    set: Vec<Spanned<SetSpec>>,
    #[serde(default)]
    tcp: Vec<Spanned<SetSpec>>,
}

fn default_runs() -> usize {
    5
}

fn default_seconds() -> u32 {
    5
}

/// One configuration set, after defaults and sweeps are applied.
#[derive(Debug, Clone, PartialEq)]
pub struct Set {
    pub name: String,
    pub dut: Dut,
    /// kernel-nft: non-matching rules before the accept.
    pub rules: u32,
    pub conntrack: bool,
    /// kernel-nft: the rules' addresses as one set lookup instead of a linear chain.
    pub nft_set: bool,
    /// Outbound NAT of every flow leaving by lrd1 to its address: nftables `masquerade`
    /// (kernel-nft) or pf's `nat` with `keep state` (linerate).
    pub nat: bool,
    /// linerate: "auto", "af_xdp", "af_xdp_native" or "af_packet".
    pub backend: String,
    /// linerate: the kernel fast path for decided flows (`router.fast_path`, default true);
    /// false measures the pipeline alone.
    pub fast_path: bool,
    /// Multiples of the set's rate to offer after its runs (the overload sweep).
    pub overload: Vec<f64>,
    /// Pings across the idle DUT, one a second, after the runs (0: none).
    pub ping: u32,
    pub traffic: Traffic,
    /// Sweep this set belongs to: (base name, parameter, value).
    pub sweep: Option<(String, String, u64)>,
}

const BACKENDS: [&str; 4] = ["auto", "af_xdp", "af_xdp_native", "af_packet"];

/// A whole lab.
#[derive(Debug, Clone, PartialEq)]
pub struct Lab {
    pub runs: usize,
    pub seconds: u32,
    /// Queues per veth and workers per DUT (`runner::Cpus::workers`).
    pub workers: usize,
    pub sets: Vec<Set>,
    /// The [[tcp]] entries: DUTs to measure with iperf3 (their traffic and overload unused).
    pub tcp: Vec<Set>,
}

#[derive(Debug, thiserror::Error)]
pub enum LabFileError {
    #[error("{0}: cannot read: {1}")]
    Io(String, std::io::Error),
    #[error("{path}:{line}:{col}: {msg}")]
    Parse { path: String, line: usize, col: usize, msg: String },
}

impl Lab {
    pub fn load(path: &Path) -> Result<Lab, LabFileError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| LabFileError::Io(path.display().to_string(), e))?;
        Lab::parse(&text, &path.display().to_string())
    }

    pub fn parse(text: &str, path: &str) -> Result<Lab, LabFileError> {
        let spec: FileSpec = toml::from_str(text).map_err(|e| {
            let (line, col) = e.span().map(|s| line_col(text, s.start)).unwrap_or((0, 0));
            LabFileError::Parse { path: path.to_owned(), line, col, msg: e.message().to_owned() }
        })?;
        let at = Locator { text, path };
        let runs = spec.runs.as_ref().map_or(default_runs(), |r| *r.get_ref());
        let seconds = spec.seconds.as_ref().map_or(default_seconds(), |r| *r.get_ref());
        if let Some(r) = spec.runs.as_ref().filter(|r| *r.get_ref() == 0) {
            return Err(at.error(r.span(), "need runs >= 1".into()));
        }
        let workers = spec.workers.as_ref().map_or(1, |w| *w.get_ref());
        if let Some(w) = spec.workers.as_ref().filter(|w| !(1..=64).contains(w.get_ref())) {
            return Err(at.error(w.span(), "need workers within 1..=64".into()));
        }
        if let Some(r) = spec.seconds.as_ref().filter(|r| *r.get_ref() < 3) {
            return Err(at.error(
                r.span(),
                "need seconds >= 3 (the first and last seconds of a run are left out)".into(),
            ));
        }
        if !["xdp-live", "af-packet"].contains(&spec.traffic.generator.as_str()) {
            return Err(at.error(
                0..0,
                format!(
                    "[traffic] generator {:?} is not xdp-live or af-packet",
                    spec.traffic.generator
                ),
            ));
        }
        let mut sets = Vec::new();
        for spanned in &spec.set {
            sets.extend(expand_set(spanned.get_ref(), spanned.span(), &spec.traffic, &at)?);
        }
        let mut tcp = Vec::new();
        for spanned in &spec.tcp {
            tcp.push(tcp_entry(spanned.get_ref(), spanned.span(), &spec.traffic, &at)?);
        }
        if sets.is_empty() && tcp.is_empty() {
            return Err(at.error(0..0, "no [[set]] or [[tcp]] to run".into()));
        }
        Ok(Lab { runs, seconds, workers, sets, tcp })
    }

    /// The built-in default: the study's headline comparison in a few minutes.
    pub fn default_lab() -> Lab {
        Lab::parse(DEFAULT_LAB, "<built-in default lab>").expect("the built-in lab parses")
    }
}

/// Every error names the value (or the [[set]]) it is about.
struct Locator<'a> {
    text: &'a str,
    path: &'a str,
}

impl Locator<'_> {
    fn error(&self, span: std::ops::Range<usize>, msg: String) -> LabFileError {
        let (line, col) = line_col(self.text, span.start);
        LabFileError::Parse { path: self.path.to_owned(), line, col, msg }
    }
}

/// One [[tcp]] entry: a set's DUT, without what only frames from the generator mean.
fn tcp_entry(
    s: &SetSpec,
    span: std::ops::Range<usize>,
    traffic: &Traffic,
    at: &Locator,
) -> Result<Set, LabFileError> {
    let unused = [
        (!s.overload.is_empty(), "overload"),
        (s.ping > 0, "ping"),
        (s.traffic.is_some(), "traffic"),
        (s.sweep.is_some(), "sweep"),
    ];
    if let Some((_, key)) = unused.iter().find(|(set, _)| *set) {
        return Err(at.error(
            span,
            format!(
                "[[tcp]] {:?}: `{key}` applies to [[set]] only (iperf3 makes the traffic)",
                s.name
            ),
        ));
    }
    let mut sets = expand_set(s, span, traffic, at)?;
    Ok(sets.remove(0))
}

/// One [[set]] with the file's traffic under its own, checked, then one set per value of its
/// sweep (or just itself).
fn expand_set(
    s: &SetSpec,
    span: std::ops::Range<usize>,
    traffic: &Traffic,
    at: &Locator,
) -> Result<Vec<Set>, LabFileError> {
    let mut t = traffic.clone();
    if let Some(o) = &s.traffic {
        t.flows = o.flows.unwrap_or(t.flows);
        t.frame_size = o.frame_size.unwrap_or(t.frame_size);
        t.imix = o.imix.unwrap_or(t.imix);
        t.ipv6 = o.ipv6.unwrap_or(t.ipv6);
        t.rate = o.rate.unwrap_or(t.rate);
        t.paced_step = o.paced_step.unwrap_or(t.paced_step);
    }
    if !(1..=256).contains(&t.paced_step) {
        return Err(at.error(
            span,
            format!("set {:?}: paced_step {} is not within 1..=256", s.name, t.paced_step),
        ));
    }
    let backend = s.backend.clone().unwrap_or_else(|| "auto".into());
    if !BACKENDS.contains(&backend.as_str()) {
        return Err(at.error(
            span,
            format!(
                "set {:?}: backend {backend:?} is not auto, af_xdp, af_xdp_native or af_packet",
                s.name
            ),
        ));
    }
    if let Some(f) = s.overload.iter().find(|f| !(f.is_finite() && (0.01..=100.0).contains(*f))) {
        return Err(at.error(
            span,
            format!("set {:?}: overload multiple {f} is not within 0.01..=100", s.name),
        ));
    }
    if s.nft_set && s.dut != Dut::KernelNft {
        return Err(at.error(
            span,
            format!("set {:?}: nft_set applies to dut = \"kernel-nft\" only", s.name),
        ));
    }
    if s.nat && s.dut == Dut::Kernel {
        return Err(at.error(
            span,
            format!(
                "set {:?}: nat applies to dut = \"kernel-nft\" (masquerade) or \"linerate\"",
                s.name
            ),
        ));
    }
    let base = Set {
        name: s.name.clone(),
        dut: s.dut,
        rules: s.rules,
        conntrack: s.conntrack,
        nft_set: s.nft_set,
        nat: s.nat,
        backend,
        fast_path: s.fast_path.unwrap_or(true),
        overload: s.overload.clone(),
        ping: s.ping,
        traffic: t,
        sweep: None,
    };
    let expanded = match &s.sweep {
        None => vec![base],
        Some(sw) => sweep(&base, sw, &s.name).map_err(|msg| at.error(span.clone(), msg))?,
    };
    for set in &expanded {
        let t = &set.traffic;
        if t.flows == 0 || (!t.imix && !(60..=1514).contains(&t.frame_size)) {
            return Err(at.error(
                span.clone(),
                format!("set {:?}: flows must be >= 1 and frame_size within 60..=1514", set.name),
            ));
        }
        if set.nat && t.ipv6 {
            return Err(at.error(
                span.clone(),
                format!(
                    "set {:?}: nat needs IPv4 traffic (linerate translates IPv4 only)",
                    set.name
                ),
            ));
        }
        if set.dut == Dut::KernelNft && set.rules > 100_000 {
            return Err(at.error(
                span.clone(),
                format!(
                    "set {:?}: {} nftables rules would take minutes to load; at most 100000",
                    set.name, set.rules
                ),
            ));
        }
    }
    Ok(expanded)
}

/// `base` once per value of the sweep, named `NAME-PARAMVALUE`.
fn sweep(base: &Set, sw: &Sweep, name: &str) -> Result<Vec<Set>, String> {
    if sw.values.is_empty() {
        return Err(format!("set {name:?}: sweep has no values"));
    }
    let mut out = Vec::new();
    for &v in &sw.values {
        let mut set = base.clone();
        match sw.param.as_str() {
            "rules" => set.rules = v as u32,
            "flows" => set.traffic.flows = v as u32,
            "frame_size" => set.traffic.frame_size = v as usize,
            other => {
                return Err(format!(
                    "set {name:?}: cannot sweep {other:?} (rules, flows or frame_size)"
                ));
            }
        }
        set.name = format!("{}-{}{}", name, sw.param, v);
        set.sweep = Some((name.to_owned(), sw.param.clone(), v));
        out.push(set);
    }
    Ok(out)
}

/// `linerate lab` with no file: kernel forwarding vs linerate, and kernel + nftables with
/// 1000 non-matching rules before the accept, 2000 flows of 60-byte frames, 5 runs each.
/// linerate's firewall with the same 1000 rules (in pf syntax) closes the list.
pub const DEFAULT_LAB: &str = r#"
runs = 5
seconds = 5

[traffic]
flows = 2000
frame_size = 60

[[set]]
name = "kernel"
dut = "kernel"
overload = [0.5, 1, 1.5, 2, 3]
ping = 10

[[set]]
name = "linerate"
dut = "linerate"
overload = [0.5, 1, 1.5, 2, 3]
ping = 10

# The pipeline alone: every frame through linerate's workers (router.fast_path = false).
[[set]]
name = "linerate-pipeline"
dut = "linerate"
fast_path = false

[[set]]
name = "kernel-nft-1000"
dut = "kernel-nft"
rules = 1000

# The same 1000 addresses as one nftables set: the baseline an nftables expert would write.
[[set]]
name = "kernel-nft-set-1000"
dut = "kernel-nft"
rules = 1000
nft_set = true

[[set]]
name = "linerate-1000"
dut = "linerate"
rules = 1000

[[set]]
name = "linerate-1000-pipeline"
dut = "linerate"
rules = 1000
fast_path = false

# Outbound NAT of every flow: nftables masquerade (with conntrack, as it needs) against
# pf's `nat on lrd1 from any to any -> (lrd1)` with `keep state`.
[[set]]
name = "kernel-nft-masquerade"
dut = "kernel-nft"
nat = true

[[set]]
name = "linerate-nat"
dut = "linerate"
nat = true

[[set]]
name = "linerate-nat-pipeline"
dut = "linerate"
nat = true
fast_path = false

# Minimum-size frames through linerate's ports over AF_PACKET: its fast path at tc ingress,
# the one TCP gets below.
[[set]]
name = "linerate-af_packet"
dut = "linerate"
backend = "af_packet"

# TCP through each DUT, every veth offload on: iperf3 A -> B, Gbit/s. linerate over AF_PACKET
# keeps its fast path at tc ingress (no XDP on its inputs: XDP on a veth turns the sender's
# TSO off); over AF_XDP (its default, fastest for small frames) XDP takes the flows.
[[tcp]]
name = "kernel-tcp"
dut = "kernel"

[[tcp]]
name = "linerate-tcp"
dut = "linerate"
backend = "af_packet"

[[tcp]]
name = "linerate-tcp-af_xdp"
dut = "linerate"
"#;

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map(|l| l.chars().count()).unwrap_or(0) + 1;
    (line, col)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_lab_is_the_study_comparison() {
        let lab = Lab::default_lab();
        assert_eq!((lab.runs, lab.seconds), (5, 5));
        let names: Vec<_> = lab.sets.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "kernel",
                "linerate",
                "linerate-pipeline",
                "kernel-nft-1000",
                "kernel-nft-set-1000",
                "linerate-1000",
                "linerate-1000-pipeline",
                "kernel-nft-masquerade",
                "linerate-nat",
                "linerate-nat-pipeline",
                "linerate-af_packet"
            ]
        );
        let tcp: Vec<_> = lab.tcp.iter().map(|s| (s.name.as_str(), s.backend.as_str())).collect();
        assert_eq!(
            tcp,
            [
                ("kernel-tcp", "auto"),
                ("linerate-tcp", "af_packet"),
                ("linerate-tcp-af_xdp", "auto")
            ]
        );
        assert_eq!((lab.sets[3].rules, lab.sets[4].rules, lab.sets[5].rules), (1000, 1000, 1000));
        assert!(!lab.sets[3].nft_set && lab.sets[4].nft_set);
        assert_eq!((lab.sets[5].dut, lab.sets[5].backend.as_str()), (Dut::Linerate, "auto"));
        let fast: Vec<bool> =
            lab.sets.iter().filter(|s| s.dut == Dut::Linerate).map(|s| s.fast_path).collect();
        assert_eq!(fast, [true, false, true, false, true, false, true]);
        assert_eq!(lab.sets[1].overload, [0.5, 1.0, 1.5, 2.0, 3.0]);
        assert!(lab.sets.iter().all(|s| s.traffic.flows == 2000 && s.traffic.frame_size == 60));
        assert_eq!(
            lab.sets.iter().filter(|s| s.nat).map(|s| s.dut).collect::<Vec<_>>(),
            [Dut::KernelNft, Dut::Linerate, Dut::Linerate]
        );
    }

    #[test]
    fn sweeps_expand_and_overrides_apply() {
        let lab = Lab::parse(
            "runs = 3\nseconds = 4\n[[set]]\nname = \"nft\"\ndut = \"kernel-nft\"\nsweep = { param = \"rules\", values = [1, 100] }\n[[set]]\nname = \"lr6\"\ndut = \"linerate\"\nbackend = \"af_packet\"\ntraffic = { ipv6 = true, frame_size = 62, paced_step = 32 }\n",
            "x.toml",
        )
        .unwrap();
        assert_eq!(lab.sets.len(), 3);
        assert_eq!(lab.workers, 1);
        assert_eq!((lab.sets[1].name.as_str(), lab.sets[1].rules), ("nft-rules100", 100));
        assert_eq!(lab.sets[1].sweep, Some(("nft".into(), "rules".into(), 100)));
        assert!(lab.sets[2].traffic.ipv6 && lab.sets[2].traffic.frame_size == 62);
        assert_eq!((lab.sets[0].traffic.paced_step, lab.sets[2].traffic.paced_step), (256, 32));
    }

    #[test]
    fn errors_name_the_place() {
        let e = Lab::parse("runs = 5\n[[set]]\nname = \"a\"\ndut = \"bsd\"\n", "lab.toml")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("lab.toml:4:7:"), "{e}");
        let e = Lab::parse("[[set]]\nname = \"a\"\ndut = \"kernel\"\nbogus = 1\n", "lab.toml")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("lab.toml:4:1:"), "{e}");
        let e = Lab::parse("seconds = 2\n[[set]]\nname = \"a\"\ndut = \"kernel\"\n", "lab.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("seconds >= 3"), "{e}");
        assert!(e.starts_with("lab.toml:1:11:"), "{e}");
        let e = Lab::parse(
            "[[set]]\nname = \"a\"\ndut = \"linerate\"\nbackend = \"dpdk\"\n",
            "lab.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("lab.toml:1:1:") && e.contains("backend \"dpdk\""), "{e}");
        let e = Lab::parse(
            "[[set]]\nname = \"a\"\ndut = \"linerate\"\noverload = [0.5, -1]\n",
            "lab.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("overload multiple -1"), "{e}");
        let e = Lab::parse(
            "[traffic]\npaced_step = 512\n[[set]]\nname = \"a\"\ndut = \"kernel\"\n",
            "lab.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("paced_step 512 is not within 1..=256"), "{e}");
        let e = Lab::parse("[[set]]\nname = \"a\"\ndut = \"kernel\"\nnft_set = true\n", "lab.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("nft_set applies"), "{e}");
        let e = Lab::parse("[[set]]\nname = \"a\"\ndut = \"kernel\"\nnat = true\n", "lab.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("nat applies"), "{e}");
        let e = Lab::parse(
            "[[set]]\nname = \"a\"\ndut = \"linerate\"\nnat = true\ntraffic = { ipv6 = true }\n",
            "lab.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("nat needs IPv4"), "{e}");
        let e = Lab::parse("workers = 0\n[[set]]\nname = \"a\"\ndut = \"kernel\"\n", "lab.toml")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("lab.toml:1:11:") && e.contains("workers within 1..=64"), "{e}");
        assert_eq!(
            Lab::parse("workers = 4\n[[set]]\nname = \"a\"\ndut = \"kernel\"\n", "lab.toml")
                .unwrap()
                .workers,
            4
        );
    }
}
