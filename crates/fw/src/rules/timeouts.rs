//! State timeouts (pf.conf(5) `set timeout`) and the kinds of timeout a state can be under.

/// State timeouts in seconds; `Default` is pf's defaults (pf.conf(5) `set timeout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// After the first packet.
    pub tcp_first: u32,
    /// Before both ends are established.
    pub tcp_opening: u32,
    /// Fully established.
    pub tcp_established: u32,
    /// After the first FIN.
    pub tcp_closing: u32,
    /// After both FINs.
    pub tcp_finwait: u32,
    /// After both FINs acknowledged, or a RST.
    pub tcp_closed: u32,
    pub udp_first: u32,
    pub udp_single: u32,
    pub udp_multiple: u32,
    pub icmp_first: u32,
    pub icmp_error: u32,
    pub other_first: u32,
    pub other_single: u32,
    pub other_multiple: u32,
    /// pf's `interval`: the data plane's paced sweep examines the whole table once per
    /// interval ([`StateTable::expire_paced`](super::StateTable::expire_paced)); expired
    /// entries are absent to lookups at once.
    pub interval: u32,
    /// pf's `src.track`: how long a source node outlives its last state (source tracking,
    /// [`crate::rules::SrcTrack`]).
    pub src_track: u32,
    /// pf's `frag`: how long a fragmented IPv4 datagram's entry lives (the data plane's
    /// fragment table, which gives later fragments the first one's ports).
    pub frag: u32,
    /// pf's adaptive scaling (`adaptive.start`, `adaptive.end`): above `adaptive_start`
    /// states every timeout is scaled by (end - states) / (end - start); at `adaptive_end`
    /// all states are dead. Off when `adaptive_end` is 0 or not above the start, as in pf.
    /// The default is pf's for the default limit (60% and 120% of 100000 states); the
    /// parser derives both from a rule file's `set limit states` as pfctl does.
    pub adaptive_start: u32,
    pub adaptive_end: u32,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            tcp_first: 120,
            tcp_opening: 30,
            tcp_established: 86400,
            tcp_closing: 900,
            tcp_finwait: 45,
            tcp_closed: 90,
            udp_first: 60,
            udp_single: 30,
            udp_multiple: 60,
            icmp_first: 20,
            icmp_error: 10,
            other_first: 60,
            other_single: 30,
            other_multiple: 60,
            interval: 10,
            src_track: 0,
            frag: 30,
            adaptive_start: 60_000,
            adaptive_end: 120_000,
        }
    }
}

/// Which timeout currently applies to a state (pf's `PFTM_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Tmo {
    TcpFirst,
    TcpOpening,
    TcpEstablished,
    TcpClosing,
    TcpFinWait,
    TcpClosed,
    UdpFirst,
    UdpSingle,
    UdpMultiple,
    IcmpFirst,
    IcmpError,
    OtherFirst,
    OtherSingle,
    OtherMultiple,
}

impl Tmo {
    pub(crate) const ALL: [Tmo; 14] = [
        Tmo::TcpFirst,
        Tmo::TcpOpening,
        Tmo::TcpEstablished,
        Tmo::TcpClosing,
        Tmo::TcpFinWait,
        Tmo::TcpClosed,
        Tmo::UdpFirst,
        Tmo::UdpSingle,
        Tmo::UdpMultiple,
        Tmo::IcmpFirst,
        Tmo::IcmpError,
        Tmo::OtherFirst,
        Tmo::OtherSingle,
        Tmo::OtherMultiple,
    ];
    /// The kind named as in pf.conf (`tcp.established`); `interval` and `src.track` are no
    /// state's timeout.
    pub fn from_name(name: &str) -> Option<Tmo> {
        Some(match name {
            "tcp.first" => Tmo::TcpFirst,
            "tcp.opening" => Tmo::TcpOpening,
            "tcp.established" => Tmo::TcpEstablished,
            "tcp.closing" => Tmo::TcpClosing,
            "tcp.finwait" => Tmo::TcpFinWait,
            "tcp.closed" => Tmo::TcpClosed,
            "udp.first" => Tmo::UdpFirst,
            "udp.single" => Tmo::UdpSingle,
            "udp.multiple" => Tmo::UdpMultiple,
            "icmp.first" => Tmo::IcmpFirst,
            "icmp.error" => Tmo::IcmpError,
            "other.first" => Tmo::OtherFirst,
            "other.single" => Tmo::OtherSingle,
            "other.multiple" => Tmo::OtherMultiple,
            _ => return None,
        })
    }

    pub(crate) fn from_u8(v: u8) -> Tmo {
        Tmo::ALL[v as usize]
    }
}

impl Timeouts {
    /// The field named as in pf.conf (`tcp.established`), if any.
    pub fn get_mut(&mut self, name: &str) -> Option<&mut u32> {
        Some(match name {
            "tcp.first" => &mut self.tcp_first,
            "tcp.opening" => &mut self.tcp_opening,
            "tcp.established" => &mut self.tcp_established,
            "tcp.closing" => &mut self.tcp_closing,
            "tcp.finwait" => &mut self.tcp_finwait,
            "tcp.closed" => &mut self.tcp_closed,
            "udp.first" => &mut self.udp_first,
            "udp.single" => &mut self.udp_single,
            "udp.multiple" => &mut self.udp_multiple,
            "icmp.first" => &mut self.icmp_first,
            "icmp.error" => &mut self.icmp_error,
            "other.first" => &mut self.other_first,
            "other.single" => &mut self.other_single,
            "other.multiple" => &mut self.other_multiple,
            "interval" => &mut self.interval,
            "src.track" => &mut self.src_track,
            "frag" => &mut self.frag,
            "adaptive.start" => &mut self.adaptive_start,
            "adaptive.end" => &mut self.adaptive_end,
            _ => return None,
        })
    }

    /// Seconds for a timeout kind.
    pub fn get(&self, t: Tmo) -> u32 {
        match t {
            Tmo::TcpFirst => self.tcp_first,
            Tmo::TcpOpening => self.tcp_opening,
            Tmo::TcpEstablished => self.tcp_established,
            Tmo::TcpClosing => self.tcp_closing,
            Tmo::TcpFinWait => self.tcp_finwait,
            Tmo::TcpClosed => self.tcp_closed,
            Tmo::UdpFirst => self.udp_first,
            Tmo::UdpSingle => self.udp_single,
            Tmo::UdpMultiple => self.udp_multiple,
            Tmo::IcmpFirst => self.icmp_first,
            Tmo::IcmpError => self.icmp_error,
            Tmo::OtherFirst => self.other_first,
            Tmo::OtherSingle => self.other_single,
            Tmo::OtherMultiple => self.other_multiple,
        }
    }
}

impl Timeouts {
    /// Seconds per kind, indexed by `Tmo as usize`: what the state table reads per packet
    /// (one load instead of a match over the fields).
    pub(crate) fn by_kind(&self) -> [u32; Tmo::ALL.len()] {
        Tmo::ALL.map(|t| self.get(t))
    }

    /// pf's adaptive timeouts for a `set limit states` of `limit` when the rule file sets
    /// neither `adaptive.start` nor `adaptive.end` (pfctl: 60% and 120% of the limit).
    pub fn adapt_to_limit(&mut self, limit: u64) {
        let tenth = u32::try_from(limit / 10).unwrap_or(u32::MAX / 12);
        self.adaptive_start = tenth.saturating_mul(6);
        self.adaptive_end = tenth.saturating_mul(12);
    }

    /// The scaling's (start, end) in states, if it is on (pf_state_expires: `end` non-zero
    /// and above `start`).
    pub fn adaptive(&self) -> Option<(u32, u32)> {
        (self.adaptive_end != 0 && self.adaptive_start < self.adaptive_end)
            .then_some((self.adaptive_start, self.adaptive_end))
    }
}
