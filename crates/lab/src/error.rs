//! The lab's error: a topology that could not be built, a process that failed or never got
//! ready, or an interruption (Ctrl-C).

use crate::topology::TopologyError;

#[derive(Debug, thiserror::Error)]
/// Why a lab (or one of its runs) stopped.
pub enum LabError {
    #[error(transparent)]
    Topology(#[from] TopologyError),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{what}: {detail}")]
    Process { what: String, detail: String },
    #[error("interrupted")]
    Interrupted,
    #[error(
        "another `linerate lab` is running (pid {pid}, lock {lock}): its namespaces lrlab-g, lrlab-d and lrlab-r are in use; run one lab at a time"
    )]
    Busy { pid: String, lock: String },
}
