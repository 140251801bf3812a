//! A rule set compiled for the fast path ([`CompiledRules`]), shared by every worker.

use std::path::Path;
use std::sync::Arc;

use fw::classifier::{BuildError, Classifier};
use fw::packet::Dir;
use fw::rules::RuleSet;
use fw::state::RuleLimits;

use super::log::LogRules;

/// A rule set ready for the fast path.
pub struct CompiledRules {
    pub rules: RuleSet,
    pub(super) classifier: Classifier,
    /// Whether the out pass can change a packet's fate: some rule that can match outbound
    /// packets (`out`, or no direction as `pass all`) blocks or keeps state. If every such
    /// rule is a stateless pass, the out verdict is always "pass, no state" (pf's default
    /// included), so the pass is skipped (but for packets with IP options, which pf's default
    /// pass blocks); the only loss is those rules' out-pass counts.
    pub(super) has_out: bool,
    /// The same for the in pass: whether a state must hold the packet's `in` state to settle it.
    pub(super) has_in: bool,
    /// The rules with `log`, and their ids in the log.
    pub log: LogRules,
    /// The state counts of the rules with `max`, shared by the workers.
    pub(super) limits: Option<Arc<RuleLimits>>,
    /// The route bits the rules test (`no-route`, `urpf-failed`): 0, the usual case, looks
    /// nothing up.
    pub(super) route_bits: u8,
    /// Some `scrub` rule applies to inbound / outbound packets: the stage's scrub pass runs.
    pub(super) scrub_in: bool,
    pub(super) scrub_out: bool,
    /// Some scrub rule names hosts, ports, a family or a protocol: matching needs a key.
    pub(super) scrub_keyed: bool,
    /// Some rule says `modulate state`: the send pass rewrites the TCP packets of states
    /// that modulate.
    pub(crate) modulate: bool,
    /// Some rule has `route-to` or `reply-to`: the forwarder looks their packets' states up
    /// before the route lookups (`forward/route_opts.rs`).
    pub(crate) route_opts: bool,
    /// Some `out` rule has `route-to`: the forwarder looks the state up again after the out
    /// pass, which may have just made it.
    pub(crate) routes_out: bool,
    /// Which flows may go to the kernel's fast path under these rules, and for how long
    /// between the pipeline's looks at them ([`crate::offload`], [`offload_policy`]).
    pub(crate) offload: crate::offload::OffloadPolicy,
    /// Shared by the sets made from this one by changing table entries (`overload`,
    /// `linerate table`): the same rules, whose counters go on.
    pub(super) lineage: Arc<()>,
    /// `set keepcounters`: where each rule's counters come from in the set this one
    /// replaced, found when it is published.
    pub(super) keep: std::sync::OnceLock<KeepCounts>,
}

/// The rules of a set published with `set keepcounters` that are in the set it replaced.
pub(super) struct KeepCounts {
    /// The replaced set's lineage: only a worker counting under it carries its counts.
    pub(super) from: Arc<()>,
    /// For each rule (and pf's default, last), the replaced set's index of the same rule.
    pub(super) map: Vec<Option<usize>>,
}

/// What makes two rules of two sets the same rule (pf's `keepcounters`): all but the line.
pub(super) fn rule_identity(r: &fw::rules::Rule) -> String {
    format!("{:?}", fw::rules::Rule { line: 0, ..r.clone() })
}

impl KeepCounts {
    /// pf's way (`set keepcounters`): a rule of `new` takes the counters of an equal rule of
    /// `old` (its line aside), each old rule's once.
    pub(super) fn of(old: &CompiledRules, new: &CompiledRules) -> KeepCounts {
        let key = rule_identity;
        let mut olds: std::collections::HashMap<String, Vec<usize>> =
            std::collections::HashMap::new();
        for (i, r) in old.rules.rules.iter().enumerate().rev() {
            olds.entry(key(r)).or_default().push(i);
        }
        let mut map: Vec<Option<usize>> =
            new.rules.rules.iter().map(|r| olds.get_mut(&key(r)).and_then(Vec::pop)).collect();
        map.push(Some(old.rule_count()));
        KeepCounts { from: Arc::clone(&old.lineage), map }
    }
}

/// Why a rule file was not loaded: the rule language's error at its position, or the
/// classifier's refusal of the whole set (too large), naming the file. Typed, so that a
/// reload's caller keeps the position (`file:line:col`) as data, not only as text.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RuleFileError {
    #[error(transparent)]
    Rules(#[from] fw::rules::RuleError),
    #[error("{}: {error}", path.display())]
    Compile { path: std::path::PathBuf, error: BuildError },
}

impl RuleFileError {
    /// Where in the rule file, if the error is at a position: file, line, column.
    pub fn position(&self) -> Option<(&Path, usize, usize)> {
        match self {
            RuleFileError::Rules(e) => Some((e.path.as_path(), e.line, e.column)),
            RuleFileError::Compile { .. } => None,
        }
    }
}

/// [`CompiledRules::new`] naming `path` in its error.
fn compile_file(rules: RuleSet, path: &Path) -> Result<CompiledRules, RuleFileError> {
    CompiledRules::new(rules)
        .map_err(|error| RuleFileError::Compile { path: path.to_path_buf(), error })
}

impl CompiledRules {
    /// Compiles `rules` (off the fast path: this can take seconds for large sets).
    pub fn new(rules: RuleSet) -> Result<CompiledRules, BuildError> {
        let limits = RuleLimits::of(&rules);
        CompiledRules::with_limits(rules, limits, Arc::new(()))
    }

    /// `rules`, this set's rules with other table entries, compiled: it shares this set's
    /// limits and source nodes, and its rule counters go on.
    pub(super) fn derived(&self, rules: RuleSet) -> Result<CompiledRules, BuildError> {
        CompiledRules::with_limits(rules, self.limits.clone(), Arc::clone(&self.lineage))
    }

    fn with_limits(
        rules: RuleSet,
        limits: Option<Arc<RuleLimits>>,
        lineage: Arc<()>,
    ) -> Result<CompiledRules, BuildError> {
        let classifier = Classifier::build(&rules)?;
        let (has_in, has_out) = (rules.acts_on(Dir::In), rules.acts_on(Dir::Out));
        let log = LogRules::of(&rules);
        let route_bits = rules.route_bits_used();
        let (scrub_in, scrub_out) = (rules.scrubs(Dir::In), rules.scrubs(Dir::Out));
        let scrub_keyed = rules.scrub.iter().any(|r| !r.matches_all_hosts());
        // `synproxy state` shifts the server's numbers as `modulate state` does.
        let modulate = rules.rules.iter().any(|r| {
            matches!(r.keep_state, fw::rules::StateMode::Modulate | fw::rules::StateMode::Synproxy)
        });
        let route_opts = rules.rules.iter().any(|r| r.route.is_some());
        let routes_out =
            rules.rules.iter().any(|r| r.route.is_some() && r.dir == Some(fw::packet::Dir::Out));
        let offload = offload_policy(&rules);
        Ok(CompiledRules {
            rules,
            classifier,
            has_out,
            has_in,
            log,
            limits,
            route_bits,
            scrub_in,
            scrub_out,
            scrub_keyed,
            modulate,
            route_opts,
            routes_out,
            offload,
            lineage,
            keep: std::sync::OnceLock::new(),
        })
    }

    /// Whether `other` is this set with other table entries (`overload`, `linerate table`).
    pub(super) fn same_rules(&self, other: &CompiledRules) -> bool {
        Arc::ptr_eq(&self.lineage, &other.lineage)
    }

    /// Whether some rule has `overload` (the slot then runs its overload thread).
    pub(crate) fn overloads(&self) -> bool {
        self.limits.as_ref().is_some_and(|l| l.has_overload())
    }

    /// Reads, parses and compiles a rule file; errors read `file:line:col: problem`.
    pub fn load(
        path: &Path,
        ifaces: &dyn Fn(&str) -> Option<u16>,
    ) -> Result<CompiledRules, RuleFileError> {
        let rules = fw::rules::load(path, ifaces)?;
        compile_file(rules, path)
    }

    /// [`load`](Self::load) knowing the router's addresses on its interfaces (`self`,
    /// interface hosts, `antispoof`: [`fw::rules::parse_with_addresses`]).
    pub fn load_with_addresses(
        path: &Path,
        ifaces: &dyn Fn(&str) -> Option<u16>,
        addresses: &fw::rules::InterfaceAddresses,
    ) -> Result<CompiledRules, RuleFileError> {
        let rules = fw::rules::load_with_addresses(path, ifaces, addresses)?;
        compile_file(rules, path)
    }

    /// [`parse`](Self::parse) knowing the router's addresses on its interfaces.
    pub fn parse_with_addresses(
        text: &str,
        path: &Path,
        ifaces: &dyn Fn(&str) -> Option<u16>,
        addresses: &fw::rules::InterfaceAddresses,
    ) -> Result<CompiledRules, RuleFileError> {
        let rules = fw::rules::parse_with_addresses(text, path, ifaces, addresses)?;
        compile_file(rules, path)
    }

    /// As [`load`](Self::load) from text; `path` names it in errors and anchors table files.
    pub fn parse(
        text: &str,
        path: &Path,
        ifaces: &dyn Fn(&str) -> Option<u16>,
    ) -> Result<CompiledRules, RuleFileError> {
        let rules = fw::rules::parse(text, path, ifaces)?;
        compile_file(rules, path)
    }

    pub fn rule_count(&self) -> usize {
        self.rules.rules.len()
    }

    /// Bytes held by the compiled classifier.
    pub fn classifier_bytes(&self) -> usize {
        self.classifier.memory_bytes()
    }
}

/// The longest an offloaded flow goes unseen by the pipeline while it keeps state: 1 s,
/// within the granularity of pf's own expiry (its purge visits each state once per
/// `interval`, 10 s), for a map update per flow and second.
const REFRESH_MAX_NS: u64 = 1_000_000_000;

/// Which flows may go to the kernel's fast path under `rules`: those whose every packet
/// the pipeline would pass alike and rewrite alike (see [`CompiledRules::offload`]).
///
/// * Nothing while a rule logs (its packets go to the log), scrubs (it may rewrite each) or
///   routes with `route-to` (the fast path forwards by the FIB's decision).
/// * Without state or translation, every flow, for ever; TCP only while no rule tests its
///   flags (a rule with `flags` may match one segment of a flow and not the next).
/// * With state or translation, UDP flows only (TCP's window tracking needs every segment),
///   each entry living half the shortest UDP timeout, at most [`REFRESH_MAX_NS`]: the flow's
///   next packet after that goes through the pipeline, which refreshes the state and the
///   translation, so neither expires while the kernel forwards, and an idle one expires at
///   most that much before pf's would. Not with per-rule adaptive timeouts (their states'
///   life follows a count), nor with a UDP timeout under 2 s.
fn offload_policy(rules: &RuleSet) -> crate::offload::OffloadPolicy {
    use crate::offload::OffloadPolicy;
    use fw::rules::{LogMode, StateMode};
    use fw::state::Tmo;
    let each_packet = !rules.scrub.is_empty()
        || rules.rules.iter().any(|r| r.log != LogMode::None || r.route.is_some());
    if each_packet {
        return OffloadPolicy::NONE;
    }
    let translates = !rules.nat.is_empty();
    let stateful = rules.rules.iter().any(|r| r.keep_state != StateMode::None);
    if !stateful && !translates {
        return OffloadPolicy {
            tcp: rules.rules.iter().all(|r| r.flags.is_none()),
            ..OffloadPolicy::STATELESS
        };
    }
    let t = &rules.timeouts;
    let udp_kinds = [Tmo::UdpFirst, Tmo::UdpSingle, Tmo::UdpMultiple];
    let own = rules
        .rules
        .iter()
        .flat_map(|r| &r.state_timeouts)
        .filter(|(k, _)| udp_kinds.contains(k))
        .map(|(_, secs)| *secs);
    let least = own.chain([t.udp_first, t.udp_single, t.udp_multiple]).min().unwrap_or(0);
    let adaptive = rules.rules.iter().any(|r| r.state_adaptive.is_some());
    OffloadPolicy {
        udp: least >= 2 && !adaptive,
        tcp: false,
        translates,
        refresh_ns: (u64::from(least) * 500_000_000).min(REFRESH_MAX_NS),
    }
}

#[cfg(test)]
mod rule_file_error_tests {
    use super::*;

    /// A rule file's error keeps its position as data, and reads as before:
    /// `file:line:col: problem`.
    #[test]
    fn the_position_is_kept() {
        let ifaces = |n: &str| (n == "a").then_some(0);
        let e = CompiledRules::parse("pass all\npass in on b all\n", Path::new("r.conf"), &ifaces)
            .err()
            .expect("unknown interface");
        assert_eq!(e.position(), Some((Path::new("r.conf"), 2, 12)));
        assert!(e.to_string().starts_with("r.conf:2:12: "), "{e}");
        // No source behind it: a reload's error chain (`{:#}`) says it once.
        assert!(std::error::Error::source(&e).is_none());
    }
}
