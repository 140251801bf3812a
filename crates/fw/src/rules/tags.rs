//! pf's packet tags (pf.conf(5), `tag` and `tagged`): the names interned to small ids, and
//! the one use linerate refuses.
//!
//! pf (FreeBSD pf.c, `pf_test_rule`) keeps a tag variable while it walks the filter rules:
//! `tagged` compares it (loaded from the packet the first time it is read), and every
//! *matching* rule with `tag` sets it, whether or not that rule ends up deciding ("Tags are
//! sticky, meaning that the packet will be tagged even if the rule is not the last matching
//! rule. Further matching rules can replace the tag with a new one but will not remove a
//! previously applied tag"). A passed packet leaves with the last tag set, and a state the
//! pass creates remembers it (`s->tag`) and tags every packet it later passes.
//!
//! The compiled classifier tests `tagged` against the tag a packet brings into the pass, so
//! a rule with `tagged` after a rule with `tag` that can match the same pass (a tag set and
//! tested within one pass) is refused by name; a tag set inbound and tested outbound, the
//! use pf's manual shows, is what the classifier does exactly.

use super::{MAX_TAG_NAME, MAX_TAGS, PResult, Parser, Rule, Tok, Token, here};

impl Parser<'_> {
    /// After `tag` / `tagged`: the tag name (a word or a quoted string), interned.
    pub(super) fn tag_name(&mut self) -> PResult<u8> {
        let t = self.peek()?.clone();
        let name = match &t.tok {
            Tok::Word(w) | Tok::Str(w) => w.clone(),
            _ => return self.fail("a tag name"),
        };
        if name.is_empty()
            || name.len() > MAX_TAG_NAME
            || name.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            return here(
                &t,
                format!("bad tag name \"{name}\" (1 to {MAX_TAG_NAME} bytes, no spaces)"),
            );
        }
        self.next()?;
        if let Some(i) = self.rs.tags.iter().position(|n| *n == name) {
            return Ok(i as u8 + 1);
        }
        if self.rs.tags.len() >= MAX_TAGS {
            return here(
                &t,
                format!(
                    "too many tags: \"{name}\" would be the {}th name (at most {MAX_TAGS})",
                    MAX_TAGS + 1
                ),
            );
        }
        self.rs.tags.push(name);
        Ok(self.rs.tags.len() as u8)
    }

    /// Refuses `rule`'s `tagged` (written at `at`) if an earlier rule can tag a packet in the
    /// same pass (see the module documentation).
    pub(super) fn check_tag_order(&self, rule: &Rule, at: Option<&Token>) -> PResult<()> {
        let Some(at) = at else { return Ok(()) };
        if let Some(r) = self.rs.rules.iter().find(|r| r.tag.is_some() && same_pass(r, rule)) {
            return here(
                at,
                format!(
                    "`tagged` after a rule that tags packets in the same pass (line {}) is not supported by linerate: test the tag in the next pass (e.g. `pass in ... tag T`, then `pass out ... tagged T`)",
                    r.line
                ),
            );
        }
        Ok(())
    }
}

/// Whether rules `a` and `b` can match the same pass over a packet: the same direction,
/// family and interface are possible for both.
fn same_pass(a: &Rule, b: &Rule) -> bool {
    let dir = a.dir.is_none() || b.dir.is_none() || a.dir == b.dir;
    let af = a.af.is_none() || b.af.is_none() || a.af == b.af;
    dir && af && ifaces_meet(a, b)
}

/// Whether some interface satisfies both rules' `on`.
fn ifaces_meet(a: &Rule, b: &Rule) -> bool {
    match (a.ifaces.is_empty(), b.ifaces.is_empty()) {
        (true, _) | (_, true) => return true,
        _ => {}
    }
    match (a.iface_neg, b.iface_neg) {
        (false, false) => a.ifaces.iter().any(|i| b.ifaces.contains(i)),
        (true, false) => b.ifaces.iter().any(|i| !a.ifaces.contains(i)),
        (false, true) => a.ifaces.iter().any(|i| !b.ifaces.contains(i)),
        (true, true) => true,
    }
}
