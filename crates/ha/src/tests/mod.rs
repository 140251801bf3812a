//! Tests across the crate: byte fixtures (`fixtures.rs`), authentication (`auth.rs`), each
//! decode error (`errors.rs`), packing to a datagram size (`packing.rs`) and properties over
//! arbitrary messages and bytes (`props.rs`, with `strategies.rs`).

mod auth;
mod errors;
mod fixtures;
mod packing;
mod props;
mod strategies;
