//! Memory helpers the fast-path crates share: a cache prefetch hint and zero-initialised
//! arrays on transparent huge pages. Kept apart so that the firewall and the route tables do
//! not depend on the I/O crate for them. The only `unsafe` here is in these two modules.

#![deny(unsafe_code)]

pub mod hugemem;
pub mod prefetch;
