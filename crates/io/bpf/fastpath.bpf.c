// SPDX-License-Identifier: MIT OR Apache-2.0
//
// linerate's XDP program: the in-kernel fast path for flows the pipeline has decided, and the
// steering of every other frame to the AF_XDP sockets of linerate's workers.
//
// A frame whose flow has an entry in `flows4` or `flows6` (written by linerate after its pipeline forwarded
// the flow: routed, filtered, neighbour resolved) is rewritten as the pipeline would rewrite it
// (MACs, TTL or hop limit with the IPv4 checksum updated, RFC 1624; for a translated IPv4
// flow its addresses and ports, with both checksums updated) and redirected to its output
// through `tx_ports`, without waking linerate. An entry of a flow the pipeline keeps state
// or a translation for lives only until its `expires` time: then the flow's frames go to the
// pipeline again, which refreshes its state and writes a new entry (or drops them, if the
// state is gone and the rules block them). Everything else goes to the socket of
// its queue, as before: a flow's first packets, TCP SYN/FIN/RST, fragments, IP options,
// TTL <= 1, ICMP, 802.1Q frames, bad IPv4 checksums, traffic for the router, frames longer
// than the output's MTU, outputs that cannot take redirected frames, and any entry written
// before the last change of routes, neighbours or rules (`gen` below).
//
// One program serves every interface linerate owns: a socket's XSKMAP slot is its
// interface's slot (`if_slots`) times MAX_QUEUES plus its queue.
//
// Two more programs serve the skb paths. `lr_fast_tc`, at tc ingress (tcx) of the same
// interfaces, forwards the decided flows' skbs, whose checksum and segmentation offloads
// stay on. On an AF_XDP port it gets what XDP cannot rewrite: frames a sender on this host
// left with a partial checksum (CHECKSUM_PARTIAL, TCP and UDP from local containers and
// VMs), which XDP passes to the kernel. On an AF_PACKET port (no XDP at all: XDP on a veth
// turns its peer's TSO off and copies every skb) it gets every frame, and `lr_fast_sock`, the
// filter of linerate's packet sockets there, keeps the frames it forwards from the pipeline.
// Only to outputs that take XDP redirects too (whose receiving end has NAPI): to one
// without, the skbs would pile into the receiver's backlog, worked off by ksoftirqd below
// the input's NAPI thread, and forwarding would starve under overload.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/pkt_cls.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define MAX_QUEUES 256
#define MAX_IFACES 64

// Keep in step with crates/io/src/xdp/fastpath.rs (FlowKey4, FlowKey6, FlowEntry, Settings,
// PortCounts). IPv4 flows have a key of their own: the hash of 20 bytes costs less than of 44.
struct flow_key4 {
	__u32 ifindex; // input interface
	__u32 src;
	__u32 dst;
	__u16 sport; // network order
	__u16 dport;
	__u8 proto; // IPPROTO_UDP or IPPROTO_TCP
	__u8 pad[3];
};

struct flow_key6 {
	__u32 ifindex;
	__u8 proto;
	__u8 pad1;
	__u16 sport;
	__u16 dport;
	__u16 pad2;
	__u32 src[4];
	__u32 dst[4];
};

struct flow_entry {
	__u8 dst_mac[6];
	__u8 src_mac[6];
	__u32 out_ifindex;
	__u32 gen;     // the settings' gen when linerate decided the flow
	__u16 mtu;     // longest IP packet the output takes
	__u16 in_slot; // the interfaces' slots, for port_stats
	__u16 out_slot;
	__u8 flags;    // ENTRY_*
	__u8 pad;
	__u32 pad2;
	// Written here only, without atomics: the receive hash keeps a flow on one queue, so on
	// one CPU (a flow moved by a changed indirection table may lose a few counts).
	__u64 packets;
	__u64 bytes;
	__u64 last_jiffies; // bpf_jiffies64() at the flow's last frame
	__u8 in_mac[6];     // the input's MAC: frames to another station are not ours
	__u16 pad3;
	__u64 expires;      // ENTRY_EXPIRES: bpf_ktime_get_coarse_ns() from which it is a miss
	// ENTRY_NAT (IPv4): the addresses and ports the frame leaves with, network order.
	__u32 nat_src;
	__u32 nat_dst;
	__u16 nat_sport;
	__u16 nat_dport;
	__u32 pad4;
};

// The entry is valid until `expires` only (a state or translation the pipeline refreshes).
#define ENTRY_EXPIRES 1
// The frame's addresses and ports are rewritten to the entry's `nat_*` (IPv4).
#define ENTRY_NAT 2

struct settings {
	__u32 gen;         // entries of another gen are misses
	__u32 fail_closed; // an IP frame no socket takes is dropped, not passed to the kernel
};

// By interface slot: 1 where `lr_fast_tc` runs at tc ingress.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, MAX_IFACES);
} tc_slots SEC(".maps");

struct port_counts {
	__u64 rx_packets, rx_bytes, tx_packets, tx_bytes;
	__u64 unsteered; // fail-closed drops: an IP frame on a queue without a socket
	__u64 handoff_lost; // taken from the pipeline by lr_fast_sock, its entry gone (or translated) at tc
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct flow_key4);
	__type(value, struct flow_entry);
	__uint(max_entries, 65536); // set by linerate at load
} flows4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct flow_key6);
	__type(value, struct flow_entry);
	__uint(max_entries, 65536);
} flows6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__type(key, __u32);
	__type(value, struct bpf_devmap_val); // ifindex, no program
	__uint(max_entries, MAX_IFACES);
} tx_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, MAX_IFACES * MAX_QUEUES);
} xsks SEC(".maps");

// ifindex -> the interface's slot (its XSKMAP range and its port_stats entry): for ifindex
// below SMALL_IFINDEX an array (slot + 1, 0 for none), above it a hash.
#define SMALL_IFINDEX 1024
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, SMALL_IFINDEX);
} if_slots_small SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, MAX_IFACES);
} if_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct settings);
	__uint(max_entries, 1);
} config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct port_counts);
	__uint(max_entries, MAX_IFACES);
} port_stats SEC(".maps");

static __always_inline struct port_counts *counts_of(__u32 port)
{
	return bpf_map_lookup_elem(&port_stats, &port);
}

// The slot of interface `ifindex` (its XSKMAP range and port_stats entry), -1 if it has none.
static __always_inline int slot_of(__u32 ifindex)
{
	if (ifindex < SMALL_IFINDEX) {
		__u32 *s = bpf_map_lookup_elem(&if_slots_small, &ifindex);
		return s && *s ? (int)(*s - 1) : -1;
	}
	__u32 *s = bpf_map_lookup_elem(&if_slots, &ifindex);
	return s ? (int)*s : -1;
}

// To the worker's socket of this queue; without one, the kernel (or, fail-closed, a counted
// drop for IP frames, which the kernel would route unfiltered).
static __always_inline int steer(struct xdp_md *ctx, struct settings *cfg, int ip)
{
	int found = slot_of(ctx->ingress_ifindex);
	if (found < 0)
		return XDP_PASS;
	__u32 slot = found;
	int closed = ip && cfg && cfg->fail_closed;
	__u32 key = slot * MAX_QUEUES + (ctx->rx_queue_index % MAX_QUEUES);
	int act = bpf_redirect_map(&xsks, key, closed ? XDP_DROP : XDP_PASS);
	if (act == XDP_DROP) {
		struct port_counts *c = counts_of(slot);
		if (c)
			c->unsteered++;
	}
	return act;
}

// RFC 1071 over the 20-byte IPv4 header: valid when the folded sum is 0xffff.
static __always_inline int ipv4_csum_ok(struct iphdr *ip)
{
	__u16 *w = (__u16 *)ip;
	__u32 sum = 0;
#pragma unroll
	for (int i = 0; i < 10; i++)
		sum += w[i];
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return sum == 0xffff;
}

// TCP segments that change a connection's state go to the pipeline.
static __always_inline int tcp_plain(struct tcphdr *t)
{
	return !(t->syn || t->fin || t->rst);
}

static __always_inline __u32 fold(__u32 s)
{
	s = (s & 0xffff) + (s >> 16);
	return (s & 0xffff) + (s >> 16);
}

// The 16-bit words of an address, summed (RFC 1071).
static __always_inline __u32 addr_sum(__u32 *a, int words32)
{
	__u32 s = 0;
#pragma unroll
	for (int i = 0; i < 4; i++) {
		if (i < words32)
			s += bpf_ntohs(a[i] >> 16) + bpf_ntohs(a[i] & 0xffff);
	}
	return s;
}

// The L4 ports at `l4` (UDP or TCP) into the key, or -1 if the header is not all there or
// the segment is one the pipeline must see; 1 if its checksum was left partial by a sender
// on this host (CHECKSUM_PARTIAL: the field holds the folded pseudo-header sum, `pseudo`):
// XDP cannot rewrite such a frame as it is (the pipeline finishes the checksum, as a NIC
// would, crates/io/src/offload; the tc program forwards the skb, whose checksum stays partial).
static __always_inline int read_ports(void *l4, void *end, __u8 proto, __u16 *sport, __u16 *dport, __u32 pseudo)
{
	__u16 check;
	if (proto == IPPROTO_UDP) {
		struct udphdr *u = l4;
		if ((void *)(u + 1) > end)
			return -1;
		*sport = u->source;
		*dport = u->dest;
		check = u->check;
		// Read here: a field address merged from two branches (offset 6 or 16) is
		// variable pointer arithmetic, which the verifier refuses without CAP_PERFMON.
		asm volatile("" : "+r"(check));
	} else if (proto == IPPROTO_TCP) {
		struct tcphdr *t = l4;
		if ((void *)(t + 1) > end || !tcp_plain(t))
			return -1;
		*sport = t->source;
		*dport = t->dest;
		check = t->check;
		asm volatile("" : "+r"(check));
	} else {
		return -1;
	}
	return bpf_ntohs(check) == fold(pseudo) ? 1 : 0;
}

// Lengths are compared as numbers (`room`: the frame's bytes from the IP header on, from
// bpf_xdp_get_buff_len), never as packet pointers moved by a variable offset: the verifier
// allows that only to loaders with CAP_PERFMON, which linerate does not ask for.

// The entry of an IPv4 frame the fast path may take, its IP length in *len; NULL otherwise.
static __always_inline struct flow_entry *entry_v4(__u32 ifindex, struct iphdr *ip, void *end, __u32 room, __u32 *len, int *partial)
{
	if ((void *)(ip + 1) > end || ip->ihl != 5 || ip->version != 4)
		return NULL;
	// Fragments (MF or an offset) and TTL <= 1 (an ICMP error to send) are the pipeline's.
	if ((ip->frag_off & bpf_htons(0x3fff)) || ip->ttl <= 1)
		return NULL;
	__u32 tot = bpf_ntohs(ip->tot_len);
	if (tot < sizeof(*ip) || tot > room || !ipv4_csum_ok(ip))
		return NULL;
	struct flow_key4 k = {.ifindex = ifindex, .src = ip->saddr, .dst = ip->daddr, .proto = ip->protocol};
	__u32 pseudo = addr_sum(&ip->saddr, 1) + addr_sum(&ip->daddr, 1) + ip->protocol + tot - sizeof(*ip);
	*partial = read_ports(ip + 1, end, ip->protocol, &k.sport, &k.dport, pseudo);
	if (*partial < 0)
		return NULL;
	*len = tot;
	return bpf_map_lookup_elem(&flows4, &k);
}

static __always_inline struct flow_entry *entry_v6(__u32 ifindex, struct ipv6hdr *ip, void *end, __u32 room, __u32 *len, int *partial)
{
	if ((void *)(ip + 1) > end || ip->version != 6 || ip->hop_limit <= 1)
		return NULL;
	__u32 tot = bpf_ntohs(ip->payload_len) + sizeof(*ip);
	if (tot > room)
		return NULL;
	// Extension headers: not UDP or TCP here, so the pipeline's.
	struct flow_key6 k = {.ifindex = ifindex, .proto = ip->nexthdr};
	__builtin_memcpy(k.src, &ip->saddr, 16);
	__builtin_memcpy(k.dst, &ip->daddr, 16);
	__u32 pseudo = addr_sum(k.src, 4) + addr_sum(k.dst, 4) + ip->nexthdr + tot - sizeof(*ip);
	*partial = read_ports(ip + 1, end, ip->nexthdr, &k.sport, &k.dport, pseudo);
	if (*partial < 0)
		return NULL;
	*len = tot;
	return bpf_map_lookup_elem(&flows6, &k);
}

static __always_inline int same_mac(const __u8 *a, const __u8 *b)
{
	return *(const __u32 *)a == *(const __u32 *)b && *(const __u16 *)(a + 4) == *(const __u16 *)(b + 4);
}

// What the pipeline does to a forwarded packet: TTL or hop limit down by one (the IPv4
// checksum adjusted incrementally, RFC 1624 eqn. 3), the output's MACs.
static __always_inline void rewrite(struct ethhdr *eth, void *l3, int v4, struct flow_entry *e)
{
	if (v4) {
		struct iphdr *ip = l3;
		__u16 old = ((__u16)ip->ttl << 8) | ip->protocol;
		ip->ttl--;
		// HC' = ~(~HC + ~m + m'): the same checksum the pipeline's update writes.
		__u32 sum = (~bpf_ntohs(ip->check) & 0xffff) + (~old & 0xffff) + (__u16)(old - 0x100);
		sum = (sum & 0xffff) + (sum >> 16);
		sum = (sum & 0xffff) + (sum >> 16);
		ip->check = bpf_htons(~sum & 0xffff);
	} else {
		((struct ipv6hdr *)l3)->hop_limit--;
	}
	__builtin_memcpy(eth->h_dest, e->dst_mac, 6);
	__builtin_memcpy(eth->h_source, e->src_mac, 6);
}

// Counts `packets` frames of `bytes` on the entry's interfaces, and on the entry the packets
// and their `ip_bytes` (what the pipeline's rule counters count).
static __always_inline void count(struct flow_entry *e, __u32 packets, __u64 bytes, __u64 ip_bytes)
{
	e->packets += packets;
	e->bytes += ip_bytes;
	e->last_jiffies = bpf_jiffies64();
	struct port_counts *c = counts_of(e->in_slot);
	if (c) {
		c->rx_packets += packets;
		c->rx_bytes += bytes;
	}
	c = counts_of(e->out_slot);
	if (c) {
		c->tx_packets += packets;
		c->tx_bytes += bytes;
	}
}

// Whether `e` decides a frame of `len` IP bytes to `eth`'s destination now: of the current
// generation, not expired, for the input's MAC, within the output's MTU.
static __always_inline int valid(struct flow_entry *e, struct settings *cfg, struct ethhdr *eth, __u32 len)
{
	if (!e || !cfg || e->gen != cfg->gen || len > e->mtu || !same_mac(eth->h_dest, e->in_mac))
		return 0;
	return !(e->flags & ENTRY_EXPIRES) || bpf_ktime_get_coarse_ns() < e->expires;
}

// Adds to a one's complement sum the change of a 32-bit field from `old` to `new` (RFC 1624
// eqn. 3: ~m + m' per 16-bit word; byte order does not matter to the sum).
static __always_inline __u32 csum_change32(__u32 sum, __u32 old, __u32 new)
{
	return sum + (~old & 0xffff) + (~old >> 16) + (new & 0xffff) + (new >> 16);
}

static __always_inline __u16 csum_apply(__u16 check, __u32 change)
{
	return ~fold((~check & 0xffff) + change) & 0xffff;
}

// A translated IPv4 flow: its addresses and ports as the pipeline's translation left them,
// the header checksum and the UDP or TCP checksum updated incrementally (a UDP checksum of 0,
// none, stays 0; a computed 0 is sent as 0xffff, RFC 768). -1 if the header is not all there.
static __always_inline int translate_v4(struct iphdr *ip, void *end, struct flow_entry *e)
{
	__u32 addrs = csum_change32(csum_change32(0, ip->saddr, e->nat_src), ip->daddr, e->nat_dst);
	void *l4 = ip + 1;
	if (ip->protocol == IPPROTO_UDP) {
		struct udphdr *u = l4;
		if ((void *)(u + 1) > end)
			return -1;
		__u32 ports = csum_change32(0, ((__u32)u->dest << 16) | u->source, ((__u32)e->nat_dport << 16) | e->nat_sport);
		if (u->check) {
			__u16 c = csum_apply(u->check, addrs + ports);
			u->check = c ? c : 0xffff;
		}
		u->source = e->nat_sport;
		u->dest = e->nat_dport;
	} else {
		struct tcphdr *t = l4;
		if ((void *)(t + 1) > end)
			return -1;
		__u32 ports = csum_change32(0, ((__u32)t->dest << 16) | t->source, ((__u32)e->nat_dport << 16) | e->nat_sport);
		t->check = csum_apply(t->check, addrs + ports);
		t->source = e->nat_sport;
		t->dest = e->nat_dport;
	}
	ip->check = csum_apply(ip->check, addrs);
	ip->saddr = e->nat_src;
	ip->daddr = e->nat_dst;
	return 0;
}

SEC("xdp")
int lr_fast(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > end)
		return XDP_PASS;
	__u16 proto = eth->h_proto;
	__u32 zero = 0;
	struct settings *cfg = bpf_map_lookup_elem(&config, &zero);
	int v4 = proto == bpf_htons(ETH_P_IP);
	if (!v4 && proto != bpf_htons(ETH_P_IPV6)) {
		int tagged = proto == bpf_htons(ETH_P_8021Q) || proto == bpf_htons(ETH_P_8021AD);
		if (tagged || proto == bpf_htons(ETH_P_ARP))
			return steer(ctx, cfg, tagged);
		return XDP_PASS; // LLDP, STP, ...: the kernel's
	}
	if (!cfg || cfg->gen == 0)
		return steer(ctx, cfg, 1);
	__u32 len = 0;
	int partial = 0;
	void *l3 = eth + 1;
	__u64 frame = bpf_xdp_get_buff_len(ctx);
	__u32 room = frame - sizeof(*eth);
	__u32 ifindex = ctx->ingress_ifindex;
	struct flow_entry *e = v4 ? entry_v4(ifindex, l3, end, room, &len, &partial) : entry_v6(ifindex, l3, end, room, &len, &partial);
	if (!valid(e, cfg, eth, len))
		return steer(ctx, cfg, 1);
	if (partial) {
		// To the kernel, whose skb keeps the checksum partial, where the tc program
		// forwards it (it does not translate); else to the pipeline, which finishes it.
		__u32 slot = e->in_slot;
		__u32 *tc = bpf_map_lookup_elem(&tc_slots, &slot);
		return tc && *tc && !(e->flags & ENTRY_NAT) ? XDP_PASS : steer(ctx, cfg, 1);
	}
	// The redirect is set up now and done when the program returns: an output that cannot
	// take it (not in tx_ports) leaves the frame untouched, to the pipeline.
	if (bpf_redirect_map(&tx_ports, e->out_ifindex, XDP_ABORTED) != XDP_REDIRECT)
		return steer(ctx, cfg, 1);
	// Checked above for the frame's family: only IPv4 entries translate.
	if (v4 && (e->flags & ENTRY_NAT) && translate_v4(l3, end, e) < 0)
		return steer(ctx, cfg, 1);
	rewrite(eth, l3, v4, e);
	count(e, 1, frame, len);
	return XDP_REDIRECT;
}

// The skb programs read headers with bpf_skb_load_bytes: a socket filter has no direct packet
// access, and one parser for both keeps the socket filter's and tc's decisions the same.

// The UDP or TCP ports at `off` into the key, the length of that header in *l4_len; -1 for
// another protocol, a short header or a segment the pipeline must see.
static __always_inline int skb_ports(struct __sk_buff *skb, __u32 off, __u8 proto, __u16 *sport, __u16 *dport, __u32 *l4_len)
{
	if (proto == IPPROTO_UDP) {
		struct udphdr u;
		if (bpf_skb_load_bytes(skb, off, &u, sizeof(u)) < 0)
			return -1;
		*sport = u.source;
		*dport = u.dest;
		*l4_len = sizeof(u);
		return 0;
	}
	if (proto != IPPROTO_TCP)
		return -1;
	struct tcphdr t;
	if (bpf_skb_load_bytes(skb, off, &t, sizeof(t)) < 0 || !tcp_plain(&t))
		return -1;
	*sport = t.source;
	*dport = t.dest;
	*l4_len = t.doff * 4;
	return 0;
}

static __always_inline struct flow_entry *skb_entry_v4(struct __sk_buff *skb, __u32 ifindex, __u32 *len, __u32 *hdrs)
{
	struct iphdr ip;
	if (bpf_skb_load_bytes(skb, sizeof(struct ethhdr), &ip, sizeof(ip)) < 0)
		return NULL;
	if (ip.ihl != 5 || ip.version != 4 || (ip.frag_off & bpf_htons(0x3fff)) || ip.ttl <= 1)
		return NULL;
	__u32 tot = bpf_ntohs(ip.tot_len);
	if (tot < sizeof(ip) || tot > skb->len - sizeof(struct ethhdr) || !ipv4_csum_ok(&ip))
		return NULL;
	struct flow_key4 k = {.ifindex = ifindex, .src = ip.saddr, .dst = ip.daddr, .proto = ip.protocol};
	__u32 l4_len = 0;
	if (skb_ports(skb, sizeof(struct ethhdr) + sizeof(ip), ip.protocol, &k.sport, &k.dport, &l4_len) < 0)
		return NULL;
	*len = tot;
	*hdrs = sizeof(ip) + l4_len;
	return bpf_map_lookup_elem(&flows4, &k);
}

static __always_inline struct flow_entry *skb_entry_v6(struct __sk_buff *skb, __u32 ifindex, __u32 *len, __u32 *hdrs)
{
	struct ipv6hdr ip;
	if (bpf_skb_load_bytes(skb, sizeof(struct ethhdr), &ip, sizeof(ip)) < 0)
		return NULL;
	if (ip.version != 6 || ip.hop_limit <= 1)
		return NULL;
	__u32 tot = bpf_ntohs(ip.payload_len) + sizeof(ip);
	if (tot > skb->len - sizeof(struct ethhdr))
		return NULL;
	struct flow_key6 k = {.ifindex = ifindex, .proto = ip.nexthdr};
	__builtin_memcpy(k.src, &ip.saddr, 16);
	__builtin_memcpy(k.dst, &ip.daddr, 16);
	__u32 l4_len = 0;
	if (skb_ports(skb, sizeof(struct ethhdr) + sizeof(ip), ip.nexthdr, &k.sport, &k.dport, &l4_len) < 0)
		return NULL;
	*len = tot;
	*hdrs = sizeof(ip) + l4_len;
	return bpf_map_lookup_elem(&flows6, &k);
}

// The entry of an skb's flow, its family in *v4; NULL for a frame the fast path does not take
// (tagged, neither IPv4 nor IPv6, or what XDP's `entry_v4` and `entry_v6` refuse too, read
// here with bpf_skb_load_bytes). Whether the entry decides the frame now is `skb_valid`'s
// question.
static __always_inline struct flow_entry *skb_entry(struct __sk_buff *skb, struct ethhdr *eth, __u32 *len, int *v4)
{
	if (skb->vlan_present || bpf_skb_load_bytes(skb, 0, eth, sizeof(*eth)) < 0)
		return NULL;
	__u32 hdrs = 0;
	struct flow_entry *e;
	*v4 = eth->h_proto == bpf_htons(ETH_P_IP);
	if (*v4)
		e = skb_entry_v4(skb, skb->ifindex, len, &hdrs);
	else if (eth->h_proto == bpf_htons(ETH_P_IPV6))
		e = skb_entry_v6(skb, skb->ifindex, len, &hdrs);
	else
		return NULL;
	// A segment of a GSO (or GRO-merged) skb leaves as long as the sender's: its size with
	// the headers is what the output's MTU must take.
	if (e && skb->gso_size)
		*len = skb->gso_size + hdrs;
	return e;
}

// Whether an skb program forwards the frame by `e`: as `valid`, and not translated (the skb
// programs do not translate: those flows stay in the pipeline, which finishes a partial
// checksum).
static __always_inline int skb_valid(struct flow_entry *e, struct settings *cfg, struct ethhdr *eth, __u32 len)
{
	return valid(e, cfg, eth, len) && !(e->flags & ENTRY_NAT);
}

// The entry of the skb's flow (in *e, its family in *v4) and whether the skb programs forward
// the frame by it now: the one decision of `lr_fast_sock` and `lr_fast_tc`.
// *len: the IP bytes of the skb's packet (of each segment, for a GSO skb).
static __always_inline int skb_decide(struct __sk_buff *skb, struct flow_entry **e, int *v4, __u32 *len)
{
	__u32 zero = 0;
	struct settings *cfg = bpf_map_lookup_elem(&config, &zero);
	struct ethhdr eth;
	*len = 0;
	*e = cfg && cfg->gen ? skb_entry(skb, &eth, len, v4) : NULL;
	return skb_valid(*e, cfg, &eth, *len);
}

// The socket filter's decision for the frame now between the packet taps and tc ingress, on
// this CPU (`__netif_receive_skb_core` delivers a frame to the taps, then runs tcx, with
// nothing else in between on the CPU). tc follows it, so that a frame is either the
// pipeline's or the fast path's, never both or neither, even when an entry expires or is
// written between the two programs.
struct handoff {
	__u32 ifindex;
	__u32 len;
	__u32 armed;
	__u32 hit;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct handoff);
	__uint(max_entries, 1);
} handoffs SEC(".maps");

// lr_fast_sock: the filter of linerate's AF_PACKET rx sockets on an interface whose fast path
// runs at tc ingress (no XDP program on it: XDP on a veth or virtio_net turns its peer's
// TSO off and copies every skb). A frame the fast path forwards is not the pipeline's (0: the
// socket does not take it); every other frame is, whole.
SEC("socket")
int lr_fast_sock(struct __sk_buff *skb)
{
	struct flow_entry *e;
	int v4 = 0;
	__u32 len = 0;
	int hit = skb_decide(skb, &e, &v4, &len);
	__u32 zero = 0;
	struct handoff *h = bpf_map_lookup_elem(&handoffs, &zero);
	if (h) {
		h->ifindex = skb->ifindex;
		h->len = skb->len;
		h->hit = hit;
		h->armed = 1;
	}
	return hit ? 0 : skb->len;
}

// What the pipeline does to a forwarded skb (`rewrite`), on the headers pulled into the
// linear part; 0 if they are not all there. One function per family, so that every bound is
// checked at a constant offset: a packet pointer moved by a variable one is refused to
// loaders without CAP_PERFMON.
#define SKB_REWRITE(name, l3type, is_v4)                                                        \
	static __always_inline int name(struct __sk_buff *skb, struct flow_entry *e)           \
	{                                                                                      \
		const __u32 want = sizeof(struct ethhdr) + sizeof(l3type);                     \
		void *data = (void *)(long)skb->data;                                          \
		void *end = (void *)(long)skb->data_end;                                       \
		if (data + want > end) {                                                       \
			if (bpf_skb_pull_data(skb, want) < 0)                                  \
				return 0;                                                      \
			data = (void *)(long)skb->data;                                        \
			end = (void *)(long)skb->data_end;                                     \
		}                                                                              \
		if (data + want > end)                                                         \
			return 0;                                                              \
		rewrite(data, data + sizeof(struct ethhdr), is_v4, e);                         \
		return 1;                                                                      \
	}
SKB_REWRITE(skb_rewrite_v4, struct iphdr, 1)
SKB_REWRITE(skb_rewrite_v6, struct ipv6hdr, 0)

// lr_fast_tc, at tc ingress (tcx, first in the chain): forwards a decided flow's skb to its
// output, rewritten, keeping its checksum and segmentation offloads. On an AF_XDP port it
// sees what XDP passed (partial checksums, see `lr_fast`); on an AF_PACKET port every frame,
// after `lr_fast_sock` has decided it. Anything else goes on down the chain (TC_ACT_UNSPEC:
// the program that drops the kernel's copy of the pipeline's frames, then the kernel).
SEC("classifier")
int lr_fast_tc(struct __sk_buff *skb)
{
	struct flow_entry *e;
	int v4 = 0;
	__u32 len = 0;
	int hit = skb_decide(skb, &e, &v4, &len);
	__u32 zero = 0;
	struct handoff *h = bpf_map_lookup_elem(&handoffs, &zero);
	if (h && h->armed) {
		h->armed = 0;
		if (h->ifindex == skb->ifindex && h->len == skb->len) {
			if (!h->hit)
				return TC_ACT_UNSPEC; // the pipeline's
			if (!e || (e->flags & ENTRY_NAT)) {
				// Taken from the socket, then its entry went (the LRU or linerate) or
				// became a translated flow's, which this program cannot rewrite:
				// neither path has the frame any more.
				int slot = slot_of(skb->ifindex);
				struct port_counts *c = slot >= 0 ? counts_of(slot) : NULL;
				if (c)
					c->handoff_lost++;
				return TC_ACT_SHOT;
			}
			hit = 1;
		}
	}
	if (!hit)
		return TC_ACT_UNSPEC;
	if (!(v4 ? skb_rewrite_v4(skb, e) : skb_rewrite_v6(skb, e)))
		return TC_ACT_UNSPEC;
	// A GSO skb's segments each carry the headers (len - gso_size bytes of them).
	__u32 segs = skb->gso_segs ? skb->gso_segs : 1;
	__u64 ip_bytes = len; // a short frame's padding is not the packet's
	if (segs > 1 && len > skb->gso_size)
		ip_bytes = skb->len - sizeof(struct ethhdr) + (__u64)(segs - 1) * (len - skb->gso_size);
	count(e, segs, skb->len, ip_bytes);
	return bpf_redirect(e->out_ifindex, 0);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
