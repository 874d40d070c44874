// cptrace latency: the rows of one or several channel pairs of a translated
// trace, joined by tuple id and bounded (latency_rows.h, shared_events.h).
#include "latency/latency.h"

#include <algorithm>
#include <stdexcept>

#include "cptrace.h"  // cp_channel_id
#include "latency/latency_rows.h"
#include "latency/latency_source.h"  // is_translated
#include "latency/shared_events.h"
#include "trace/trace_reader.h"
#include "translate/translated_frame.h"
#include "translate/translated_run.h"

namespace cptrace {

using namespace latency_join;  // the row machinery of latency_rows.h, shared_events.h

namespace {

using nlohmann::json;

// By full name (its hash is the id, whatever the trace kept of the name) or label.
uint64_t find_channel(const TraceReader& r, const std::string& name) {
  if (r.channels().count(cp_channel_id(name.c_str()))) return cp_channel_id(name.c_str());
  for (const auto& [id, c] : r.channels())
    if (r.channel_name(id) == name) return id;
  std::string have;
  for (const auto& [id, c] : r.channels()) have += (have.empty() ? "" : ", ") + r.channel_name(id);
  throw std::runtime_error("unknown channel \"" + name +
                           "\" (channels in the trace: " + (have.empty() ? "none" : have) + ")");
}

}  // namespace

uint64_t latency_channel(const TraceReader& r, const std::string& name) { return find_channel(r, name); }

LatencyResult latency(const std::string& dir, const std::string& from, const std::string& to) {
  TraceReader r(dir);
  if (!is_translated(r)) throw std::runtime_error(dir + ": not a translated trace (run cptrace translate first)");
  return latency(r, from, to);
}

void LatencyResult::for_each_row(const std::function<void(const LatencyRow&)>& fn) const {
  if (stream)
    stream->for_each(fn);
  else
    for (const LatencyRow& r : rows) fn(r);
}

LatencyResult latency(const TraceReader& r, const std::string& from, const std::string& to) {
  MemoryBudget unlimited;
  unlimited.bytes = ~0ull >> 1;
  LatencyResult res = latency_stream(r, from, to, unlimited);
  res.rows.reserve(res.row_count);
  res.stream->for_each([&](const LatencyRow& row) { res.rows.push_back(row); });
  res.stream.reset();
  return res;
}

namespace {

// What every result of trace `r` takes from its meta.json: the nodes, the
// method, the reference's origin and TSC frequency.
LatencyResult result_header(const TraceReader& r, const std::vector<std::string>& nodes, const MemoryBudget& budget) {
  const TranslatedRun run = TranslatedRun::read(r);
  LatencyResult res;
  res.budget = budget;
  res.node_names = nodes;
  res.method = run.method;
  res.unauthenticated = run.unauthenticated_rounds;
  res.ref_origin = run.ref_origin;
  res.have_ns = run.have_ns;
  res.hz = run.hz, res.hz_lo = run.hz_lo, res.hz_hi = run.hz_hi;
  return res;
}

void check_translated(const TraceReader& r) {
  if (!is_translated(r))
    throw std::runtime_error(r.events_path() + ": not a translated trace (run cptrace translate first)");
  if (r.error()) throw *r.error();
}

}  // namespace

LatencyResult latency_stream(const TraceReader& r, const std::string& from, const std::string& to,
                             const MemoryBudget& budget) {
  return std::move(latency_streams(r, {{from, to}}, budget).front());
}

LatencyResult latency_header(const TraceReader& r) {
  check_translated(r);
  return result_header(r, DurationBounds::from_translated(r.meta()["translated"]).names, {});
}

namespace {

// One pair: its join takes the events straight from the decode (`feed`). A
// little over half the budget joins, a quarter holds the rows: the summaries
// later take 0.55 beside the rows (latency_summary.h), the join gone.
LatencyResult join_one(const TraceReader& r, const DurationBounds& sc, std::pair<uint64_t, uint64_t> ids,
                       const MemoryBudget& budget, const TranslatedFeed& feed) {
  const size_t node_count = sc.names.size();
  TupleJoin join(budget.share(0.55));
  const auto [from, to] = ids;
  feed([&](const std::vector<TranslatedEvent>& evs) {
    for (const TranslatedEvent& e : evs) {
      if (e.kind != uint8_t(EventKind::User)) continue;
      if (e.node >= node_count) throw std::runtime_error("translated event names node index beyond meta.json");
      if (e.channel == from) join.add(false, e.tuple, join_stamp(e));
      if (e.channel == to) join.add(true, e.tuple, join_stamp(e));
    }
  });
  LatencyResult res = result_header(r, sc.names, budget);
  join_rows(join, sc, res);
  return res;
}

// latency_streams' work: done(i, result) for each index i of pairs, as soon as
// its pair's rows are complete; the budget divided as `split` says.
void streams(const TraceReader& r, const std::vector<ChannelPair>& pairs, const MemoryBudget& budget,
             const SharedSplit& split, const std::function<void(size_t, const LatencyResult&)>& done) {
  if (pairs.empty()) return;  // nothing to read the trace for
  check_translated(r);
  const DurationBounds sc = DurationBounds::from_translated(r.meta()["translated"]);
  // One join per distinct channel pair (a pair asked twice is read once).
  std::vector<std::pair<uint64_t, uint64_t>> ids;
  std::vector<size_t> join_of;
  for (const auto& [from, to] : pairs) {
    std::pair<uint64_t, uint64_t> id{find_channel(r, from), find_channel(r, to)};
    auto at = std::find(ids.begin(), ids.end(), id);
    join_of.push_back(size_t(at - ids.begin()));
    if (at == ids.end()) ids.push_back(id);
  }
  // Join j's result to every index that asked for it.
  auto hand_on = [&](size_t j, const LatencyResult& res) {
    for (size_t i = 0; i < join_of.size(); ++i)
      if (join_of[i] == j) done(i, res);
  };
  const size_t node_count = sc.names.size();
  auto check_node = [&](const TranslatedEvent& e) {
    if (e.node >= node_count) throw std::runtime_error("translated event names node index beyond meta.json");
  };
  if (ids.size() == 1) {
    // One pair: its join takes the events straight from the decode.
    return hand_on(0, join_one(r, sc, ids.front(), budget,
                               [&](const TranslatedSink& fn) { for_each_translated(r, budget.thread_count(), fn); }));
  }
  // Several pairs share channels (a path's hops: each channel in two pairs).
  // Each channel's events are held once (SharedEvents, split.store of the
  // budget), not once per pair, and the pairs are joined from there: one at a
  // time in split.join while the events are in memory, else part by part, all
  // pairs of a part together in 0.22 (their events' positions included). Every
  // pair's rows hold a quarter of its result's share of the budget, as its
  // summaries later take 0.55 of that share.
  std::vector<uint64_t> channels;
  std::vector<std::pair<uint16_t, uint16_t>> sides;  // per join: the channels' indices
  auto index_of = [&](uint64_t ch) {
    auto at = std::find(channels.begin(), channels.end(), ch);
    if (at == channels.end()) channels.push_back(ch);
    if (channels.size() >= SharedEvents::kWide) throw std::runtime_error("latency: too many channels in one read");
    return uint16_t(std::find(channels.begin(), channels.end(), ch) - channels.begin());
  };
  for (const auto& [from, to] : ids) sides.push_back({index_of(from), index_of(to)});
  SharedEvents events(budget.share(split.store));
  for_each_translated(r, budget.thread_count(), [&](const std::vector<TranslatedEvent>& evs) {
    for (const TranslatedEvent& e : evs) {
      if (e.kind != uint8_t(EventKind::User)) continue;
      check_node(e);
      for (uint16_t c = 0; c < channels.size(); ++c)
        if (e.channel == channels[c]) {
          events.add(c, e.tuple, join_stamp(e));
          break;
        }
    }
  });
  // Once spilled, every pair's rows are made together: an equal share each.
  const bool in_turn = split.each_in_memory > 0 && !events.spilled();
  const MemoryBudget each = budget.share(in_turn ? split.each_in_memory : 1.0 / double(ids.size()));
  std::vector<LatencyResult> joined;
  for (size_t j = 0; j < ids.size(); ++j) joined.push_back(result_header(r, sc.names, each));
  // Compact rows where the positions and nodes fit them, else wide ones.
  if (events.size() < CompactRow::kMaxSeq && node_count <= CompactRow::kMaxNodes)
    join_shared<CompactRow>(events, sides, sc, budget, split, joined, hand_on);
  else
    join_shared<WideRow>(events, sides, sc, budget, split, joined, hand_on);
}

}  // namespace

std::vector<LatencyResult> latency_streams(const TraceReader& r, const std::vector<ChannelPair>& pairs,
                                           const MemoryBudget& budget) {
  std::vector<LatencyResult> out(pairs.size());
  streams(r, pairs, budget, kAllKept, [&](size_t i, const LatencyResult& res) { out[i] = res; });
  return out;
}

LatencyResult latency_stream(const TraceReader& r, const std::string& from, const std::string& to,
                             const MemoryBudget& budget, const TranslatedFeed& feed) {
  check_translated(r);
  const DurationBounds sc = DurationBounds::from_translated(r.meta()["translated"]);
  const std::pair<uint64_t, uint64_t> ids{find_channel(r, from), find_channel(r, to)};
  return join_one(r, sc, ids, budget, feed);
}

void latency_streams(const TraceReader& r, const std::vector<ChannelPair>& pairs, const MemoryBudget& budget,
                     const std::function<void(size_t, const LatencyResult&)>& fn) {
  streams(r, pairs, budget, kEachInTurn, fn);
}

void LatencyResult::take_join(const JoinCounts& c, std::shared_ptr<const LatencyRowSource> rows) {
  from_only = c.from_only;
  to_only = c.to_only;
  from_duplicates = c.from_duplicates;
  to_duplicates = c.to_duplicates;
  row_count = c.pairs;
  partitions = c.partitions;
  stream = std::move(rows);
}

}  // namespace cptrace
