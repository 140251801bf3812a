//! Integration tests of the `lpm` crate (one binary so that tests share the two cores).

mod basic;
mod concurrent;
mod data;
mod fam;
mod props;
mod realistic;
