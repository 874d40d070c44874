// Net frames (FrameType::Net): network events of `cptrace record --net`.
//
// Payload, before zstd: `count` records of struct cp_net_rec (include/cptrace_net.h)
// exactly as the BPF programs wrote them, little-endian: 104 bytes each in Net2
// frames (what the recorder writes), 96 in Net frames (version 1, before the
// cgroup id; read with cgroup 0). raw_len must equal count * that size and
// count <= kMaxFrameEvents; the decoder checks both before decompressing
// anything. Timestamps are CLOCK_MONOTONIC ns (the kernel's
// bpf_ktime_get_ns); TraceReader converts them to the node's TSC through the
// trace's clock map, like user events with Timebase::MonoNs.
//
// Why packed structs and not columns like Events frames: network records are
// wide and mostly independent fields (addresses, seq/ack); zstd on the raw array
// already removes the repetition (same flows, zero padding), and the decoder
// stays a length check plus memcpy.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "trace/block_codec.h"
#include "cptrace_net.h"
#include "trace/trace_format.h"

namespace cptrace {

static_assert(sizeof(cp_net_rec) == 104, "cp_net_rec is the on-disk Net2 record: keep it 104 bytes");
constexpr size_t kNetRecV1Bytes = 96;  // a Net (version 1) record: cp_net_rec up to `cgroup`
static_assert(offsetof(cp_net_rec, cgroup) == kNetRecV1Bytes);

// One network event as handed out by TraceReader: `ts` in the node's TSC ticks
// (converted from r.ktime_ns, which keeps the raw CLOCK_MONOTONIC value).
struct NetEvent {
  uint64_t ts = 0;
  cp_net_rec r{};
  uint64_t ts_err = 0;  // the true instant is in [ts - ts_err, ts + ts_err]
  // A socket send with CP_NETF_CALL_START: the entry of its send call, the same way.
  uint64_t call_ts = 0, call_err = 0;
};

// A Net2 frame. n <= kMaxFrameEvents, else std::invalid_argument.
EncodedFrame encode_net(const cp_net_rec* recs, size_t n, int zstd_level = 1);
// A Net or Net2 frame. Throws std::runtime_error on any inconsistency; never
// reads out of bounds.
void decode_net_into(const FrameHeader& h, const uint8_t* payload, size_t len, std::vector<cp_net_rec>& out);

// Text helpers shared by dump and tests.
const char* net_kind_name(uint8_t kind);  // "send", "recv", "tx", "rx"
// Where a record was stamped (cp_net_rec.stamp_at): its tracepoint's name, e.g.
// "netif_rx"; the kind's own tracepoint for 0 ("netif_receive_skb" for a receive).
const char* net_stamp_name(uint8_t kind, uint8_t stamp_at);
const char* net_proto_name(uint8_t proto);  // "tcp", "udp", or "ip" for others
std::string net_addr(const cp_net_rec& r, bool src);  // inet_ntop of saddr/daddr
std::string tcp_flags_text(uint8_t flags);  // e.g. "SA", "PA", "F" ("" when none)

}  // namespace cptrace
