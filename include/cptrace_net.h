/* Network event record shared by bpf/netcap.bpf.c and user/ (net_capture, net_codec).
 *
 * One fixed-size record for all four kinds (socket send/recv, packet tx/rx): the
 * BPF programs write it into the per-CPU net rings, and a Net frame of a trace is
 * exactly an array of these records (zstd-compressed), so the layout below is also
 * the on-disk layout: explicit padding, little-endian, 96 bytes. Change it only
 * together with the Net frame version (user/trace/net_codec.h).
 *
 * Byte order: addresses are stored as on the wire (network order, IPv4 in the
 * first 4 bytes); ports, seq/ack and every other number are host order. */
#ifndef CPTRACE_NET_H
#define CPTRACE_NET_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

enum cp_net_kind {
	CP_NET_SOCK_SEND = 1, /* sock:sock_send_length: bytes a sendmsg() accepted */
	CP_NET_SOCK_RECV = 2, /* sock:sock_recv_length: bytes a recvmsg() returned */
	CP_NET_PKT_TX = 3,    /* net:net_dev_start_xmit: a frame handed to the driver */
	CP_NET_PKT_RX = 4,    /* net:netif_receive_skb: a frame entering the stack (its stamp:
				 the earliest receive point it passed, see cp_net_rec.stamp_at) */
};

/* cp_net_rec.stamp_at: the tracepoint where ktime_ns was read. 0 is the kind's own
 * tracepoint (above); a receive is stamped at the earliest point the kernel offers
 * on its path, before the backlog queue or GRO, and recorded at netif_receive_skb.
 * Traces written before this field existed hold 0 there. */
enum cp_net_stamp {
	CP_NET_AT_KIND = 0,
	CP_NET_AT_NETIF_RX = 1,			    /* net:netif_rx: enqueue onto the backlog (veth,
						  loopback, tun, tunnels, anything via netif_rx) */
	CP_NET_AT_NETIF_RECEIVE_SKB_ENTRY = 2,	    /* net:netif_receive_skb_entry: driver, no GRO */
	CP_NET_AT_NETIF_RECEIVE_SKB_LIST_ENTRY = 3, /* net:netif_receive_skb_list_entry */
	CP_NET_AT_NAPI_GRO_RECEIVE_ENTRY = 4,	    /* net:napi_gro_receive_entry: NAPI driver, GRO */
	CP_NET_AT_NAPI_GRO_FRAGS_ENTRY = 5,	    /* net:napi_gro_frags_entry: NAPI driver, frags */
	CP_NET_AT_MAX = 6,
};

/* cp_net_rec.flags (not the TCP flags). */
enum cp_net_flag {
	CP_NETF_TASK = 1,	 /* pid/tid are the task that ran the program (process context) */
	CP_NETF_OWNER = 2,	 /* pid/tid come from the socket/flow owner learned earlier */
	CP_NETF_HASH_PART = 4,	 /* UDP payload hash covers fewer than CP_NET_HASH_BYTES (short
				  datagram or payload outside the linear skb area) */
	CP_NETF_L4_TRUNC = 8,	 /* the L4 header was not in the linear area: ports etc. are 0 */
	CP_NETF_RX_GREW = 16,	 /* receive: the skb grew after its early stamp (GRO merged later
				  segments into it), so it is stamped at netif_receive_skb,
				  when all its bytes had arrived */
	CP_NETF_CALL_START = 32, /* socket send: call_ns holds the time since the entry of the
				    send call (write, writev, send*) that handed the bytes over */
	CP_NETF_MSG_HASH = 64,	 /* UDP socket send/recv: hash holds the FNV-1a of the message's
				    first min(len, CP_NET_HASH_BYTES) bytes, read from the caller's
				    buffer (a packet's hash of the same datagram is equal). With or
				    without it, a UDP send whose call named a destination (sendto,
				    sendmsg) carries that one in daddr/dport */
};

/* Bytes of UDP payload hashed (FNV-1a 32) for matching a datagram across nodes. */
#define CP_NET_HASH_BYTES 64

struct cp_net_rec {
	__u64 ktime_ns; /* bpf_ktime_get_ns() (CLOCK_MONOTONIC) in the program */
	__u8 saddr[16]; /* source (packets) / local (socket events) address */
	__u8 daddr[16]; /* destination (packets) / remote (socket events) address */
	__u32 netns;	/* network namespace inode (as in /proc/PID/ns/net) */
	__u32 ifindex;	/* device (packets; 0 for socket events) */
	__u32 pid;	/* tgid, 0 when unknown (see flags) */
	__u32 tid;
	__u32 seq;  /* TCP sequence number of the first payload byte */
	__u32 ack;  /* TCP acknowledgement number */
	__u32 len;  /* L4 payload bytes (packets); byte count (socket events) */
	__u32 hash; /* UDP packets: FNV-1a of the first CP_NET_HASH_BYTES payload bytes;
		       UDP socket events with CP_NETF_MSG_HASH: the same of the message */
	union {
		__u32 skb_len; /* packets: skb->len (whole frame as the device sees it) */
		__u32 call_ns; /* socket send with CP_NETF_CALL_START: ns from the send
				  call's entry (its syscall) to ktime_ns */
	};
	__u16 sport;	/* source (packets) / local (socket) port */
	__u16 dport;	/* destination (packets) / remote (socket) port */
	__u16 gso_segs; /* packets: skb_shinfo()->gso_segs (0 or 1: a single segment) */
	__u16 gso_size; /* packets: MSS of each wire segment of a GSO packet */
	__u16 cpu;
	__u16 ip_id;	/* IPv4 identification (IPv6: 0) */
	__u8 kind;	/* enum cp_net_kind */
	__u8 family;	/* AF_INET (2) or AF_INET6 (10) */
	__u8 proto;	/* IPPROTO_TCP (6), IPPROTO_UDP (17), else the L4 number */
	__u8 tcp_flags; /* FIN 0x01 SYN 0x02 RST 0x04 PSH 0x08 ACK 0x10 URG 0x20 ECE CWR */
	__u8 flags;	/* enum cp_net_flag */
	__u8 stamp_at;	/* enum cp_net_stamp: where ktime_ns was read */
	__u8 pad[2];
	/* Version 2 (Net2 frames) from here; version 1's records end above (96 bytes). */
	__u64 cgroup; /* cgroup v2 id of the task pid/tid name (0 when unknown), as
			 bpf_get_current_cgroup_id() gives it: the inode of its directory */
};

/* Index of the per-CPU counters in the BPF `net_counters` array. seen counts
 * every event that passed the filters; dropped those whose ring reservation
 * failed. recorded + dropped == seen exactly. */
enum cp_net_counter {
	CP_NET_CNT_SEEN = 0,
	CP_NET_CNT_DROPPED = 1,
	CP_NET_CNT_MAX = 4,
};

#endif
