//! The data plane as a config describes it: the config's interfaces as logical ports, its
//! addresses, neighbours and static routes in a FIB, its `[router.punt]` limits and its
//! interfaces' `ra` settings as the data plane's own types. `dataplane` knows nothing of the
//! config file; `linerate run`, `linerate check` and `reload` build through here.

#![forbid(unsafe_code)]

mod fib;
mod settings;
#[cfg(test)]
mod tests;

pub use fib::{BuildError, fib, next_hops_for, ports, static_routes};
pub use settings::{advert_settings, punt_policy};
