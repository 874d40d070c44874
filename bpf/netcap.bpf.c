// SPDX-License-Identifier: GPL-2.0
/* Kernel side of `cptrace record --net`: network events on the socket path
 * (sock:sock_send_length / sock:sock_recv_length) and as close to the device as
 * this kernel lets us (tp_btf net:net_dev_start_xmit / net:netif_receive_skb),
 * one record per event into the ring of the CPU it fired on. Every filter runs
 * here, so filtered-out traffic never crosses into user space.
 *
 * Stamps: a packet pair (transmit on one node, receive on another) is a causality
 * constraint, so a transmit is stamped as late and a receive as early as the
 * kernel allows while the packet certainly exists there. Transmit: at
 * net_dev_start_xmit, just before the driver gets the frame, the clock read as the
 * program's last act (emit), since the frame waits for the program to return
 * (net_dev_xmit fires after the driver returned, when veth has already handed the
 * frame to its peer and a NIC may have sent it: too late to be a lower bound on
 * the send). Receive:
 * at the earliest of the receive entry points (netif_rx, before the backlog queue;
 * napi_gro_*_entry and netif_receive_skb*_entry, before GRO and RPS), remembered
 * per skb in `rx_early` and taken over by the one record emitted at
 * netif_receive_skb, where the headers are final and the packet is parsed.
 *
 * Who owns a packet: a packet transmitted in process context belongs to the
 * current task. Otherwise (softirq transmits such as TCP ACKs and
 * retransmissions, and every receive at the device) we look the flow up in
 * `flow_owner`, which the programs fill whenever a task sends, receives,
 * connects or listens. -p and --cgroup filter on that owner.
 *
 * Record layout: include/cptrace_net.h. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "cptrace_net.h"
#include "cptrace_records.h" /* CP_FOLLOW_MAX */
#include "ring_common.h"

char LICENSE[] SEC("license") = "GPL";

#define AF_INET 2
#define AF_INET6 10
#define ETH_P_IP 0x0800
#define ETH_P_IPV6 0x86DD
#define IPPROTO_TCP 6
#define IPPROTO_UDP 17
#define TCP_LISTEN 10

/* Filters, set by user/net/net_capture.cpp before load. 0 = no filter. */
const volatile __u32 filter_netns = 0;	/* netns inode */
const volatile __u32 filter_tgid = 0;	/* owner tgid */
const volatile __u8 filter_tree = 0;	/* 1: owner tgid in `followed` instead */
const volatile __u64 filter_cgroup = 0; /* owner cgroup v2 id */
const volatile __u8 filter_ports = 0;	/* 1: keep only ports in `ports` */
const volatile __u64 wakeup_bytes = 1 << 20;

/* One ring per CPU and the per-CPU counters (bpf/ring_common.h). */
CP_PER_CPU_RINGS(net_rings);
CP_PER_CPU_COUNTERS(net_counters, CP_NET_CNT_MAX);

/* --port N: host-order ports to keep (either end matches). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u16);
	__type(value, __u8);
} ports SEC(".maps");

/* A flow seen from one end: local/remote address and port. Wildcard entries
 * (remote all zero; local address zero) stand for listening/bound sockets. */
struct flow_key {
	__u32 netns;
	__u8 proto;
	__u8 pad;
	__u16 lport;
	__u16 rport;
	__u16 pad2;
	__u8 laddr[16];
	__u8 raddr[16];
};

struct owner {
	__u32 tgid;
	__u32 tid;
	__u64 cgid;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct flow_key);
	__type(value, struct owner);
} flow_owner SEC(".maps");

/* Softirqs running on this CPU (0 or 1; they do not nest). This kernel exports
 * no per-CPU symbols (no __preempt_count ksym), so "are we in process context?"
 * is answered by bracketing every softirq (inline on irq exit and in ksoftirqd)
 * with its entry/exit tracepoints. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} softirq_depth SEC(".maps");

SEC("tp_btf/softirq_entry")
int BPF_PROG(cp_softirq_entry, unsigned int vec_nr)
{
	__u32 zero = 0, *d = bpf_map_lookup_elem(&softirq_depth, &zero);
	if (d)
		*d += 1;
	return 0;
}

SEC("tp_btf/softirq_exit")
int BPF_PROG(cp_softirq_exit, unsigned int vec_nr)
{
	__u32 zero = 0, *d = bpf_map_lookup_elem(&softirq_depth, &zero);
	if (d && *d) /* attached half-way through a softirq: no matching entry */
		*d -= 1;
	return 0;
}

/* Process context: the current task caused this transmit. Hard irqs do not
 * transmit on the paths we record (netpoll aside). */
static __always_inline bool in_task(void)
{
	__u32 zero = 0, *d = bpf_map_lookup_elem(&softirq_depth, &zero);
	return d && *d == 0;
}

static __always_inline void count(__u32 idx)
{
	cp_count_atomic(&net_counters, idx, 1); /* softirq receives can interleave */
}

static __always_inline bool port_ok(__u16 a, __u16 b)
{
	if (!filter_ports)
		return true;
	return bpf_map_lookup_elem(&ports, &a) || bpf_map_lookup_elem(&ports, &b);
}

/* The processes `record -p / -- CMD` follows: the map of bpf/cptrace.bpf.c,
 * shared (user space hands its descriptor over before loading). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, CP_FOLLOW_MAX);
	__type(key, __u32);
	__type(value, __u8);
} followed SEC(".maps");

static __always_inline bool owner_ok(const struct owner *o)
{
	if (!filter_tgid && !filter_tree && !filter_cgroup)
		return true;
	if (!o)
		return false;
	if (filter_tree && !bpf_map_lookup_elem(&followed, &o->tgid))
		return false;
	if (!filter_tree && filter_tgid && o->tgid != filter_tgid)
		return false;
	if (filter_cgroup && o->cgid != filter_cgroup)
		return false;
	return true;
}

static __always_inline void current_owner(struct owner *o)
{
	__u64 id = bpf_get_current_pid_tgid();
	o->tgid = id >> 32;
	o->tid = (__u32)id;
	o->cgid = bpf_get_current_cgroup_id();
}

/* Remembers `o` as the owner of the flow, writing only when it changed. */
static __always_inline void learn(const struct flow_key *k, const struct owner *o)
{
	struct owner *old = bpf_map_lookup_elem(&flow_owner, k);
	if (old && old->tgid == o->tgid && old->tid == o->tid && old->cgid == o->cgid)
		return;
	bpf_map_update_elem(&flow_owner, k, o, BPF_ANY);
}

/* Exact flow, then the local socket alone (bound UDP / listening TCP on that
 * address), then the port on any address. */
static __always_inline struct owner *find_owner(struct flow_key *k)
{
	struct owner *o = bpf_map_lookup_elem(&flow_owner, k);
	if (o)
		return o;
	__builtin_memset(k->raddr, 0, 16);
	k->rport = 0;
	o = bpf_map_lookup_elem(&flow_owner, k);
	if (o)
		return o;
	__builtin_memset(k->laddr, 0, 16);
	return bpf_map_lookup_elem(&flow_owner, k);
}

static __always_inline void flow_of(struct flow_key *k, const struct cp_net_rec *r, bool local_is_src)
{
	__builtin_memset(k, 0, sizeof(*k));
	k->netns = r->netns;
	k->proto = r->proto;
	if (local_is_src) {
		__builtin_memcpy(k->laddr, r->saddr, 16);
		__builtin_memcpy(k->raddr, r->daddr, 16);
		k->lport = r->sport;
		k->rport = r->dport;
	} else {
		__builtin_memcpy(k->laddr, r->daddr, 16);
		__builtin_memcpy(k->raddr, r->saddr, 16);
		k->lport = r->dport;
		k->rport = r->sport;
	}
}

/* Copies r into this CPU's ring. `stamp_now`: read the clock into the record last,
 * once the slot is reserved and filled, for a transmit (see on_packet). */
static __always_inline void emit(struct cp_net_rec *r, bool stamp_now)
{
	__u32 cpu = bpf_get_smp_processor_id();
	void *rb = cp_ring_of_cpu(&net_rings, cpu);
	struct cp_net_rec *slot = rb ? bpf_ringbuf_reserve(rb, sizeof(*r), 0) : NULL;
	count(CP_NET_CNT_SEEN);
	if (!slot) {
		count(CP_NET_CNT_DROPPED);
		return;
	}
	r->cpu = cpu;
	__builtin_memcpy(slot, r, sizeof(*r));
	__u64 wake = cp_wake_flag(rb, wakeup_bytes);
	if (stamp_now)
		slot->ktime_ns = bpf_ktime_get_ns();
	bpf_ringbuf_submit(slot, wake);
}

/* ---- packets ------------------------------------------------------------------- */

static __always_inline __u32 fnv1a(const __u8 *p, __u32 n)
{
	__u32 h = 2166136261u;
	for (int i = 0; i < CP_NET_HASH_BYTES; i++) {
		if (i >= n)
			break;
		h = (h ^ p[i]) * 16777619u;
	}
	return h;
}

/* UDP payload hash: the first CP_NET_HASH_BYTES bytes that lie in the linear area. */
static __always_inline void hash_udp(struct cp_net_rec *r, unsigned char *pay, unsigned char *lin_end)
{
	__u8 buf[CP_NET_HASH_BYTES] = {};
	long avail = lin_end - pay;
	__u32 n = r->len < CP_NET_HASH_BYTES ? r->len : CP_NET_HASH_BYTES;
	if (avail < 0)
		avail = 0;
	if (n > avail) {
		n = avail;
		r->flags |= CP_NETF_HASH_PART;
	} else if (n < CP_NET_HASH_BYTES) {
		r->flags |= CP_NETF_HASH_PART;
	}
	n &= (CP_NET_HASH_BYTES * 2 - 1);
	if (n > CP_NET_HASH_BYTES)
		n = CP_NET_HASH_BYTES;
	if (n && bpf_probe_read_kernel(buf, n, pay))
		n = 0;
	r->hash = fnv1a(buf, n);
}

/* Fills addresses, ports, TCP/UDP fields from the skb's headers (CO-RE reads).
 * Returns false for anything that is not IPv4/IPv6. On receive the L3 header is
 * at skb->data (the driver pulled the link header; netif_receive_skb resets
 * network_header to it only after its tracepoint, so that offset may still be a
 * transmit's or unset); on transmit, network_header is the stack's own. */
static __always_inline bool parse_skb(const struct sk_buff *skb, struct cp_net_rec *r, bool rx)
{
	unsigned char *head = BPF_CORE_READ(skb, head);
	unsigned char *data = BPF_CORE_READ(skb, data);
	__u16 nh = BPF_CORE_READ(skb, network_header);
	__u16 eth = bpf_ntohs(BPF_CORE_READ(skb, protocol));
	__u32 len = BPF_CORE_READ(skb, len);
	__u32 lin = len - BPF_CORE_READ(skb, data_len);
	unsigned char *lin_end = data + lin;
	unsigned char *l3 = rx ? data : head + nh;
	unsigned char *l4;
	__u8 proto;

	if (!rx && nh == 0xffff)
		return false;
	if (eth == ETH_P_IP) {
		struct iphdr ip;
		if (bpf_probe_read_kernel(&ip, sizeof(ip), l3) || ip.version != 4)
			return false;
		r->family = AF_INET;
		__builtin_memcpy(r->saddr, &ip.saddr, 4);
		__builtin_memcpy(r->daddr, &ip.daddr, 4);
		r->ip_id = bpf_ntohs(ip.id);
		proto = ip.protocol;
		l4 = l3 + ip.ihl * 4;
		if (bpf_ntohs(ip.frag_off) & 0x1fff) { /* not the first fragment: no L4 header */
			r->proto = proto;
			r->flags |= CP_NETF_L4_TRUNC;
			return true;
		}
	} else if (eth == ETH_P_IPV6) {
		struct ipv6hdr ip6;
		if (bpf_probe_read_kernel(&ip6, sizeof(ip6), l3) || ip6.version != 6)
			return false;
		r->family = AF_INET6;
		__builtin_memcpy(r->saddr, &ip6.saddr, 16);
		__builtin_memcpy(r->daddr, &ip6.daddr, 16);
		proto = ip6.nexthdr; /* extension headers are not walked */
		l4 = l3 + sizeof(ip6);
	} else {
		return false;
	}
	r->proto = proto;
	/* Bytes from the start of the L4 header to the end of the skb. */
	long l4_bytes = (long)len - (l4 - data);
	if (proto == IPPROTO_TCP) {
		struct tcphdr th;
		if (bpf_probe_read_kernel(&th, sizeof(th), l4)) {
			r->flags |= CP_NETF_L4_TRUNC;
			return true;
		}
		r->sport = bpf_ntohs(th.source);
		r->dport = bpf_ntohs(th.dest);
		r->seq = bpf_ntohl(th.seq);
		r->ack = bpf_ntohl(th.ack_seq);
		r->tcp_flags = ((__u8 *)&th)[13];
		long pay = l4_bytes - th.doff * 4;
		r->len = pay > 0 ? pay : 0;
	} else if (proto == IPPROTO_UDP) {
		struct udphdr uh;
		if (bpf_probe_read_kernel(&uh, sizeof(uh), l4)) {
			r->flags |= CP_NETF_L4_TRUNC;
			return true;
		}
		r->sport = bpf_ntohs(uh.source);
		r->dport = bpf_ntohs(uh.dest);
		long pay = l4_bytes - (long)sizeof(uh);
		r->len = pay > 0 ? pay : 0;
		hash_udp(r, l4 + sizeof(uh), lin_end);
	} else {
		r->len = l4_bytes > 0 ? l4_bytes : 0;
	}
	return true;
}

static __always_inline void gso_info(const struct sk_buff *skb, struct cp_net_rec *r)
{
	struct skb_shared_info *si =
		(struct skb_shared_info *)(BPF_CORE_READ(skb, head) + BPF_CORE_READ(skb, end));
	r->gso_size = BPF_CORE_READ(si, gso_size);
	r->gso_segs = BPF_CORE_READ(si, gso_segs);
}

static __always_inline int on_packet(const struct sk_buff *skb, const struct net_device *dev, __u8 kind,
				     __u64 now, __u8 stamp_at, __u8 flags)
{
	__u32 netns = BPF_CORE_READ(dev, nd_net.net, ns.inum);
	if (filter_netns && netns != filter_netns)
		return 0;
	/* On the stack, not in a per-CPU scratch map: a softirq may run this program
	 * while a task-context one is half-way through its record on the same CPU. */
	struct cp_net_rec rec = {.ktime_ns = now, .kind = kind, .stamp_at = stamp_at, .flags = flags};
	struct cp_net_rec *r = &rec;
	r->netns = netns;
	r->ifindex = BPF_CORE_READ(dev, ifindex);
	r->skb_len = BPF_CORE_READ(skb, len);
	if (!parse_skb(skb, r, kind == CP_NET_PKT_RX))
		return 0;
	if (!port_ok(r->sport, r->dport))
		return 0;
	gso_info(skb, r);

	struct flow_key k;
	struct owner cur, *o = NULL;
	flow_of(&k, r, kind == CP_NET_PKT_TX);
	if (kind == CP_NET_PKT_TX && in_task()) {
		current_owner(&cur);
		learn(&k, &cur);
		o = &cur;
		r->flags |= CP_NETF_TASK;
	} else {
		o = find_owner(&k);
		if (o)
			r->flags |= CP_NETF_OWNER;
	}
	if (!owner_ok(o))
		return 0;
	if (o) {
		r->pid = o->tgid;
		r->tid = o->tid;
		r->cgroup = o->cgid;
	}
	/* A transmit's clock is read as late as it can be, in emit: the frame reaches
	 * the driver only once this program has returned, so the time the program
	 * took (0.2 µs at best, a microsecond or more on a cold CPU) would otherwise
	 * lie between the stamp and the peer's receive and widen every traffic
	 * bound by as much. */
	emit(r, kind == CP_NET_PKT_TX);
	return 0;
}

SEC("tp_btf/net_dev_start_xmit")
int BPF_PROG(cp_net_tx, const struct sk_buff *skb, const struct net_device *dev)
{
	return on_packet(skb, dev, CP_NET_PKT_TX, 0 /* read in emit */, CP_NET_AT_KIND, 0);
}

/* ---- early receive stamps ------------------------------------------------------ */

/* A receive's stamp from its earliest entry point, keyed by the skb's address until
 * netif_receive_skb takes it (and deletes it). Entries of skbs that never get
 * there (dropped on a full backlog, merged by GRO and freed) are overwritten when
 * the slab hands the address out again, since every path into netif_receive_skb
 * passes one of the entry points (user space loads all of them or none), or evicted
 * by the LRU; a lost entry only means the later stamp. */
struct rx_stamp {
	__u64 ktime_ns;
	__u32 len; /* skb->len then: GRO grows an skb it merges later segments into */
	__u8 at;   /* enum cp_net_stamp */
	__u8 pad[3];
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384); /* in flight: backlogs (netdev_max_backlog) + GRO */
	__type(key, __u64);
	__type(value, struct rx_stamp);
} rx_early SEC(".maps");

static __always_inline int stamp_early(const struct sk_buff *skb, __u8 at)
{
	struct rx_stamp s = {.ktime_ns = bpf_ktime_get_ns(), .at = at};
	__u64 key = (__u64)skb;
	if (filter_netns && BPF_CORE_READ(skb, dev, nd_net.net, ns.inum) != filter_netns)
		return 0;
	s.len = BPF_CORE_READ(skb, len);
	/* Overwrites: a later entry point of the same skb (a bridge's local delivery
	 * after the port's) is the stamp of the later netif_receive_skb. */
	bpf_map_update_elem(&rx_early, &key, &s, BPF_ANY);
	return 0;
}

SEC("tp_btf/netif_rx")
int BPF_PROG(cp_rx_netif_rx, struct sk_buff *skb)
{
	return stamp_early(skb, CP_NET_AT_NETIF_RX);
}

SEC("tp_btf/netif_receive_skb_entry")
int BPF_PROG(cp_rx_receive_entry, const struct sk_buff *skb)
{
	return stamp_early(skb, CP_NET_AT_NETIF_RECEIVE_SKB_ENTRY);
}

SEC("tp_btf/netif_receive_skb_list_entry")
int BPF_PROG(cp_rx_list_entry, const struct sk_buff *skb)
{
	return stamp_early(skb, CP_NET_AT_NETIF_RECEIVE_SKB_LIST_ENTRY);
}

SEC("tp_btf/napi_gro_receive_entry")
int BPF_PROG(cp_rx_gro_entry, const struct sk_buff *skb)
{
	return stamp_early(skb, CP_NET_AT_NAPI_GRO_RECEIVE_ENTRY);
}

SEC("tp_btf/napi_gro_frags_entry")
int BPF_PROG(cp_rx_frags_entry, const struct sk_buff *skb)
{
	return stamp_early(skb, CP_NET_AT_NAPI_GRO_FRAGS_ENTRY);
}

/* The one receive record: the early stamp when this skb has one and still holds
 * exactly what it held then; else now, when all its bytes have arrived. */
SEC("tp_btf/netif_receive_skb")
int BPF_PROG(cp_net_rx, struct sk_buff *skb)
{
	__u64 now = bpf_ktime_get_ns(), key = (__u64)skb;
	__u8 at = CP_NET_AT_KIND, flags = 0;
	struct rx_stamp *s = bpf_map_lookup_elem(&rx_early, &key);
	if (s) {
		if (s->len != BPF_CORE_READ(skb, len)) {
			flags = CP_NETF_RX_GREW;
		} else if (s->ktime_ns <= now) {
			now = s->ktime_ns;
			at = s->at;
		}
		bpf_map_delete_elem(&rx_early, &key);
	}
	return on_packet(skb, BPF_CORE_READ(skb, dev), CP_NET_PKT_RX, now, at, flags);
}

/* ---- sockets ------------------------------------------------------------------- */

/* Local/remote addresses and ports of an inet socket into r. An IPv4-mapped IPv6
 * socket is reported as IPv4, as its packets are. False for non-inet sockets. */
static __always_inline bool sock_addrs(const struct sock *sk, struct cp_net_rec *r)
{
	__u16 fam = BPF_CORE_READ(sk, __sk_common.skc_family);
	if (fam == AF_INET) {
		__u32 l = BPF_CORE_READ(sk, __sk_common.skc_rcv_saddr);
		__u32 d = BPF_CORE_READ(sk, __sk_common.skc_daddr);
		__builtin_memcpy(r->saddr, &l, 4);
		__builtin_memcpy(r->daddr, &d, 4);
	} else if (fam == AF_INET6) {
		/* &r->saddr: the macro reads sizeof(*dst) bytes, 16 here (r->saddr,
		 * decayed to a pointer to its first byte, read only that byte). */
		BPF_CORE_READ_INTO(&r->saddr, sk, __sk_common.skc_v6_rcv_saddr.in6_u.u6_addr8);
		BPF_CORE_READ_INTO(&r->daddr, sk, __sk_common.skc_v6_daddr.in6_u.u6_addr8);
		const __u32 *s = (const __u32 *)r->saddr;
		if (s[0] == 0 && s[1] == 0 && s[2] == bpf_htonl(0xffff)) { /* ::ffff:a.b.c.d */
			__u32 l = s[3], d = ((const __u32 *)r->daddr)[3];
			__builtin_memset(r->saddr, 0, 16);
			__builtin_memset(r->daddr, 0, 16);
			__builtin_memcpy(r->saddr, &l, 4);
			__builtin_memcpy(r->daddr, &d, 4);
			fam = AF_INET;
		}
	} else {
		return false;
	}
	r->family = fam;
	r->proto = BPF_CORE_READ(sk, sk_protocol);
	r->sport = BPF_CORE_READ(sk, __sk_common.skc_num);
	r->dport = bpf_ntohs(BPF_CORE_READ(sk, __sk_common.skc_dport));
	r->netns = BPF_CORE_READ(sk, __sk_common.skc_net.net, ns.inum);
	return true;
}

/* Fills r from the socket; false when it is not ours to record. Learns the flow
 * owner from the current task either way (so that later packets of the flow are
 * attributed even when the socket event itself is filtered out by --port). */
static __always_inline bool sock_event(const struct sock *sk, struct cp_net_rec *r)
{
	if (!sock_addrs(sk, r))
		return false;
	if (filter_netns && r->netns != filter_netns)
		return false;
	struct owner cur;
	struct flow_key k;
	current_owner(&cur);
	flow_of(&k, r, true);
	learn(&k, &cur);
	if (!owner_ok(&cur) || !port_ok(r->sport, r->dport))
		return false;
	r->pid = cur.tgid;
	r->tid = cur.tid;
	r->cgroup = cur.cgid;
	r->flags |= CP_NETF_TASK;
	return true;
}

/* ---- the start of a send call ------------------------------------------------- */

/* x86-64 numbers of the calls that hand bytes to a socket (send() is sendto())
 * and of those that take bytes from one (recv() is recvfrom()). */
#define CP_NR_READ 0
#define CP_NR_WRITE 1
#define CP_NR_READV 19
#define CP_NR_WRITEV 20
#define CP_NR_SENDTO 44
#define CP_NR_RECVFROM 45
#define CP_NR_SENDMSG 46
#define CP_NR_RECVMSG 47
#define CP_NR_RECVMMSG 299
#define CP_NR_SENDMMSG 307

/* The call a task is in, as its entry saw it: the stamp (send calls) and the
 * arguments that locate its buffer, for the payload hash of a UDP message. */
struct call_start {
	__u64 ktime_ns;
	__u64 nr;
	__u64 buf;  /* 2nd argument: the buffer, iovec array, msghdr or mmsghdr array */
	__u64 len;  /* 3rd argument: the buffer's length or the iovec count */
	__u64 dest; /* sendto's 5th argument: the destination (NULL when connected) */
	__u32 msg;  /* sendmmsg/recvmmsg: socket events seen so far in this call */
	__u32 pad;
};

/* The last send- or receive-family call each task entered: sock_send_length
 * fires inside it, after its bytes may already have left (the exit of a send is
 * not before the transmit), so the application's view of a send starts here. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct call_start);
} call_starts SEC(".maps");

static __always_inline bool is_send_call(long id)
{
	return id == CP_NR_SENDTO || id == CP_NR_SENDMSG || id == CP_NR_SENDMMSG || id == CP_NR_WRITE ||
	       id == CP_NR_WRITEV;
}

static __always_inline bool is_recv_call(long id)
{
	return id == CP_NR_RECVFROM || id == CP_NR_RECVMSG || id == CP_NR_RECVMMSG || id == CP_NR_READ ||
	       id == CP_NR_READV;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(cp_sys_enter, struct pt_regs *regs, long id)
{
	__u64 now = bpf_ktime_get_ns();
	if (!is_send_call(id) && !is_recv_call(id))
		return 0;
	struct owner cur;
	current_owner(&cur);
	if (!owner_ok(&cur))
		return 0;
	struct call_start *c = bpf_task_storage_get(&call_starts, bpf_get_current_task_btf(), 0,
						    BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (c) {
		c->ktime_ns = now;
		c->nr = id;
		c->buf = BPF_CORE_READ(regs, si);
		c->len = BPF_CORE_READ(regs, dx);
		c->dest = id == CP_NR_SENDTO ? BPF_CORE_READ(regs, r8) : 0;
		c->msg = 0;
	}
	return 0;
}

/* The entry record of the call this task is in, or NULL when the call is not
 * one cp_sys_enter saw (sendfile, splice, io_uring: the record left there
 * belongs to an earlier call). */
static __always_inline struct call_start *current_call(void)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct call_start *c = bpf_task_storage_get(&call_starts, task, 0, 0);
	if (!c)
		return NULL;
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	if (!regs || BPF_CORE_READ(regs, orig_ax) != c->nr)
		return NULL;
	return c;
}

/* Nanoseconds from the entry of the send call `c` to `now`; 0 when it is none. */
static __always_inline __u32 call_ns(const struct call_start *c, __u64 now)
{
	if (!c || !is_send_call(c->nr) || c->ktime_ns > now || now - c->ktime_ns > 0xffffffffULL)
		return 0;
	return (__u32)(now - c->ktime_ns);
}

/* user_msghdr as x86-64 lays it out: msg_name at 0, msg_iov at 16, msg_iovlen
 * at 24; an mmsghdr is one of them and a length, 64 bytes. */
#define CP_MSGHDR_IOV 16
#define CP_MSGHDR_IOVLEN 24
#define CP_MMSGHDR_SIZE 64
#define CP_MSG_IOVS 4 /* iovecs a message's first CP_NET_HASH_BYTES are looked for in */

/* Where the message of this socket event lies in the caller's memory: a plain
 * buffer (iov == 0) or an iovec array; and sendto/sendmsg's destination. */
struct msg_place {
	__u64 base, len; /* the plain buffer */
	__u64 iov, iovcnt;
	__u64 name; /* struct sockaddr * or 0 */
};

static __always_inline bool msg_place_of(struct call_start *c, struct msg_place *m)
{
	__builtin_memset(m, 0, sizeof(*m));
	__u64 hdr = c->buf;
	switch (c->nr) {
	case CP_NR_WRITE:
	case CP_NR_READ:
	case CP_NR_SENDTO:
	case CP_NR_RECVFROM:
		m->base = c->buf;
		m->len = c->len;
		m->name = c->dest;
		return true;
	case CP_NR_WRITEV:
	case CP_NR_READV:
		m->iov = c->buf;
		m->iovcnt = c->len;
		return true;
	case CP_NR_SENDMMSG:
	case CP_NR_RECVMMSG:
		/* One socket event per message, in the array's order. */
		hdr += (__u64)c->msg * CP_MMSGHDR_SIZE;
		c->msg++;
		/* fallthrough */
	case CP_NR_SENDMSG:
	case CP_NR_RECVMSG:
		if (bpf_probe_read_user(&m->iov, 8, (void *)(hdr + CP_MSGHDR_IOV)) ||
		    bpf_probe_read_user(&m->iovcnt, 8, (void *)(hdr + CP_MSGHDR_IOVLEN)))
			return false;
		if (c->nr == CP_NR_SENDMSG || c->nr == CP_NR_SENDMMSG)
			bpf_probe_read_user(&m->name, 8, (void *)hdr);
		return true;
	}
	return false;
}

/* FNV-1a over the first min(len, CP_NET_HASH_BYTES) bytes of the message, the
 * bytes a UDP packet's hash covers (hash_udp): gathered from the caller's
 * buffers, which the call has just copied from (send) or into (receive), so
 * their pages are present, then hashed in one pass (one loop over the bytes
 * keeps the verifier's work small). False when they cannot all be read. */
static __always_inline bool msg_hash(const struct msg_place *m, __u32 len, __u32 *out)
{
	__u8 buf[CP_NET_HASH_BYTES * 2] = {};
	__u32 want = len < CP_NET_HASH_BYTES ? len : CP_NET_HASH_BYTES, done = 0;
	for (int i = 0; i < CP_MSG_IOVS; i++) {
		__u64 base = m->base, n = m->len;
		if (done >= want)
			break;
		if (m->iov) {
			struct iovec v;
			if (i >= m->iovcnt ||
			    bpf_probe_read_user(&v, sizeof(v), (void *)(m->iov + i * sizeof(v))))
				return false;
			base = (__u64)v.iov_base;
			n = v.iov_len;
		} else if (i > 0) {
			return false;
		}
		if (n > want - done)
			n = want - done;
		/* Both below CP_NET_HASH_BYTES * 2 for the verifier: done < want <= 64. */
		done &= CP_NET_HASH_BYTES - 1;
		n &= CP_NET_HASH_BYTES * 2 - 1;
		if (n > CP_NET_HASH_BYTES)
			n = CP_NET_HASH_BYTES;
		if (n && bpf_probe_read_user(buf + done, n, (void *)base))
			return false;
		done += n;
	}
	if (done < want)
		return false;
	*out = fnv1a(buf, want);
	return true;
}

/* An unconnected socket's send names its destination in the call: the record's
 * remote end is that (as its packet will carry it), not the socket's none. */
static __always_inline void msg_dest(const struct msg_place *m, struct cp_net_rec *r)
{
	struct sockaddr_in6 sa = {};
	if (!m->name || bpf_probe_read_user(&sa, sizeof(struct sockaddr_in), (void *)m->name))
		return;
	if (sa.sin6_family != AF_INET && sa.sin6_family != AF_INET6)
		return; /* AF_UNSPEC and the like: the socket's own remote end stands */
	if (sa.sin6_family == AF_INET6 && bpf_probe_read_user(&sa, sizeof(sa), (void *)m->name))
		return;
	__builtin_memset(r->daddr, 0, 16);
	r->dport = bpf_ntohs(sa.sin6_port);
	if (sa.sin6_family == AF_INET) {
		__builtin_memcpy(r->daddr, &((struct sockaddr_in *)&sa)->sin_addr, 4);
		return;
	}
	const __u32 *a = (const __u32 *)&sa.sin6_addr;
	if (a[0] == 0 && a[1] == 0 && a[2] == bpf_htonl(0xffff)) /* ::ffff:a.b.c.d, as sock_addrs */
		__builtin_memcpy(r->daddr, &a[3], 4);
	else
		__builtin_memcpy(r->daddr, &sa.sin6_addr, 16);
}

/* A UDP message's identity in the application's view: the hash of its first
 * bytes as the caller's buffer holds them (CP_NETF_MSG_HASH), and for a send,
 * its destination when the call named one. */
static __always_inline void udp_msg(struct call_start *c, struct cp_net_rec *r)
{
	struct msg_place m;
	if (!c || !msg_place_of(c, &m))
		return;
	if (r->kind == CP_NET_SOCK_SEND)
		msg_dest(&m, r);
	if (msg_hash(&m, r->len, &r->hash))
		r->flags |= CP_NETF_MSG_HASH;
}

static __always_inline int on_sock(struct sock *sk, int ret, __u8 kind)
{
	__u64 now = bpf_ktime_get_ns();
	if (ret <= 0)
		return 0;
	struct cp_net_rec rec = {.ktime_ns = now, .kind = kind};
	struct cp_net_rec *r = &rec;
	if (!sock_event(sk, r))
		return 0;
	r->len = ret;
	struct call_start *c = current_call();
	if (kind == CP_NET_SOCK_SEND) {
		r->call_ns = call_ns(c, now);
		if (r->call_ns)
			r->flags |= CP_NETF_CALL_START;
	}
	if (r->proto == IPPROTO_UDP)
		udp_msg(c, r);
	if (r->proto == IPPROTO_TCP) {
		/* Stream position of the first byte: matches the packets' seq. */
		struct tcp_sock *tp = (struct tcp_sock *)sk;
		__u32 end = kind == CP_NET_SOCK_SEND ? BPF_CORE_READ(tp, write_seq)
						     : BPF_CORE_READ(tp, copied_seq);
		/* copied_seq counts a FIN the same recvmsg() consumed (the FIN takes
		 * the sequence number after the last byte): the peer's FIN arrived
		 * (tcp_fin() sets SOCK_DONE; a local shutdown or a reset does not) and
		 * everything up to rcv_nxt, which includes it, has been read. */
		if (kind == CP_NET_SOCK_RECV &&
		    (BPF_CORE_READ(sk, __sk_common.skc_flags) & (1UL << SOCK_DONE)) &&
		    end == BPF_CORE_READ(tp, rcv_nxt))
			end--;
		r->seq = end - (__u32)ret;
	}
	emit(r, false);
	return 0;
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(cp_sock_send, struct sock *sk, int ret, int flags)
{
	return on_sock(sk, ret, CP_NET_SOCK_SEND);
}

SEC("tp_btf/sock_recv_length")
int BPF_PROG(cp_sock_recv, struct sock *sk, int ret, int flags)
{
	return on_sock(sk, ret, CP_NET_SOCK_RECV);
}

/* TCP data goes out inside sendmsg, before sock_send_length fires: learn the
 * owner here first, so the very first segment is attributed. */
SEC("tp_btf/tcp_sendmsg_locked")
int BPF_PROG(cp_tcp_sendmsg, const struct sock *sk, const struct msghdr *msg, const struct sk_buff *skb,
	     int size_goal)
{
	struct cp_net_rec rec = {};
	struct owner cur;
	struct flow_key k;
	if (!sock_addrs(sk, &rec))
		return 0;
	struct cp_net_rec *r = &rec;
	current_owner(&cur);
	flow_of(&k, r, true);
	learn(&k, &cur);
	return 0;
}

/* listen() happens in process context: the owner of the listening port is known
 * before any SYN arrives, so a server's receives are attributed from the first
 * one (through the wildcard lookup of find_owner). connect() needs no hook: its
 * SYN is transmitted in process context and learnt in on_packet. Entries are not
 * deleted on close: the FIN/ACKs after close still belong to the owner, and the
 * LRU map evicts old flows; a reused 4-tuple is relearnt at its first use. */
SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(cp_sock_state, const struct sock *sk, const int oldstate, const int newstate)
{
	struct cp_net_rec rec = {};
	struct flow_key k;
	struct owner cur;
	if (newstate != TCP_LISTEN || !in_task() || !sock_addrs(sk, &rec))
		return 0;
	flow_of(&k, &rec, true);
	{
		current_owner(&cur);
		learn(&k, &cur);
	}
	return 0;
}
