//! pf's normalization on a packet a `scrub` rule matched ([`fw::rules::ScrubOpts`]), as
//! FreeBSD's `pf_normalize_ip`, `pf_normalize_ip6` and `pf_normalize_tcp` do it, every
//! checksum updated incrementally (RFC 1624 eqn. 3):
//!
//! * IPv4: `no-df` clears DF; `min-ttl` raises the TTL; `set-tos` sets the TOS (its ECN bits
//!   kept); `random-id` gives a packet that is not a fragment a random identification.
//! * IPv6: `min-ttl` raises the hop limit, `set-tos` sets the traffic class (ECN kept).
//! * TCP (not in a fragment): a segment with flags pf calls illegal (SYN with RST or FIN;
//!   FIN, PSH or URG without ACK; none of SYN, ACK, RST) or a data offset below 5 is dropped;
//!   the reserved bits are cleared, the urgent pointer is zeroed without URG; `max-mss`
//!   lowers the MSS option.
//!
//! Fragments are not reassembled (see `fw::rules` `scrub` and `super::frags`).

use fw::packet::proto;
use fw::rules::ScrubOpts;

use crate::counters::DropReason;

const SCRUB_FIELDS: usize = 7;

/// Names of [`ScrubCounts`]' fields, in [`ScrubCounts::fields`] order.
pub const SCRUB_COUNTER_NAMES: [&str; SCRUB_FIELDS] = [
    "packets",
    "df_cleared",
    "id_randomized",
    "ttl_raised",
    "tos_set",
    "mss_clamped",
    "tcp_cleared",
];

/// What normalization did, per worker.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScrubCounts {
    /// Packets a scrub rule matched (both passes count).
    pub packets: u64,
    pub df_cleared: u64,
    pub id_randomized: u64,
    pub ttl_raised: u64,
    pub tos_set: u64,
    pub mss_clamped: u64,
    /// TCP segments whose reserved bits or stray urgent pointer were cleared.
    pub tcp_cleared: u64,
}

impl ScrubCounts {
    pub fn fields(&self) -> [u64; SCRUB_FIELDS] {
        [
            self.packets,
            self.df_cleared,
            self.id_randomized,
            self.ttl_raised,
            self.tos_set,
            self.mss_clamped,
            self.tcp_cleared,
        ]
    }
}

const SYN: u8 = 0x02;
const FIN: u8 = 0x01;
const RST: u8 = 0x04;
const PSH: u8 = 0x08;
const ACK: u8 = 0x10;
const URG: u8 = 0x20;

/// The ones'-complement sum of the 16-bit words of `b` (even length), unfolded.
fn sum(b: &[u8]) -> u64 {
    b.chunks(2).map(|w| u64::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]))).sum()
}

fn fold(mut s: u64) -> u16 {
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// Writes `new` at `at` in `buf` and updates the checksum at `ck` (covering `buf` from its
/// start, word-aligned) by RFC 1624 eqn. 3, `HC' = ~(~HC + ~m + m')`, `m` and `m'` the sums
/// of the aligned words the change touches (so an odd `at` is fine). `ck` must lie outside
/// them.
fn rewrite(buf: &mut [u8], at: usize, new: &[u8], ck: usize) {
    let (lo, hi) = (at & !1, (at + new.len() + 1) & !1);
    let old = fold(sum(&buf[lo..hi.min(buf.len())]));
    buf[at..at + new.len()].copy_from_slice(new);
    let new_sum = fold(sum(&buf[lo..hi.min(buf.len())]));
    let hc = u16::from_be_bytes([buf[ck], buf[ck + 1]]);
    let v = !fold(u64::from(!hc) + u64::from(!old) + u64::from(new_sum));
    buf[ck..ck + 2].copy_from_slice(&v.to_be_bytes());
}

/// The TOS (traffic class) `set-tos` makes of `old`: its value, `old`'s ECN bits.
fn tos(set: u8, old: u8) -> u8 {
    (set & 0xfc) | (old & 0x03)
}

/// Normalizes IPv4 packet `ip` (its header validated by the classify pass) by `o`;
/// `random`: the source of `random-id`'s identifications.
pub fn scrub_v4(
    ip: &mut [u8],
    o: &ScrubOpts,
    random: &mut impl FnMut() -> u16,
    c: &mut ScrubCounts,
) -> Result<(), DropReason> {
    if ip.len() < 20 {
        return Ok(());
    }
    c.packets += 1;
    if o.no_df && ip[6] & 0x40 != 0 {
        rewrite(ip, 6, &[ip[6] & !0x40], 10);
        c.df_cleared += 1;
    }
    let fragment = u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0;
    if ip[8] < o.min_ttl {
        rewrite(ip, 8, &[o.min_ttl], 10);
        c.ttl_raised += 1;
    }
    if let Some(t) = o.set_tos
        && tos(t, ip[1]) != ip[1]
    {
        rewrite(ip, 1, &[tos(t, ip[1])], 10);
        c.tos_set += 1;
    }
    if o.random_id && !fragment {
        rewrite(ip, 4, &random().to_be_bytes(), 10);
        c.id_randomized += 1;
    }
    if ip[9] != proto::TCP || fragment {
        return Ok(());
    }
    let hl = usize::from(ip[0] & 0x0f) * 4;
    let end = usize::from(u16::from_be_bytes([ip[2], ip[3]])).min(ip.len());
    match ip.get_mut(hl..end) {
        Some(seg) => scrub_tcp(seg, o.max_mss, c),
        None => Ok(()),
    }
}

/// Normalizes IPv6 packet `ip` by `o`.
pub fn scrub_v6(ip: &mut [u8], o: &ScrubOpts, c: &mut ScrubCounts) -> Result<(), DropReason> {
    if ip.len() < 40 {
        return Ok(());
    }
    c.packets += 1;
    if ip[7] < o.min_ttl {
        ip[7] = o.min_ttl;
        c.ttl_raised += 1;
    }
    let class = (ip[0] << 4) | (ip[1] >> 4);
    if let Some(t) = o.set_tos
        && tos(t, class) != class
    {
        let new = tos(t, class);
        ip[0] = (ip[0] & 0xf0) | (new >> 4);
        ip[1] = (ip[1] & 0x0f) | (new << 4);
        c.tos_set += 1;
    }
    let view = wire::Ipv6Packet::new_unchecked(&*ip);
    let end = (40 + usize::from(view.payload_len())).min(ip.len());
    match view.upper_layer() {
        Ok((wire::IpProtocol::Tcp, off)) => match ip.get_mut(off..end) {
            Some(seg) => scrub_tcp(seg, o.max_mss, c),
            None => Ok(()),
        },
        _ => Ok(()),
    }
}

/// pf's TCP normalization of segment `seg` (header and payload), and `max-mss` (0: none).
pub fn scrub_tcp(seg: &mut [u8], max_mss: u16, c: &mut ScrubCounts) -> Result<(), DropReason> {
    if seg.len() < 20 {
        return Ok(());
    }
    let flags = seg[13];
    let illegal =
        if flags & SYN != 0 { flags & (RST | FIN) != 0 } else { flags & (ACK | RST) == 0 };
    if illegal || (flags & ACK == 0 && flags & (FIN | PSH | URG) != 0) || seg[12] >> 4 < 5 {
        return Err(DropReason::ScrubBadTcp);
    }
    let mut cleared = false;
    if seg[12] & 0x0f != 0 {
        rewrite(seg, 12, &[seg[12] & 0xf0], 16);
        cleared = true;
    }
    if flags & URG == 0 && (seg[18] | seg[19]) != 0 {
        rewrite(seg, 18, &[0, 0], 16);
        cleared = true;
    }
    c.tcp_cleared += u64::from(cleared);
    if max_mss != 0 {
        clamp_mss(seg, max_mss, c);
    }
    Ok(())
}

/// Lowers the MSS option of `seg` (a TCP segment of at least 20 bytes) to `max`.
fn clamp_mss(seg: &mut [u8], max: u16, c: &mut ScrubCounts) {
    let end = (usize::from(seg[12] >> 4) * 4).min(seg.len());
    let mut at = 20;
    while at < end {
        match seg[at] {
            0 => return,
            1 => at += 1,
            kind => {
                let Some(&len) = seg.get(at + 1).filter(|_| at + 1 < end) else { return };
                let len = usize::from(len);
                if len < 2 || at + len > end {
                    return;
                }
                if kind == 2 && len == 4 {
                    let mss = u16::from_be_bytes([seg[at + 2], seg[at + 3]]);
                    if mss > max {
                        rewrite(seg, at + 2, &max.to_be_bytes(), 16);
                        c.mss_clamped += 1;
                    }
                }
                at += len;
            }
        }
    }
}

#[cfg(test)]
#[path = "scrub_tests.rs"]
pub(crate) mod tests;

/// The filter stage's normalization: whether the batch's rules scrub each direction, and
/// what it needs per packet.
pub(crate) struct ScrubStage {
    /// Some scrub rule applies inbound / outbound (per batch, from the rule set).
    pub on_in: bool,
    pub on_out: bool,
    /// The state of `random-id`'s generator (xorshift64*).
    rng: u64,
    key: fw::packet::PacketKey,
    tcp: Option<fw::state::TcpSegment>,
}

impl ScrubStage {
    pub fn new(seed: u64) -> ScrubStage {
        ScrubStage {
            on_in: false,
            on_out: false,
            rng: seed | 1,
            key: fw::packet::PacketKey::ZERO,
            tcp: None,
        }
    }

    /// Normalizes the packet at `l3` of `frame` in pass `dir` on `port`, by the first scrub
    /// rule of `rules` that matches it (none: untouched); what it does is counted in
    /// `counts`. `Err`: the packet is to be dropped.
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    pub fn apply(
        &mut self,
        rules: &super::CompiledRules,
        counts: &mut ScrubCounts,
        frame: &mut [u8],
        l3: usize,
        v4: bool,
        port: u16,
        dir: fw::packet::Dir,
    ) -> Result<(), DropReason> {
        // A rule naming hosts, a family or a protocol needs the packet's key; `scrub in on
        // em0 all` its direction and interface only.
        if rules.scrub_keyed {
            super::keys::extract(frame, l3, v4, port, &mut self.key, &mut self.tcp);
        } else {
            self.key = fw::packet::PacketKey::ZERO;
        }
        self.key.dir = dir;
        self.key.iface = port;
        let Some(o) = rules.rules.scrub_for(&self.key) else { return Ok(()) };
        let Some(ip) = frame.get_mut(l3..) else { return Ok(()) };
        if !v4 {
            return scrub_v6(ip, &o, counts);
        }
        let rng = &mut self.rng;
        let mut random = || {
            *rng ^= *rng >> 12;
            *rng ^= *rng << 25;
            *rng ^= *rng >> 27;
            (rng.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 48) as u16
        };
        scrub_v4(ip, &o, &mut random, counts)
    }
}
