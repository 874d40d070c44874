// cptrace translate: the stages in order (translate.h), and the events written.
#include "translate/translate.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <stdexcept>

#include <fmt/format.h>

#include "trace/block_codec.h"
#include "trace/trace_writer.h"
#include "translate/frame_rewrite.h"
#include "tables/memory_budget.h"
#include "translate/relation_cursor.h"
#include "translate/run_relations.h"
#include "translate/translated_meta.h"
#include "os/say.h"

namespace cptrace {
namespace {

using nlohmann::json;

// Every node's frames, node after node, each node's counts into `meta`; a
// warning for the events whose bounds a hull transition leaves unguaranteed.
uint64_t write_events(const TranslateOptions& opt, const std::vector<TranslateNode>& nodes, size_t ref,
                      const RunRelations& rel, unsigned threads, json& meta, TraceWriter& w) {
  const ReferencePaths& paths = rel.paths;
  uint64_t events = 0;
  for (size_t v = 0; v < nodes.size(); ++v) {
    Ranges transitions = node_transitions(opt, nodes, ref, rel, v);
    NodeRewrite done =
        translate_node(nodes[v], uint16_t(v), *paths.to_ref[v], transitions, threads, opt.compression_level, w);
    const uint64_t k = done.events, in_transition = done.in_transition;
    meta["translated"]["nodes"][v]["events"] = k;
    // The largest error of a stamp on the node's own TSC (conversion, skew across
    // CPUs), and per CPU of the stamps that name theirs: latency widens a
    // same-node duration by its two stamps' (latency/duration_bounds.h).
    meta["translated"]["nodes"][v]["max_ts_err"] = std::min(done.errs.any(), kTranslateTscRange);
    meta["translated"]["nodes"][v]["cpu_ts_err"] = done.errs.per_cpu_json(kTranslateTscRange);
    meta["translated"]["nodes"][v]["events_in_transition"] = in_transition;
    if (in_transition)
      say("warning: {} events of {} lie where its clock relation to {} changes rate "
          "(hull transition): their bounds are NOT guaranteed",
          in_transition, nodes[v].name, paths.names[v][1]);
    events += k;
  }
  return events;
}

}  // namespace

TranslateSummary translate(const TranslateOptions& opt) {
  check_options(opt);
  MemoryBudget cpus;
  cpus.threads = opt.threads;
  const unsigned threads = cpus.thread_count();
  std::vector<TranslateNode> nodes = open_nodes(opt.dirs, threads);
  if (nodes.size() > 0xffff) throw std::runtime_error("more than 65535 nodes");
  size_t ref = reference_index(nodes, opt.reference);
  warn_unknown_peers(nodes);
  PacketMatches packets = read_packets(nodes);
  RunRelations rel = relate_nodes(opt, nodes, ref, packets, "translate");
  json meta = translated_meta(opt, nodes, ref, rel.pairs, rel.paths, rel.checks, rel.findings, packets);

  TraceWriter w(opt.out, meta, opt.overwrite);
  json chans = channels_json(nodes);
  w.write(encode_json(FrameType::Channels, chans.dump(), uint32_t(chans.size())));
  TranslateSummary s;
  auto t0 = std::chrono::steady_clock::now();
  s.events = write_events(opt, nodes, ref, rel, threads, meta, w);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  meta["translated"]["events"] = s.events;
  meta["translated"]["seconds"] = secs;
  meta["complete"] = true;
  w.finish(meta);
  s.meta = meta;
  return s;
}

}  // namespace cptrace
