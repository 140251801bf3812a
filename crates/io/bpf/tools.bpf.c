// SPDX-License-Identifier: MIT OR Apache-2.0
//
// Two small XDP programs of linerate's:
// - lr_sink counts every frame reaching an interface (packets and bytes, per CPU) and drops
//   it: the lab's receiver (crates/io/src/xdp/sink.rs).
// - lr_pass passes every frame: attached to a veth that linerate reads with AF_PACKET, it gives
//   the veth the NAPI that crates/io/src/napi.rs moves into a thread (xdp::attach_pass).

#include <linux/bpf.h>
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

SEC("xdp")
int lr_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
