//! Packet I/O for linerate: frame memory, batches and the ports that fill and drain them.
//!
//! Start reading at [`port`]: every backend implements the batch-first [`RxPort`] and
//! [`TxPort`] traits (in the spirit of ixy.rs), moving [`FrameDesc`]s that point into a
//! [`FramePool`]. A frame is written once by the receiving port (as a NIC's DMA would) and
//! then only rewritten in place; descriptors, not bytes, travel through the pipeline.
//!
//! Backends: [`xdp`] (AF_XDP sockets sharing one UMEM: the pool), [`afpacket`] (TPACKET_V3
//! rx ring, mmap tx ring), [`mem`] (in-memory replay, counting and pcap ports for benchmarks
//! and golden tests); [`any`] puts them behind one type with a `match` per burst.
//! `unsafe` lives only where the kernel is: syscalls, mmap'd rings and the UMEM registration
//! (in `xdp/` and `afpacket/`), plus the pool's per-frame slices of the UMEM and the [`spsc`] ring's slots, each block
//! with a `// SAFETY:` comment.

pub mod affinity;
pub mod afpacket;
pub mod any;
pub mod batch;
pub mod child;
pub mod clock;
pub mod ethtool;
pub mod idle;
pub mod mem;
pub mod napi;
pub mod netdev;
pub mod netlink;
pub mod offload;
pub mod pcap;
pub mod pflog;
pub mod pid_lock;
pub mod pool;
pub mod port;
pub mod privilege;
pub mod ratelimit;
pub mod rss;
pub mod spsc;
mod sys;
pub mod tap;
pub mod xdp;

pub use batch::Batch;
pub use pool::{FRAME_SIZE, FrameDesc, FramePool, HEADROOM};
pub use port::{PortStats, RxDrops, RxPort, TxPort};
