// SPDX-License-Identifier: MIT OR Apache-2.0
//
// lr_kernel_copy, at tc ingress (tcx) of an interface linerate reads with AF_PACKET: drops
// the kernel's copy of the frames linerate forwards (crates/io/src/xdp/kernel_copy.rs says
// why). It passes what is for the router itself: IPv4 to one of its addresses on the
// interface (`own4`), multicast (224.0.0.0/4) and broadcast; IPv6 to one of its addresses
// (`own6`), link-local (fe80::/10) and multicast (ff00::/8); every frame that is neither IPv4
// nor IPv6 (ARP, LLDP, ...), and frames too short to hold the header it would read. With
// `settings.everything` (the router's host stack is on TAPs), it drops every frame.
//
// One object is loaded per interface: its maps hold that interface's addresses.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32); // network order
	__type(value, __u8);
	__uint(max_entries, 256);
} own4 SEC(".maps");

struct addr6 {
	__u8 bytes[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct addr6);
	__type(value, __u8);
	__uint(max_entries, 256);
} own6 SEC(".maps");

struct settings {
	__u32 everything;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct settings);
	__uint(max_entries, 1);
} settings SEC(".maps");

static __always_inline int verdict_v4(struct iphdr *ip, void *end)
{
	if ((void *)(ip + 1) > end)
		return TC_ACT_OK;
	__u32 dst = ip->daddr;
	if ((bpf_ntohl(dst) >> 28) == 0xe || dst == 0xffffffff)
		return TC_ACT_OK; // multicast, broadcast
	return bpf_map_lookup_elem(&own4, &dst) ? TC_ACT_OK : TC_ACT_SHOT;
}

static __always_inline int verdict_v6(struct ipv6hdr *ip, void *end)
{
	if ((void *)(ip + 1) > end)
		return TC_ACT_OK;
	struct addr6 dst;
	__builtin_memcpy(dst.bytes, &ip->daddr, 16);
	if (dst.bytes[0] == 0xff || (dst.bytes[0] == 0xfe && (dst.bytes[1] & 0xc0) == 0x80))
		return TC_ACT_OK; // multicast, link-local
	return bpf_map_lookup_elem(&own6, &dst) ? TC_ACT_OK : TC_ACT_SHOT;
}

SEC("classifier")
int lr_kernel_copy(struct __sk_buff *skb)
{
	__u32 zero = 0;
	struct settings *s = bpf_map_lookup_elem(&settings, &zero);
	if (s && s->everything)
		return TC_ACT_SHOT;
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > end)
		return TC_ACT_OK;
	if (eth->h_proto == bpf_htons(ETH_P_IP))
		return verdict_v4((void *)(eth + 1), end);
	if (eth->h_proto == bpf_htons(ETH_P_IPV6))
		return verdict_v6((void *)(eth + 1), end);
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
