// MinRTT rounds summarized per peer and phase: see sync_round_summary.h.
#include "trace/sync_round_summary.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <utility>

namespace cptrace {

nlohmann::json summarize_rounds(const std::vector<SyncRound>& rounds, double tsc_hz) {
  struct Acc {
    std::string addr;
    uint64_t n = 0, kok = 0, uok = 0;
    int64_t kmin = INT64_MAX, umin = INT64_MAX;
    uint64_t kmin_seq = 0;
  };
  std::map<std::pair<std::string, std::string>, Acc> acc;  // (peer, phase)
  for (const auto& r : rounds) {
    for (const std::string& ph : {r.phase, std::string("all")}) {
      Acc& a = acc[{r.peer, ph}];
      a.addr = r.peer_addr;
      a.n++;
      if (r.kernel_ok) {
        a.kok++;
        if (r.kernel_rtt() < a.kmin) {
          a.kmin = r.kernel_rtt();
          a.kmin_seq = r.seq;
        }
      }
      if (r.user_ok) {
        a.uok++;
        a.umin = std::min(a.umin, r.user_rtt());
      }
    }
  }
  nlohmann::json out = nlohmann::json::object();
  auto us = [&](int64_t t) -> nlohmann::json {
    if (t == INT64_MAX || !(tsc_hz > 0)) return nullptr;
    return double(t) * 1e6 / tsc_hz;
  };
  for (auto& [k, a] : acc) {
    out[k.first]["addr"] = a.addr;
    out[k.first][k.second] = {
        {"rounds", a.n},
        {"kernel_ok", a.kok},
        {"user_ok", a.uok},
        {"kernel_min_ticks", a.kmin == INT64_MAX ? nlohmann::json(nullptr) : nlohmann::json(a.kmin)},
        {"kernel_min_seq", a.kmin_seq},
        {"user_min_ticks", a.umin == INT64_MAX ? nlohmann::json(nullptr) : nlohmann::json(a.umin)},
        {"kernel_min_us", us(a.kmin)},
        {"user_min_us", us(a.umin)}};
  }
  return out;
}

}  // namespace cptrace
