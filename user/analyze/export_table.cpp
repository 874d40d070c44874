// CSV tables of a translated trace for SQL engines (export_table.h).
#include "analyze/export_table.h"

#include <optional>
#include <stdexcept>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "analyze/csv_util.h"
#include "analyze/zstd_csv_writer.h"
#include "trace/event_names.h"
#include "trace/out_file.h"
#include "trace/output_dir.h"
#include "trace/trace_reader.h"
#include "translate/latency.h"
#include "translate/translated_frame.h"

namespace cptrace {
namespace {

// Both forms' names, so that -f also clears an export of the other form (or of
// a version before .zst) instead of leaving two events tables side by side.
bool table_owns(const std::string& name) {
  for (const char* table : {"events.csv", "latency.csv"})
    for (const char* tail : {"", ".tmp", ".zst", ".zst.tmp"})
      if (name == std::string(table) + tail) return true;
  return false;
}
const OutputKind kTableOutput{"table export", "events.csv.zst", table_owns};
const OutputKind kPlainTableOutput{"table export", "events.csv", table_owns};

// One table of the export: `STEM.csv.zst`, or `STEM.csv` with --plain, or the
// plain text on stdout (export_table_stdout); the same text every way.
class TableFile {
 public:
  TableFile(const OutputDir& dir, const std::string& stem, bool plain) {
    if (plain)
      plain_.emplace(dir, table_file_name(stem, true));
    else
      zst_.emplace(dir, table_file_name(stem, false));
  }
  explicit TableFile(OutFile::Stdout s) { plain_.emplace(s); }
  void write(std::string_view text) { plain_ ? plain_->write(text) : zst_->write(text); }
  void close() { plain_ ? plain_->close() : zst_->close(); }

 private:
  std::optional<OutFile> plain_;
  std::optional<ZstdCsvWriter> zst_;
};

// What every events.csv row needs from meta.json: node names, which one is the
// reference, its span start and the frequency interval.
struct RefClock {
  std::vector<std::string> nodes;  // CSV-quoted
  std::vector<bool> reference;
  int64_t origin = 0;
  bool have_ns = false;
  long double hz = 0, hz_lo = 0, hz_hi = 0;
};

RefClock ref_clock(const nlohmann::json& tr) {
  RefClock c;
  for (const nlohmann::json& n : tr.at("nodes")) {
    c.nodes.push_back(csv_field(n.at("node").get<std::string>()));
    c.reference.push_back(n.at("node") == tr.at("reference"));
    if (c.reference.back() && n.contains("span_tsc")) c.origin = n["span_tsc"][0].get<int64_t>();
  }
  const nlohmann::json& f = tr.at("frequency");
  c.have_ns = f.contains("hz_lo");
  if (c.have_ns) {
    c.hz = f.at("hz").get<double>();
    c.hz_lo = f.at("hz_lo").get<double>();
    c.hz_hi = f.at("hz_hi").get<double>();
  }
  return c;
}

uint64_t write_events(const TraceReader& r, const RefClock& c, TableFile& f) {
  f.write(
      "node,reference,kind,channel,channel_id,tuple,pid,tid,cpu,local_ts,ref_ts,ref_lo,ref_hi,time_ns,time_lo_ns,"
      "time_hi_ns\n");
  std::vector<TranslatedEvent> evs;
  std::string buf;
  uint64_t n = 0;
  // One frame's rows at a time: memory follows the frame size, not the trace.
  r.for_each_frame(FrameType::Translated, [&](const FrameHeader& h, const std::vector<uint8_t>& p) {
    decode_translated(h, p.data(), p.size(), evs);
    buf.clear();
    for (const TranslatedEvent& e : evs) {
      if (e.node >= c.nodes.size()) throw std::runtime_error("translated event names node index beyond meta.json");
      fmt::format_to(std::back_inserter(buf), "{},{},{},{},0x{:016x},{},{},{},{},{},{},{},{},", c.nodes[e.node],
                     c.reference[e.node] ? "true" : "false", event_kind_name(e.kind),
                     csv_field(r.channel_name(e.channel)), e.channel, e.tuple, e.pid, e.tid, e.cpu, e.local_ts,
                     e.ref_ts, e.ref_lo, e.ref_hi);
      if (c.have_ns) {
        NsBound t = ticks_to_ns(e.ref_ts - c.origin, e.ref_lo - c.origin, e.ref_hi - c.origin, c.hz, c.hz_lo, c.hz_hi);
        fmt::format_to(std::back_inserter(buf), "{},{},{}\n", t.ns, t.lo, t.hi);
      } else {
        buf += ",,\n";  // no frequency: empty (NULL) ns columns
      }
    }
    f.write(buf);
    n += evs.size();
  });
  f.close();
  return n;
}

// What every latency.csv row of one pair shares, CSV-quoted once rather than per row.
struct LatencyCsvPair {
  std::string from, to;
  std::vector<std::string> nodes;  // by node index
  bool have_ns = false;
};

LatencyCsvPair latency_csv_pair(const std::string& from, const std::string& to, const LatencyResult& res) {
  LatencyCsvPair p{csv_field(from), csv_field(to), {}, res.have_ns};
  for (const std::string& n : res.node_names) p.nodes.push_back(csv_field(n));
  return p;
}

// Appends the latency.csv line of one row. Apart from where the rows come from,
// so that a producer handing out rows one by one can call it as it makes each.
void append_latency_line(std::string& out, const LatencyCsvPair& p, const LatencyRow& row) {
  fmt::format_to(std::back_inserter(out), "{},{},{},{},{},{},{},{},{},{},{},", p.from, p.to, row.tuple,
                 p.nodes.at(row.from_node), p.nodes.at(row.to_node), row.scenario, row.local() ? "false" : "true",
                 row.from_ref, row.ticks, row.ticks_lo, row.ticks_hi);
  if (p.have_ns)
    fmt::format_to(std::back_inserter(out), "{},{},{}\n", row.ns, row.ns_lo, row.ns_hi);
  else
    out += ",,\n";  // no frequency: empty (NULL) ns columns
}

// One pair at a time, each within the budget (latency_stream): the rows go out
// as the merge hands them over; the writer buffers and compresses.
uint64_t write_latency(const TraceReader& r, const std::vector<std::pair<std::string, std::string>>& pairs,
                       TableFile& f, const MemoryBudget& budget) {
  f.write(
      "from_channel,to_channel,tuple,from_node,to_node,scenario,remote,from_ref_ts,ticks,ticks_lo,ticks_hi,ns,ns_lo,"
      "ns_hi\n");
  uint64_t n = 0;
  std::string line;
  for (const auto& [from, to] : pairs) {
    LatencyResult res = latency_stream(r, from, to, budget);
    LatencyCsvPair p = latency_csv_pair(from, to, res);
    res.for_each_row([&](const LatencyRow& row) {
      line.clear();
      append_latency_line(line, p, row);
      f.write(line);
      ++n;
    });
  }
  f.close();
  return n;
}

// What the directory and the stdout export check before writing anything.
RefClock check_export(const TraceReader& r, const std::vector<std::pair<std::string, std::string>>& pairs) {
  if (!r.meta().contains("translated"))
    throw std::runtime_error(r.events_path() +
                             ": not a translated trace (export table needs the output of cptrace translate; "
                             "export csv writes one node's trace)");
  // The latency rows would stop at a bad frame; a half table would pass for a whole one.
  if (r.error()) throw *r.error();
  RefClock c = ref_clock(r.meta()["translated"]);
  // Every channel checked before anything is written, so an unknown one leaves no half export.
  for (const auto& [from, to] : pairs) {
    latency_channel(r, from);
    latency_channel(r, to);
  }
  return c;
}

}  // namespace

std::string table_file_name(const std::string& stem, bool plain) { return stem + (plain ? ".csv" : ".csv.zst"); }

TableExportStats export_table(const TraceReader& r, const std::string& out,
                              const std::vector<std::pair<std::string, std::string>>& pairs, bool overwrite, bool plain,
                              const MemoryBudget& budget) {
  RefClock c = check_export(r, pairs);
  OutputDir dir(out, plain ? kPlainTableOutput : kTableOutput, overwrite);
  TableExportStats s;
  if (!pairs.empty()) {
    TableFile f(dir, "latency", plain);
    s.latency_rows = write_latency(r, pairs, f, budget);
  }
  // Written last: the marker file, so a directory with the events table holds a whole export.
  TableFile f(dir, "events", plain);
  s.events = write_events(r, c, f);
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
    s.events = write_events(r, c, f);
  else
    s.latency_rows = write_latency(r, pairs, f, budget);
  return s;
}

}  // namespace cptrace
