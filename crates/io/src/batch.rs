//! A vector of frame descriptors: the unit of work of every port and node.

use crate::pool::FrameDesc;

/// Largest batch a port or node handles.
pub const MAX_BATCH: usize = 256;

/// Up to `MAX_BATCH` frame descriptors, allocated once.
#[derive(Debug)]
pub struct Batch {
    descs: Vec<FrameDesc>,
}

impl Default for Batch {
    fn default() -> Self {
        Self::new()
    }
}

impl Batch {
    pub fn new() -> Self {
        Batch { descs: Vec::with_capacity(MAX_BATCH) }
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.descs.len()
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.descs.is_empty()
    }

    #[inline]
    pub fn is_full(&self) -> bool {
        self.descs.len() >= MAX_BATCH
    }

    /// Room left before `MAX_BATCH`.
    #[inline]
    pub fn room(&self) -> usize {
        MAX_BATCH - self.descs.len()
    }

    /// Appends a descriptor. The caller keeps the batch under `MAX_BATCH` (checked in debug).
    #[inline]
    pub fn push(&mut self, desc: FrameDesc) {
        debug_assert!(self.descs.len() < MAX_BATCH);
        self.descs.push(desc);
    }

    #[inline]
    pub fn as_slice(&self) -> &[FrameDesc] {
        &self.descs
    }

    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [FrameDesc] {
        &mut self.descs
    }

    #[inline]
    pub fn clear(&mut self) {
        self.descs.clear();
    }

    /// Removes and yields every descriptor.
    #[inline]
    pub fn drain(&mut self) -> std::vec::Drain<'_, FrameDesc> {
        self.descs.drain(..)
    }
}
