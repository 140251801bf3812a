//! The bench lab: topologies of network namespaces and veth pairs, and the statistics that
//! compare configuration sets the way the FreeBSD study did (ministat).

#![forbid(unsafe_code)]

pub mod configs;
pub mod counters;
pub mod error;
pub mod flows;
pub mod labfile;
pub mod one_lab;
pub mod plot;
pub mod process;
pub mod runner;
pub mod search;
pub mod session;
pub mod stat;
pub mod tcp;
pub mod topology;
pub mod traffic;
