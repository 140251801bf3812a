//! pf's source-tracking state options (pf.conf(5), STATEFUL TRACKING OPTIONS): `max-src-nodes`,
//! `max-src-states`, `max-src-conn`, `max-src-conn-rate N/S`, `overload <table> [flush
//! [global]]` and `source-track [rule | global]`, read inside `keep state ( ... )`, checked
//! as pfctl checks them.

use super::{Flush, Overload, PResult, Parser, SrcTrack, Tok, Token, here};

/// The source-tracking options of one `keep state ( ... )` as written, with their tokens.
#[derive(Default)]
pub(super) struct SrcOptions {
    /// `source-track` (`Some(true)`: global, `Some(false)`: rule).
    track: Option<(bool, Token)>,
    nodes: Option<(u32, Token)>,
    states: Option<(u32, Token)>,
    conn: Option<(u32, Token)>,
    rate: Option<((u32, u32), Token)>,
    overload: Option<(Overload, Token)>,
}

/// Fails at `t` if `slot` holds a value already (pfctl: "multiple definitions").
fn once<T>(slot: &Option<(T, Token)>, t: &Token, name: &str) -> PResult<()> {
    if slot.is_some() {
        return here(t, format!("`{name}` is given twice"));
    }
    Ok(())
}

impl Parser<'_> {
    /// One source-tracking option at the next word, if it is one: `Ok(true)` once read.
    pub(super) fn src_track_option(&mut self, o: &mut SrcOptions) -> PResult<bool> {
        let t = self.peek()?.clone();
        let Tok::Word(w) = &t.tok else { return Ok(false) };
        match w.as_str() {
            "source-track" => {
                once(&o.track, &t, "source-track")?;
                self.next()?;
                // A bare `source-track` is global, as in pfctl.
                let global = !self.eat_word("rule")?;
                if global {
                    self.eat_word("global")?;
                }
                o.track = Some((global, t));
            }
            "max-src-nodes" | "max-src-states" | "max-src-conn" => {
                let name = w.clone();
                self.next()?;
                let nt = self.peek()?.clone();
                let n = self.number("a number", u64::from(u32::MAX))? as u32;
                if n == 0 {
                    return here(&nt, format!("`{name}` must be at least 1"));
                }
                let slot = match name.as_str() {
                    "max-src-nodes" => &mut o.nodes,
                    "max-src-states" => &mut o.states,
                    _ => &mut o.conn,
                };
                once(slot, &t, &name)?;
                *slot = Some((n, t));
            }
            "max-src-conn-rate" => {
                once(&o.rate, &t, "max-src-conn-rate")?;
                self.next()?;
                o.rate = Some((self.conn_rate()?, t));
            }
            "overload" => {
                once(&o.overload, &t, "overload")?;
                self.next()?;
                o.overload = Some((self.overload()?, t));
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// After `overload`: `<table> [flush [global]]`; a table no `table` line defines is
    /// made empty, as pf does.
    fn overload(&mut self) -> PResult<Overload> {
        self.expect_punct("<", "a table <name>")?;
        let (name, _) = self.word("a table name")?;
        self.expect_punct(">", "\">\" closing the table name")?;
        let table = self.table_named(&name);
        let flush = if !self.eat_word("flush")? {
            Flush::None
        } else if self.eat_word("global")? {
            Flush::Global
        } else {
            Flush::Rule
        };
        Ok(Overload { table, flush })
    }

    /// `N/S` (one word, or `N / S`): at least 1 connection per at least 1 second.
    fn conn_rate(&mut self) -> PResult<(u32, u32)> {
        const WHAT: &str = "a rate (connections/seconds, e.g. 10/5)";
        let at = self.peek()?.clone();
        let Tok::Word(first) = &at.tok else { return self.fail(WHAT) };
        let mut text = first.clone();
        self.next()?;
        // `10 / 5`, `10 /5`, `10/ 5`: the lexer splits where the spaces are.
        while text.matches('/').count() == 0 || text.ends_with('/') {
            match &self.peek()?.tok {
                Tok::Word(w)
                    if (text.ends_with('/') || w.starts_with('/'))
                        && text.matches('/').count() + w.matches('/').count() == 1 =>
                {
                    text.push_str(w);
                    self.next()?;
                }
                _ => return self.fail(WHAT),
            }
        }
        let parsed = text
            .split_once('/')
            .and_then(|(n, s)| Some((n.parse::<u32>().ok()?, s.parse::<u32>().ok()?)));
        match parsed {
            Some((n, s)) if n > 0 && s > 0 => Ok((n, s)),
            Some(_) => {
                here(&at, "`max-src-conn-rate` needs at least 1 connection per at least 1 second")
            }
            None => here(&at, format!("expected {WHAT}, found \"{text}\"")),
        }
    }

    /// The rule's source tracking from its options, as pfctl derives it: `max-src-conn`,
    /// `max-src-conn-rate` and `max-src-nodes` track per rule (and cannot be combined with
    /// `source-track global`); `max-src-states` alone, or `source-track` alone, globally.
    pub(super) fn src_track_of(o: SrcOptions) -> PResult<Option<SrcTrack>> {
        let per_rule = [
            o.nodes.as_ref().map(|(_, t)| ("max-src-nodes", t)),
            o.conn.as_ref().map(|(_, t)| ("max-src-conn", t)),
            o.rate.as_ref().map(|(_, t)| ("max-src-conn-rate", t)),
        ];
        if let Some((_, ot)) = &o.overload
            && o.conn.is_none()
            && o.rate.is_none()
        {
            return here(
                ot,
                "`overload` acts on sources refused by `max-src-conn` or `max-src-conn-rate`: give one",
            );
        }
        let any = o.track.is_some() || o.states.is_some() || per_rule.iter().any(Option::is_some);
        if !any {
            return Ok(None);
        }
        let global = match &o.track {
            Some((true, tt)) => {
                if let Some((name, _)) = per_rule.iter().flatten().next() {
                    return here(
                        tt,
                        format!(
                            "`{name}` counts per rule: it cannot be combined with `source-track global`"
                        ),
                    );
                }
                true
            }
            Some((false, _)) => false,
            None => per_rule.iter().all(Option::is_none),
        };
        Ok(Some(SrcTrack {
            global,
            max_nodes: o.nodes.map(|(n, _)| n),
            max_states: o.states.map(|(n, _)| n),
            max_conn: o.conn.map(|(n, _)| n),
            max_conn_rate: o.rate.map(|(r, _)| r),
            overload: o.overload.map(|(v, _)| v),
        }))
    }
}
