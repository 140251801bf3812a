//! Build-time helpers of the RFC engine: sorted rule sets, their interning into class
//! spaces, and the memory budget.

use std::collections::HashMap;

use crate::classifier::BuildError;

pub(crate) type RSet = Vec<u32>;

pub(crate) fn intersect(a: &[u32], b: &[u32]) -> RSet {
    let (small, large) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    if small.is_empty() {
        return Vec::new();
    }
    if small.len() * 16 < large.len() {
        return small.iter().copied().filter(|x| large.binary_search(x).is_ok()).collect();
    }
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                out.push(a[i]);
                i += 1;
                j += 1;
            }
        }
    }
    out
}

pub(crate) fn union(a: &[u32], b: &[u32]) -> RSet {
    let (mut i, mut j, mut out) = (0, 0, Vec::with_capacity(a.len() + b.len()));
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => {
                out.push(a[i]);
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                out.push(b[j]);
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                out.push(a[i]);
                i += 1;
                j += 1;
            }
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out
}

pub(crate) struct Budget {
    pub(crate) limit: usize,
    pub(crate) used: usize,
    /// Most (left class, right class) pairs sharing a rule that one combination may
    /// enumerate: past it, the build is given up before that work is done.
    pub(crate) max_pairs: usize,
}

impl Budget {
    pub(crate) fn charge(&mut self, bytes: usize, what: &str) -> Result<(), BuildError> {
        self.used = self.used.saturating_add(bytes);
        if self.used > self.limit {
            return Err(BuildError {
                message: format!(
                    "rule set too complex: compiling it would exceed the classifier memory budget of {} MiB ({} bytes) while building {what}",
                    self.limit >> 20,
                    self.limit
                ),
            });
        }
        Ok(())
    }

    pub(crate) fn release(&mut self, bytes: usize) {
        self.used = self.used.saturating_sub(bytes);
    }
}

pub(crate) fn set_bytes(s: &RSet) -> usize {
    set_bytes_of(s.len())
}

/// [`set_bytes`] of a set of `len` rules.
pub(crate) fn set_bytes_of(len: usize) -> usize {
    // The set is held twice (map key + vector) plus bookkeeping.
    2 * 4 * len + 64
}

/// A class space under construction: class `i` accepts `common ∪ sets[i]`.
pub(crate) struct Space {
    pub(crate) common: RSet,
    pub(crate) sets: Vec<RSet>,
    pub(crate) map: HashMap<RSet, u32>,
    pub(crate) bytes: usize,
}

impl Space {
    pub(crate) fn new(common: RSet) -> Space {
        let bytes = 4 * common.len();
        Space { common, sets: Vec::new(), map: HashMap::new(), bytes }
    }

    pub(crate) fn id(
        &mut self,
        s: RSet,
        budget: &mut Budget,
        what: &str,
    ) -> Result<u32, BuildError> {
        if let Some(&i) = self.map.get(&s) {
            return Ok(i);
        }
        let b = set_bytes(&s);
        budget.charge(b, what)?;
        self.bytes += b;
        let i = self.sets.len() as u32;
        self.map.insert(s.clone(), i);
        self.sets.push(s);
        Ok(i)
    }

    pub(crate) fn len(&self) -> usize {
        self.sets.len()
    }
}
