//! ministat-compatible statistics (being written).
