// `cptrace dump`: every event of a trace as text or CSV, in file order (per CPU
// ring and block, so only roughly in time order; sort on ts for a timeline):
// all user events first, then all network events (net_dump.h for their columns).
// A translated trace prints its events with their instants on the reference.
#include "analyze/trace_dump.h"

#include <cstdio>
#include <string>

#include <fmt/format.h>

#include "tables/csv_util.h"
#include "analyze/net_dump.h"
#include "trace/event_names.h"
#include "trace/handler_history.h"
#include "trace/trace_reader.h"
#include "trace/trace_timeline.h"
#include "translate/translated_frame.h"
#include "translate/translated_run.h"

namespace cptrace {

namespace {

// A translated trace (`cptrace translate`): each event with its node, its local
// TSC and its instant on the reference's TSC, estimate and bound.
void dump_translated(const TraceReader& r, const DumpOptions& a) {
  const TranslatedRun run = TranslatedRun::read(r);
  auto node_name = [&](uint16_t i) { return run.node_name(i); };
  if (a.csv) fmt::print("node,kind,local_ts,ref_est,ref_lo,ref_hi,channel,tuple,pid,tid,cpu\n");
  std::vector<TranslatedEvent> evs;
  r.for_each_frame(FrameType::Translated, [&](const FrameHeader& h, const std::vector<uint8_t>& p) {
    decode_translated(h, p.data(), p.size(), evs);
    for (const TranslatedEvent& e : evs) {
      const std::string ch = r.channel_name(e.channel);
      if (a.csv)
        fmt::print("{},{},{},{},{},{},{},{},{},{},{}\n", csv_field(node_name(e.node)), event_kind_name(e.kind),
                   e.local_ts, e.ref_ts, e.ref_lo, e.ref_hi, csv_field(ch), e.tuple, e.pid, e.tid, e.cpu);
      else
        fmt::print("{:20} [{}, {}] {:<8} {:<6} {:<24} tuple={:<20} pid={:<7} tid={:<7} cpu={}\n", e.ref_ts, e.ref_lo,
                   e.ref_hi, node_name(e.node), event_kind_name(e.kind), ch, e.tuple, e.pid, e.tid, e.cpu);
    }
  });
}

// A recorded trace: user events, then network events.
void dump_recorded(const TraceReader& r, const DumpOptions& a) {
  std::string node = r.trace_meta().node;
  bool net = r.net_event_count() > 0;  // without net events the CSV stays as it was
  // Likewise the `nspid` column: only when a process ran in a container.
  const PidTable& pids = r.pids();
  bool nspid = pids.any_container();
  auto nspid_tail = [&](uint32_t pid) { return nspid ? "," + pids.csv_field(pid) : std::string(); };
  const char* tail = net ? kNetCsvEmpty : "";
  if (a.csv)
    fmt::print("node,kind,ts,channel,tuple,pid,tid,cpu{}{}\n", net ? kNetCsvColumns : "", nspid ? ",nspid" : "");
  if (!a.csv) print_handler_history(r, stdout, "# ");
  r.for_each_event([&](const TraceEvent& e) {
    const std::string ch = r.channel_name(e.channel);
    if (a.csv)
      fmt::print("{},{},{},{},{},{},{},{}{}{}\n", csv_field(node), event_kind_name(e.kind), e.ts, csv_field(ch),
                 e.tuple, e.pid, e.tid, e.cpu, tail, nspid_tail(e.pid));
    else
      fmt::print("{:20} {:<6} {:<24} tuple={:<20} pid={:<7} tid={:<7} cpu={}\n", e.ts, event_kind_name(e.kind), ch,
                 e.tuple, std::to_string(e.pid) + pids.text_suffix(e.pid), e.tid, e.cpu);
  });
  r.for_each_net_event([&](const NetEvent& e) {
    a.csv ? print_net_csv(stdout, csv_field(node), e, nspid_tail(e.r.pid)) : print_net_text(stdout, e, &pids);
  });
}

}  // namespace

int run_dump(const DumpOptions& a) {
  TraceReader r(a.dir);
  if (r.meta().contains("translated"))
    dump_translated(r, a);
  else
    dump_recorded(r, a);
  return damaged_trace_exit(r, "events before it were printed");
}

}  // namespace cptrace
