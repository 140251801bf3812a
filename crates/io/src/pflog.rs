//! The pflog(4) header: what OpenBSD's pf puts in front of each packet it logs, link type
//! `DLT_PFLOG` (117) in a capture file. `tcpdump -n -e -r FILE` prints it as
//! `rule 3.web.0/match: block in on em0: IP ...`.
//!
//! Layout (OpenBSD `net/if_pflog.h`, `struct pfloghdr`; multi-byte fields big-endian):
//!
//! ```text
//!  0 length   1 af   2 action   3 reason   4..20 ifname   20..36 ruleset
//! 36 rulenr  40 subrulenr  44 uid  48 pid  52 rule_uid  56 rule_pid  60 dir  61..64 padding
//! ```
//!
//! `length` is the header's length without its padding (61); readers round it up to 4 bytes
//! and find the IP packet there. linerate fills `ruleset` with the rule's stable id (its
//! label, or a hash of its text) and `subrulenr` with 0, so tcpdump shows both.

/// `LINKTYPE_PFLOG`.
pub const LINKTYPE_PFLOG: u32 = 117;
/// Bytes in front of the packet.
pub const HDR_LEN: usize = 64;
/// The `length` field: the header up to and including `dir`.
const REAL_HDR_LEN: u8 = 61;
/// `IFNAMSIZ` and `PF_RULESET_NAME_SIZE`.
pub const NAME_LEN: usize = 16;

/// BSD address family numbers, as tcpdump reads them (`AF_INET`, OpenBSD's `AF_INET6`).
pub const AF_INET: u8 = 2;
pub const AF_INET6: u8 = 24;
/// `PF_PASS`, `PF_DROP`.
pub const ACTION_PASS: u8 = 0;
pub const ACTION_BLOCK: u8 = 1;
/// `PF_IN`, `PF_OUT`.
pub const DIR_IN: u8 = 1;
pub const DIR_OUT: u8 = 2;

/// pf's reasons (`PFRES_*`) that linerate logs, with tcpdump's names for them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Reason {
    /// A rule matched (the packet passed or a `block` rule decided).
    Match = 0,
    /// IP options without `allow-opts`.
    IpOption = 8,
    /// A TCP segment outside its state's window.
    StateMismatch = 10,
    /// The state table is full, or the rule has its `max` states.
    StateLimit = 12,
    /// A source-tracking limit (`max-src-*`).
    SrcLimit = 13,
    /// A packet `synproxy state` consumed or dropped during its handshake.
    Synproxy = 14,
}

impl Reason {
    pub fn name(self) -> &'static str {
        match self {
            Reason::Match => "match",
            Reason::IpOption => "ip-option",
            Reason::StateMismatch => "state-mismatch",
            Reason::StateLimit => "state-limit",
            Reason::SrcLimit => "src-limit",
            Reason::Synproxy => "synproxy",
        }
    }

    fn from_u8(v: u8) -> Option<Reason> {
        [
            Reason::Match,
            Reason::IpOption,
            Reason::StateMismatch,
            Reason::StateLimit,
            Reason::SrcLimit,
            Reason::Synproxy,
        ]
        .into_iter()
        .find(|r| *r as u8 == v)
    }
}

/// The fields of a pflog header that linerate writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub af: u8,
    pub action: u8,
    pub reason: u8,
    /// Interface name, cut to 15 bytes.
    pub ifname: String,
    /// The rule's stable id, cut to 15 bytes.
    pub ruleset: String,
    pub rulenr: u32,
    pub subrulenr: u32,
    pub dir: u8,
}

fn put_name(dst: &mut [u8], name: &str) {
    let b = name.as_bytes();
    let n = b.len().min(NAME_LEN - 1);
    dst[..n].copy_from_slice(&b[..n]);
}

fn get_name(src: &[u8]) -> String {
    let end = src.iter().position(|&b| b == 0).unwrap_or(src.len());
    String::from_utf8_lossy(&src[..end]).into_owned()
}

impl Header {
    /// The 64 header bytes.
    pub fn encode(&self) -> [u8; HDR_LEN] {
        let mut h = [0u8; HDR_LEN];
        h[0] = REAL_HDR_LEN;
        h[1] = self.af;
        h[2] = self.action;
        h[3] = self.reason;
        put_name(&mut h[4..20], &self.ifname);
        put_name(&mut h[20..36], &self.ruleset);
        h[36..40].copy_from_slice(&self.rulenr.to_be_bytes());
        h[40..44].copy_from_slice(&self.subrulenr.to_be_bytes());
        // No socket owner: uid -1 (tcpdump then prints no "[uid N]"), pid -1.
        h[44..60].copy_from_slice(&[0xff; 16]);
        h[60] = self.dir;
        h
    }

    /// Reads a header and returns it with the offset of the packet behind it; `None` if the
    /// bytes are too short or the length field is below the fields read here.
    pub fn decode(bytes: &[u8]) -> Option<(Header, usize)> {
        let len = usize::from(*bytes.first()?);
        let padded = len.div_ceil(4) * 4;
        if len < usize::from(REAL_HDR_LEN) || bytes.len() < padded {
            return None;
        }
        let word = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        let h = Header {
            af: bytes[1],
            action: bytes[2],
            reason: bytes[3],
            ifname: get_name(&bytes[4..20]),
            ruleset: get_name(&bytes[20..36]),
            rulenr: word(36),
            subrulenr: word(40),
            dir: bytes[60],
        };
        Some((h, padded))
    }

    /// tcpdump's words for the action, the direction and the reason.
    pub fn action_name(&self) -> &'static str {
        if self.action == ACTION_PASS { "pass" } else { "block" }
    }

    pub fn dir_name(&self) -> &'static str {
        match self.dir {
            DIR_IN => "in",
            DIR_OUT => "out",
            _ => "in/out",
        }
    }

    pub fn reason_name(&self) -> &'static str {
        Reason::from_u8(self.reason).map_or("unknown", Reason::name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A block of an IPv4 packet on "lrlog-a" by rule 3, labelled "ssh-in", inbound.
    const FIXTURE: [u8; HDR_LEN] = [
        61, 2, 1, 0, // length, AF_INET, PF_DROP, PFRES_MATCH
        b'l', b'r', b'l', b'o', b'g', b'-', b'a', 0, 0, 0, 0, 0, 0, 0, 0, 0, // ifname
        b's', b's', b'h', b'-', b'i', b'n', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // ruleset
        0, 0, 0, 3, // rulenr
        0, 0, 0, 0, // subrulenr
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // uid, pid
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // rule_uid, rule_pid
        1, 0, 0, 0, // PF_IN, padding
    ];

    fn fixture_header() -> Header {
        Header {
            af: AF_INET,
            action: ACTION_BLOCK,
            reason: Reason::Match as u8,
            ifname: "lrlog-a".into(),
            ruleset: "ssh-in".into(),
            rulenr: 3,
            subrulenr: 0,
            dir: DIR_IN,
        }
    }

    #[test]
    fn encodes_the_fixture_bytes() {
        assert_eq!(fixture_header().encode(), FIXTURE);
    }

    #[test]
    fn decodes_what_it_encodes() {
        let mut bytes = FIXTURE.to_vec();
        bytes.extend_from_slice(&[0x45, 0]);
        let (h, at) = Header::decode(&bytes).unwrap();
        assert_eq!((h, at), (fixture_header(), 64));
        let h = fixture_header();
        assert_eq!((h.action_name(), h.dir_name(), h.reason_name()), ("block", "in", "match"));
        assert!(Header::decode(&FIXTURE[..40]).is_none());
        let mut short_len = FIXTURE;
        short_len[0] = 45;
        assert!(Header::decode(&short_len).is_none());
    }

    #[test]
    fn long_names_are_cut_and_terminated() {
        let h = Header {
            ifname: "a-very-long-interface-name".into(),
            ruleset: "x".repeat(40),
            ..fixture_header()
        };
        let b = h.encode();
        assert_eq!(&b[4..20], b"a-very-long-int\0");
        assert_eq!(b[35], 0);
        let (d, _) = Header::decode(&b).unwrap();
        assert_eq!(d.ruleset, "x".repeat(15));
    }
}
