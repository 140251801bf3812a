//! Packet I/O for linerate: frame memory, batches and the ports that fill and drain them.
//!
//! Start reading at [`port`]: every backend implements the batch-first [`RxPort`] and
//! [`TxPort`] traits (in the spirit of ixy.rs), moving [`FrameDesc`]s that point into a
//! [`FramePool`]. A frame is written once by the receiving port (as a NIC's DMA would) and
//! then only rewritten in place; descriptors, not bytes, travel through the pipeline.
//!
//! Backends: [`mem`] (in-memory replay and counting ports for benchmarks and golden tests).
//! `unsafe` is confined to [`prefetch`] (a CPU hint) and, later, the kernel ring backends.

pub mod affinity;
pub mod batch;
pub mod mem;
pub mod netdev;
pub mod pcap;
pub mod pool;
pub mod port;
pub mod prefetch;

pub use batch::Batch;
pub use pool::{FrameDesc, FramePool, FRAME_SIZE, HEADROOM};
pub use port::{PortStats, RxPort, TxPort};
