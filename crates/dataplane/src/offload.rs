//! Offload of decided flows to the in-kernel fast path (`io::xdp::fastpath`).
//!
//! After the forwarding node has finished a batch, a worker with a [`FlowLearner`] looks at
//! the frames it is about to send: a UDP or TCP packet (no SYN, FIN or RST) that left untagged
//! from an untagged input, with no IP options and not a fragment, becomes an [`Offer`]: its
//! flow as the program will see it on the input, and the rewrite the pipeline applied to it.
//! A thread of the control plane ([`OfferConsumer`]'s reader) turns offers into the program's
//! entries; the worker never makes a system call for it.
//!
//! An entry is valid while the generation it was decided in ([`Decisions`]) is current. Any
//! change that may change a decision (a route, a neighbour, a rule set, a table, a capture)
//! moves the generation on: an offer decided before it is never installed, and the program
//! moves on too whenever it holds an entry still valid, so every flow comes back to the
//! pipeline, which decides it again.
//!
//! Only flows whose every packet the pipeline would treat alike are offered, as the rule set
//! allows ([`OffloadPolicy`], [`crate::firewall::Firewall::offload_policy`]): with state or
//! translation, UDP flows only, whose entries expire so that the pipeline sees each flow
//! again in time to refresh its state and translation (docs/router.md, "The fast path in
//! the kernel").

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use io::{Batch, FramePool};

/// The generation of the data plane's decisions, and who mirrors it into the kernel.
pub struct Decisions {
    generation: AtomicU32,
    mirror: Mutex<Mirror>,
}

/// The kernel's side of the generation: what its program holds, and whether an entry of
/// that generation may exist (only then must a change reach the kernel).
#[derive(Default)]
struct Mirror {
    write: Option<Box<dyn Fn(u32) + Send>>,
    /// The generation the program holds (0: none yet, the program only steers).
    written: u32,
    /// An entry of `written` was installed: a change must move the program on.
    live: bool,
}

impl Default for Decisions {
    fn default() -> Self {
        Decisions { generation: AtomicU32::new(1), mirror: Mutex::new(Mirror::default()) }
    }
}

impl Decisions {
    /// The current generation (never 0: the program reads 0 as "off").
    #[inline]
    pub fn current(&self) -> u32 {
        self.generation.load(Ordering::Acquire)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Mirror> {
        self.mirror.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Something a decision depends on changed: every decision made so far is void. The
    /// kernel hears of it only if it holds an entry that would still be valid (so route
    /// churn with nothing offloaded costs no system call).
    pub fn changed(&self) {
        let mut m = self.lock();
        let mut g = self.generation.fetch_add(1, Ordering::AcqRel).wrapping_add(1);
        if g == 0 {
            self.generation.store(1, Ordering::Release);
            g = 1;
        }
        if m.live {
            if let Some(write) = &m.write {
                write(g);
            }
            (m.written, m.live) = (g, false);
        }
    }

    /// Has `write` give the kernel's program its generation from now on.
    pub fn set_mirror(&self, write: Box<dyn Fn(u32) + Send>) {
        self.lock().write = Some(write);
    }

    /// Installs an entry decided in `generation` by `insert` (which says whether it did),
    /// unless a change came since: then the decision is void and nothing is installed.
    /// Returns whether it was installed.
    pub fn install(&self, generation: u32, insert: impl FnOnce() -> bool) -> bool {
        let mut m = self.lock();
        if generation != self.current() {
            return false;
        }
        if m.written != generation {
            if let Some(write) = &m.write {
                write(generation);
            }
            m.written = generation;
        }
        let installed = insert();
        m.live |= installed;
        installed
    }
}

/// What a rule set lets the fast path take (see the module documentation).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OffloadPolicy {
    /// UDP flows may be offloaded.
    pub udp: bool,
    /// TCP flows may be offloaded (their segments without SYN, FIN or RST).
    pub tcp: bool,
    /// Packets may leave with other addresses or ports than they came with: the learner
    /// notes each input's flow before the batch is processed ([`FlowLearner::note_inputs`]).
    pub translates: bool,
    /// Nanoseconds an entry lives before the pipeline must see the flow again, to refresh
    /// the state or translation it keeps for it; 0: for ever (the flow has neither).
    pub refresh_ns: u64,
}

impl OffloadPolicy {
    /// Nothing goes to the fast path (a capture, a tap, a rule set that must see every packet).
    pub const NONE: OffloadPolicy =
        OffloadPolicy { udp: false, tcp: false, translates: false, refresh_ns: 0 };
    /// Every flow is decided once and for all (no firewall, or one without state).
    pub const STATELESS: OffloadPolicy =
        OffloadPolicy { udp: true, tcp: true, translates: false, refresh_ns: 0 };

    /// Whether some flow may be offloaded at all.
    #[inline]
    pub fn any(&self) -> bool {
        self.udp || self.tcp
    }

    fn takes(&self, proto: u8) -> bool {
        match proto {
            17 => self.udp,
            6 => self.tcp,
            _ => false,
        }
    }
}

/// A flow's addresses and ports (IPv4 in the first 4 bytes of each address).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Tuple {
    pub src: [u8; 16],
    pub dst: [u8; 16],
    pub sport: [u8; 2],
    pub dport: [u8; 2],
}

/// One forwarded packet's flow and rewrite, from a worker to the control plane.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Offer {
    /// Physical ports (the worker's numbering) it came in on and left by.
    pub in_port: u16,
    pub out_port: u16,
    pub proto: u8,
    /// 4 or 6.
    pub family: u8,
    /// The flow as it arrived: what the program matches.
    pub flow: Tuple,
    /// As it left: differs from `flow` when the firewall translated it.
    pub sent: Tuple,
    pub dst_mac: [u8; 6],
    pub src_mac: [u8; 6],
    pub generation: u32,
    /// CLOCK_MONOTONIC nanoseconds from which the entry must send the flow to the pipeline
    /// again (the pipeline's state or translation must see it by then); 0: never.
    pub expires_ns: u64,
    /// What the pipeline counts each packet of the flow under: the fast path's counts of it
    /// are credited there ([`Credit`]).
    pub counted: CountedUnder,
}

/// The rules a forwarded packet is counted under (pf counts it under each pass's rule, or its
/// state's rule), in the rule set of generation `generation`; [`CountedUnder::NO_RULE`]
/// where a pass counts nothing. No firewall: both `NO_RULE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CountedUnder {
    pub rules: [u32; 2],
    pub generation: u64,
}

impl CountedUnder {
    pub const NO_RULE: u32 = u32::MAX;
    pub const NOTHING: CountedUnder = CountedUnder { rules: [Self::NO_RULE; 2], generation: 0 };
}

impl Default for CountedUnder {
    fn default() -> Self {
        Self::NOTHING
    }
}

/// Packets and bytes (of IP) the fast path forwarded for flows counted under `counted`, from
/// the control plane back to the worker that offered them (the one writer of its counters).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Credit {
    pub counted: CountedUnder,
    pub packets: u64,
    pub bytes: u64,
}

/// Flows a worker already offered in the current generation, at most this many (then it
/// forgets them all, and offers again what still comes its way).
const REMEMBERED: usize = 1 << 16;

/// How long a flow the firewall could not say how it counts stays in the pipeline before it
/// is asked again. A stateless rule set's answer holds for the whole generation (the check
/// above keeps a flow without expiry for good).
const ASK_AGAIN_NS: u64 = 1_000_000_000;

/// The flows of a batch's received frames as they arrived, by the frame's chunk: what the
/// program will see of a flow the pipeline translates. Direct-mapped: a frame whose slot
/// another frame of the batch took is not offered (its flow is, with a later packet).
struct InputFlows {
    /// By chunk: the chunk, the flow's family (4 or 6), the flow.
    slots: Vec<(u32, u8, Tuple)>,
}

const INPUT_SLOTS: usize = 1024;

impl InputFlows {
    fn note(&mut self, pool: &FramePool, input: &Batch) {
        if self.slots.is_empty() {
            self.slots = vec![(u32::MAX, 0, Tuple::default()); INPUT_SLOTS];
        }
        for desc in input.as_slice() {
            let slot = &mut self.slots[desc.chunk() as usize % INPUT_SLOTS];
            match flow_of(pool.frame(*desc)) {
                Some((family, _, t)) => *slot = (desc.chunk(), family, t),
                None => slot.0 = u32::MAX,
            }
        }
    }

    /// The family and flow of the frame that arrived in `chunk`.
    fn get(&self, chunk: u32) -> Option<(u8, &Tuple)> {
        let (c, family, t) = self.slots.get(chunk as usize % INPUT_SLOTS)?;
        (*c == chunk).then_some((*family, t))
    }
}

/// A worker's side: finds offers among the frames it sends and queues them.
pub struct FlowLearner {
    queue: io::spsc::Producer<Offer>,
    credits: io::spsc::Consumer<Credit>,
    decisions: std::sync::Arc<Decisions>,
    /// Physical ports whose input the program may take (untagged only, AF_XDP with the
    /// fast path): an input port that also carries VLANs is not one.
    inputs: Vec<bool>,
    /// The flows offered in this generation (with no time), and when each offer's entry
    /// expires (0: never).
    offered: HashMap<Offer, u64>,
    generation: u32,
    inputs_noted: InputFlows,
    /// The batch's time (CLOCK_MONOTONIC ns), read only under a policy that refreshes.
    now_ns: u64,
}

impl FlowLearner {
    pub fn new(
        (queue, credits): WorkerQueues,
        decisions: std::sync::Arc<Decisions>,
        inputs: Vec<bool>,
    ) -> Self {
        FlowLearner {
            queue,
            credits,
            decisions,
            inputs,
            offered: HashMap::new(),
            generation: 0,
            inputs_noted: InputFlows { slots: Vec::new() },
            now_ns: 0,
        }
    }

    /// Voids every decision offloaded so far (a capture starts: its frames must come through
    /// the pipeline; states were killed).
    pub fn void_all(&self) {
        self.decisions.changed();
    }

    /// Reads the generation the next batch is decided in (before the batch's lookups), and
    /// under `policy`, the flows of its frames as they arrive (before the pipeline rewrites
    /// them) and the time.
    #[inline]
    pub fn begin_batch(&mut self, policy: &OffloadPolicy, pool: &FramePool, input: &Batch) {
        let g = self.decisions.current();
        if g != self.generation {
            self.generation = g;
            self.offered.clear();
        }
        if policy.translates && policy.any() {
            self.note_inputs(pool, input);
        }
        if policy.refresh_ns != 0 {
            self.now_ns = io::clock::monotonic_ns();
        }
    }

    #[inline(never)]
    pub fn note_inputs(&mut self, pool: &FramePool, input: &Batch) {
        self.inputs_noted.note(pool, input);
    }

    /// Hands each credit the control plane sent back for this worker's offloaded flows to
    /// `apply` (its firewall's rule counters).
    #[inline]
    pub fn take_credits(&mut self, mut apply: impl FnMut(&Credit)) {
        while self.credits.pop_with(&mut apply) {}
    }

    /// Offers the flows of the frames in `outputs` (by output port), as rewritten, that
    /// `policy` lets the fast path take, each with what `counted` says its packets are
    /// counted under (`None`: the flow stays in the pipeline).
    pub fn learn(
        &mut self,
        pool: &FramePool,
        outputs: &[Batch],
        policy: &OffloadPolicy,
        mut counted: impl FnMut(&[u8], &Offer) -> Option<CountedUnder>,
    ) {
        for (out_port, batch) in outputs.iter().enumerate() {
            for desc in batch.as_slice() {
                if !self.inputs.get(usize::from(desc.port)).copied().unwrap_or(false) {
                    continue;
                }
                let Some(mut offer) = offer_of(pool.frame(*desc)) else { continue };
                if !policy.takes(offer.proto) {
                    continue;
                }
                if policy.translates {
                    let Some((family, flow)) = self.inputs_noted.get(desc.chunk()) else {
                        continue;
                    };
                    // NAT66 and af-to are not the program's (it translates IPv4 to IPv4 only).
                    if family != offer.family || (*flow != offer.sent && offer.family != 4) {
                        continue;
                    }
                    offer.flow = *flow;
                }
                offer.in_port = desc.port;
                offer.out_port = out_port as u16;
                let frame = pool.frame(*desc);
                self.offer(offer, policy.refresh_ns, |o| counted(frame, o));
            }
        }
    }

    /// Queues `offer` unless it was offered in this generation and its entry is not yet
    /// half-way to its expiry (one that refreshes is offered again from then on, so that the
    /// entry is renewed before the pipeline would see every packet of the flow).
    /// What the flow is counted under is asked (of `counted`) only then, once per offer.
    fn offer(
        &mut self,
        mut offer: Offer,
        refresh_ns: u64,
        counted: impl FnOnce(&Offer) -> Option<CountedUnder>,
    ) {
        offer.generation = self.generation;
        if let Some(&expires) = self.offered.get(&offer)
            && (expires == 0 || self.now_ns.saturating_add(refresh_ns / 2) < expires)
        {
            return;
        }
        if self.offered.len() >= REMEMBERED {
            self.offered.clear();
        }
        let Some(under) = counted(&offer) else {
            // Asked again in a second (a state may settle by then), not per packet.
            self.offered.insert(offer, self.now_ns.saturating_add(refresh_ns / 2 + ASK_AGAIN_NS));
            return;
        };
        let expires = if refresh_ns == 0 { 0 } else { self.now_ns + refresh_ns };
        // A full queue: offered again with the flow's next packet.
        let sent = Offer { expires_ns: expires, counted: under, ..offer };
        if self.queue.push_with(|slot| *slot = sent) {
            self.offered.insert(offer, expires);
        }
    }
}

/// The family, protocol and flow of an untagged IPv4 (no options, not a fragment) or IPv6
/// (no extension header) frame carrying UDP, or TCP without SYN, FIN or RST.
fn flow_of(frame: &[u8]) -> Option<(u8, u8, Tuple)> {
    let mut t = Tuple::default();
    let (family, proto, l4) = match frame.get(12..14)? {
        [0x08, 0x00] => {
            let ip = frame.get(14..34)?;
            let fragment = u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0;
            if ip[0] != 0x45 || fragment {
                return None;
            }
            t.src[..4].copy_from_slice(&ip[12..16]);
            t.dst[..4].copy_from_slice(&ip[16..20]);
            (4, ip[9], 34)
        }
        [0x86, 0xdd] => {
            let ip = frame.get(14..54)?;
            t.src.copy_from_slice(&ip[8..24]);
            t.dst.copy_from_slice(&ip[24..40]);
            (6, ip[6], 54)
        }
        _ => return None,
    };
    let ports = frame.get(l4..l4 + 4)?;
    match proto {
        17 => {}
        // SYN, FIN, RST: the byte of flags at offset 13.
        6 if frame.get(l4 + 13)? & 0x07 == 0 => {}
        _ => return None,
    }
    t.sport.copy_from_slice(&ports[0..2]);
    t.dport.copy_from_slice(&ports[2..4]);
    Some((family, proto, t))
}

/// The flow of a frame the pipeline is sending, if the fast path could forward it (see
/// [`flow_of`]), as if it arrived as it leaves (a learner under translation replaces `flow`).
pub fn offer_of(frame: &[u8]) -> Option<Offer> {
    let (family, proto, sent) = flow_of(frame)?;
    let mut o = Offer { family, proto, flow: sent, sent, ..Offer::default() };
    o.dst_mac.copy_from_slice(frame.get(0..6)?);
    o.src_mac.copy_from_slice(frame.get(6..12)?);
    Some(o)
}

/// The control plane's side of one worker's offers.
pub type OfferConsumer = io::spsc::Consumer<Offer>;

/// A worker's ends of its queues to and from the control plane.
pub type WorkerQueues = (io::spsc::Producer<Offer>, io::spsc::Consumer<Credit>);

/// The control plane's ends of one worker's queues: its offers, and the credits for them.
pub struct ControlQueues {
    pub offers: OfferConsumer,
    pub credits: io::spsc::Producer<Credit>,
}

/// The queues between a worker and the control plane, each of `capacity` entries.
pub fn worker_queues(capacity: usize) -> (WorkerQueues, ControlQueues) {
    let (offer_tx, offers) = io::spsc::ring(capacity);
    let (credits, credit_rx) = io::spsc::ring(capacity);
    ((offer_tx, credit_rx), ControlQueues { offers, credits })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A UDP datagram 198.18.0.2:1234 -> 198.19.0.2:9 as the pipeline sends it.
    fn udp4() -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 0xb, 2, 0, 0, 0, 0, 0xa, 0x08, 0x00];
        f.extend_from_slice(&[
            0x45, 0, 0, 28, 0, 1, 0x40, 0, 63, 17, 0, 0, 198, 18, 0, 2, 198, 19, 0, 2,
        ]);
        f.extend_from_slice(&[0x04, 0xd2, 0, 9, 0, 8, 0, 0]);
        f.resize(60, 0);
        f
    }

    #[test]
    fn a_udp_datagram_is_offered_with_its_rewrite() {
        let o = offer_of(&udp4()).unwrap();
        assert_eq!((o.family, o.proto), (4, 17));
        assert_eq!(&o.flow.src[..4], &[198, 18, 0, 2]);
        assert_eq!(&o.flow.dst[..4], &[198, 19, 0, 2]);
        assert_eq!((o.flow.sport, o.flow.dport), ([0x04, 0xd2], [0, 9]));
        assert_eq!(o.flow, o.sent);
        assert_eq!((o.dst_mac[5], o.src_mac[5]), (0xb, 0xa));
    }

    #[test]
    fn what_the_pipeline_must_see_is_never_offered() {
        let mut options = udp4();
        options[14] = 0x46;
        let mut fragment = udp4();
        fragment[20] = 0x20; // MF
        let mut icmp = udp4();
        icmp[23] = 1;
        let mut tagged = udp4();
        tagged[12..14].copy_from_slice(&[0x81, 0x00]);
        let mut syn = udp4();
        syn[23] = 6;
        syn.resize(74, 0);
        syn[34 + 13] = 0x02;
        for f in [options, fragment, icmp, tagged, syn, udp4()[..30].to_vec()] {
            assert_eq!(offer_of(&f), None, "{f:02x?}");
        }
        let mut ack = udp4();
        ack[23] = 6;
        ack.resize(74, 0);
        ack[34 + 13] = 0x10;
        assert!(offer_of(&ack).is_some());
    }

    #[test]
    fn a_change_voids_what_was_offered() {
        let d = std::sync::Arc::new(Decisions::default());
        let seen = std::sync::Arc::new(AtomicU32::new(0));
        let s = std::sync::Arc::clone(&seen);
        d.set_mirror(Box::new(move |g| s.store(g, Ordering::Relaxed)));
        assert_eq!(seen.load(Ordering::Relaxed), 0, "nothing offloaded: the program only steers");
        d.changed();
        assert_eq!(
            seen.load(Ordering::Relaxed),
            0,
            "a change with nothing offloaded costs nothing"
        );
        assert!(!d.install(1, || true), "decided before the change: void");
        assert!(d.install(2, || true));
        assert_eq!(seen.load(Ordering::Relaxed), 2, "the program holds the entry's generation");
        let (worker, mut control) = worker_queues(8);
        let mut l = FlowLearner::new(worker, std::sync::Arc::clone(&d), vec![true]);
        let pool = FramePool::new(64);
        let empty = Batch::new();
        l.begin_batch(&OffloadPolicy::STATELESS, &pool, &empty);
        let o = offer_of(&udp4()).unwrap();
        l.offer(o, 0, |_| Some(CountedUnder::NOTHING));
        l.offer(o, 0, |_| Some(CountedUnder::NOTHING));
        let mut n = 0;
        while control.offers.pop_with(|_| ()) {
            n += 1;
        }
        assert_eq!(n, 1, "offered once per generation");
        d.changed();
        assert_eq!(
            seen.load(Ordering::Relaxed),
            3,
            "an installed entry: the change reaches the program"
        );
        d.changed();
        assert_eq!(seen.load(Ordering::Relaxed), 3, "nothing installed since");
        l.begin_batch(&OffloadPolicy::STATELESS, &pool, &empty);
        l.offer(o, 0, |_| Some(CountedUnder::NOTHING));
        assert!(control.offers.pop_with(|got| assert_eq!(got.generation, 4)));
    }
}
