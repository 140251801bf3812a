// SPDX-License-Identifier: MIT OR Apache-2.0
//
// Small programs of linerate's:
// - lr_sink counts every frame reaching an interface (packets and bytes, per CPU) and drops
//   it: the lab's receiver (crates/io/src/xdp/sink.rs); lr_sink_tc, at tc ingress of the
//   same interface, counts in the same map what generic XDP does not see (an skb another
//   program redirected: the kernel skips generic XDP for those).
// - lr_pass passes every frame: attached to a veth that linerate reads with AF_PACKET, it gives
//   the veth the NAPI that crates/io/src/napi.rs moves into a thread (xdp::attach_pass).

#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

struct sink_counts {
	__u64 packets;
	__u64 bytes;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct sink_counts);
	__uint(max_entries, 1);
} sink_count SEC(".maps");

SEC("xdp")
int lr_sink(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct sink_counts *c = bpf_map_lookup_elem(&sink_count, &zero);
	if (c) {
		// This CPU's slot: no atomics.
		c->packets++;
		c->bytes += bpf_xdp_get_buff_len(ctx);
	}
	return XDP_DROP;
}

SEC("classifier")
int lr_sink_tc(struct __sk_buff *skb)
{
	__u32 zero = 0;
	struct sink_counts *c = bpf_map_lookup_elem(&sink_count, &zero);
	if (c) {
		c->packets += skb->gso_segs ? skb->gso_segs : 1;
		c->bytes += skb->len;
	}
	return TC_ACT_SHOT;
}

SEC("xdp")
int lr_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
