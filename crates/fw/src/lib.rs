//! The linerate firewall: a pf-like rule language compiled off the fast path into a
//! classifier whose cost per packet does not grow with the number of rules, and per-worker
//! stateful tracking.
//!
//! Start at [`packet::PacketKey`] (what the firewall sees of a packet), then [`rules`]
//! (the language: parser and AST), [`reference`](mod@reference) (the plain linear evaluator with pf's
//! semantics, the oracle of the property tests), [`classifier`] (the compiled form used on
//! the fast path) and [`state`] (connection tracking).

#![forbid(unsafe_code)]

pub mod classifier;
pub mod nat;
pub mod packet;
pub mod passes;
pub mod reference;
pub mod rules;
pub mod state;
#[doc(hidden)]
pub mod testgen;
pub mod verdict;
