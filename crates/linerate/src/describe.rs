//! One line per packet for `linerate log` and `linerate capture`, in the words of
//! `tcpdump -n -e` (times in UTC). Reads cut packets: what is missing is left out.

use std::fmt::Display;
use std::net::{Ipv4Addr, Ipv6Addr};

use dataplane::DropReason;

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

/// `HH:MM:SS.uuuuuu` of a Unix time, UTC.
pub fn time(sec: u32, usec: u32) -> String {
    let s = sec % 86_400;
    format!("{:02}:{:02}:{:02}.{usec:06}", s / 3600, s / 60 % 60, s % 60)
}

/// A logged packet: `rule N/ID(reason): action dir on IFACE: addresses`.
pub fn pflog_line(sec: u32, usec: u32, record: &[u8]) -> String {
    let Some((h, at)) = io::pflog::Header::decode(record) else {
        return format!("{} [bad pflog header]", time(sec, usec));
    };
    let ip_bytes = record.get(at..).unwrap_or_default();
    format!(
        "{} rule {}/{}({}): {} {} on {}: {}",
        time(sec, usec),
        h.rulenr,
        h.ruleset,
        h.reason_name(),
        h.action_name(),
        h.dir_name(),
        h.ifname,
        ip(ip_bytes)
    )
}

/// A captured frame: `POINT SRC-MAC > DST-MAC, [vlan N,] addresses`, and why it was dropped.
pub fn capture_line(
    sec: u32,
    usec: u32,
    point: &str,
    frame: &[u8],
    orig_len: u32,
    reason: Option<DropReason>,
) -> String {
    let mac = |at: usize| {
        frame.get(at..at + 6).map_or("?".into(), |m| {
            m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
        })
    };
    let mut line = format!("{} {point} {} > {}", time(sec, usec), mac(6), mac(0));
    let (mut ethertype, mut l3) = (be16(frame, 12), 14);
    if ethertype == Some(0x8100) {
        line += &format!(", vlan {}", be16(frame, 14).unwrap_or(0) & 0xfff);
        (ethertype, l3) = (be16(frame, 16), 18);
    }
    let rest = frame.get(l3..).unwrap_or_default();
    line += &match ethertype {
        Some(0x0800 | 0x86dd) => format!(", {}", ip(rest)),
        Some(0x0806) => ", ARP".into(),
        Some(t) => format!(", ethertype {t:#06x}"),
        None => ", truncated".into(),
    };
    line += &format!(", length {orig_len}");
    if let Some(r) = reason {
        line += &format!(" (dropped: {})", r.name());
    }
    line
}

/// An IP packet: `IP SRC.PORT > DST.PORT: PROTO ...`.
pub fn ip(b: &[u8]) -> String {
    match b.first().map(|v| v >> 4) {
        Some(4) if b.len() >= 20 => {
            let ihl = usize::from(b[0] & 15) * 4;
            let (src, dst) = (
                Ipv4Addr::new(b[12], b[13], b[14], b[15]),
                Ipv4Addr::new(b[16], b[17], b[18], b[19]),
            );
            let total = usize::from(be16(b, 2).unwrap_or(0));
            let later_fragment = be16(b, 6).unwrap_or(0) & 0x1fff != 0;
            let l4 = if later_fragment { None } else { b.get(ihl..) };
            format!("IP {}", transport(b[9], src, dst, l4, total.saturating_sub(ihl)))
        }
        Some(6) if b.len() >= 40 => {
            let addr = |at: usize| {
                Ipv6Addr::from(<[u8; 16]>::try_from(&b[at..at + 16]).expect("16 bytes"))
            };
            let payload = usize::from(be16(b, 4).unwrap_or(0));
            format!("IP6 {}", transport(b[6], addr(8), addr(24), b.get(40..), payload))
        }
        _ => format!("IP? ({} bytes)", b.len()),
    }
}

fn transport(
    proto: u8,
    src: impl Display,
    dst: impl Display,
    l4: Option<&[u8]>,
    len: usize,
) -> String {
    let l4 = l4.unwrap_or_default();
    match proto {
        6 if l4.len() >= 14 => {
            let (sp, dp) = (be16(l4, 0).unwrap_or(0), be16(l4, 2).unwrap_or(0));
            let data = len.saturating_sub(usize::from(l4[12] >> 4) * 4);
            format!("{src}.{sp} > {dst}.{dp}: Flags [{}], length {data}", tcp_flags(l4[13]))
        }
        17 if l4.len() >= 4 => {
            let (sp, dp) = (be16(l4, 0).unwrap_or(0), be16(l4, 2).unwrap_or(0));
            format!("{src}.{sp} > {dst}.{dp}: UDP, length {}", len.saturating_sub(8))
        }
        1 | 58 if l4.len() >= 2 => {
            let name = if proto == 1 { "ICMP" } else { "ICMP6" };
            format!("{src} > {dst}: {name} type {} code {}, length {len}", l4[0], l4[1])
        }
        _ => format!("{src} > {dst}: ip-proto-{proto} {len}"),
    }
}

/// tcpdump's letters for TCP flags (`S`, `.` for ACK, ...).
fn tcp_flags(f: u8) -> String {
    let letters = [
        (0x02, 'S'),
        (0x01, 'F'),
        (0x04, 'R'),
        (0x08, 'P'),
        (0x20, 'U'),
        (0x40, 'E'),
        (0x80, 'W'),
        (0x10, '.'),
    ];
    let s: String = letters.iter().filter(|(b, _)| f & b != 0).map(|(_, c)| *c).collect();
    if s.is_empty() { "none".into() } else { s }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// IPv4 UDP 198.18.0.2:1000 -> 10.1.1.1:9999, 18 bytes of payload.
    const UDP4: [u8; 28] = [
        0x45, 0, 0, 46, 0, 1, 0, 0, 64, 17, 0, 0, 198, 18, 0, 2, 10, 1, 1, 1, 0x03, 0xe8, 0x27,
        0x0f, 0, 26, 0, 0,
    ];

    #[test]
    fn pflog_lines_read_as_tcpdump_prints_them() {
        let h = io::pflog::Header {
            af: 2,
            action: 1,
            reason: 0,
            ifname: "lrlog-a".into(),
            ruleset: "ssh".into(),
            rulenr: 3,
            subrulenr: 0,
            dir: 1,
        };
        let mut rec = h.encode().to_vec();
        rec.extend_from_slice(&UDP4);
        assert_eq!(
            pflog_line(3723, 42, &rec),
            "01:02:03.000042 rule 3/ssh(match): block in on lrlog-a: IP 198.18.0.2.1000 > 10.1.1.1.9999: UDP, length 18"
        );
        assert_eq!(pflog_line(0, 0, &rec[..10]), "00:00:00.000000 [bad pflog header]");
    }

    #[test]
    fn capture_lines_name_macs_vlans_and_drop_reasons() {
        let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x81, 0, 0, 10, 0x08, 0];
        f.extend_from_slice(&UDP4);
        let line = capture_line(0, 5, "drop", &f, 64, Some(DropReason::TtlExpired));
        assert_eq!(
            line,
            "00:00:00.000005 drop 02:00:00:00:00:02 > 02:00:00:00:00:01, vlan 10, IP 198.18.0.2.1000 > 10.1.1.1.9999: UDP, length 18, length 64 (dropped: ttl_expired)"
        );
        assert!(capture_line(0, 0, "rx", &f[..8], 8, None).ends_with("truncated, length 8"));
    }

    #[test]
    fn tcp_and_cut_packets() {
        let mut tcp = UDP4.to_vec();
        tcp[9] = 6;
        tcp.resize(40, 0);
        tcp[32] = 5 << 4;
        tcp[33] = 0x12;
        assert_eq!(ip(&tcp), "IP 198.18.0.2.1000 > 10.1.1.1.9999: Flags [S.], length 6");
        assert_eq!(ip(&UDP4[..22]), "IP 198.18.0.2 > 10.1.1.1: ip-proto-17 26");
        assert_eq!(ip(&[0x45]), "IP? (1 bytes)");
    }
}
