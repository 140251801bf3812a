#!/usr/bin/env python3
"""Crafted frames for netns_fastpath.rs's differential test.

send IFACE SRC_MAC DST_MAC ROUNDS: sends every frame of FRAMES, ROUNDS times over, from IFACE.
recv IFACE SECONDS: prints the frames from A's addresses (or translated to the router's)
that reach IFACE (hex, one a line)
until SECONDS pass without one.
"""
import socket
import struct
import sys
import time

A4, B4 = bytes([198, 18, 0, 2]), bytes([198, 19, 0, 2])
# The router's address towards B: A's source once a `nat` rule translated it.
D1_4 = bytes([198, 19, 0, 1])
A6 = bytes.fromhex("20010db8000a0000000000000000" + "0002")
B6 = bytes.fromhex("20010db8000b0000000000000000" + "0002")


def csum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def ipv4(proto, l4, ttl=64, options=b"", frag=0, bad_sum=False):
    ihl = 5 + len(options) // 4
    hdr = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, 0, ihl * 4 + len(l4), 7, frag, ttl, proto, 0, A4, B4) + options
    s = csum(hdr) ^ (1 if bad_sum else 0)
    return b"\x08\x00", hdr[:10] + struct.pack("!H", s) + hdr[12:] + l4


def l4_sum(proto, l4, src, dst):
    if len(src) == 4:
        pseudo = src + dst + struct.pack("!BBH", 0, proto, len(l4))
    else:
        pseudo = src + dst + struct.pack("!IxxxB", len(l4), proto)
    return csum(pseudo + l4)


def udp(sport, dport, payload, src=A4, dst=B4, zero_sum=False):
    u = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    s = 0 if zero_sum else (l4_sum(17, u, src, dst) or 0xFFFF)
    return u[:6] + struct.pack("!H", s) + u[8:]


def tcp(sport, dport, flags, src=A4, dst=B4):
    t = struct.pack("!HHIIBBHHH", sport, dport, 1000, 2000, 5 << 4, flags, 65535, 0, 0)
    s = l4_sum(6, t, src, dst)
    return t[:16] + struct.pack("!H", s) + t[18:]


def ipv6(nh, l4, hops=64):
    return b"\x86\xdd", struct.pack("!IHBB16s16s", 6 << 28, len(l4), nh, hops, A6, B6) + l4


def icmp_echo():
    m = struct.pack("!BBHHH", 8, 0, 0, 77, 1) + b"fastpath"
    return m[:2] + struct.pack("!H", csum(m)) + m[4:]


FRAMES = [
    ("udp flow %d" % i, ipv4(17, udp(1000 + i, 9, b"x" * 18))) for i in range(4)
] + [
    ("udp without checksum", ipv4(17, udp(1100, 9, b"y" * 18, zero_sum=True))),
    ("tcp ack", ipv4(6, tcp(2000, 80, 0x10))),
    ("tcp syn", ipv4(6, tcp(2001, 80, 0x02))),
    ("tcp fin", ipv4(6, tcp(2002, 80, 0x11))),
    ("ip options", ipv4(17, udp(1200, 9, b"o" * 18), options=b"\x01\x01\x01\x00")),
    ("fragment", ipv4(17, udp(1300, 9, b"f" * 18), frag=0x2000)),
    ("ttl 1", ipv4(17, udp(1400, 9, b"t" * 18), ttl=1)),
    ("bad ip checksum", ipv4(17, udp(1500, 9, b"b" * 18), bad_sum=True)),
    ("icmp echo", ipv4(1, icmp_echo())),
    ("udp6", ipv6(17, udp(1600, 9, b"6" * 18, src=A6, dst=B6))),
    ("tcp6 ack", ipv6(6, tcp(2600, 80, 0x10, src=A6, dst=B6))),
    ("hop limit 1", ipv6(17, udp(1700, 9, b"h" * 18, src=A6, dst=B6), hops=1)),
]


def mac(s):
    return bytes(int(x, 16) for x in s.split(":"))


def send(iface, src_mac, dst_mac, rounds):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((iface, 0))
    other = bytes([2, 0, 0, 0, 0x77, 0x77])
    for r in range(rounds):
        for _, (ethertype, body) in FRAMES:
            s.send(mac(dst_mac) + mac(src_mac) + ethertype + body)
        # A frame of the first flow to another station's MAC: never the router's to forward.
        s.send(other + mac(src_mac) + FRAMES[0][1][0] + FRAMES[0][1][1])
        time.sleep(0.005)


def recv(iface, seconds):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
    s.bind((iface, 0))
    print("ready", file=sys.stderr, flush=True)
    s.settimeout(10)
    out = []
    try:
        while True:
            f = s.recv(4096)
            s.settimeout(seconds)
            from_a = (f[12:14] == b"\x08\x00" and f[26:30] in (A4, D1_4)) or (f[12:14] == b"\x86\xdd" and f[22:38] == A6)
            if from_a:
                out.append(f.hex())
    except socket.timeout:
        pass
    for line in sorted(out):
        print(line)


if __name__ == "__main__":
    if sys.argv[1] == "send":
        send(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    else:
        recv(sys.argv[2], float(sys.argv[3]))
