//! The lab's traffic tools: a generator in the spirit of netmap's pkt-gen (`linerate gen`) and
//! a receiver that counts what arrives per second (`linerate rcv`). Both run on real
//! interfaces through linerate's own ports (AF_PACKET or AF_XDP); the receiver can also
//! leave the counting to an XDP program in the kernel (`--backend xdp-sink`, the lab's).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use io::any::{AnyRx, AnyTx, PortOpener};
use io::mem::ReplayRx;

use crate::flows::LiveFlows;
use io::{Batch, FramePool, RxPort, TxPort};

/// Which kind of socket to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    AfPacket,
    AfXdp,
    /// Receiver only: an XDP program counts the frames in the kernel and drops them
    /// ([`io::xdp::sink`]); the receiving process only reads the counters.
    XdpSink,
    /// Generator only: the kernel makes and sends the frames, an XDP program run by
    /// BPF_PROG_RUN in live-frames mode ([`io::xdp::livegen`], [`generate_live`]).
    XdpLive,
}

#[derive(Debug, thiserror::Error)]
pub enum TrafficError {
    #[error("{0}")]
    Open(String),
    #[error("cannot pin to cpu {0}: {1}")]
    Pin(usize, std::io::Error),
}

/// Frames per burst.
const BURST: usize = 64;

fn open(
    iface: &str,
    backend: Backend,
    pool: &mut FramePool,
) -> Result<(AnyRx, AnyTx), TrafficError> {
    let mut opener = PortOpener::new();
    let res = match backend {
        Backend::AfPacket => opener.open_packet(iface, 0).map_err(|e| e.to_string()),
        Backend::AfXdp => opener.open_xdp(pool, iface, 0).map_err(|e| e.to_string()),
        Backend::XdpSink => Err("the xdp-sink backend only receives (linerate rcv)".to_string()),
        Backend::XdpLive => {
            Err("the xdp-live backend only sends (linerate gen; see traffic::generate_live)"
                .to_string())
        }
    };
    let (rx, tx, _) = res.map_err(|e| TrafficError::Open(format!("{iface}: {e}")))?;
    Ok((rx, tx))
}

fn pin(cpu: Option<usize>) -> Result<(), TrafficError> {
    match cpu {
        Some(c) => io::affinity::pin_current_thread(c).map_err(|e| TrafficError::Pin(c, e)),
        None => Ok(()),
    }
}

/// What to send and for how long.
pub struct GenConfig {
    pub iface: String,
    pub backend: Backend,
    /// The frames to cycle through (see [`crate::flows::frames`]).
    pub frames: Vec<Vec<u8>>,
    /// Offered rate; `None` = as fast as possible.
    pub rate_pps: Option<f64>,
    pub count: Option<u64>,
    pub duration: Option<Duration>,
    pub cpu: Option<usize>,
}

/// Totals of a generator or receiver run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    /// Frames sent (generator) or received (receiver).
    pub packets: u64,
    pub bytes: u64,
    /// Generator: frames the port could not take (ring full). Receiver: kernel drops.
    pub dropped: u64,
    /// Packets per second in each whole second of the run.
    pub per_second: Vec<f64>,
    pub elapsed: Duration,
    /// What the user should know about how the run went (e.g. a slower mode it fell back to).
    pub notes: Vec<String>,
}

/// Counts per whole second and reports each second as it ends.
struct Seconds<F: FnMut(usize, f64)> {
    start: Instant,
    next: Duration,
    last_count: u64,
    per_second: Vec<f64>,
    on_second: F,
}

impl<F: FnMut(usize, f64)> Seconds<F> {
    fn new(on_second: F) -> Self {
        Seconds {
            start: Instant::now(),
            next: Duration::from_secs(1),
            last_count: 0,
            per_second: Vec::new(),
            on_second,
        }
    }

    fn tick(&mut self, count: u64) {
        while self.start.elapsed() >= self.next {
            let pps = (count - self.last_count) as f64;
            self.last_count = count;
            self.per_second.push(pps);
            (self.on_second)(self.per_second.len(), pps);
            self.next += Duration::from_secs(1);
        }
    }
}

/// Sends `cfg.frames` in a loop until the count or duration is reached or `stop` is set.
pub fn generate(
    cfg: &GenConfig,
    stop: &AtomicBool,
    on_second: impl FnMut(usize, f64),
) -> Result<Report, TrafficError> {
    pin(cfg.cpu)?;
    let mut pool = FramePool::new(8192);
    let (_rx, mut tx) = open(&cfg.iface, cfg.backend, &mut pool)?;
    let mut source = ReplayRx::new(0, &cfg.frames);
    let mut batch = Batch::new();
    let mut secs = Seconds::new(on_second);
    let start = secs.start;
    let limit = cfg.count.unwrap_or(u64::MAX);
    let mut offered = 0u64;
    loop {
        let sent = tx.stats().tx_packets;
        let elapsed = start.elapsed();
        if stop.load(Ordering::Relaxed)
            || offered >= limit
            || cfg.duration.is_some_and(|d| elapsed >= d)
        {
            break;
        }
        let mut want = BURST.min((limit - offered) as usize);
        if let Some(rate) = cfg.rate_pps {
            // Token bucket: never more than `rate` x elapsed, bursts of at most BURST.
            let allowed = (rate * elapsed.as_secs_f64()) as u64;
            want = want.min(allowed.saturating_sub(offered) as usize);
            if want == 0 {
                std::hint::spin_loop();
                secs.tick(sent);
                continue;
            }
        }
        let got = source.rx_burst(&mut pool, &mut batch, want);
        offered += got as u64;
        tx.tx_burst(&mut pool, &mut batch);
        secs.tick(tx.stats().tx_packets);
    }
    tx.flush(&mut pool);
    let s = tx.stats();
    Ok(Report {
        packets: s.tx_packets,
        bytes: s.tx_bytes,
        dropped: s.tx_dropped,
        per_second: secs.per_second,
        elapsed: start.elapsed(),
        notes: Vec::new(),
    })
}

/// What the in-kernel generator sends and for how long ([`generate_live`]).
pub struct LiveConfig {
    pub iface: String,
    /// The flows and sizes (see [`crate::flows::live_flows`]).
    pub flows: LiveFlows,
    /// Offered rate; `None` = as fast as possible.
    pub rate_pps: Option<f64>,
    /// Frames to offer (runs of the program).
    pub count: Option<u64>,
    pub duration: Option<Duration>,
    /// CPU to pin to: the program runs on the CPU that calls BPF_PROG_RUN.
    pub cpu: Option<usize>,
    /// Frames per flush to the driver (1..=256).
    pub batch: u32,
    /// With `rate_pps`: most frames per call, the largest burst the receiver gets (1..=256).
    pub paced_step: u32,
}

/// Time one BPF_PROG_RUN call should take at full speed: long enough to spread the call's
/// own cost, short enough that a stop, the count or the end of a second is seen in time.
const LIVE_CALL: Duration = Duration::from_millis(10);
/// The same when the program could not be attached and each call costs ~20 ms more (see
/// [`io::xdp::livegen::Sender::open`]), and the fewest frames per call then.
const LIVE_CALL_UNATTACHED: Duration = Duration::from_millis(250);
const LIVE_MIN_CALL_UNATTACHED: u64 = 1 << 16;
/// Calls in a row that may fail for want of memory before the generator gives up.
const LIVE_MAX_FAILING_CALLS: u32 = 1000;
/// The first call: small, so that a peer that takes nothing is reported at once.
const LIVE_PROBE: u64 = 256;
const LIVE_MAX_CALL: u64 = 1 << 22;
/// Most frames per call when rate-limited, by default: a veth's 256-frame ring, which an
/// empty ring takes whole. Each call sets up a page pool of fresh pages, which cost more than
/// the frames, so fewer, larger calls pace higher rates (docs/performance.md, "The in-kernel
/// generator"); smaller ones leave a receiver's ring room for jitter.
pub const LIVE_PACED_STEP: u32 = 256;

/// Sends `cfg.flows` with the kernel's live-frames XDP generator until the count or
/// duration is reached or `stop` is set. The report's `packets` are the frames the driver
/// took (its `xdp_xmit` counters), `dropped` the frames offered that it did not take (veth:
/// its peer's ring was full), and `bytes` the frames taken times the mean frame length of
/// the size cycle. The per-second rates count frames taken.
pub fn generate_live(
    cfg: &LiveConfig,
    stop: &AtomicBool,
    on_second: impl FnMut(usize, f64),
) -> Result<Report, TrafficError> {
    pin(cfg.cpu)?;
    let open = |e: io::xdp::livegen::LiveGenError| TrafficError::Open(e.to_string());
    let generator = io::xdp::livegen::Generator::load(&cfg.flows.spec()).map_err(open)?;
    let mut sender = io::xdp::livegen::Sender::open(generator, &cfg.iface).map_err(open)?;
    let mut secs = Seconds::new(on_second);
    let start = secs.start;
    let limit = cfg.count.unwrap_or(u64::MAX);
    let mut notes = Vec::new();
    let (target, least) = match sender.attach_error() {
        None => (LIVE_CALL, LIVE_PROBE),
        Some(e) => {
            notes.push(format!("could not attach the generator's program to {} ({e}): fewer, longer BPF_PROG_RUN calls", cfg.iface));
            (LIVE_CALL_UNATTACHED, LIVE_MIN_CALL_UNATTACHED)
        }
    };
    let mut t = sender.totals();
    // Frames per call, scaled after each call to take about `target`.
    let mut call = LIVE_PROBE;
    // Calls that failed for want of memory: in a row, and in all.
    let (mut failing, mut failed) = (0u32, 0u64);
    while !stop.load(Ordering::Relaxed)
        && t.attempted < limit
        && cfg.duration.is_none_or(|d| start.elapsed() < d)
    {
        let mut want = (limit - t.attempted).min(call);
        if let Some(rate) = cfg.rate_pps {
            // Token bucket: never more than `rate` x elapsed, in steps of at most
            // `paced_step` frames so that no burst overflows a receiver's ring (veth: 256)
            // on its own. Below a step per millisecond it sleeps between steps; faster, it
            // waits on the clock (the generator has its CPU to itself).
            let allowed =
                ((rate * start.elapsed().as_secs_f64()) as u64).saturating_sub(t.attempted);
            let most = u64::from(cfg.paced_step.clamp(1, io::xdp::livegen::MAX_BATCH));
            let step = ((rate / 1000.0) as u64).clamp(1, most).min(want);
            if allowed < step {
                let wait = (step - allowed) as f64 / rate;
                if wait > 1e-3 {
                    std::thread::sleep(Duration::from_secs_f64(wait.min(1e-2)));
                } else {
                    std::hint::spin_loop();
                }
                secs.tick(t.sent);
                continue;
            }
            want = want.min(allowed).min(most);
        }
        let began = Instant::now();
        match sender.send(want as u32, cfg.batch) {
            Ok(now) => (t, failing) = (now, 0),
            Err(e) if e.is_transient() && failing < LIVE_MAX_FAILING_CALLS => {
                (failing, failed) = (failing + 1, failed + 1);
                continue;
            }
            Err(e) => return Err(open(e)),
        }
        let took = began.elapsed().as_secs_f64().max(1e-6);
        call = ((want as f64 * target.as_secs_f64() / took) as u64).clamp(least, LIVE_MAX_CALL);
        secs.tick(t.sent);
    }
    if failed > 0 {
        notes.push(format!("{failed} BPF_PROG_RUN calls failed for want of memory (ENOSPC/ENOMEM) and were made again"));
    }
    let bytes = (t.sent as f64 * cfg.flows.mean_frame_len()).round() as u64;
    Ok(Report {
        packets: t.sent,
        bytes,
        dropped: t.attempted.saturating_sub(t.sent),
        per_second: secs.per_second,
        elapsed: start.elapsed(),
        notes,
    })
}

/// Counts frames arriving on `iface` until `duration` passes or `stop` is set.
pub fn receive(
    iface: &str,
    backend: Backend,
    duration: Option<Duration>,
    cpu: Option<usize>,
    stop: &AtomicBool,
    on_second: impl FnMut(usize, f64),
) -> Result<Report, TrafficError> {
    pin(cpu)?;
    if backend == Backend::XdpSink {
        return receive_in_kernel(iface, duration, stop, on_second);
    }
    let mut pool = FramePool::new(8192);
    let (mut rx, _tx) = open(iface, backend, &mut pool)?;
    let mut batch = Batch::new();
    let mut secs = Seconds::new(on_second);
    let (mut packets, mut bytes) = (0u64, 0u64);
    while !stop.load(Ordering::Relaxed) && duration.is_none_or(|d| secs.start.elapsed() < d) {
        let n = rx.rx_burst(&mut pool, &mut batch, BURST);
        packets += n as u64;
        for d in batch.drain() {
            bytes += u64::from(d.len);
            pool.free(d);
        }
        if n == 0 {
            std::hint::spin_loop();
        }
        secs.tick(packets);
    }
    // Frames the kernel could not hand over (ring full) count as dropped, so that received +
    // dropped accounts for every frame that reached the interface.
    let kernel_drops = match &mut rx {
        AnyRx::Packet(p) => p.kernel_stats().drops,
        _ => 0,
    };
    let dropped = rx.stats().rx_dropped + kernel_drops;
    Ok(Report {
        packets,
        bytes,
        dropped,
        per_second: secs.per_second,
        elapsed: secs.start.elapsed(),
        notes: Vec::new(),
    })
}

/// [`receive`] with the counting done in the kernel by an XDP program: this thread reads the
/// counters once a millisecond and sleeps in between, leaving its CPU to whatever shares it
/// (in the lab, the generator). Nothing is dropped before the count: the program sees every
/// frame that reaches the interface.
fn receive_in_kernel(
    iface: &str,
    duration: Option<Duration>,
    stop: &AtomicBool,
    on_second: impl FnMut(usize, f64),
) -> Result<Report, TrafficError> {
    let sink = io::xdp::sink::CountingSink::attach(iface).map_err(|e| {
        TrafficError::Open(format!("{iface}: cannot attach the counting XDP program: {e}"))
    })?;
    let read = || {
        sink.counts()
            .map_err(|e| TrafficError::Open(format!("{iface}: cannot read the XDP counters: {e}")))
    };
    let mut secs = Seconds::new(on_second);
    while !stop.load(Ordering::Relaxed) && duration.is_none_or(|d| secs.start.elapsed() < d) {
        secs.tick(read()?.0);
        std::thread::sleep(Duration::from_millis(1));
    }
    let (packets, bytes) = read()?;
    Ok(Report {
        packets,
        bytes,
        dropped: 0,
        per_second: secs.per_second,
        elapsed: secs.start.elapsed(),
        notes: Vec::new(),
    })
}

/// The lab's measure of a run: the median of the per-second rates, leaving out the first and
/// last seconds (ramp-up and tail), as the study did with its receiver's output.
pub fn run_value(per_second: &[f64]) -> Option<f64> {
    let inner =
        if per_second.len() > 2 { &per_second[1..per_second.len() - 1] } else { per_second };
    (!inner.is_empty()).then(|| crate::stat::median(inner))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_value_drops_first_and_last_second() {
        assert_eq!(run_value(&[10.0, 100.0, 102.0, 98.0, 5.0]), Some(100.0));
        assert_eq!(run_value(&[10.0, 100.0, 104.0, 5.0]), Some(102.0));
        assert_eq!(run_value(&[7.0]), Some(7.0));
        assert_eq!(run_value(&[]), None);
    }
}
