//! The rule language: a subset of OpenBSD's pf.conf(5) filter rules, its AST and its parser.
//!
//! The grammar (EBNF), the defaults and examples are in `docs/firewall.md`. In short:
//!
//! ```text
//! ext_if = "em0"
//! table <bad> file "bad-hosts.txt"
//! set limit states 200000
//! block all
//! pass in on $ext_if proto tcp from any to 192.0.2.10 port { www https }
//! block in quick from <bad>
//! ```
//!
//! Semantics follow pf: rules are evaluated first to last, the **last** matching rule decides
//! unless a matching rule carries `quick`, which ends the evaluation; a packet matching no rule
//! is **passed** (pf's implicit `pass all` without state), so a rule file normally starts with
//! `block all`. `pass` rules keep state by default and, when stateful, only match TCP packets
//! whose flags are `S/SA` (pf's defaults since OpenBSD 4.1); both are filled into [`Rule`] by the
//! parser, so a `Rule` always holds its *effective* options.
//!
//! pf expands a rule holding lists (`from { a, !b }`) into one rule per combination; here the
//! rule stays one [`Rule`] whose lists match if **any** element matches, which selects exactly
//! the same packets with the same outcome (the expanded rules are adjacent and identical apart
//! from the address), the deciding rule index being the one of the unexpanded rule. As in pf,
//! an address element of one family only matches packets of that family, negated or not
//! (`from !10.0.0.0/8` matches IPv4 packets outside 10/8, no IPv6 packet); tables and `any`
//! match both families.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

mod anchor;
mod block_return;
pub(crate) mod dims;
mod extras;
mod filter_rule;
mod hosts;
mod icmp_names;
mod iface_addr;
mod lexer;
mod match_rule;
mod matching;
mod nat;
mod parser;
mod print;
mod route_opt;
mod scrub;
mod services;
mod src_track;
mod tags;
mod text_file;
mod timeouts;
mod translate_rule;
mod translation;
mod values;

use lexer::{Tok, Token, describe, lex};
use parser::{PErr, PResult, Parser, here};
pub use text_file::{MAX_RULE_FILE_BYTES, read_rule_text};
pub use translation::{
    DEFAULT_NAT_PORTS, MAX_POOL_ADDRS, NatAddr, NatKind, NatRule, NatTarget, PoolMethod,
};
use values::{af_name, parse_flags, port_number};
pub use values::{parse_prefix, parse_table_file};

pub use anchor::{Anchor, AnchorKind};
pub use extras::LogMode;
pub use print::{ExpansionTooLarge, MAX_PRINTED_RULES};
pub use route_opt::RouteOpt;
pub use scrub::{ScrubOpts, ScrubRule};

pub use crate::packet::{Af, Dir};

/// TCP flag bits as in [`PacketKey::tcp_flags`](crate::packet::PacketKey::tcp_flags).
pub mod tcp_flags {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;
    pub const URG: u8 = 0x20;
    pub const ECE: u8 = 0x40;
    pub const CWR: u8 = 0x80;
}

/// pf's default flags of a stateful rule: `flags S/SA`.
pub const DEFAULT_FLAGS: (u8, u8) = (tcp_flags::SYN, tcp_flags::SYN | tcp_flags::ACK);

/// pf's default `set limit states` (OpenBSD pf FAQ "Options" / pf.conf(5): "Default is 100000").
pub const DEFAULT_LIMIT_STATES: u64 = 100_000;

/// The largest `set limit states` (the state table's [`MAX_LIMIT`](crate::state::MAX_LIMIT)):
/// each worker reserves 104 bytes per state, 10.4 GB at this limit.
pub const MAX_LIMIT_STATES: u64 = 100_000_000;

/// pf's default `set limit src-nodes` (pf.conf(5): "Default is 10000").
pub const DEFAULT_LIMIT_SRC_NODES: u64 = 10_000;

/// pf's default `set limit frags` (OpenBSD pf FAQ "Options": "frags ... Default is 5000").
pub const DEFAULT_LIMIT_FRAGS: u64 = 5000;

/// The largest `set limit frags`: fragmented datagrams tracked per worker (36 MB).
pub const MAX_LIMIT_FRAGS: u64 = 1_000_000;

/// The largest `set limit src-nodes`: some 100 bytes a node, 1 GB at this limit, shared by
/// the workers.
pub const MAX_LIMIT_SRC_NODES: u64 = 10_000_000;

/// pf features linerate parses only to refuse them, with the reason given after "`X` is not
/// supported by linerate": accepting them would promise what is not done.
const UNSUPPORTED: [(&str, &str); 0] = [];

/// The most distinct tag names a rule set may use (`tag`, `tagged`): a tag travels with the
/// packet and its states as a byte (0: none). pf allows more; a rule set beyond is refused
/// at the name that crosses the cap.
pub const MAX_TAGS: usize = 255;

/// The longest tag name (pf's `PF_TAG_NAME_SIZE` is 64 bytes with the terminating NUL).
pub const MAX_TAG_NAME: usize = 63;

/// What a rule does with the packets it decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    Pass,
    Block,
}

/// Whether a deciding `pass` rule creates a state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StateMode {
    /// `no state` (and every `block` rule).
    None,
    /// `keep state` (the default of `pass` rules).
    Keep,
    /// `keep state (sloppy)`: the state does not check TCP sequence windows.
    KeepSloppy,
    /// `modulate state`: `keep state`, and a TCP state created by a SYN shifts each end's
    /// sequence numbers by a random offset (see [`crate::state::Modulation`]).
    Modulate,
    /// `synproxy state`: `modulate state`'s rewriting, and the router completes a TCP
    /// client's handshake itself before it opens the connection to the server (see
    /// `state/proxy.rs`). TCP only.
    Synproxy,
}

/// What a `block` rule sends back about a packet it blocks (pf's `block return`,
/// `return-rst`, `return-icmp`, `return-icmp6`; none for `block drop`). As in pf, a TCP
/// packet gets a reset if `rst`, any other packet (a TCP one too without `rst`) the ICMP
/// destination unreachable of its family if a code is set; never about an ICMP error, a
/// reset, or a packet to a broadcast or multicast address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BlockReturn {
    /// Answer TCP with a reset (`return`, `return-rst`).
    pub rst: bool,
    /// The reset's TTL / hop limit (`return-rst (ttl N)`; pf's default is the system's, 64).
    pub rst_ttl: u8,
    /// ICMPv4 destination unreachable code (`return-icmp (code)`; pf's default: port
    /// unreachable, 3).
    pub icmp: Option<u8>,
    /// ICMPv6 destination unreachable code (pf's default: port unreachable, 4).
    pub icmp6: Option<u8>,
}

impl BlockReturn {
    /// pf's `block return`: a reset for TCP, port unreachable for the rest.
    pub const RETURN: BlockReturn =
        BlockReturn { rst: true, rst_ttl: 64, icmp: Some(3), icmp6: Some(4) };
}

/// An address prefix of one family. `addr` has its host bits cleared; IPv4 in the low 32 bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Prefix {
    pub af: Af,
    pub addr: u128,
    pub len: u8,
}

impl Prefix {
    /// Address width of the family in bits.
    pub fn bits(af: Af) -> u8 {
        match af {
            Af::Inet => 32,
            Af::Inet6 => 128,
        }
    }

    /// Builds the prefix, clearing host bits. `len` must be at most the family's width.
    pub fn new(af: Af, addr: u128, len: u8) -> Prefix {
        let bits = Self::bits(af);
        let len = len.min(bits);
        let addr = if af == Af::Inet { addr & 0xffff_ffff } else { addr };
        let host = bits - len;
        let addr = if host >= 128 { 0 } else { (addr >> host) << host };
        Prefix { af, addr, len }
    }

    /// First address covered.
    pub fn first(&self) -> u128 {
        self.addr
    }

    /// Last address covered.
    pub fn last(&self) -> u128 {
        let host = Self::bits(self.af) - self.len;
        if host >= 128 { u128::MAX } else { self.addr | ((1u128 << host) - 1) }
    }

    /// Whether the prefix covers `addr` of family `af`.
    pub fn contains(&self, af: Af, addr: u128) -> bool {
        af == self.af && addr >= self.first() && addr <= self.last()
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.af {
            Af::Inet => write!(f, "{}/{}", std::net::Ipv4Addr::from(self.addr as u32), self.len),
            Af::Inet6 => write!(f, "{}/{}", std::net::Ipv6Addr::from(self.addr), self.len),
        }
    }
}

/// What one address element designates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AddrTarget {
    Prefix(Prefix),
    /// Index into [`RuleSet::tables`].
    Table(usize),
}

/// One element of an address match: `[!] prefix` or `[!] <table>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AddrItem {
    pub negated: bool,
    pub target: AddrTarget,
}

/// The `from`/`to` part of a rule.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AddrMatch {
    /// `any`.
    Any,
    /// Matches if any element matches (a single address is a one-element list).
    List(Vec<AddrItem>),
}

/// The `port` part of a rule: inclusive ranges, matching if the port is in any of them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PortMatch {
    Any,
    /// May be empty (e.g. `port 10 >< 11`): matches nothing.
    Ranges(Vec<(u16, u16)>),
}

impl PortMatch {
    /// Whether `port` is matched.
    pub fn matches(&self, port: u16) -> bool {
        match self {
            PortMatch::Any => true,
            PortMatch::Ranges(r) => r.iter().any(|&(lo, hi)| lo <= port && port <= hi),
        }
    }
}

/// One entry of a table: `[!] prefix`. The most specific entry covering an address decides
/// whether it is in the table (a negated entry excludes), as in pf.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TableEntry {
    pub negated: bool,
    pub prefix: Prefix,
}

/// `table <name> { ... } file "..."`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    pub name: String,
    pub entries: Vec<TableEntry>,
    /// `const`, or made by linerate (an interface's addresses): its entries cannot be
    /// changed while the rules run (`linerate table`).
    pub constant: bool,
}

impl Table {
    /// Membership (linear scan: for the reference evaluator and tests).
    pub fn contains(&self, af: Af, addr: u128) -> bool {
        let mut best: Option<&TableEntry> = None;
        for e in &self.entries {
            if e.prefix.contains(af, addr) && best.is_none_or(|b| e.prefix.len >= b.prefix.len) {
                best = Some(e);
            }
        }
        best.is_some_and(|e| !e.negated)
    }
}

/// One filter rule with its effective options (pf's defaults filled in).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub action: Action,
    /// What a `block` rule sends back (`None`: drop silently, pf's `block drop`).
    pub block_return: Option<BlockReturn>,
    pub dir: Option<Dir>,
    pub quick: bool,
    /// `on IFACE` / `on { IFACE ... }` resolved to port indices (empty: any interface).
    pub ifaces: Vec<u16>,
    /// `on ! IFACE` (a single interface).
    pub iface_neg: bool,
    pub af: Option<Af>,
    /// Empty = any protocol.
    pub protos: Vec<u8>,
    pub src: AddrMatch,
    pub src_ports: PortMatch,
    pub dst: AddrMatch,
    pub dst_ports: PortMatch,
    /// `icmp-type T` / `icmp6-type { T ... }` (matched against `PacketKey::src_port`; empty:
    /// any type).
    pub icmp_types: Vec<u8>,
    /// `code C`, after a single type (matched against `PacketKey::dst_port`).
    pub icmp_code: Option<u8>,
    /// `flags set/mask`, only checked on TCP packets; `None` = `flags any`.
    pub flags: Option<(u8, u8)>,
    /// pf's `no-route` and `urpf-failed` hosts: the [`route`](crate::packet::route) bits a
    /// packet must have (`from no-route`), and those it must not have (`from ! no-route`).
    pub route_need: u8,
    pub route_refuse: u8,
    pub keep_state: StateMode,
    /// `keep state (max N)`: at most N states of this rule at a time.
    pub max_states: Option<u32>,
    /// pf's source tracking (`max-src-conn`, `max-src-conn-rate`, `max-src-states`,
    /// `max-src-nodes`, `source-track`): `None` without any of them.
    pub src_track: Option<SrcTrack>,
    /// `keep state (if-bound)` / `(floating)`: this rule's states bind as it says rather than
    /// as `set state-policy` does.
    pub state_policy: Option<StatePolicy>,
    /// `allow-opts`: packets this rule passes (or its states pass) may carry IP options (see
    /// [`PacketKey::ip_opts`](crate::packet::PacketKey::ip_opts)); without it pf drops them.
    pub allow_opts: bool,
    pub label: Option<String>,
    /// `ridentifier N` (pfSense's older `tracker N`): a number the rule set's author gives
    /// the rule, shown beside it (`linerate show`, metrics) as pfctl shows it; no effect on
    /// verdicts.
    pub ridentifier: Option<u32>,
    /// `keep state (tcp.established 3600, ...)`: timeouts of this rule's states that differ
    /// from the rule set's (`set timeout`), as (kind, seconds); empty for most rules.
    pub state_timeouts: Vec<(Tmo, u32)>,
    /// pf's per-rule adaptive timeouts, (start, end) in this rule's states: `keep state
    /// (adaptive.start N, adaptive.end M)`, or 60% and 120% of `max` when the rule sets
    /// neither (pfctl). `None` when the start is 0: the rule set's scaling applies.
    pub state_adaptive: Option<(u32, u32)>,
    /// `tag NAME`: the packets the rule matches are tagged (its id, see [`RuleSet::tags`]).
    pub tag: Option<u8>,
    /// `tagged NAME` / `! tagged NAME`: (negated, id) of the tag the packet must (must not)
    /// carry.
    pub tagged: Option<(bool, u8)>,
    /// `log` / `log (all)`.
    pub log: LogMode,
    /// `route-to` / `reply-to` (`pass in` rules that keep state only).
    pub route: Option<RouteOpt>,
    /// 1-based line of the rule in its file.
    pub line: usize,
}

/// A rule's source tracking (pf.conf(5), STATEFUL TRACKING OPTIONS): the states it creates
/// are counted per source address (the address the creating packet came from), in a *source
/// node* of the rule (`source-track rule`) or one shared by every rule that tracks globally
/// (`source-track global`). As pfctl: `max-src-conn`, `max-src-conn-rate` and
/// `max-src-nodes` track per rule; `max-src-states` alone, or `source-track` without a word,
/// globally.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SrcTrack {
    /// Source nodes shared by all globally tracking rules rather than this rule's own.
    pub global: bool,
    /// `max-src-nodes N`: at most N source addresses with states of this rule.
    pub max_nodes: Option<u32>,
    /// `max-src-states N`: at most N states per source address (in its node).
    pub max_states: Option<u32>,
    /// `max-src-conn N`: at most N fully established TCP connections per source address.
    pub max_conn: Option<u32>,
    /// `max-src-conn-rate N / S`: at most N new established connections per S seconds
    /// per source address (pf's decaying count).
    pub max_conn_rate: Option<(u32, u32)>,
    /// `overload <table> [flush [global]]`: a source refused by `max-src-conn` or
    /// `max-src-conn-rate` is added to that table.
    pub overload: Option<Overload>,
}

/// `overload <table> [flush [global]]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overload {
    /// The table's index in [`RuleSet::tables`].
    pub table: usize,
    /// Which states of the source `flush` kills as well.
    pub flush: Flush,
}

/// What `overload ... flush` kills: nothing, the source's states of the rule, or all its
/// states (`flush global`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flush {
    None,
    Rule,
    Global,
}

/// pf's state timeouts (`set timeout`): the state table's own type, so that a parsed rule
/// set configures the table directly.
pub use timeouts::{Timeouts, Tmo};

/// `set state-policy`: whether a state matches packets on any interface (`floating`, pf's
/// default) or only on the interface where it was created (`if-bound`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum StatePolicy {
    #[default]
    Floating,
    IfBound,
}

/// A parsed rule file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleSet {
    pub rules: Vec<Rule>,
    pub tables: Vec<Table>,
    /// `set limit states N` (default [`DEFAULT_LIMIT_STATES`]).
    pub limit_states: u64,
    /// `set limit src-nodes N` (default [`DEFAULT_LIMIT_SRC_NODES`]): source nodes of the
    /// tracking rules, all together.
    pub limit_src_nodes: u64,
    /// `set limit frags N` (default [`DEFAULT_LIMIT_FRAGS`]): fragmented IPv4 datagrams
    /// each worker tracks at a time.
    pub limit_frags: u64,
    /// `set limit table-entries N`, if the file sets it: what the tables may hold in all.
    pub limit_table_entries: Option<u64>,
    /// `set keepcounters`: a reload carries each rule's counters over to the same rule in
    /// the new set.
    pub keep_counters: bool,
    pub timeouts: Timeouts,
    pub state_policy: StatePolicy,
    /// `set skip on IFACE`: interfaces pf does not filter at all (port indices).
    pub skip: Vec<u16>,
    /// `nat`, `rdr` and `binat` rules, in file order (`crate::nat`).
    pub nat: Vec<NatRule>,
    /// `scrub` and `no scrub` rules, in file order: the first that matches a packet applies.
    pub scrub: Vec<ScrubRule>,
    /// `set block-policy`: what a plain `block` rule written after it sends back (`None`:
    /// drop, the default; `return`: [`BlockReturn::RETURN`]).
    pub block_policy: Option<BlockReturn>,
    /// The tag names the rules use: tag id `i + 1` is `tags[i]` (0 is no tag).
    pub tags: Vec<String>,
    /// What the file holds that linerate accepts but that does nothing here (an anchor
    /// nothing loads rules into, `set skip` on an interface not configured), as
    /// `path:line:column: text`: `check`, `run` and `reload` print them.
    pub notices: Vec<String>,
    /// The anchors written, in file order (nested ones after the one they are inside): only
    /// to print the rule set as pfctl does (`linerate check -v`).
    pub anchors: Vec<Anchor>,
}

impl Default for RuleSet {
    fn default() -> Self {
        RuleSet {
            rules: Vec::new(),
            tables: Vec::new(),
            limit_states: DEFAULT_LIMIT_STATES,
            limit_src_nodes: DEFAULT_LIMIT_SRC_NODES,
            limit_frags: DEFAULT_LIMIT_FRAGS,
            limit_table_entries: None,
            keep_counters: false,
            timeouts: Timeouts::default(),
            state_policy: StatePolicy::Floating,
            skip: Vec::new(),
            nat: Vec::new(),
            scrub: Vec::new(),
            block_policy: None,
            tags: Vec::new(),
            notices: Vec::new(),
            anchors: Vec::new(),
        }
    }
}

impl RuleSet {
    /// The [`route`](crate::packet::route) bits some rule tests: the data plane looks the
    /// packet's addresses up in the FIB for the filter only if this is not 0.
    pub fn route_bits_used(&self) -> u8 {
        self.rules.iter().fold(0, |b, r| b | r.route_need | r.route_refuse)
    }

    /// Whether some rule that can match packets of direction `dir` blocks, keeps state or
    /// tags (a translation rule with `pass` keeps one in the pass it translates in). If none
    /// does, that pass over any packet (without IP options) ends in "pass, no state", the
    /// packet's tag unchanged: the data plane skips it, and a state need not cover it to
    /// settle a packet.
    pub fn acts_on(&self, dir: Dir) -> bool {
        self.rules.iter().any(|r| {
            r.dir.is_none_or(|d| d == dir)
                && (r.action == Action::Block || r.keep_state != StateMode::None || r.tag.is_some())
        }) || self.nat.iter().any(|r| r.pass && r.translates(dir))
    }
}

/// A rejected rule file: `path:line:column: message` (line and column 1-based; line 0 when
/// the file itself could not be read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleError {
    pub path: PathBuf,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.path.display(), self.message)
        } else {
            write!(f, "{}:{}:{}: {}", self.path.display(), self.line, self.column, self.message)
        }
    }
}

impl std::error::Error for RuleError {}

/// Reads and parses the rule file at `path` (and the table files it names).
pub fn load(path: &Path, ifaces: &dyn Fn(&str) -> Option<u16>) -> Result<RuleSet, RuleError> {
    let text = read_rule_text(path).map_err(|e| RuleError {
        path: path.to_path_buf(),
        line: 0,
        column: 0,
        message: format!("cannot read rule file: {e}"),
    })?;
    parse(&text, path, ifaces)
}

/// The router's addresses on each interface, by interface name, with their prefix lengths:
/// what `self`, interface names as hosts (`em0`, `(em0)`, `em0:network`) and `antispoof`
/// stand for.
pub type InterfaceAddresses = [(String, Vec<(std::net::IpAddr, u8)>)];

/// Parses rule text. `path` names the file in errors and anchors relative `table ... file`
/// paths (table files are read by this function); `ifaces` maps interface names to port
/// indices (an unknown name is an error at its position). Without the interfaces'
/// addresses, `self`, interface hosts and `antispoof` are errors (see [`parse_with_addresses`]).
pub fn parse(
    text: &str,
    path: &Path,
    ifaces: &dyn Fn(&str) -> Option<u16>,
) -> Result<RuleSet, RuleError> {
    parse_inner(text, path, ifaces, None)
}

/// [`parse`] knowing the router's addresses on its interfaces (`addresses`).
pub fn parse_with_addresses(
    text: &str,
    path: &Path,
    ifaces: &dyn Fn(&str) -> Option<u16>,
    addresses: &InterfaceAddresses,
) -> Result<RuleSet, RuleError> {
    parse_inner(text, path, ifaces, Some(addresses))
}

/// [`load`] knowing the router's addresses on its interfaces.
pub fn load_with_addresses(
    path: &Path,
    ifaces: &dyn Fn(&str) -> Option<u16>,
    addresses: &InterfaceAddresses,
) -> Result<RuleSet, RuleError> {
    let text = read_rule_text(path).map_err(|e| RuleError {
        path: path.to_path_buf(),
        line: 0,
        column: 0,
        message: format!("cannot read rule file: {e}"),
    })?;
    parse_with_addresses(&text, path, ifaces, addresses)
}

fn parse_inner(
    text: &str,
    path: &Path,
    ifaces: &dyn Fn(&str) -> Option<u16>,
    addresses: Option<&InterfaceAddresses>,
) -> Result<RuleSet, RuleError> {
    let err = |(line, column, message): (usize, usize, String)| RuleError {
        path: path.to_path_buf(),
        line,
        column,
        message,
    };
    let toks = lex(text, None, 0).map_err(err)?;
    let mut p = Parser {
        toks: toks.into_iter().rev().collect(),
        macros: HashMap::new(),
        table_idx: HashMap::new(),
        tables_referenced: Default::default(),
        rs: RuleSet::default(),
        path,
        ifaces,
        table_entries_limit: None,
        adaptive_set: false,
        addresses,
        synproxy_at: None,
        match_scrubs: Vec::new(),
        match_nats: Vec::new(),
        pass_translations: Vec::new(),
        state_defaults: None,
        macro_tokens: 0,
        anchor_depth: 0,
        files: vec![path.to_path_buf()],
        anchor_files: HashMap::new(),
        anchors_loaded: Default::default(),
    };
    p.file().and_then(|()| p.check_table_entries()).map_err(|e| match e {
        PErr::Here(f, line, column, message) => RuleError {
            path: p.files.get(usize::from(f)).unwrap_or(&p.files[0]).clone(),
            line,
            column,
            message,
        },
        PErr::Full(e) => e,
    })?;
    if !p.adaptive_set {
        p.rs.timeouts.adapt_to_limit(p.rs.limit_states);
    }
    Ok(p.rs)
}
