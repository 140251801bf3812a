#!/usr/bin/env python3
"""Writes starting corpora for the targets that need structure to get anywhere:
fuzz_pipeline (conversations of valid frames for each of its rule sets), fuzz_rules (rule
files of the repository, cut into sets of a few rules), fuzz_classes (rule sets and keys
from a fixed generator), fuzz_ndisc, fuzz_routefile, fuzz_pcap and fuzz_ha_decode. Usage: fuzz/seeds.py [DIR] (writes DIR/<target>/seed-*, DIR defaulting to
fuzz/corpus, where the fuzzer's own finds stay beside them)."""
import glob
import hashlib
import hmac
import os
import random
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "corpus")
MAC = [bytes([2, 0, 0, 0, 0, 1]), bytes([2, 0, 0, 0, 0, 2])]
PEER = [bytes([2, 0, 0, 0, 0, 0xA2]), bytes([2, 0, 0, 0, 0, 0xB2])]


def v4(a):
    return bytes(int(x) for x in a.split("."))


def v6(x, host):
    return bytes.fromhex(f"20010db8{x:04x}" + "0" * 12 + f"{host:08x}")


def ipv4(src, dst, proto, payload, ttl=64, frag=0, ident=1, opts=b""):
    hlen = 20 + len(opts)
    h = struct.pack("!BBHHHBBH4s4s", 0x40 | hlen // 4, 0, hlen + len(payload), ident, frag, ttl, proto, 0, v4(src), v4(dst))
    return h + opts + payload


def ipv6(src, dst, nh, payload, hop=64):
    return struct.pack("!IHBB", 6 << 28, len(payload), nh, hop) + src + dst + payload


def eth(port, ethertype, l3, vlan=None):
    tag = struct.pack("!HH", 0x8100, vlan) if vlan is not None else b""
    return MAC[port] + PEER[port] + tag + struct.pack("!H", ethertype) + l3


def udp(sp, dp, data=b"x" * 18):
    return struct.pack("!HHHH", sp, dp, 8 + len(data), 0) + data


def tcp(sp, dp, flags, seq=1000, ack=0, opts=b""):
    return struct.pack("!HHIIBBHHH", sp, dp, seq, ack, (20 + len(opts)) // 4 << 4, flags, 65535, 0, 0) + opts


def icmp(t, code=0, rest=b"\x00\x07\x00\x01", data=b"ping"):
    return bytes([t, code, 0, 0]) + rest + data


def frame(f, control=6):
    """One frame of a fuzz_pipeline input, received on the port its destination MAC names;
    `control` 6: the MAC kept and the checksums fixed by the target."""
    port = 0 if f[:6] == MAC[0] else 1
    return bytes([control | port]) + struct.pack("!H", len(f)) + f


A, FAR, B = "198.18.0.2", "10.1.1.1", "198.19.0.1"
A6, FAR6, R6 = v6(0xA, 2), v6(0xF, 1), v6(0xA, 1)
NAT64_B = bytes.fromhex("0064ff9b0000000000000000c6130002")  # 198.19.0.2 in 64:ff9b::/96
NAT46_B = bytes.fromhex("20010db8000f000000000000" "0a400005")  # 10.64.0.5 in 2001:db8:f::/96
ARP_REQ = struct.pack("!HHBBH", 1, 0x0800, 6, 4, 1) + PEER[0] + v4(A) + b"\0" * 6 + v4("198.18.0.1")
NS = bytes([135, 0, 0, 0, 0, 0, 0, 0]) + R6 + bytes([1, 1]) + PEER[0]
CONVERSATIONS = {
    "udp": [eth(0, 0x800, ipv4(A, FAR, 17, udp(40000, 53))), eth(1, 0x800, ipv4(FAR, A, 17, udp(53, 40000)))],
    "tcp": [
        eth(0, 0x800, ipv4(A, FAR, 6, tcp(40000, 80, 0x02, opts=bytes([2, 4, 5, 0xB4])))),
        eth(1, 0x800, ipv4(FAR, B, 6, tcp(80, 40000, 0x12, seq=9000, ack=1001))),
        eth(0, 0x800, ipv4(A, FAR, 6, tcp(40000, 80, 0x10, seq=1001, ack=9001))),
    ],
    "icmp": [eth(0, 0x800, ipv4(A, FAR, 1, icmp(8))), eth(1, 0x800, ipv4(FAR, B, 1, icmp(0)))],
    "ttl": [eth(0, 0x800, ipv4(A, FAR, 17, udp(1, 2), ttl=1))],
    "options": [eth(0, 0x800, ipv4(A, FAR, 1, icmp(8), opts=bytes([7, 7, 4, 0, 0, 0, 0, 0])))],
    "fragments": [
        eth(0, 0x800, ipv4(A, FAR, 17, udp(1000, 2000, b"a" * 24)[:16], frag=0x2000, ident=9)),
        eth(0, 0x800, ipv4(A, FAR, 17, b"b" * 16, frag=2, ident=9)),
    ],
    "big": [eth(0, 0x800, ipv4(A, FAR, 17, udp(1000, 2000, b"z" * 1450)))],
    "vlan": [eth(0, 0x800, ipv4("203.0.114.2", FAR, 17, udp(5, 6)), vlan=10)],
    "arp": [eth(0, 0x806, ARP_REQ)],
    "rdr": [eth(1, 0x800, ipv4(FAR, B, 6, tcp(5555, 8080, 0x02)))],
    "udp6": [eth(0, 0x86DD, ipv6(A6, FAR6, 17, udp(40000, 53))), eth(1, 0x86DD, ipv6(FAR6, A6, 17, udp(53, 40000)))],
    "ns": [eth(0, 0x86DD, ipv6(A6, bytes.fromhex("ff0200000000000000000001ff000001"), 58, NS, hop=255))],
    "ping6": [eth(0, 0x86DD, ipv6(A6, FAR6, 58, icmp(128)))],
    # NAT66 (rule set 1) and NAT64 by af-to (rule set 3): the replies' ports are guesses.
    "nat66": [eth(0, 0x86DD, ipv6(A6, FAR6, 17, udp(40000, 53))), eth(1, 0x86DD, ipv6(FAR6, v6(0xB, 1), 17, udp(53, 50001)))],
    "nat64": [
        eth(0, 0x86DD, ipv6(A6, NAT64_B, 17, udp(40000, 53))),
        eth(1, 0x800, ipv4("198.19.0.2", B, 17, udp(53, 50001))),
        eth(1, 0x800, ipv4("198.19.0.2", B, 1, icmp(3, 3, b"\0\0\0\0", ipv4(B, "198.19.0.2", 17, udp(50001, 53))))),
    ],
    # NAT46 by af-to inet6 (rule set 3): 10.64.0.5 is 2001:db8:f::a40:5.
    "nat46": [
        eth(0, 0x800, ipv4(A, "10.64.0.5", 17, udp(40000, 53))),
        eth(1, 0x86DD, ipv6(NAT46_B, v6(0xB, 1), 17, udp(53, 50001))),
        eth(0, 0x800, ipv4(A, "10.64.0.5", 1, icmp(8, 0, b"\x12\x34\x00\x01"))),
    ],
    "ping64": [eth(0, 0x86DD, ipv6(A6, NAT64_B, 58, icmp(128))), eth(1, 0x800, ipv4("198.19.0.2", B, 1, icmp(0, 0, b"\xc3\x51\x00\x01")))],
}


def write(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"seed-{name}"), "wb") as f:
        f.write(data)


for choice in range(4):
    for name, frames in CONVERSATIONS.items():
        write("fuzz_pipeline", f"{choice}-{name}", bytes([choice]) + b"".join(frame(f) for f in frames))

# Reloads in the middle of a conversation (control bit 3 before its second frame).
for choice in (1, 2, 3):
    for name in ("tcp", "udp", "icmp", "rdr"):
        body = b"".join(frame(f, 6 | (8 if i == 1 else 0)) for i, f in enumerate(CONVERSATIONS[name]))
        write("fuzz_pipeline", f"{choice}-reload-{name}", bytes([choice]) + body)

root = os.path.dirname(HERE)
files = glob.glob(os.path.join(root, "examples", "*.conf")) + glob.glob(os.path.join(root, "crates", "fw", "tests", "fixtures", "**", "*"), recursive=True)
n = 0
for path in sorted(files):
    if not os.path.isfile(path):
        continue
    lines = [l for l in open(path, errors="replace").read().splitlines() if l.strip() and not l.lstrip().startswith("#")]
    for i in range(0, len(lines), 4):
        write("fuzz_rules", f"{n}", "\n".join(lines[i : i + 4]).encode() + b"\n")
        n += 1


# Neighbour discovery: the solicitation above and an advertisement, as IPv6 packets.
NA = bytes([136, 0, 0, 0, 0x60, 0, 0, 0]) + A6 + bytes([2, 1]) + PEER[0]
RS = bytes([133, 0, 0, 0, 0, 0, 0, 0, 1, 1]) + PEER[0]
ALL = bytes.fromhex("ff020000000000000000000000000001")
for name, pkt in [("ns", ipv6(A6, R6, 58, NS, hop=255)), ("na", ipv6(A6, R6, 58, NA, hop=255)), ("rs", ipv6(A6, ALL, 58, RS, hop=255))]:
    write("fuzz_ndisc", name, pkt)
# The route file of the examples, and the golden pcaps.
write("fuzz_routefile", "example", open(os.path.join(root, "examples", "routes.txt"), "rb").read())
for path in glob.glob(os.path.join(root, "crates", "*", "tests", "golden", "*.pcap")):
    write("fuzz_pcap", os.path.basename(path), open(path, "rb").read())
# Rule sets of fuzz_classes: an options byte, 12-byte rules, 0xff, 8-byte keys; drawn from a
# fixed generator, crowded (many rules per base) or sparse, both node budgets.
rng = random.Random(17)
for n, (rules, opts) in enumerate([(4, 0), (24, 1), (60, 2), (120, 3), (160, 4), (40, 5)]):
    crowd = n % 2 == 1
    body = b"".join(bytes([rng.randrange(0xff)]) + bytes((rng.randrange(256) & (0x30 if crowd and i in (0, 3) else 0xff)) for i in range(11)) for _ in range(rules))
    keys = bytes(rng.randrange(256) for _ in range(8 * 200))
    write("fuzz_classes", f"{n}", bytes([opts]) + body + b"\xff" + keys)
# State sync datagrams (docs/ha.md): the crate's two fixtures (an IPv4 TCP INS, translated,
# and an IPv6 UDP INS) and one of every other message, each also tagged with fuzz_ha_decode's
# key, so that the fuzzer starts past the header and the tag.
def ha_datagram(messages, seq, key=None):
    body = b"".join(struct.pack("!BBH", kind, 0, len(m)) + m for kind, m in messages)
    flags, tag = (1, 32) if key else (0, 0)
    d = struct.pack("!IBBHHHIQ", 0x4C524841, 1, flags, len(messages), 24 + len(body) + tag, 0, 0x0A0B0C0D, seq) + body
    return d + (hmac.new(key, d, hashlib.sha256).digest() if key else b"")


def ha_peer(seqlo, seqhi, max_win, wscale, state):
    return struct.pack("!IIIHBB", seqlo, seqhi, 0, max_win, wscale, state)


def ha_pf_state(flags, tag, name):
    return struct.pack("!BBH", flags, 0, tag) + name.ljust(16, b"\0")


HA_ID = struct.pack("!IQ", 0x0A0B0C0D, 1)
HA_TCP4 = (HA_ID + struct.pack("!BBBBQIIHHHH", 4, 6, 2, 2, 0x0123456789ABCDEF, 7, 86400, 40000, 443, 61000, 0)
           + ha_peer(1000, 66535, 64240, 0x87, 4) + ha_peer(5000, 70000, 65160, 0x87, 4) + struct.pack("!QQQQ", 10, 8, 1200, 6400)
           + ha_pf_state(3, 0, b"") + ha_pf_state(1, 3, b"wan0") + v4("192.0.2.10") + v4("198.51.100.20") + v4("203.0.113.5"))
HA_UDP6 = (struct.pack("!IQBBBBQIIHHHH", 0x0A0B0C0D, 2, 6, 17, 8, 0, 0x0123456789ABCDEF, 12, 60, 5353, 53, 0, 0)
           + ha_peer(0, 0, 0, 0, 2) * 2 + struct.pack("!QQQQ", 3, 3, 210, 450) + ha_pf_state(1, 0, b"eth1") + b"\0" * 20
           + v6(0, 1) + v6(1, 0x53))
HA_UPD_C = HA_ID + struct.pack("!IBBH", 60, 2, 1, 0) + ha_peer(1500, 70000, 64240, 0x87, 4) + ha_peer(5000, 71000, 65160, 0x87, 4)
HA_OTHERS = [(3, HA_UPD_C), (4, HA_ID), (5, HA_ID[:4]), (6, b"\0" * 12), (6, HA_ID), (7, bytes([1, 0, 0, 0])), (7, bytes([2, 0, 0, 0])), (8, HA_ID), (0x42, b"later")]
HA_KEY = b"fuzz_ha_decode's key, 32 bytes!!"
for name, msgs in [("tcp4", [(1, HA_TCP4)]), ("udp6", [(1, HA_UDP6), (2, HA_UDP6)]), ("others", HA_OTHERS)]:
    write("fuzz_ha_decode", name, ha_datagram(msgs, 42))
    write("fuzz_ha_decode", f"{name}-keyed", ha_datagram(msgs, 43, HA_KEY))
print("seeds written under", OUT)
