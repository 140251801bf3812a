//! The linerate data plane: what happens to a packet between an rx port and a tx port.
//!
//! Start at [`worker::Worker::poll`]: rx burst -> [`forward::Forwarder::process`] (parse,
//! validate, route, neighbour rewrite) -> tx bursts. [`firewall`] is the optional firewall
//! stage of that node. [`fib`] holds the tables it reads and the control-plane writer that
//! fills them; [`counters`] names every reason a packet can be dropped. The crate knows
//! nothing of the config file: its callers turn the config into [`PortInfo`]s, routes and
//! settings (linerate's `setup` crate).

#![forbid(unsafe_code)]

pub mod adjacency;
pub mod counters;
pub mod ecmp;
pub mod fib;
pub mod firewall;
pub mod fnv;
pub mod forward;
pub mod host_out;
pub mod neighbour;
mod next;
pub mod offload;
pub mod ports;
pub mod punt;
pub mod router_adv;
pub mod seed;
pub mod slowpath;
pub mod tap;
pub mod worker;

pub use counters::{Counts, DropReason, WorkerCounters};
pub use fib::{Fib, FibControl, PortInfo};
pub use firewall::{CompiledRules, Firewall, FirewallStats, RulesSlot};
pub use worker::{Idle, Worker};
