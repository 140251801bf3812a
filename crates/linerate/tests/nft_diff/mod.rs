//! The differential test's own generator of stateless pf rule sets, restricted to what has
//! an exact nftables equivalent, each rule written twice: as pf.conf text for linerate's
//! parser and as nftables rules; and its packets, as fw keys and as Ethernet frames.
//!
//! pf's order becomes nftables' first match: the `quick` rules first, in order (the first
//! matching one decides), then the other rules in reverse order (the first match from the
//! end is pf's last match), then the chain's policy, accept (pf's default pass). A pf rule
//! with address lists becomes one nftables rule per (source, destination) element, all with
//! its verdict and adjacent, as pfctl expands it. Direction and interface are the kernel's
//! input interface: the test's DUT has one per (direction, interface) pair.

use std::fmt::Write;

use fw::packet::{Af, Dir, PacketKey, proto};

/// xorshift64*: reproducible from the seed a failure prints.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    pub fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len() as u64) as usize]
    }
}

/// The kernel input interface standing for pf's (direction, interface) pair.
pub fn kernel_iface(dir: Dir, iface: u16) -> String {
    match dir {
        Dir::In => format!("lrdin{iface}"),
        Dir::Out => format!("lrdout{iface}"),
    }
}

/// The four (direction, interface) pairs, in the order of [`kernel_iface`]'s interfaces.
pub const PAIRS: [(Dir, u16); 4] = [(Dir::In, 0), (Dir::In, 1), (Dir::Out, 0), (Dir::Out, 1)];

/// `[!] prefix` of one family (IPv4 in the low 32 bits).
#[derive(Clone, Copy, Debug)]
pub struct Host {
    pub af: Af,
    pub addr: u128,
    pub len: u8,
    pub neg: bool,
}

impl Host {
    fn masked(&self) -> u128 {
        let bits = if self.af == Af::Inet { 32 } else { 128 };
        let host = bits - u32::from(self.len);
        if host >= 128 { 0 } else { (self.addr >> host) << host }
    }
    fn text(&self) -> String {
        let a = match self.af {
            Af::Inet => std::net::Ipv4Addr::from(self.masked() as u32).to_string(),
            Af::Inet6 => std::net::Ipv6Addr::from(self.masked()).to_string(),
        };
        format!("{a}/{}", self.len)
    }
    fn pf(&self) -> String {
        format!("{}{}", if self.neg { "! " } else { "" }, self.text())
    }
    fn nft(&self, field: &str) -> String {
        let fam = if self.af == Af::Inet { "ip" } else { "ip6" };
        format!("{fam} {field} {}{}", if self.neg { "!= " } else { "" }, self.text())
    }
}

/// A port condition, as written in pf.
#[derive(Clone, Debug)]
pub enum Ports {
    Op(&'static str, u16),
    /// `a:b`
    Range(u16, u16),
    /// `a >< b`
    Inside(u16, u16),
    /// `a <> b`
    Outside(u16, u16),
    /// `{ p, a:b, ... }`
    List(Vec<(u16, u16)>),
}

impl Ports {
    fn pf(&self) -> String {
        let item = |&(a, b): &(u16, u16)| if a == b { a.to_string() } else { format!("{a}:{b}") };
        match self {
            Ports::Op(op, p) => format!("{op} {p}"),
            Ports::Range(a, b) => format!("{a}:{b}"),
            Ports::Inside(a, b) => format!("{a} >< {b}"),
            Ports::Outside(a, b) => format!("{a} <> {b}"),
            Ports::List(v) => {
                format!("{{ {} }}", v.iter().map(item).collect::<Vec<_>>().join(", "))
            }
        }
    }
    /// The nftables condition on `th <field>`.
    fn nft(&self, field: &str) -> String {
        let item = |&(a, b): &(u16, u16)| if a == b { a.to_string() } else { format!("{a}-{b}") };
        match self {
            Ports::Op("=", p) => format!("th {field} {p}"),
            Ports::Op(op, p) => format!("th {field} {op} {p}"),
            Ports::Range(a, b) => format!("th {field} {}", item(&(*a, *b))),
            Ports::Inside(a, b) => format!("th {field} > {a} th {field} < {b}"),
            Ports::Outside(a, b) => format!("th {field} != {}", item(&(*a, *b))),
            Ports::List(v) => {
                format!("th {field} {{ {} }}", v.iter().map(item).collect::<Vec<_>>().join(", "))
            }
        }
    }
    fn bounds(&self, out: &mut Vec<u16>) {
        match self {
            Ports::Op(_, p) => out.push(*p),
            Ports::Range(a, b) | Ports::Inside(a, b) | Ports::Outside(a, b) => out.extend([*a, *b]),
            Ports::List(v) => v.iter().for_each(|&(a, b)| out.extend([a, b])),
        }
    }
}

/// One generated rule.
#[derive(Clone, Debug)]
pub struct GenRule {
    pub pass: bool,
    pub dir: Option<Dir>,
    pub quick: bool,
    /// `on X`, `on ! X`, `on { X Y }`: (negated, interfaces).
    pub on: Option<(bool, Vec<u16>)>,
    pub af: Option<Af>,
    pub protos: Vec<u8>,
    pub src: Vec<Host>,
    pub src_ports: Option<Ports>,
    pub dst: Vec<Host>,
    pub dst_ports: Option<Ports>,
    /// `icmp-type` / `icmp6-type`: types, and a code after a single type.
    pub icmp: Option<(Vec<u8>, Option<u8>)>,
}

fn proto_name(p: u8) -> String {
    match p {
        proto::TCP => "tcp".into(),
        proto::UDP => "udp".into(),
        proto::ICMP => "icmp".into(),
        proto::ICMPV6 => "icmp6".into(),
        p => p.to_string(),
    }
}

impl GenRule {
    /// The rule in pf.conf syntax.
    pub fn pf(&self) -> String {
        let mut s = String::from(if self.pass { "pass" } else { "block" });
        match self.dir {
            Some(Dir::In) => s.push_str(" in"),
            Some(Dir::Out) => s.push_str(" out"),
            None => {}
        }
        if self.quick {
            s.push_str(" quick");
        }
        if let Some((neg, ifs)) = &self.on {
            let names: Vec<String> = ifs.iter().map(|i| format!("if{i}")).collect();
            match (neg, names.len()) {
                (true, _) => write!(s, " on ! {}", names[0]).unwrap(),
                (false, 1) => write!(s, " on {}", names[0]).unwrap(),
                _ => write!(s, " on {{ {} }}", names.join(" ")).unwrap(),
            }
        }
        match self.af {
            Some(Af::Inet) => s.push_str(" inet"),
            Some(Af::Inet6) => s.push_str(" inet6"),
            None => {}
        }
        match self.protos.len() {
            0 => {}
            1 => write!(s, " proto {}", proto_name(self.protos[0])).unwrap(),
            _ => write!(
                s,
                " proto {{ {} }}",
                self.protos.iter().map(|p| proto_name(*p)).collect::<Vec<_>>().join(", ")
            )
            .unwrap(),
        }
        let side = |hosts: &[Host], ports: &Option<Ports>| {
            let mut t = match hosts.len() {
                0 => "any".to_owned(),
                1 => hosts[0].pf(),
                _ => format!("{{ {} }}", hosts.iter().map(Host::pf).collect::<Vec<_>>().join(", ")),
            };
            if let Some(p) = ports {
                write!(t, " port {}", p.pf()).unwrap();
            }
            t
        };
        if self.src.is_empty()
            && self.dst.is_empty()
            && self.src_ports.is_none()
            && self.dst_ports.is_none()
            && self.icmp.is_none()
            && self.protos.is_empty()
        {
            s.push_str(" all");
        } else {
            write!(
                s,
                " from {} to {}",
                side(&self.src, &self.src_ports),
                side(&self.dst, &self.dst_ports)
            )
            .unwrap();
        }
        if let Some((types, code)) = &self.icmp {
            let kw = if self.protos == [proto::ICMP] { "icmp-type" } else { "icmp6-type" };
            match (types.len(), code) {
                (1, Some(c)) => write!(s, " {kw} {} code {c}", types[0]).unwrap(),
                (1, None) => write!(s, " {kw} {}", types[0]).unwrap(),
                _ => write!(
                    s,
                    " {kw} {{ {} }}",
                    types.iter().map(u8::to_string).collect::<Vec<_>>().join(", ")
                )
                .unwrap(),
            }
        }
        if self.pass {
            s.push_str(" no state");
        }
        s
    }

    /// The kernel input interfaces the rule's direction and `on` allow (all four: no
    /// condition).
    fn ifaces(&self) -> Vec<String> {
        PAIRS
            .iter()
            .filter(|(d, i)| {
                self.dir.is_none_or(|x| x == *d)
                    && match &self.on {
                        None => true,
                        Some((true, v)) => !v.contains(i),
                        Some((false, v)) => v.contains(i),
                    }
            })
            .map(|&(d, i)| kernel_iface(d, i))
            .collect()
    }

    /// The rule as nftables rules (none if it can match nothing).
    pub fn nft(&self, out: &mut String) {
        let mut base = String::new();
        let ifs = self.ifaces();
        if ifs.is_empty() {
            return;
        }
        if ifs.len() < PAIRS.len() {
            write!(
                base,
                "iifname {{ {} }} ",
                ifs.iter().map(|i| format!("\"{i}\"")).collect::<Vec<_>>().join(", ")
            )
            .unwrap();
        }
        match self.af {
            Some(Af::Inet) => base.push_str("meta nfproto ipv4 "),
            Some(Af::Inet6) => base.push_str("meta nfproto ipv6 "),
            None => {}
        }
        if !self.protos.is_empty() {
            write!(
                base,
                "meta l4proto {{ {} }} ",
                self.protos.iter().map(u8::to_string).collect::<Vec<_>>().join(", ")
            )
            .unwrap();
        }
        let mut tail = String::new();
        if let Some(p) = &self.src_ports {
            write!(tail, "{} ", p.nft("sport")).unwrap();
        }
        if let Some(p) = &self.dst_ports {
            write!(tail, "{} ", p.nft("dport")).unwrap();
        }
        if let Some((types, code)) = &self.icmp {
            let kw = if self.protos == [proto::ICMP] { "icmp" } else { "icmpv6" };
            write!(
                tail,
                "{kw} type {{ {} }} ",
                types.iter().map(u8::to_string).collect::<Vec<_>>().join(", ")
            )
            .unwrap();
            if let Some(c) = code {
                write!(tail, "{kw} code {c} ").unwrap();
            }
        }
        let verdict = if self.pass { "accept" } else { "drop" };
        let srcs: Vec<Option<&Host>> =
            if self.src.is_empty() { vec![None] } else { self.src.iter().map(Some).collect() };
        let dsts: Vec<Option<&Host>> =
            if self.dst.is_empty() { vec![None] } else { self.dst.iter().map(Some).collect() };
        for s in &srcs {
            for d in &dsts {
                // An address of the other family than the rule's, or than the other side's,
                // can match nothing.
                if [s, d].iter().any(|h| h.is_some_and(|h| self.af.is_some_and(|af| af != h.af)))
                    || matches!((s, d), (Some(a), Some(b)) if a.af != b.af)
                {
                    continue;
                }
                let s = s.map_or(String::new(), |h| h.nft("saddr") + " ");
                let d = d.map_or(String::new(), |h| h.nft("daddr") + " ");
                writeln!(out, "    {base}{s}{d}{tail}{verdict}").unwrap();
            }
        }
    }
}

/// The whole rule set as an nftables script: table `inet lrdiff`, chain `pre` on prerouting.
pub fn nft_script(rules: &[GenRule]) -> String {
    let mut s = String::from(
        "table inet lrdiff\ndelete table inet lrdiff\ntable inet lrdiff {\n  chain pre {\n    type filter hook prerouting priority 0; policy accept;\n",
    );
    for r in rules.iter().filter(|r| r.quick) {
        r.nft(&mut s);
    }
    for r in rules.iter().rev().filter(|r| !r.quick) {
        r.nft(&mut s);
    }
    s.push_str("  }\n}\n");
    s
}

/// Addresses the rules and packets are drawn near: unicast, routable, none the DUT's own.
pub struct Anchors {
    pub v4: Vec<u128>,
    pub v6: Vec<u128>,
}

/// A forwardable IPv4 address: 1-126, 128-223 but 169.254/16, 192.0.2/24 (the DUT's).
fn sane_v4(a: u32) -> bool {
    let [o0, o1, o2, _] = a.to_be_bytes();
    (1..=223).contains(&o0)
        && o0 != 127
        && !(o0 == 169 && o1 == 254)
        && !(o0 == 192 && o1 == 0 && o2 == 2)
}

/// A forwardable IPv6 address: in 2000::/3 or fc00::/7, not fdff::/16 (the DUT's).
fn sane_v6(a: u128) -> bool {
    let top = (a >> 112) as u16;
    (top >> 13 == 1 || top >> 9 == 0x7e) && top != 0xfdff
}

impl Anchors {
    pub fn new(rng: &mut Rng, n: usize) -> Anchors {
        let mut v4 = Vec::new();
        while v4.len() < n {
            let a = rng.next() as u32;
            if sane_v4(a) {
                v4.push(u128::from(a));
            }
        }
        let mut v6 = Vec::new();
        while v6.len() < n {
            let a = (u128::from(rng.next()) << 64) | u128::from(rng.next());
            let a = if rng.chance(50) {
                (a & !(0xffff_ffffu128 << 96)) | (0x2001_0db8u128 << 96)
            } else {
                a
            };
            if sane_v6(a) {
                v6.push(a);
            }
        }
        Anchors { v4, v6 }
    }

    fn host(&self, rng: &mut Rng, af: Af) -> Host {
        let (addr, len) = match af {
            Af::Inet => (
                *rng.pick(&self.v4),
                *rng.pick(&[0u8, 1, 8, 12, 16, 20, 24, 24, 28, 30, 31, 32, 32]),
            ),
            Af::Inet6 => (
                *rng.pick(&self.v6),
                *rng.pick(&[0u8, 3, 16, 32, 48, 56, 64, 64, 96, 120, 127, 128, 128]),
            ),
        };
        Host { af, addr, len, neg: rng.chance(20) }
    }

    /// An address near an anchor: the anchor with one random bit flipped (or itself), until
    /// it is forwardable.
    pub fn address(&self, rng: &mut Rng, af: Af) -> u128 {
        loop {
            let (a, bits) = match af {
                Af::Inet => (*rng.pick(&self.v4), 32),
                Af::Inet6 => (*rng.pick(&self.v6), 128),
            };
            let a = if rng.chance(25) { a } else { a ^ (1u128 << rng.below(bits)) };
            let ok = match af {
                Af::Inet => sane_v4(a as u32),
                Af::Inet6 => sane_v6(a),
            };
            if ok {
                return a;
            }
        }
    }
}

fn ports(rng: &mut Rng) -> Ports {
    let p = |rng: &mut Rng| {
        if rng.chance(50) {
            *rng.pick(&[0u16, 1, 22, 53, 80, 443, 1023, 1024, 5000, 8080, 65534, 65535])
        } else {
            rng.below(65536) as u16
        }
    };
    let pair = |rng: &mut Rng| {
        let (a, b) = (p(rng), p(rng));
        (a.min(b), a.max(b))
    };
    match rng.below(7) {
        0 => Ports::Op("=", p(rng)),
        1 => Ports::Op(["!=", "<", "<=", ">", ">="][rng.below(5) as usize], p(rng)),
        2 => {
            let (a, b) = pair(rng);
            Ports::Range(a, b)
        }
        3 => {
            let (a, b) = pair(rng);
            Ports::Inside(a, b)
        }
        4 => {
            let (a, b) = pair(rng);
            Ports::Outside(a, b)
        }
        _ => Ports::List(
            (0..1 + rng.below(3))
                .map(|_| {
                    if rng.chance(50) {
                        let x = p(rng);
                        (x, x)
                    } else {
                        pair(rng)
                    }
                })
                .collect(),
        ),
    }
}

/// A random stateless rule. `sparse`: most fields left open, as in large real rule sets
/// (a host, a port and a direction), rather than every field drawn.
pub fn rule(rng: &mut Rng, anchors: &Anchors, sparse: bool) -> GenRule {
    let af = *rng.pick(&[None, None, Some(Af::Inet), Some(Af::Inet6)]);
    let protos: Vec<u8> = match rng.below(10) {
        0..=3 => vec![],
        4 => vec![proto::TCP],
        5 => vec![proto::UDP],
        6 => vec![proto::TCP, proto::UDP],
        7 => vec![if af == Some(Af::Inet6) { proto::ICMPV6 } else { proto::ICMP }],
        8 => vec![47],
        _ => vec![proto::UDP, 47],
    };
    let l4 = !protos.is_empty() && protos.iter().all(|p| *p == proto::TCP || *p == proto::UDP);
    // The family of the rule's addresses; a list may hold one of the other family if the
    // rule has none.
    let host_af = af.unwrap_or(*rng.pick(&[Af::Inet, Af::Inet6]));
    let other = if host_af == Af::Inet { Af::Inet6 } else { Af::Inet };
    let hosts = |rng: &mut Rng| -> Vec<Host> {
        let n = *rng.pick(&[0usize, 0, 1, 1, 1, 2, 3]);
        (0..n)
            .map(|i| {
                let fam = if i > 0 && af.is_none() && rng.chance(30) { other } else { host_af };
                anchors.host(rng, fam)
            })
            .collect()
    };
    let (src, dst) = (hosts(rng), hosts(rng));
    let src = if sparse && rng.chance(80) { Vec::new() } else { src };
    // pf refuses a rule whose source and destination are of different single families.
    let single = |v: &[Host]| (!v.is_empty() && v.iter().all(|h| h.af == v[0].af)).then(|| v[0].af);
    let dst = match (single(&src), single(&dst)) {
        (Some(a), Some(b)) if a != b => Vec::new(),
        _ => dst,
    };
    let icmp = (protos.len() == 1
        && (protos[0] == proto::ICMP || protos[0] == proto::ICMPV6)
        && rng.chance(60))
    .then(|| {
        let types: &[u8] =
            if protos[0] == proto::ICMP { &[0, 3, 8, 11] } else { &[1, 3, 128, 129] };
        if rng.chance(50) {
            (vec![*rng.pick(types)], rng.chance(50).then(|| *rng.pick(&[0u8, 1, 3])))
        } else {
            let mut v: Vec<u8> = types.iter().copied().filter(|_| rng.chance(50)).collect();
            if v.is_empty() {
                v.push(types[0]);
            }
            (v, None)
        }
    });
    GenRule {
        pass: rng.chance(50),
        dir: *rng.pick(&[None, Some(Dir::In), Some(Dir::Out)]),
        quick: rng.chance(20),
        on: match rng.below(6) {
            0 => Some((false, vec![rng.below(2) as u16])),
            1 => Some((true, vec![rng.below(2) as u16])),
            2 => Some((false, vec![0, 1])),
            _ => None,
        },
        af,
        protos,
        src,
        src_ports: (l4 && !sparse && rng.chance(30)).then(|| ports(rng)),
        dst,
        dst_ports: (l4 && rng.chance(50)).then(|| ports(rng)),
        icmp,
    }
}

/// The port numbers the rules name, and their neighbours: where verdicts change.
pub fn port_edges(rules: &[GenRule]) -> Vec<u16> {
    let mut v = vec![0, 65535];
    for r in rules {
        for p in [&r.src_ports, &r.dst_ports].into_iter().flatten() {
            p.bounds(&mut v);
        }
    }
    let mut out: Vec<u16> =
        v.iter().flat_map(|&p| [p.saturating_sub(1), p, p.saturating_add(1)]).collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// A random packet: its fw key (the magic and `id` go in its payload).
pub fn packet(rng: &mut Rng, anchors: &Anchors, edges: &[u16]) -> PacketKey {
    let (dir, iface) = *rng.pick(&PAIRS);
    let af = if rng.chance(50) { Af::Inet } else { Af::Inet6 };
    let icmp = if af == Af::Inet { proto::ICMP } else { proto::ICMPV6 };
    let p = *rng.pick(&[proto::TCP, proto::TCP, proto::UDP, proto::UDP, icmp, 47]);
    let port =
        |rng: &mut Rng| if rng.chance(75) { *rng.pick(edges) } else { rng.below(65536) as u16 };
    let (src_port, dst_port) = match p {
        proto::TCP | proto::UDP => (port(rng), port(rng)),
        proto::ICMP => {
            (u16::from(*rng.pick(&[0u8, 3, 8, 11, 5])), u16::from(*rng.pick(&[0u8, 1, 3])))
        }
        proto::ICMPV6 => {
            (u16::from(*rng.pick(&[1u8, 3, 128, 129, 2])), u16::from(*rng.pick(&[0u8, 1, 3])))
        }
        _ => (0, 0),
    };
    PacketKey {
        af,
        dir,
        iface,
        proto: p,
        src: anchors.address(rng, af),
        dst: anchors.address(rng, af),
        src_port,
        dst_port,
        tcp_flags: if p == proto::TCP { 0x10 } else { 0 },
        len: 0,
        icmp_id: 0,
        ip_opts: false,
        route: 0,
        tag: 0,
    }
}

/// The payload that marks a test packet: "LRDF" and its id.
pub const MAGIC: &[u8; 4] = b"LRDF";

fn csum(b: &[u8]) -> u16 {
    let mut s: u32 =
        b.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))).sum();
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// The Ethernet frame of `key` from `src_mac` to `dst_mac`, carrying `id`. Transport
/// checksums are left zero: nothing on the forwarding path checks them.
pub fn frame(key: &PacketKey, id: u32, dst_mac: [u8; 6], src_mac: [u8; 6]) -> Vec<u8> {
    let mut l4 = match key.proto {
        proto::TCP => {
            let mut t = vec![0u8; 20];
            t[0..2].copy_from_slice(&key.src_port.to_be_bytes());
            t[2..4].copy_from_slice(&key.dst_port.to_be_bytes());
            t[12] = 5 << 4;
            t[13] = key.tcp_flags;
            t[14..16].copy_from_slice(&1024u16.to_be_bytes());
            t
        }
        proto::UDP => {
            let mut u = vec![0u8; 8];
            u[0..2].copy_from_slice(&key.src_port.to_be_bytes());
            u[2..4].copy_from_slice(&key.dst_port.to_be_bytes());
            u[4..6].copy_from_slice(&16u16.to_be_bytes());
            u
        }
        proto::ICMP | proto::ICMPV6 => {
            vec![key.src_port as u8, key.dst_port as u8, 0, 0, 0, 0, 0, 0]
        }
        _ => Vec::new(),
    };
    l4.extend_from_slice(MAGIC);
    l4.extend_from_slice(&id.to_be_bytes());
    let mut f = Vec::with_capacity(128);
    f.extend_from_slice(&dst_mac);
    f.extend_from_slice(&src_mac);
    match key.af {
        Af::Inet => {
            f.extend_from_slice(&[0x08, 0x00]);
            let mut ip = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, key.proto, 0, 0];
            ip[2..4].copy_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
            ip.extend_from_slice(&(key.src as u32).to_be_bytes());
            ip.extend_from_slice(&(key.dst as u32).to_be_bytes());
            let c = csum(&ip);
            ip[10..12].copy_from_slice(&c.to_be_bytes());
            f.extend_from_slice(&ip);
        }
        Af::Inet6 => {
            f.extend_from_slice(&[0x86, 0xdd]);
            f.extend_from_slice(&[0x60, 0, 0, 0]);
            f.extend_from_slice(&(l4.len() as u16).to_be_bytes());
            f.extend_from_slice(&[key.proto, 64]);
            f.extend_from_slice(&key.src.to_be_bytes());
            f.extend_from_slice(&key.dst.to_be_bytes());
        }
    }
    f.extend_from_slice(&l4);
    f.resize(f.len().max(60), 0);
    f
}
