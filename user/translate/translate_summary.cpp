// What translate tells the user: see translate_summary.h.
#include "translate/translate_summary.h"

#include <cstdio>
#include <iterator>

#include <fmt/format.h>

#include "translate/realtime_offset.h"
#include "translate/sync_sanity.h"

namespace cptrace {

using nlohmann::json;

namespace {

using Out = std::back_insert_iterator<std::string>;

// Each node's events, path and bound width; the packets matched across nodes.
void nodes_part(const json& tr, Out out) {
  for (const json& n : tr["nodes"]) {
    std::string path;
    for (const auto& p : n["path"]) path += (path.empty() ? "" : " -> ") + p.get<std::string>();
    fmt::format_to(out, "  {:<12} {:10} events  path {}", n["node"].get<std::string>(), n["events"].get<uint64_t>(),
                   path);
    if (n.contains("width_mid_ticks"))
      fmt::format_to(out, "  bound width mid-span {} ticks", n["width_mid_ticks"].get<int64_t>());
    fmt::format_to(out, "\n");
  }
  const json& pk = tr["packets"];
  if (pk["receives"].get<uint64_t>() > 0)
    fmt::format_to(out,
                   "  packets: {} receives, {} matched, {} ambiguous (discarded), {} unmatched, {} without "
                   "handshake, {} from senders that dropped records\n",
                   pk["receives"].get<uint64_t>(), pk["matched"].get<uint64_t>(), pk["ambiguous"].get<uint64_t>(),
                   pk["unmatched"].get<uint64_t>(), pk["no_handshake"].get<uint64_t>(),
                   pk["lossy_sender"].get<uint64_t>());
}

// Each pair's inputs and whether it is usable; the physics check of its rounds.
void pairs_part(const json& tr, Out out) {
  for (const json& p : tr["pairs"]) {
    const json& in = p["inputs"];
    const std::string from = p["from"].get<std::string>(), to = p["to"].get<std::string>();
    fmt::format_to(out, "  pair {}->{} bounded by {} ({} rounds, {}/{} packets each way)", from, to,
                   in["bounded_by"].get<std::string>(), in["rounds"].get<size_t>(), in["packets_from_to"].get<size_t>(),
                   in["packets_to_from"].get<size_t>());
    for (const char* k : {"rounds_alone", "traffic_alone"})
      if (in.contains(k)) fmt::format_to(out, "; {}: {}", k, in[k].get<std::string>());
    fmt::format_to(out, "\n");
    if (p.contains("hull") && !p["hull"].value("linear", true))
      fmt::format_to(out, "  NON-LINEAR {}->{}: {}{}\n", from, to, p["hull"]["nonlinear"].get<std::string>(),
                     p.contains("piecewise") ? "; the piecewise model in use does not assume linear clocks" : "");
    if (p.contains("error"))
      fmt::format_to(out, "  pair {}->{} unusable: {}\n", from, to, p["error"].get<std::string>());
  }
  for (const json& c : tr.value("sync_check", json::array()))
    if (c.contains("line_rate_ppm"))
      fmt::format_to(
          out, "  pair {}: rounds' rate vs the nodes' own TSC frequencies {:+.2f}..{:+.2f} ppm (limit +-{:.0f})\n",
          c["pair"].get<std::string>(), c["line_rate_ppm"][0].get<double>(), c["line_rate_ppm"][1].get<double>(),
          c["limit_ppm"].get<double>());
  for (const json& f : tr.value("suspect_sync", json::array()))
    fmt::format_to(out, "  {}\n", suspect_sync_warning(SyncFinding::from_json(f)));
}

// Where each node's clock model fell back or its TSC changed rate; the nodes'
// CLOCK_REALTIME offsets; the reference's TSC frequency.
void clocks_part(const json& tr, Out out) {
  for (const json& n : tr["nodes"]) {
    const json& cm = n["clock_model"];
    uint64_t violated = cm["violated"].get<uint64_t>(), crowded = cm["crowded"].get<uint64_t>(),
             departed = cm.value("departed", uint64_t(0));
    if (violated + crowded + departed > 0)
      fmt::format_to(out,
                     "  {}: kernel stamps in {} of {} correlation segments bounded without the clock model "
                     "(its assumption failed there: {} violated, {} with two clock adjustments, {} where "
                     "CLOCK_MONOTONIC_RAW left its TSC line); wider, not wrong\n",
                     n["node"].get<std::string>(), violated + crowded + departed, cm["segments"].get<uint64_t>(),
                     violated, crowded, departed);
    if (uint64_t r = cm.value("tsc_rate_changes", uint64_t(0)))
      fmt::format_to(out, "  {}: the TSC changed its rate {} time(s) (a live migration?): each side has its own line\n",
                     n["node"].get<std::string>(), r);
  }
  for (const json& o : tr.value("realtime_offsets", json::array()))
    fmt::format_to(out, "  {}\n", realtime_offset_line(o));
  const json& f = tr["frequency"];
  if (f.contains("hz"))
    fmt::format_to(out, "  reference TSC {:.6f} GHz [{:.9f}, {:.9f}] ({})\n", f["hz"].get<double>() / 1e9,
                   f["hz_lo"].get<double>() / 1e9, f["hz_hi"].get<double>() / 1e9, f["source"].get<std::string>());
}

}  // namespace

std::string translate_summary(const TranslateSummary& s, const TranslateOptions& opt) {
  std::string text;
  auto out = std::back_inserter(text);
  const json& tr = s.meta["translated"];
  fmt::format_to(out, "translated {} events of {} nodes onto {}'s TSC (method {}) in {:.2f} s -> {}\n", s.events,
                 tr["nodes"].size(), tr["reference"].get<std::string>(), name_of(opt.method),
                 tr["seconds"].get<double>(), opt.out);
  nodes_part(tr, out);
  pairs_part(tr, out);
  clocks_part(tr, out);
  return text;
}

int run_translate(const TranslateOptions& opt) {
  fmt::print("{}", translate_summary(translate(opt), opt));
  return 0;
}

}  // namespace cptrace
