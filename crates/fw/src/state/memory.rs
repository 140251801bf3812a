//! The memory of a state table, allocated apart from the table so that it can be allocated
//! where a failure is an error, not an abort: at start-up, or by the control thread for a
//! reload that raises `set limit states`, never by a worker on its fast path (with
//! `panic = "abort"`, a failed `Vec` growth there would kill the router).

use mem::hugemem::{HugeArray, advise_huge};

use super::tcp::Peer;
use super::{Entry, MAX_LIMIT};

/// Why a state table's memory could not be had.
#[derive(Debug, thiserror::Error)]
pub enum StateAllocError {
    #[error("set limit states {0} is above the maximum, {MAX_LIMIT}")]
    TooLarge(usize),
    #[error("cannot allocate a state table for {states} states ({} MB): {why}", bytes / 1_000_000)]
    NoMemory { states: usize, bytes: usize, why: String },
}

/// Slot array, TCP peers and index for up to `capacity` states: reserved (virtual memory,
/// committed by the OS as the table fills), none of it written yet.
pub struct StateMemory {
    pub(super) slots: Vec<Entry>,
    pub(super) tcp: Vec<[Peer; 2]>,
    pub(super) index: HugeArray<u64>,
    pub(super) capacity: usize,
}

impl std::fmt::Debug for StateMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StateMemory({} states)", self.capacity)
    }
}

/// Index words for `capacity` states: load factor at most 0.5, whole cache lines.
pub(super) fn index_words(capacity: usize) -> usize {
    (2 * capacity).max(8).next_multiple_of(8)
}

impl StateMemory {
    /// Reserves memory for `capacity` states (at most [`MAX_LIMIT`]).
    pub fn try_new(capacity: usize) -> Result<StateMemory, StateAllocError> {
        if capacity > MAX_LIMIT {
            return Err(StateAllocError::TooLarge(capacity));
        }
        let no_memory = |why: String| StateAllocError::NoMemory {
            states: capacity,
            bytes: StateMemory::bytes(capacity),
            why,
        };
        let mut slots = Vec::new();
        slots.try_reserve_exact(capacity).map_err(|e| no_memory(e.to_string()))?;
        let mut tcp = Vec::new();
        tcp.try_reserve_exact(capacity).map_err(|e| no_memory(e.to_string()))?;
        let index =
            HugeArray::zeroed(index_words(capacity)).map_err(|e| no_memory(e.to_string()))?;
        // Huge pages for the arrays' pages, as for the index: at millions of states a slot
        // access would otherwise miss the TLB as well as the cache.
        advise_huge(slots.spare_capacity_mut());
        advise_huge(tcp.spare_capacity_mut());
        Ok(StateMemory { slots, tcp, index, capacity })
    }

    /// Bytes reserved for `capacity` states (104 per state, see the module doc of `state`).
    pub fn bytes(capacity: usize) -> usize {
        capacity * (size_of::<Entry>() + size_of::<[Peer; 2]>())
            + index_words(capacity) * size_of::<u64>()
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserves_what_it_says() {
        let m = StateMemory::try_new(1000).unwrap();
        assert_eq!(m.capacity(), 1000);
        assert!(m.slots.capacity() >= 1000 && m.tcp.capacity() >= 1000);
        assert_eq!(m.index.len(), 2000);
        assert_eq!(StateMemory::bytes(1000), 104_000);
    }

    #[test]
    fn refuses_above_the_maximum() {
        assert!(matches!(StateMemory::try_new(MAX_LIMIT + 1), Err(StateAllocError::TooLarge(_))));
    }
}
