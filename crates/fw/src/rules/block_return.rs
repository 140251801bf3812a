//! What a `block` rule answers (pfctl's `blockspec`): `drop`, `return`, `return-rst [(ttl
//! N)]`, `return-icmp [(code [[,] icmp6-code])]`, `return-icmp6 [(icmp6-code)]`, or, with none
//! of them, what `set block-policy` said before the rule.

use super::{BlockReturn, PResult, Parser, Tok, here};

/// ICMP's and ICMPv6's destination unreachable types: `return-icmp` answers with one of
/// their codes (by number or pfctl's name, [`super::icmp_names`]).
const UNREACH: u8 = 3;
const UNREACH6: u8 = 1;

impl Parser<'_> {
    /// The answer of a `block` rule, right after `block`.
    pub(super) fn block_return(&mut self) -> PResult<Option<BlockReturn>> {
        let drop_only = BlockReturn { rst: false, rst_ttl: 64, icmp: None, icmp6: None };
        if self.eat_word("drop")? {
            return Ok(None);
        }
        if self.eat_word("return")? {
            return Ok(Some(BlockReturn::RETURN));
        }
        if self.eat_word("return-rst")? {
            let mut r = BlockReturn { rst: true, ..drop_only };
            if self.eat_punct("(")? {
                self.expect_word("ttl")?;
                let t = self.peek()?.clone();
                r.rst_ttl = self.number("a TTL (1-255)", 255)? as u8;
                if r.rst_ttl == 0 {
                    return here(&t, "a reset's TTL is 1 to 255");
                }
                self.expect_punct(")", "\")\"")?;
            }
            return Ok(Some(r));
        }
        if self.eat_word("return-icmp")? {
            let mut r = BlockReturn { icmp: Some(3), icmp6: Some(4), ..drop_only };
            if self.eat_punct("(")? {
                r.icmp = Some(self.icmp_code(
                    UNREACH,
                    false,
                    "an ICMP unreachable code (port-unr, host-unr, net-prohib, ... or 0-255)",
                )?);
                if !self.is_punct(")")? {
                    self.eat_punct(",")?;
                    r.icmp6 = Some(self.icmp_code(
                        UNREACH6,
                        true,
                        "an ICMPv6 unreachable code (port-unr, admin-unr, addr-unr, ... or 0-255)",
                    )?);
                }
                self.expect_punct(")", "\")\"")?;
            }
            return Ok(Some(r));
        }
        if self.eat_word("return-icmp6")? {
            let mut r = BlockReturn { icmp: Some(3), icmp6: Some(4), ..drop_only };
            if self.eat_punct("(")? {
                r.icmp6 = Some(self.icmp_code(
                    UNREACH6,
                    true,
                    "an ICMPv6 unreachable code (port-unr, admin-unr, addr-unr, ... or 0-255)",
                )?);
                self.expect_punct(")", "\")\"")?;
            }
            return Ok(Some(r));
        }
        Ok(self.rs.block_policy)
    }

    /// After `pass`: a `drop` or `return...` there is an error of its own.
    pub(super) fn refuse_return(&mut self) -> PResult<Option<BlockReturn>> {
        let t = self.peek()?.clone();
        if let Tok::Word(w) = &t.tok
            && (w == "drop" || w.starts_with("return"))
        {
            return here(&t, format!("`{w}` only applies to block rules"));
        }
        Ok(None)
    }
}
