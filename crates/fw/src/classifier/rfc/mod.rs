//! The RFC engine: Recursive Flow Classification with sparse cross-products
//!
//! The structure is **RFC** (P. Gupta, N. McKeown, "Packet Classification on Multiple
//! Fields", SIGCOMM 1999). Every rule is a conjunction of one constraint per *field*, and
//! two values of a field are *equivalent* when exactly the same rules accept them. Phase 0
//! maps each of the six fields of a [`PacketKey`] to its equivalence-class id:
//!
//! | field | key | lookup |
//! |---|---|---|
//! | interface × direction | `iface`, `dir` | two small arrays |
//! | family × protocol × TCP flags | `af`, `proto`, `tcp_flags` if TCP | one 1024-entry array |
//! | source port / ICMP type | `src_port` | one 65536-entry array |
//! | destination port / ICMP code | `dst_port` | one 65536-entry array |
//! | source address | `af`, `src` | sorted elementary intervals (binary search) when the field has few prefixes, else an [`lpm`] DIR-24-8 table (1-2 reads for IPv4) |
//! | destination address | `af`, `dst` | same |
//!
//! Later phases combine two class ids into the class id of the pair, through precomputed
//! tables, down to one final class whose verdict is precomputed: ((iface·proto)·(sport·dport))
//! · (src·dst). Per packet: 6 field lookups, 5 combinations, 1 verdict read, whatever the
//! number of rules.
//!
//! **Why RFC** rather than the alternatives the issue lists. Lakshman-Stiliadis bit vectors
//! AND bitmaps as long as the rule set (linear, with a small constant); aggregated bit
//! vectors (Baboescu-Varghese) fix the common case but degrade when many rules share a
//! field value. Tuple-space search costs one hash probe per distinct prefix-length tuple and
//! handles port ranges and negation badly. RFC's lookup is a constant number of reads, and
//! its known weakness, the size of cross-product tables (|classes A| × |classes B| entries:
//! 10^10 for 100k rules each with its own source and destination /32), is dealt with here by
//! making the combination tables **sparse**:
//!
//! Each class space keeps a *common* rule set W (rules accepting every class: the rules that
//! do not constrain the fields combined so far) and per class its *specific* set A (the
//! other accepting rules), so class `l` accepts `W_L ∪ A_l`. For two spaces L and R,
//!
//! ```text
//! (W_L ∪ A_l) ∩ (W_R ∪ A_r) = (W_L ∩ W_R) ∪ (A_l ∩ W_R) ∪ (A_r ∩ W_L) ∪ (A_l ∩ A_r)
//!                              common        X(l)          Y(r)          Z(l, r)
//! ```
//!
//! X depends on `l` only, Y on `r` only: the distinct X sets and Y sets are few (rules that
//! constrain one field and not the other), so a dense table indexed by (X id, Y id) is small.
//! Z is non-empty only for pairs of classes both constrained by the same rule; those pairs
//! are enumerated from the rules (rule -> classes that hold it), and stored as *exceptions*
//! in an open-addressing hash table keyed by (l, r), guarded by a 64-bit per-row filter so
//! that traffic of rows without exceptions never probes it. A combination is therefore
//! `rows[l]`, `cols[r]`, (rarely) one hash probe, one dense read: constant.
//!
//! For 100k rules `block in quick proto tcp from X_i/32 to Y_i/32 port P_i` + `pass all`,
//! src×dst has 1 × 1 dense entries and 100k exceptions (one per rule), instead of 10^10.
//!
//! The deciding rule of a final class is computed from its rule set with pf's semantics:
//! the lowest-numbered `quick` rule if any, else the highest-numbered rule.
//!
//! ## Addresses
//!
//! Per family, the class of an address is fixed by the set of rule prefixes and table
//! entries containing it; prefixes nest, so that set is fixed by the *most specific* one, and
//! each distinct prefix gets the class of "its" set, computed by walking the prefixes in
//! (address, length) order with a stack of enclosing prefixes. Prefixes whose class equals
//! their parent's are dropped. A table of 1M entries used by a rule gives 2 classes (in, not
//! in), whatever its size; its entries are inserted into an [`lpm::Ipv4Lpm`] /
//! [`lpm::Ipv6Lpm`] whose next hop is the class id, so the lookup is one or two reads.
//!
//!
//! Builds are accounted against a memory budget and a cap on the exception pairs of a
//! combination; over either the build stops at once and the caller (`super`) compiles the
//! rules with the decision tree instead.

mod addr;
mod fields;
mod join;
mod sets;

use addr::{AddrField, build_addr};
use fields::{IfaceField, build_ports, build_proto, port_constraint, proto_index};
use join::Join;
use sets::Budget;

use super::{BuildError, BuildOptions, ClassifierStats};
use crate::packet::{Af, PacketKey};
use crate::rules::RuleSet;
use crate::verdict::Verdict;

/// A rule set compiled by RFC. See the module documentation.
pub(crate) struct Rfc {
    iface: IfaceField,
    proto: Vec<u32>,
    sport: Vec<u16>,
    dport: Vec<u16>,
    src: AddrField,
    dst: AddrField,
    ab: Join,
    ef: Join,
    abef: Join,
    cd: Join,
    fin: Join,
    verdicts: Vec<Verdict>,
    pub(crate) stats: ClassifierStats,
}

/// What [`ClassifierStats`] reports of a compiled RFC: classes per field and per
/// combination, the combinations' table sizes, and which address lookups took an `lpm` table
/// or a host map.
fn stats(
    field_classes: [usize; 6],
    join_classes: [usize; 5],
    joins: [&Join; 5],
    [src, dst]: [&AddrField; 2],
) -> ClassifierStats {
    ClassifierStats {
        engine: "rfc",
        field_classes,
        join_classes,
        join_dense: joins.map(|j| j.dense.len().max(if j.small_full { 0 } else { j.full.len() })),
        join_exceptions: joins.map(|j| j.n_exc),
        lpm: [src.v4.uses_lpm(), src.v6.uses_lpm(), dst.v4.uses_lpm(), dst.v6.uses_lpm()],
        host_maps: [&src.v4, &src.v6, &dst.v4, &dst.v6]
            .map(|a| a.hosts.as_ref().map_or(0, |h| h.len)),
        ..ClassifierStats::default()
    }
}

/// What RFC charges first: both port tables and the protocol table.
pub(super) const PORT_AND_PROTO_TABLES: usize = 2 * 65536 * 2 + 1024 * 4;

/// The error [`Rfc::build`] would return on `rs` within `limit` bytes, when its address
/// fields alone surely cross it. Building them before giving up was most of RFC's lost
/// work on realistic sets of thousands of rules. See [`field_at_least`].
pub(super) fn surely_over_budget(
    rs: &RuleSet,
    opts: &BuildOptions,
    limit: usize,
) -> Option<BuildError> {
    let mut budget = Budget { limit, used: 0, max_pairs: usize::MAX };
    (budget.charge(PORT_AND_PROTO_TABLES, "the port and protocol tables"))
        .and_then(|()| {
            budget.charge(field_at_least(rs, opts, super::tree::SRC), "the source address field")
        })
        .and_then(|()| {
            budget.charge(
                field_at_least(rs, opts, super::tree::SRC + 1),
                "the destination address field",
            )
        })
        .err()
}

/// At least what RFC charges for address field `d` (`SRC` or `SRC + 1`), from the rule sets
/// of the field's intervals per family (the cache classes' sweep):
/// - each distinct set: RFC's sets hold at least those rules (and also those that constrain
///   the field without excluding any address), and it tells at least these sets apart;
/// - an `lpm` table where it surely needs one: each value where the set changes is the
///   start or the end of a prefix it inserts, so it inserts at least half as many, of
///   which the host prefixes its host map may take are at most those the rules name.
///
/// One field holds both families: each family's charge is a lower bound.
pub(super) fn field_at_least(rs: &RuleSet, opts: &BuildOptions, d: usize) -> usize {
    let family = |af| {
        let (sizes, changes) = super::classes::set_sizes_and_changes(rs, af, d);
        let prefixes_left =
            changes.div_ceil(2).saturating_sub(addr::host_prefixes(rs, d == super::tree::SRC, af));
        let lpm = if prefixes_left > opts.lpm_threshold { addr::LPM_TABLE_BYTES } else { 0 };
        sizes.into_iter().map(sets::set_bytes_of).sum::<usize>() + lpm
    };
    family(Af::Inet).max(family(Af::Inet6))
}

impl Rfc {
    /// Compiles `rs` within `limit` bytes and at most `max_pairs` exception pairs per
    /// combination; over either, fails fast with the phase it was building.
    pub(crate) fn build(
        rs: &RuleSet,
        opts: &BuildOptions,
        limit: usize,
        max_pairs: usize,
    ) -> Result<Rfc, BuildError> {
        let mut budget = Budget { limit, used: 0, max_pairs };
        let b = &mut budget;
        b.charge(PORT_AND_PROTO_TABLES, "the port and protocol tables")?;
        // The address fields first: they are where a rule set RFC cannot hold crosses the
        // budget, and building the port fields before was a third of the lost work.
        let (src, s_src) = build_addr(rs, |r| &r.src, opts, b, "the source address field")?;
        let (dst, s_dst) = build_addr(rs, |r| &r.dst, opts, b, "the destination address field")?;
        let (iface, s_if) = IfaceField::build(rs, b)?;
        let (proto, s_pr) = build_proto(rs, b)?;
        let (sport, s_sp) = build_ports(
            rs,
            |r| port_constraint(&r.src_ports, &r.icmp_types),
            b,
            "the source port field",
        )?;
        let (dport, s_dp) = build_ports(
            rs,
            |r| port_constraint(&r.dst_ports, r.icmp_code.as_slice()),
            b,
            "the destination port field",
        )?;
        let field_classes =
            [s_if.len(), s_pr.len(), s_sp.len(), s_dp.len(), s_src.len(), s_dst.len()];
        let n = rs.rules.len();
        let (ab, s_ab) = Join::build(s_if, s_pr, n, b, "interface x protocol", None)?;
        let (ef, s_ef) = Join::build(s_sp, s_dp, n, b, "source port x destination port", None)?;
        let (n_ab, n_ef) = (s_ab.len(), s_ef.len());
        let (abef, s_abef) =
            Join::build(s_ab, s_ef, n, b, "(interface, protocol) x (ports)", None)?;
        let n_abef = s_abef.len();
        let (cd, s_cd) =
            Join::build(s_src, s_dst, n, b, "source address x destination address", None)?;
        let n_cd = s_cd.len();
        let quick: Vec<bool> = rs.rules.iter().map(|r| r.quick).collect();
        let (fin, s_fin) = Join::build(s_abef, s_cd, n, b, "the final combination", Some(&quick))?;
        // The final classes are decisions: at most the deciding rule.
        let verdicts: Vec<Verdict> = s_fin
            .sets
            .iter()
            .map(|s| s.first().map_or(Verdict::DEFAULT, |&i| Verdict::of_rule(rs, i as usize)))
            .collect();
        let join_classes = [n_ab, n_ef, n_abef, n_cd, s_fin.len()];
        let stats = stats(field_classes, join_classes, [&ab, &ef, &abef, &cd, &fin], [&src, &dst]);
        Ok(Rfc { iface, proto, sport, dport, src, dst, ab, ef, abef, cd, fin, verdicts, stats })
    }

    /// The verdict for one packet (same as [`reference::evaluate`](crate::reference::evaluate)).
    #[inline(always)]
    pub(crate) fn classify(&self, key: &PacketKey) -> Verdict {
        let a = self.iface.lookup(key.iface, key.dir);
        let b = self.proto[proto_index(key.af, key.proto, key.tcp_flags)];
        let e = u32::from(self.sport[key.src_port as usize]);
        let f = u32::from(self.dport[key.dst_port as usize]);
        let c = self.src.lookup(key.af, key.src);
        let d = self.dst.lookup(key.af, key.dst);
        let ab = self.ab.get(a, b);
        let ef = self.ef.get(e, f);
        let p = self.abef.get(ab, ef);
        let cd = self.cd.get(c, d);
        self.verdicts[self.fin.get(p, cd) as usize]
    }

    /// Bytes held by the compiled structure (LPM tables counted as their committed size).
    pub(crate) fn memory_bytes(&self) -> usize {
        self.iface.slot.len() * 2
            + self.iface.cls.len() * 4
            + self.proto.len() * 4
            + (self.sport.len() + self.dport.len()) * 2
            + self.src.v4.bytes()
            + self.src.v6.bytes()
            + self.dst.v4.bytes()
            + self.dst.v6.bytes()
            + [&self.ab, &self.ef, &self.abef, &self.cd, &self.fin]
                .iter()
                .map(|j| j.bytes())
                .sum::<usize>()
            + self.verdicts.len() * std::mem::size_of::<Verdict>()
    }
}
