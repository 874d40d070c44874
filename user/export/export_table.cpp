// CSV tables of a translated trace for SQL engines (export_table.h).
#include "export/export_table.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <unordered_map>

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tables/csv_util.h"
#include "translate/translated_run.h"
#include "export/event_handoff.h"
#include "tables/parquet_writer.h"
#include "tables/zstd_csv_writer.h"
#include "trace/event_names.h"
#include "os/out_file.h"
#include "os/output_dir.h"
#include "trace/trace_reader.h"
#include "latency/latency.h"
#include "tables/parallel_for.h"
#include "translate/translated_frame.h"

namespace cptrace {
namespace {

bool table_owns(const std::string& name) { return is_table_file(name, {"events", "latency"}); }
const OutputKind kTableOutput{"table export", "events.csv.zst", table_owns};
const OutputKind kPlainTableOutput{"table export", "events.csv", table_owns};
const OutputKind kParquetTableOutput{"table export", "events.parquet", table_owns};

// CSV text made in place: integers by std::to_chars straight into a buffer
// that holds many rows, no string per row or field (formatting was most of
// the export's time). Callers make room() for a row before writing it.
class CsvText {
 public:
  // Room for `n` more bytes; the pointer to write them at.
  char* room(size_t n) {
    if (cap_ - len_ < n) {
      cap_ = std::max(cap_ * 2, len_ + n);
      auto grown = std::make_unique<char[]>(cap_);
      if (len_) std::memcpy(grown.get(), buf_.get(), len_);  // buf_ is null before the first row
      buf_ = std::move(grown);
    }
    return buf_.get() + len_;
  }
  void done(char* end) { len_ = size_t(end - buf_.get()); }
  size_t size() const { return len_; }
  std::string_view text() const { return {buf_.get(), len_}; }
  void clear() { len_ = 0; }

 private:
  std::unique_ptr<char[]> buf_;
  size_t len_ = 0, cap_ = 0;
};

// The widest decimal integer (a sign and 20 digits) and its comma.
constexpr size_t kIntField = 22;

char* put(char* p, std::string_view s) {
  std::memcpy(p, s.data(), s.size());
  return p + s.size();
}
template <class T>
char* put_int(char* p, T v) {
  return std::to_chars(p, p + kIntField, v).ptr;
}
// An integer and the comma after it.
template <class T>
char* put_field(char* p, T v) {
  p = put_int(p, v);
  *p = ',';
  return p + 1;
}
// `0x` and 16 lower-case hex digits.
// The ns columns that end a row of either table, and the line's end.
char* put_ns_tail(char* p, const NsBound& t) {
  p = put_field(p, t.ns);
  p = put_field(p, t.lo);
  p = put_int(p, t.hi);
  *p++ = '\n';
  return p;
}

char* put_no_ns_tail(char* p) { return put(p, ",,\n"); }  // no frequency: empty (NULL) ns columns

char* put_hex16(char* p, uint64_t v) {
  static constexpr char kDigits[] = "0123456789abcdef";
  p[0] = '0';
  p[1] = 'x';
  for (int i = 0; i < 16; ++i) p[2 + i] = kDigits[(v >> (60 - 4 * i)) & 0xf];
  return p + 18;
}

// What every events row needs from meta.json: node names, which one is the
// reference, its span start and the frequency interval.
struct RefClock {
  std::vector<std::string> names;  // as they are
  std::vector<std::string> nodes;  // CSV-quoted
  std::vector<bool> reference;
  int64_t origin = 0;
  bool have_ns = false;
  // The frequency interval's factors, computed once: every row converts.
  TicksToNs to_ns{1, 1, 1};
};

RefClock ref_clock(const TranslatedRun& run) {
  RefClock c;
  c.names = run.node_names;
  for (const std::string& name : c.names) {
    c.nodes.push_back(csv_field(name));
    c.reference.push_back(name == run.reference);
  }
  c.origin = int64_t(run.ref_origin);
  c.have_ns = run.have_ns;
  if (c.have_ns) c.to_ns = TicksToNs(run.hz, run.hz_lo, run.hz_hi);
  return c;
}

void check_node(const RefClock& c, const TranslatedEvent& e) {
  if (e.node >= c.nodes.size()) throw std::runtime_error("translated event names node index beyond meta.json");
}

NsBound event_ns(const RefClock& c, const TranslatedEvent& e) {
  return c.to_ns(e.ref_ts - c.origin, e.ref_lo - c.origin, e.ref_hi - c.origin);
}

// A channel's name as the events rows show it, looked up once per channel
// (the rows of a frame come from a few channels, mostly in runs).
template <class V>
class ChannelCache {
 public:
  template <class Make>
  const V& get(uint64_t id, Make make) {
    if (last_ && last_id_ == id) return *last_;
    auto it = map_.find(id);
    if (it == map_.end()) it = map_.emplace(id, make(id)).first;
    last_id_ = id;
    last_ = &it->second;
    return *last_;
  }

 private:
  std::unordered_map<uint64_t, V> map_;
  uint64_t last_id_ = 0;
  const V* last_ = nullptr;
};

// Frames decoded, and their rows made, on every thread: the Translated frames
// (at `pos`) in segments of `per` consecutive frames, `wave` segments at a
// time on `threads` threads; work(positions, count, slot, worker) on any
// thread, then take(slot) on the calling thread in file order. An error in a
// segment (a damaged frame) is raised when its turn comes, after every segment
// before it was taken: as a sequential reading.
template <class Slot, class Work, class Take>
void in_segments(const std::vector<size_t>& pos, unsigned threads, size_t wave, size_t per, std::vector<Slot>& slots,
                 Work work, Take take) {
  wave = std::max<size_t>(wave, 1);
  slots.resize(wave);
  std::vector<std::exception_ptr> errors(wave);
  const size_t segments = (pos.size() + per - 1) / per;
  for (size_t s = 0; s < segments; s += wave) {
    const size_t n = std::min(wave, segments - s);
    parallel_for(threads, n, [&](size_t i, unsigned worker) {
      errors[i] = nullptr;
      try {
        const size_t first = (s + i) * per;
        work(pos.data() + first, std::min(per, pos.size() - first), slots[i], worker);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    });
    for (size_t i = 0; i < n; ++i) {
      if (errors[i]) std::rethrow_exception(errors[i]);
      take(slots[i]);
    }
  }
}

// Frames per segment: about `rows` rows, judged by the first frame's size.
size_t frames_per_segment(const TraceReader& r, const std::vector<size_t>& pos, size_t rows) {
  if (pos.empty()) return 1;
  FrameHeader h{};
  std::vector<uint8_t> payload;
  r.read_frame(pos[0], h, payload);
  return std::max<size_t>(1, rows / std::max<size_t>(h.count, 1));
}

// A worker's scratch for reading frames.
struct FrameScratch {
  std::vector<uint8_t> payload;
  std::vector<TranslatedEvent> events;
  const std::vector<TranslatedEvent>& decode(const TraceReader& r, size_t position) {
    FrameHeader h{};
    r.read_frame(position, h, payload);
    decode_translated(h, payload.data(), payload.size(), events);
    return events;
  }
};

uint64_t write_events(const TraceReader& r, const RefClock& c, TableFile& f, unsigned threads) {
  f.write(
      "node,reference,kind,channel,channel_id,tuple,pid,tid,cpu,local_ts,ref_ts,ref_lo,ref_hi,time_ns,time_lo_ns,"
      "time_hi_ns\n");
  ChannelCache<std::string> channels;
  size_t widest_node = 0;
  for (const std::string& n : c.nodes) widest_node = std::max(widest_node, n.size());
  CsvText buf;
  uint64_t n = 0;
  // One frame's rows at a time: memory follows the frame size, not the trace.
  for_each_translated(r, threads, [&](const std::vector<TranslatedEvent>& evs) {
    buf.clear();
    for (const TranslatedEvent& e : evs) {
      check_node(c, e);
      const std::string& channel = channels.get(e.channel, [&](uint64_t id) { return csv_field(r.channel_name(id)); });
      const std::string_view kind = event_kind_name(e.kind);
      char* p = buf.room(widest_node + kind.size() + channel.size() + 16 * kIntField + 16);
      p = put(p, c.nodes[e.node]);
      p = put(p, c.reference[e.node] ? ",true," : ",false,");
      p = put(p, kind);
      *p++ = ',';
      p = put(p, channel);
      *p++ = ',';
      p = put_hex16(p, e.channel);
      *p++ = ',';
      p = put_field(p, e.tuple);
      p = put_field(p, e.pid);
      p = put_field(p, e.tid);
      p = put_field(p, e.cpu);
      p = put_field(p, e.local_ts);
      p = put_field(p, e.ref_ts);
      p = put_field(p, e.ref_lo);
      p = put_field(p, e.ref_hi);
      p = c.have_ns ? put_ns_tail(p, event_ns(c, e)) : put_no_ns_tail(p);
      buf.done(p);
    }
    f.write(buf.text());
    n += evs.size();
  });
  f.close();
  return n;
}

// What every latency row of one pair shares, CSV-quoted once rather than per row.
struct LatencyCsvPair {
  std::string from, to;
  std::vector<std::string> nodes;  // by node index
  size_t widest = 0;  // the longest row's text fields together
  bool have_ns = false;
};

LatencyCsvPair latency_csv_pair(const std::string& from, const std::string& to, const LatencyResult& res) {
  LatencyCsvPair p{csv_field(from), csv_field(to), {}, 0, res.have_ns};
  size_t widest_node = 0;
  for (const std::string& n : res.node_names) {
    p.nodes.push_back(csv_field(n));
    widest_node = std::max(widest_node, p.nodes.back().size());
  }
  p.widest = p.from.size() + p.to.size() + 2 * widest_node;
  return p;
}

// Appends the latency.csv line of one row. Apart from where the rows come from,
// so that a producer handing out rows one by one can call it as it makes each.
void append_latency_line(CsvText& out, const LatencyCsvPair& p, const LatencyRow& row) {
  const std::string_view scenario = row.scenario;
  char* q = out.room(p.widest + scenario.size() + 11 * kIntField + 32);
  q = put(q, p.from);
  *q++ = ',';
  q = put(q, p.to);
  *q++ = ',';
  q = put_field(q, row.tuple);
  q = put(q, p.nodes.at(row.from_node));
  *q++ = ',';
  q = put(q, p.nodes.at(row.to_node));
  *q++ = ',';
  q = put(q, scenario);
  q = put(q, row.local() ? ",false," : ",true,");
  q = put_field(q, row.from_ref);
  q = put_field(q, row.ticks);
  q = put_field(q, row.ticks_lo);
  q = put_field(q, row.ticks_hi);
  q = p.have_ns ? put_ns_tail(q, {row.ns, row.ns_lo, row.ns_hi}) : put_no_ns_tail(q);
  out.done(q);
}

// Text is handed to the file in pieces of about this much: a call per row
// would cost more than the row.
constexpr size_t kCsvFlush = size_t(1) << 18;

// One pair at a time, each within the budget (latency_stream): the rows go out
// as the merge hands them over; the writer buffers and compresses.
uint64_t write_latency(const TraceReader& r, const std::vector<std::pair<std::string, std::string>>& pairs,
                       TableFile& f, const MemoryBudget& budget) {
  f.write(
      "from_channel,to_channel,tuple,from_node,to_node,scenario,remote,from_ref_ts,ticks,ticks_lo,ticks_hi,ns,ns_lo,"
      "ns_hi\n");
  uint64_t n = 0;
  CsvText buf;
  for (const auto& [from, to] : pairs) {
    LatencyResult res = latency_stream(r, from, to, budget);
    LatencyCsvPair p = latency_csv_pair(from, to, res);
    res.for_each_row([&](const LatencyRow& row) {
      append_latency_line(buf, p, row);
      if (buf.size() >= kCsvFlush) {
        f.write(buf.text());
        buf.clear();
      }
      ++n;
    });
  }
  f.write(buf.text());
  f.close();
  return n;
}

// The Parquet tables: the columns of the CSV ones, typed as DuckDB typed them
// (tools/duckdb/tables.mjs); the ns columns NULL on every row when the
// reference's frequency is unknown, as the CSV leaves them empty.
std::vector<ParquetWriter::ColumnSpec> events_columns(bool have_ns) {
  using K = ParquetWriter::Kind;
  return {{"node", K::String},
          {"reference", K::Bool},
          {"kind", K::String},
          {"channel", K::String},
          {"channel_id", K::String},
          {"tuple", K::UInt64},
          {"pid", K::UInt32},
          {"tid", K::UInt32},
          {"cpu", K::UInt16},
          {"local_ts", K::UInt64},
          {"ref_ts", K::Int64},
          {"ref_lo", K::Int64},
          {"ref_hi", K::Int64},
          {"time_ns", K::Int64, !have_ns},
          {"time_lo_ns", K::Int64, !have_ns},
          {"time_hi_ns", K::Int64, !have_ns}};
}

std::vector<ParquetWriter::ColumnSpec> latency_columns(bool have_ns) {
  using K = ParquetWriter::Kind;
  return {{"from_channel", K::String},   {"to_channel", K::String},    {"tuple", K::UInt64},
          {"from_node", K::String},      {"to_node", K::String},       {"scenario", K::String},
          {"remote", K::Bool},           {"from_ref_ts", K::Int64},    {"ticks", K::Int64},
          {"ticks_lo", K::Int64},        {"ticks_hi", K::Int64},       {"ns", K::Int64, !have_ns},
          {"ns_lo", K::Int64, !have_ns}, {"ns_hi", K::Int64, !have_ns}};
}

// The writer's share of --memory: a quarter, but never below what the latency
// join needs to run at all (MemoryBudget::kMinBytes: the smallest budget
// leaves the writer its smallest pages, a few hundred KiB).
uint64_t writer_bytes(const MemoryBudget& budget) {
  return std::min(budget.bytes / 4, budget.bytes - std::min(budget.bytes, MemoryBudget::kMinBytes));
}
// Parquet pages encoded, CSV chunks compressed, on a thread of their own when
// there is a core for it and room: that thread's allocations live in its own
// malloc arena, a few MiB that the smallest budgets cannot spare (measured:
// 4.5 MiB over at --memory 16M).
bool writer_in_background(const MemoryBudget& budget) {
  return budget.thread_count() > 1 && writer_bytes(budget) >= (uint64_t(32) << 20);
}

// The events table as Parquet: every thread reads frames, fills a page's
// columns straight from them (the ns columns computed there too) and encodes
// it; this thread appends the pages in file order. The strings' codes are
// given before: every node, kind and announced channel (a dictionary may hold
// a value no row has); a channel never announced is coded when a segment
// meets it, and that segment made again.
// `memory`: the writer's share of the budget; before_close(): called once
// every row is in, before the file is finished (and so named).
// `handoff`: where the latency pair's events go as they are decoded (or none).
uint64_t write_events_parquet(const TraceReader& r, const RefClock& c, const OutputDir& dir, const MemoryBudget& budget,
                              uint64_t memory, const std::function<void()>& before_close = {},
                              EventHandOff* handoff = nullptr) {
  OutFile file(dir, table_file_name("events", TableForm::Parquet));
  // A thread's allocations live in its own malloc arena, which the smallest budgets cannot spare.
  const unsigned threads = writer_in_background(budget) ? budget.thread_count() : 1;
  std::vector<ParquetWriter::ColumnSpec> cols = events_columns(c.have_ns);
  const size_t ncols = cols.size();
  const size_t wave = threads > 1 ? 2 * size_t(threads) : 1;  // segments made at a time, a page of values each
  ParquetWriter w(file, std::move(cols), false, ParquetWriter::shape_for(memory, ncols, wave), true);
  const size_t page_rows = w.shape().page_rows;
  enum { kNode, kReference, kKind, kChannel, kChannelId, kTuple, kPid, kTid, kCpu, kLocalTs, kRefTs, kRefLo, kRefHi };
  std::vector<uint32_t> node_code;
  for (const std::string& name : c.names) node_code.push_back(w.code(kNode, name));
  uint32_t kind_code[256];
  for (size_t k = 0; k < 256; ++k) kind_code[k] = w.code(kKind, event_kind_name(uint8_t(k)));
  std::unordered_map<uint64_t, std::pair<uint32_t, uint32_t>> channel_code;  // name, id codes
  auto add_channel = [&](uint64_t id) {
    channel_code.emplace(
        id, std::pair{w.code(kChannel, r.channel_name(id)), w.code(kChannelId, fmt::format("0x{:016x}", id))});
  };
  for (const auto& [id, info] : r.channels()) add_channel(id);

  struct Slot {
    ParquetWriter::Page page;
    std::vector<ParquetWriter::EncodedPage> done;
    size_t used = 0;  // pages of done made by this segment
    std::optional<uint64_t> missing;  // a channel without a code: the segment stopped there
    const size_t* pos = nullptr;  // the segment's frames
    size_t frames = 0;
    std::vector<TranslatedEvent> kept;  // for the hand-off
  };
  std::vector<FrameScratch> scratch(threads);
  std::vector<ParquetWriter::Encoder> encoders(threads);
  const std::vector<ParquetWriter::ColumnSpec>& specs = w.columns();
  const size_t filled = c.have_ns ? ncols : kRefHi + 1;
  auto encode = [&](Slot& s, unsigned worker) {
    if (s.used == s.done.size()) s.done.emplace_back();
    encoders[worker].encode(specs, s.page, s.done[s.used++]);
    s.page.rows = 0;
  };
  // n rows of a frame into the page, after its rows; false at a channel without a code.
  auto fill = [&](const TranslatedEvent* e, size_t n, Slot& s) {
    int64_t* v[16];
    for (size_t k = 0; k < filled; ++k) v[k] = s.page.values[k].data() + s.page.rows;
    uint64_t last_channel = 0;
    std::pair<uint32_t, uint32_t> ch{0, 0};
    bool have_channel = false;
    for (size_t i = 0; i < n; ++i, ++e) {
      check_node(c, *e);
      if (!have_channel || e->channel != last_channel) {
        auto it = channel_code.find(e->channel);
        if (it == channel_code.end()) {
          s.missing = e->channel;
          return false;
        }
        ch = it->second, last_channel = e->channel, have_channel = true;
      }
      v[kNode][i] = node_code[e->node];
      v[kReference][i] = c.reference[e->node];
      v[kKind][i] = kind_code[e->kind];
      v[kChannel][i] = ch.first;
      v[kChannelId][i] = ch.second;
      v[kTuple][i] = int64_t(e->tuple);
      v[kPid][i] = e->pid;
      v[kTid][i] = e->tid;
      v[kCpu][i] = e->cpu;
      v[kLocalTs][i] = int64_t(e->local_ts);
      v[kRefTs][i] = e->ref_ts;
      v[kRefLo][i] = e->ref_lo;
      v[kRefHi][i] = e->ref_hi;
      if (c.have_ns) {
        NsBound t = event_ns(c, *e);
        v[kRefHi + 1][i] = t.ns;
        v[kRefHi + 2][i] = t.lo;
        v[kRefHi + 3][i] = t.hi;
      }
    }
    s.page.rows += n;
    return true;
  };
  auto work = [&](const size_t* pos, size_t n, Slot& s, unsigned worker) {
    s.used = 0;
    s.missing.reset();
    s.pos = pos, s.frames = n;
    s.kept.clear();
    s.page.rows = 0;
    s.page.values.resize(ncols);
    for (size_t k = 0; k < filled; ++k) s.page.values[k].resize(page_rows);
    for (size_t f = 0; f < n; ++f) {
      const std::vector<TranslatedEvent>& evs = scratch[worker].decode(r, pos[f]);
      if (handoff)
        for (const TranslatedEvent& e : evs)
          if (handoff->wanted(e)) s.kept.push_back(e);
      for (size_t at = 0; at < evs.size();) {
        const size_t m = std::min(evs.size() - at, page_rows - s.page.rows);
        if (!fill(evs.data() + at, m, s)) return;
        at += m;
        if (s.page.rows == page_rows) encode(s, worker);
      }
    }
    if (s.page.rows) encode(s, worker);
  };
  const std::vector<size_t> pos = r.frame_positions(FrameType::Translated);
  // Segments of about 8 pages, two a thread in a wave: the threads wait for
  // each other only at a wave's end.
  const size_t per = frames_per_segment(r, pos, 8 * page_rows);
  std::vector<Slot> slots;
  in_segments(pos, threads, wave, per, slots, work, [&](Slot& s) {
    while (s.missing) {  // rare: a channel never announced; made again here, on worker 0's scratch
      add_channel(*s.missing);
      work(s.pos, s.frames, s, 0);
    }
    for (size_t i = 0; i < s.used; ++i) w.append(s.done[i]);
    if (handoff) handoff->push(s.kept);
  });
  if (handoff) handoff->close();
  if (before_close) before_close();
  w.close();
  return w.rows();
}

// `memory`: the writer's share of the budget; the join takes what the writers leave.
// `handoff`: the events of a single pair, from the events table's pass.
uint64_t write_latency_parquet(const TraceReader& r, const std::vector<std::pair<std::string, std::string>>& pairs,
                               const RefClock& c, const OutputDir& dir, const MemoryBudget& budget, uint64_t memory,
                               EventHandOff* handoff = nullptr, uint64_t handoff_bytes = 0) {
  OutFile file(dir, table_file_name("latency", TableForm::Parquet));
  std::vector<ParquetWriter::ColumnSpec> cols = latency_columns(c.have_ns);
  const size_t ncols = cols.size();
  ParquetWriter w(file, std::move(cols), writer_in_background(budget), ParquetWriter::shape_for(memory, ncols));
  MemoryBudget join_budget = budget;
  join_budget.bytes -= std::min(join_budget.bytes - std::min(join_budget.bytes, MemoryBudget::kMinBytes),
                                writer_bytes(budget) + handoff_bytes);
  enum { kFrom, kTo, kTuple, kFromNode, kToNode, kScenario, kRemote, kFromRef, kTicks, kTicksLo, kTicksHi, kNs };
  for (const auto& [from, to] : pairs) {
    LatencyResult res =
        handoff ? latency_stream(r, from, to, join_budget, [&](const TranslatedSink& fn) { handoff->feed(fn); })
                : latency_stream(r, from, to, join_budget);
    if (handoff) handoff->leave();
    // The schema was chosen before the rows: the same frequency criterion.
    if (res.have_ns != c.have_ns) throw std::logic_error("latency rows and meta.json disagree on the frequency");
    const uint32_t from_code = w.code(kFrom, from), to_code = w.code(kTo, to);
    std::vector<uint32_t> from_node, to_node;
    for (const std::string& n : res.node_names) {
      from_node.push_back(w.code(kFromNode, n));
      to_node.push_back(w.code(kToNode, n));
    }
    const char* scenario = nullptr;
    uint32_t scenario_code = 0;
    res.for_each_row([&](const LatencyRow& row) {
      if (row.scenario != scenario) {
        scenario = row.scenario;
        scenario_code = w.code(kScenario, scenario);
      }
      w.put_code(kFrom, from_code);
      w.put_code(kTo, to_code);
      w.put_int(kTuple, int64_t(row.tuple));
      w.put_code(kFromNode, from_node.at(row.from_node));
      w.put_code(kToNode, to_node.at(row.to_node));
      w.put_code(kScenario, scenario_code);
      w.put_bool(kRemote, !row.local());
      w.put_int(kFromRef, row.from_ref);
      w.put_int(kTicks, row.ticks);
      w.put_int(kTicksLo, row.ticks_lo);
      w.put_int(kTicksHi, row.ticks_hi);
      if (c.have_ns) {
        w.put_int(kNs, row.ns);
        w.put_int(kNs + 1, row.ns_lo);
        w.put_int(kNs + 2, row.ns_hi);
      }
      w.end_row();
    });
  }
  w.close();
  return w.rows();
}

// What the directory and the stdout export check before writing anything.
RefClock check_export(const TraceReader& r, const std::vector<std::pair<std::string, std::string>>& pairs) {
  if (!r.meta().contains("translated"))
    throw std::runtime_error(r.events_path() +
                             ": not a translated trace (export table needs the output of cptrace translate; "
                             "export csv writes one node's trace)");
  // The latency rows would stop at a bad frame; a half table would pass for a whole one.
  if (r.error()) throw *r.error();
  RefClock c = ref_clock(TranslatedRun::read(r));
  // Every channel checked before anything is written, so an unknown one leaves no half export.
  for (const auto& [from, to] : pairs) {
    latency_channel(r, from);
    latency_channel(r, to);
  }
  return c;
}

}  // namespace

std::string table_file_name(const std::string& stem, TableForm form) {
  switch (form) {
    case TableForm::Plain:
      return stem + ".csv";
    case TableForm::Parquet:
      return stem + ".parquet";
    case TableForm::Zstd:
      break;
  }
  return stem + ".csv.zst";
}

namespace {

// Removes the events file when the export ends by an exception. The directory
// was empty of our files when opened (OutputDir), so a file of that name is
// this export's; unlinkat removes a link, it never follows one.
class EventsFileGuard {
 public:
  EventsFileGuard(const OutputDir& dir, std::string name) : dir_(dir), name_(std::move(name)) {}
  ~EventsFileGuard() {
    if (std::uncaught_exceptions() > exceptions_) ::unlinkat(dir_.fd(), name_.c_str(), 0);
  }
  EventsFileGuard(const EventsFileGuard&) = delete;
  EventsFileGuard& operator=(const EventsFileGuard&) = delete;

 private:
  const OutputDir& dir_;
  std::string name_;
  int exceptions_ = std::uncaught_exceptions();
};

}  // namespace

bool is_table_file(const std::string& name, std::initializer_list<const char*> stems) {
  for (const char* table : stems)
    for (const char* tail : {".csv", ".csv.tmp", ".csv.zst", ".csv.zst.tmp", ".parquet", ".parquet.tmp"})
      if (name == std::string(table) + tail) return true;
  return false;
}

TableExportStats export_table(const TraceReader& r, const std::string& out,
                              const std::vector<std::pair<std::string, std::string>>& pairs, bool overwrite,
                              TableForm form, const MemoryBudget& budget) {
  RefClock c = check_export(r, pairs);
  const OutputKind& kind = form == TableForm::Parquet ? kParquetTableOutput
                           : form == TableForm::Plain ? kPlainTableOutput
                                                      : kTableOutput;
  OutputDir dir(out, kind, overwrite);
  // The events file marks a whole export: a failed export leaves none, also
  // where it was begun beside the latency table or failed itself.
  EventsFileGuard guard(dir, table_file_name("events", form));
  TableExportStats s;
  const unsigned threads = budget.thread_count();
  if (form == TableForm::Parquet) {
    if (pairs.empty() || !writer_in_background(budget)) {
      if (!pairs.empty()) s.latency_rows = write_latency_parquet(r, pairs, c, dir, budget, writer_bytes(budget));
      s.events = write_events_parquet(r, c, dir, budget, writer_bytes(budget));  // last, as below
      return s;
    }
    // Both tables at once, each writer with half the writers' share: the
    // events pages fill the cores while the join waits on its own steps. The
    // events file is finished only after the latency table, so that it still
    // marks a whole export; an error of the latency table is the one raised,
    // as when it was written first.
    // One pair: its join takes its events from the events table's pass
    // (EventHandOff), the trace decoded once.
    const uint64_t half = writer_bytes(budget) / 2;
    std::optional<EventHandOff> handoff;
    if (pairs.size() == 1)
      handoff.emplace(latency_channel(r, pairs[0].first), latency_channel(r, pairs[0].second), kHandOffSegments);
    EventHandOff* shared = handoff ? &*handoff : nullptr;
    // What the hand-off can hold: every segment being made, waiting or being
    // joined, each of the pass's 8 pages of rows (write_events_parquet), all
    // of them the pair's at worst. Taken from the join's share.
    const size_t wave = threads > 1 ? 2 * size_t(threads) : 1;
    const uint64_t handoff_bytes =
        shared ? (wave + kHandOffSegments + 1) * 8 *
                     ParquetWriter::shape_for(half, events_columns(c.have_ns).size(), wave).page_rows *
                     sizeof(TranslatedEvent)
               : 0;
    std::exception_ptr latency_error;
    std::thread latency([&] {
      try {
        s.latency_rows = write_latency_parquet(r, pairs, c, dir, budget, half, shared, handoff_bytes);
      } catch (...) {
        latency_error = std::current_exception();
      }
      if (shared) shared->leave();
    });
    auto join_latency = [&] {
      latency.join();
      if (latency_error) std::rethrow_exception(latency_error);
    };
    try {
      s.events = write_events_parquet(r, c, dir, budget, half, join_latency, shared);
    } catch (...) {
      if (shared) shared->close(std::current_exception());
      if (latency.joinable()) join_latency();
      throw;
    }
    return s;
  }
  if (!pairs.empty()) {
    TableFile f(dir, "latency", form, writer_in_background(budget));
    s.latency_rows = write_latency(r, pairs, f, budget);
  }
  // Written last: the marker file, so a directory with the events table holds a whole export.
  TableFile f(dir, "events", form, writer_in_background(budget));
  s.events = write_events(r, c, f, threads);
  return s;
}

TableExportStats export_table_stdout(const TraceReader& r, const std::string& table,
                                     const std::vector<std::pair<std::string, std::string>>& pairs,
                                     const MemoryBudget& budget) {
  if (table != "events" && table != "latency")
    throw std::runtime_error("--stdout '" + table + "': expected events or latency");
  if (table == "latency" && pairs.empty()) throw std::runtime_error("--stdout latency needs at least one --pair");
  RefClock c = check_export(r, pairs);
  TableExportStats s;
  TableFile f{OutFile::Stdout{}};
  if (table == "events")
    s.events = write_events(r, c, f, budget.thread_count());
  else
    s.latency_rows = write_latency(r, pairs, f, budget);
  return s;
}

}  // namespace cptrace
