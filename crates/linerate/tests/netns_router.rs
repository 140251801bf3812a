//! The router around the fast path, end to end with the real tools: host A -> linerate (in
//! namespace D) -> host B, neighbours resolved by ARP and NDP (no static entries).
//!
//! - ping and ping -6 of the router's own addresses (linerate's echo replies), and across it;
//! - traceroute and tracepath show linerate's hop (ICMP time exceeded from its address);
//! - net unreachable (no route), host unreachable (a neighbour that never answers ARP);
//! - fragmentation needed with DF set, and fragmentation of a large ping without DF, on an
//!   output interface with a 1400-byte MTU;
//! - a TCP connection from A to a listener on the router's address (the host stack, through
//!   linerate's TAP) while linerate forwards;
//! - `linerate show routes|neighbours|interfaces|drops --json` and `linerate top`;
//! - an ICMPv6 redirect or a Router Advertisement to the router changes none of its host
//!   stack's routes;
//! - frames longer than a frame buffer (a link MTU above linerate's) are counted as dropped;
//! - subnet broadcasts are not forwarded (RFC 2644);
//! - a DHCP DISCOVER from 0.0.0.0 reaches the host stack.
//!
//! Once per backend. Needs root (skips without). Namespaces `lr<pid><tag><host>` and the
//! TAPs inside D are removed on drop, also when an assertion fails.

use std::process::Command;
use std::time::Duration;

use lab::topology::is_root;

mod common;

use common::{Lab, build, start_until, text, write_config};

/// Runs `program args` in A without failing on a non-zero exit (ping reporting errors exits 1).
fn in_a(lab: &Lab, program: &str, args: &[&str]) -> String {
    text(&lab.a.command(program).args(args).output().unwrap())
}

fn show(lab: &Lab, cfg: &std::path::Path, what: &str) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(["show", what, "--json", "-c"])
        .arg(cfg)
        .output()
        .unwrap();
    assert!(out.status.success(), "show {what}: {}", text(&out));
    let _ = lab;
    serde_json::from_slice(&out.stdout).unwrap()
}

fn router(backend: &str, tag: &str) {
    if !is_root() {
        lab::topology::skip_test("needs root");
        return;
    }
    let lab = build(tag);
    // B's side has a 1400-byte IP MTU in linerate.
    let cfg = write_config(&lab, backend, "");
    common::set_b_mtu(&cfg, 1400);
    let mut linerate = lab.d.command(env!("CARGO_BIN_EXE_linerate"));
    linerate.args(["run", "-c"]).arg(&cfg).args(["--cpu", "1"]);
    let mut dut = start_until(linerate, "forwarding with");

    pings_answer_and_cross(&lab, backend);
    icmp_errors_and_fragments(&lab, backend);
    host_stack_answers_tcp(&lab, backend);
    control_socket_shows(&lab, &cfg, backend);
    redirects_leave_the_host_stack_alone(&lab, &cfg, backend);
    directed_broadcasts_are_not_forwarded(&lab, &cfg, backend);
    dhcp_discover_reaches_the_host_stack(&lab, backend);

    let child = dut.terminate().unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{backend}: linerate exited with {}: {}", out.status, text(&out));
    let summary = text(&out);
    assert!(summary.contains("slow path: arp replies"), "{summary}");
    std::thread::sleep(Duration::from_millis(100));
    let links = text(&lab.d.ip(&["-o", "link"]).unwrap());
    assert!(!links.contains("lrh"), "{backend}: TAPs left behind after exit:\n{links}");
}

/// The router's own addresses answer, in both families (echo replies from linerate); across
/// linerate, ARP and NDP resolve B on demand (the first packet waits, not lost).
fn pings_answer_and_cross(lab: &Lab, backend: &str) {
    let ping = in_a(lab, "ping", &["-c", "2", "-i", "0.2", "-W", "2", "198.18.0.1"]);
    assert!(ping.contains(" 0% packet loss"), "{backend}: ping 198.18.0.1:\n{ping}");
    let ping = in_a(lab, "ping", &["-c", "2", "-i", "0.2", "-W", "2", "198.19.0.1"]);
    assert!(ping.contains(" 0% packet loss"), "{backend}: ping of the far address:\n{ping}");
    let ping6 = in_a(lab, "ping", &["-6", "-c", "2", "-i", "0.2", "-W", "2", "2001:db8:a::1"]);
    assert!(ping6.contains(" 0% packet loss"), "{backend}: ping -6 2001:db8:a::1:\n{ping6}");
    let ping = in_a(lab, "ping", &["-c", "3", "-i", "0.2", "-W", "2", "198.19.0.2"]);
    assert!(ping.contains(" 0% packet loss"), "{backend}: ping through:\n{ping}");
    let ping6 = in_a(lab, "ping", &["-6", "-c", "3", "-i", "0.2", "-W", "2", "2001:db8:b::2"]);
    assert!(ping6.contains(" 0% packet loss"), "{backend}: ping -6 through:\n{ping6}");
}

/// traceroute / tracepath: hop 1 is the router (time exceeded from 198.18.0.1), then B.
/// Errors: no route (net unreachable), a silent neighbour (host unreachable after 3 ARP
/// requests), DF too big for the 1400-byte link (frag needed, mtu 1400); without DF, the
/// ping is fragmented.
fn icmp_errors_and_fragments(lab: &Lab, backend: &str) {
    let tr = in_a(lab, "traceroute", &["-n", "-q", "1", "-w", "2", "-m", "3", "198.19.0.2"]);
    assert!(
        tr.lines().any(|l| l.trim_start().starts_with("1 ") && l.contains("198.18.0.1")),
        "{backend}: traceroute:\n{tr}"
    );
    assert!(
        tr.lines().any(|l| l.trim_start().starts_with("2 ") && l.contains("198.19.0.2")),
        "{backend}: traceroute:\n{tr}"
    );
    let tp = in_a(lab, "tracepath", &["-n", "-m", "3", "2001:db8:b::2"]);
    assert!(tp.contains("2001:db8:a::1"), "{backend}: tracepath -6 shows no router hop:\n{tp}");
    let net = in_a(lab, "ping", &["-c", "1", "-W", "2", "203.0.113.9"]);
    assert!(net.contains("From 198.18.0.1") && net.contains("Net Unreachable"), "{backend}: {net}");
    let host = in_a(lab, "ping", &["-c", "1", "-W", "5", "198.19.0.77"]);
    assert!(
        host.contains("From 198.18.0.1") && host.contains("Host Unreachable"),
        "{backend}: {host}"
    );
    let df = in_a(lab, "ping", &["-c", "1", "-W", "2", "-M", "do", "-s", "1450", "198.19.0.2"]);
    assert!(df.contains("mtu = 1400") || df.contains("Frag needed"), "{backend}: {df}");
    let frag = in_a(
        lab,
        "ping",
        &["-c", "2", "-i", "0.3", "-W", "2", "-M", "dont", "-s", "1450", "198.19.0.2"],
    );
    assert!(frag.contains(" 0% packet loss"), "{backend}: fragmented ping:\n{frag}");
}

/// The host stack: a TCP listener on the router's address, reached through linerate.
fn host_stack_answers_tcp(lab: &Lab, backend: &str) {
    let mut listener = lab.d.command("python3");
    listener.args(["-u", "-c", "import socket\ns=socket.socket()\ns.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\ns.bind(('198.18.0.1',7777))\ns.listen(1)\nprint('listening',flush=True)\nimport sys\nsys.stderr.write('listening\\n');sys.stderr.flush()\nc,_=s.accept()\nc.sendall(b'hello from the router\\n')\nc.close()"]);
    let mut server = start_until(listener, "listening");
    let tcp = in_a(lab, "bash", &["-c", "exec 3<>/dev/tcp/198.18.0.1/7777 && timeout 5 cat <&3"]);
    assert!(
        tcp.contains("hello from the router"),
        "{backend}: TCP to the router through its TAP: {tcp}"
    );
    if let Some(mut c) = server.terminate() {
        let _ = c.wait();
    }
}

/// What the control socket shows: neighbours, routes, interfaces, drops, `top`.
fn control_socket_shows(lab: &Lab, cfg: &std::path::Path, backend: &str) {
    let neigh = show(lab, cfg, "neighbours");
    let list = neigh.as_array().unwrap();
    for addr in ["198.18.0.2", "198.19.0.2", "2001:db8:b::2"] {
        assert!(
            list.iter().any(|n| n["address"] == addr && n["mac"].is_string()),
            "{backend}: neighbour {addr} missing: {neigh}"
        );
    }
    let routes = show(lab, cfg, "routes");
    assert!(
        routes
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["prefix"] == "198.19.0.0/24" && r["kind"] == "connected"),
        "{routes}"
    );
    let ifaces = show(lab, cfg, "interfaces");
    assert_eq!(ifaces[1]["mtu"], 1400);
    assert!(ifaces[0]["tap"].is_string());
    let drops = show(lab, cfg, "drops");
    assert!(drops["ttl_expired"].as_u64().unwrap() >= 1, "{drops}");
    assert!(drops["no_route"].as_u64().unwrap() >= 1, "{drops}");
    assert!(drops["too_big"].as_u64().unwrap() >= 1, "{drops}");
    let top = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(["top", "-n", "1", "-w", "0.3", "-c"])
        .arg(cfg)
        .output()
        .unwrap();
    let top_out = text(&top);
    assert!(
        top.status.success()
            && top_out.contains("lrd0")
            && top_out.contains("ipkts/s")
            && top_out.contains("q0"),
        "{top_out}"
    );
}

/// An ICMPv6 redirect from A, the first hop of D's host stack for 2001:db8:99::/64, naming
/// another neighbour, then a Router Advertisement from A: the router's routes stay as they
/// were (RFC 4861 8), and the slow path counts both. Before, D's kernel took them from the
/// TAP: its own traffic for that destination went to the address A named, and A's advert
/// gave it a default route (which `[router.kernel_routes]` mirrored into the FIB).
fn redirects_leave_the_host_stack_alone(lab: &Lab, cfg: &std::path::Path, backend: &str) {
    let tap = show(lab, cfg, "interfaces")[0]["tap"].as_str().unwrap().to_owned();
    let a_ll =
        text(&lab.a.ip(&["-6", "-o", "addr", "show", "dev", "lra0", "scope", "link"]).unwrap());
    let a_ll = a_ll
        .split_whitespace()
        .skip_while(|w| *w != "inet6")
        .nth(1)
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    lab.d.ip(&["-6", "route", "add", "2001:db8:99::/64", "via", &a_ll, "dev", &tap]).unwrap();
    let route = || text(&lab.d.ip(&["-6", "route", "get", "2001:db8:99::1"]).unwrap());
    assert!(route().contains(&a_ll), "{backend}: {}", route());
    let send = format!(
        "import socket,struct\ns=socket.socket(socket.AF_INET6,socket.SOCK_RAW,socket.IPPROTO_ICMPV6)\n\
         s.setsockopt(socket.IPPROTO_IPV6,socket.IPV6_UNICAST_HOPS,255)\ns.bind(('{a_ll}',0,0,socket.if_nametoindex('lra0')))\n\
         a=lambda x:socket.inet_pton(socket.AF_INET6,x)\n\
         s.sendto(struct.pack('!BBHI',137,0,0,0)+a('fe80::bad')+a('2001:db8:99::1')+bytes.fromhex('0201020000000bad'),('2001:db8:a::1',0,0,0))"
    );
    let out = lab.a.command("python3").args(["-c", &send]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        route().contains(&a_ll) && !route().contains("fe80::bad"),
        "{backend}: the host stack took the redirect: {}",
        route()
    );
    // A Router Advertisement from A to all nodes, default router for 1800 s with a prefix.
    let advert = format!(
        "import socket,struct\ns=socket.socket(socket.AF_INET6,socket.SOCK_RAW,socket.IPPROTO_ICMPV6)\n\
         i=socket.if_nametoindex('lra0')\ns.setsockopt(socket.IPPROTO_IPV6,socket.IPV6_MULTICAST_HOPS,255)\n\
         s.setsockopt(socket.IPPROTO_IPV6,socket.IPV6_MULTICAST_IF,i)\ns.bind(('{a_ll}',0,0,i))\n\
         p=struct.pack('!BBBBIII',3,4,64,0xc0,86400,14400,0)+socket.inet_pton(socket.AF_INET6,'2001:db8:66::')\n\
         s.sendto(struct.pack('!BBHBBHII',134,0,0,64,0,1800,0,0)+p,('ff02::1',0,0,i))"
    );
    let out = lab.a.command("python3").args(["-c", &advert]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    std::thread::sleep(Duration::from_millis(500));
    let routes = text(&lab.d.ip(&["-6", "route"]).unwrap());
    assert!(
        !routes.contains("proto ra") && !routes.contains("2001:db8:66::"),
        "{backend}: the host stack took A's advertisement:\n{routes}"
    );
    let drops = text(
        &Command::new(env!("CARGO_BIN_EXE_linerate"))
            .args(["show", "drops", "-c"])
            .arg(cfg)
            .output()
            .unwrap(),
    );
    for reason in ["redirect_ignored", "router_advert_ignored"] {
        assert!(
            drops.lines().any(|l| l.split_whitespace().eq([reason, "1"])),
            "{backend}: {reason}: {drops}"
        );
    }
}

/// Subnet broadcasts (198.18.0.255 on A's link, 198.19.0.255 across) are the router's, never
/// forwarded (RFC 2644): no ARP for them, no host unreachable back. Before, linerate routed
/// them as hosts of the connected prefix: it asked ARP for x.x.x.255 on the link and
/// answered A with host unreachable after three tries.
fn directed_broadcasts_are_not_forwarded(lab: &Lab, cfg: &std::path::Path, backend: &str) {
    let routes = show(lab, cfg, "routes");
    for b in ["198.18.0.255/32", "198.19.0.255/32"] {
        assert!(
            routes.as_array().unwrap().iter().any(|r| r["prefix"] == b && r["kind"] == "broadcast"),
            "{backend}: {b}: {routes}"
        );
    }
    let before = show(lab, cfg, "neighbours");
    for b in ["198.18.0.255", "198.19.0.255"] {
        let ping = in_a(lab, "ping", &["-b", "-c", "1", "-W", "4", b]);
        assert!(!ping.contains("Unreachable"), "{backend}: ping -b {b}: {ping}");
    }
    let after = show(lab, cfg, "neighbours");
    assert_eq!(
        before.as_array().unwrap().len(),
        after.as_array().unwrap().len(),
        "{backend}: a broadcast address was resolved: {after}"
    );
}

/// A DHCP client's DISCOVER (from 0.0.0.0:68 to 255.255.255.255:67, a raw frame from A)
/// reaches a UDP socket on port 67 in D, where a DHCP server on the router would listen.
/// Before, the classify pass dropped it as a martian source.
fn dhcp_discover_reaches_the_host_stack(lab: &Lab, backend: &str) {
    let mut listener = lab.d.command("python3");
    listener.args(["-u", "-c", "import socket,sys\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\ns.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\ns.bind(('',67))\ns.settimeout(5)\nsys.stderr.write('listening\\n');sys.stderr.flush()\nd,a=s.recvfrom(2048)\nprint('got',len(d),'from',a[0],flush=True)"]);
    listener.stdout(std::process::Stdio::piped());
    let mut server = start_until(listener, "listening");
    let send = "import socket,struct\ns=socket.socket(socket.AF_PACKET,socket.SOCK_RAW)\ns.bind(('lra0',0))\n\
        p=b'\\x01\\x01\\x06\\x00'+bytes(236)+b'\\x63\\x82\\x53\\x63\\x35\\x01\\x01\\xff'\n\
        u=struct.pack('!HHHH',68,67,8+len(p),0)+p\n\
        h=struct.pack('!BBHHHBBH4s4s',0x45,0,20+len(u),1,0,64,17,0,bytes(4),b'\\xff'*4)\n\
        c=sum(struct.unpack('!10H',h));c=(c>>16)+(c&0xffff);c=~(c+(c>>16))&0xffff\n\
        h=h[:10]+struct.pack('!H',c)+h[12:]\n\
        m=bytes.fromhex(open('/sys/class/net/lra0/address').read().strip().replace(':',''))\n\
        s.send(b'\\xff'*6+m+b'\\x08\\x00'+h+u)";
    let out = lab.a.command("python3").args(["-c", send]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let out = server.0.take().unwrap().wait_with_output().unwrap();
    let got = String::from_utf8_lossy(&out.stdout);
    assert!(
        got.contains("got 248 from 0.0.0.0"),
        "{backend}: no DISCOVER reached the host stack: {got} {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A link whose MTU is above linerate's (A's and the veth's 4000 bytes, set before linerate
/// starts): a 3000-byte ping does not fit a frame buffer and is dropped as `frame_too_long`,
/// not lost without a count. AF_PACKET only: native XDP on veth refuses that MTU.
#[test]
fn jumbo_frames_are_counted() {
    if !is_root() {
        lab::topology::skip_test("needs root");
        return;
    }
    let lab = build("rj");
    lab.a.ip(&["link", "set", "lra0", "mtu", "4000"]).unwrap();
    lab.d.ip(&["link", "set", "lrd0", "mtu", "4000"]).unwrap();
    let cfg = write_config(&lab, "af_packet", "");
    let mut linerate = lab.d.command(env!("CARGO_BIN_EXE_linerate"));
    linerate.args(["run", "-c"]).arg(&cfg).args(["--cpu", "1"]);
    let _dut = start_until(linerate, "forwarding with");
    let ping = in_a(
        &lab,
        "ping",
        &["-c", "2", "-i", "0.2", "-W", "1", "-M", "dont", "-s", "3000", "198.19.0.2"],
    );
    assert!(ping.contains("100% packet loss"), "{ping}");
    let ping = in_a(&lab, "ping", &["-c", "2", "-i", "0.2", "-W", "2", "-s", "1000", "198.19.0.2"]);
    assert!(ping.contains(" 0% packet loss"), "{ping}");
    let drops = text(
        &Command::new(env!("CARGO_BIN_EXE_linerate"))
            .args(["show", "drops", "-c"])
            .arg(&cfg)
            .output()
            .unwrap(),
    );
    assert!(drops.lines().any(|l| l.split_whitespace().eq(["frame_too_long", "2"])), "{drops}");
}

#[test]
fn router_with_af_packet() {
    router("af_packet", "r");
}

#[test]
fn router_with_af_xdp() {
    router("af_xdp", "rx");
}
