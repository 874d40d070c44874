// Net frame codec: a checked array of cp_net_rec (layout in net_codec.h).
#include "trace/net_codec.h"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <cstring>
#include <stdexcept>

namespace cptrace {

EncodedFrame encode_net(const cp_net_rec* recs, size_t n, int zstd_level) {
  if (n > kMaxFrameEvents) throw std::invalid_argument("encode_net: more than kMaxFrameEvents records");
  EncodedFrame f;
  finish_frame(f, FrameType::Net2, reinterpret_cast<const uint8_t*>(recs), n * sizeof(cp_net_rec),
               static_cast<uint32_t>(n), zstd_level);
  return f;
}

void decode_net_into(const FrameHeader& h, const uint8_t* payload, size_t len, std::vector<cp_net_rec>& out) {
  out.clear();
  const bool v1 = h.type == uint16_t(FrameType::Net);
  const size_t size = v1 ? kNetRecV1Bytes : sizeof(cp_net_rec);
  if (h.count > kMaxFrameEvents) throw std::runtime_error("net record count beyond kMaxFrameEvents");
  if (uint64_t{h.count} * size != h.raw_len)
    throw std::runtime_error("net frame: raw_len != count * " + std::to_string(size));
  auto [raw, raw_len] = frame_bytes(h, v1 ? FrameType::Net : FrameType::Net2, payload, len);
  out.resize(h.count);  // value-initialised: a version 1 record's cgroup is 0
  if (v1) {
    for (size_t i = 0; i < h.count; ++i) std::memcpy(&out[i], raw + i * size, size);
  } else if (raw_len > 0) {
    std::memcpy(out.data(), raw, raw_len);
  }
  for (const cp_net_rec& r : out) {
    // Unknown kinds could come from a newer writer, but the family decides how
    // addresses are read: anything else is corruption the CRC did not catch.
    if (r.kind < CP_NET_SOCK_SEND || r.kind > CP_NET_PKT_RX) throw std::runtime_error("net record of unknown kind");
    if (r.family != AF_INET && r.family != AF_INET6) throw std::runtime_error("net record of unknown address family");
  }
}

const char* net_kind_name(uint8_t kind) {
  switch (kind) {
    case CP_NET_SOCK_SEND:
      return "send";
    case CP_NET_SOCK_RECV:
      return "recv";
    case CP_NET_PKT_TX:
      return "tx";
    case CP_NET_PKT_RX:
      return "rx";
  }
  return "unknown";
}

const char* net_stamp_name(uint8_t kind, uint8_t stamp_at) {
  switch (stamp_at) {
    case CP_NET_AT_KIND:
      break;
    case CP_NET_AT_NETIF_RX:
      return "netif_rx";
    case CP_NET_AT_NETIF_RECEIVE_SKB_ENTRY:
      return "netif_receive_skb_entry";
    case CP_NET_AT_NETIF_RECEIVE_SKB_LIST_ENTRY:
      return "netif_receive_skb_list_entry";
    case CP_NET_AT_NAPI_GRO_RECEIVE_ENTRY:
      return "napi_gro_receive_entry";
    case CP_NET_AT_NAPI_GRO_FRAGS_ENTRY:
      return "napi_gro_frags_entry";
    default:
      return "unknown";
  }
  switch (kind) {
    case CP_NET_SOCK_SEND:
      return "sock_send_length";
    case CP_NET_SOCK_RECV:
      return "sock_recv_length";
    case CP_NET_PKT_TX:
      return "net_dev_start_xmit";
    case CP_NET_PKT_RX:
      return "netif_receive_skb";
  }
  return "unknown";
}

const char* net_proto_name(uint8_t proto) { return proto == 6 ? "tcp" : proto == 17 ? "udp" : "ip"; }

std::string net_addr(const cp_net_rec& r, bool src) {
  char buf[INET6_ADDRSTRLEN] = {};
  const void* a = src ? r.saddr : r.daddr;
  if (!inet_ntop(r.family == AF_INET6 ? AF_INET6 : AF_INET, a, buf, sizeof buf)) return "?";
  return buf;
}

std::string tcp_flags_text(uint8_t f) {
  static const char names[] = "FSRPAUEC";
  std::string s;
  for (int i = 0; i < 8; ++i)
    if (f & (1u << i)) s += names[i];
  return s;
}

}  // namespace cptrace
