// CTF 1.8 writer: TSDL metadata + per-CPU binary streams, bounded reorder.
#include "export/export_ctf.h"

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <queue>

#include <fmt/format.h>

#include "export/counter_periods.h"
#include "clock/clock_map.h"
#include "os/out_file.h"
#include "os/time_units.h"

namespace cptrace {

namespace {

constexpr uint32_t kCtfMagic = 0xC1FC1FC1;
constexpr size_t kPacketBytes = 256 << 10;  // content per packet before it is flushed
// Packet header (magic, stream_id) + context (begin, end, content_size, packet_size, cpu_id).
constexpr size_t kPacketHead = 4 + 4 + 8 + 8 + 8 + 8 + 4;
constexpr uint16_t kEventUser = 0, kEventClose = 1, kEventCounterPeriod = 2;

template <class T>
void put(std::string& b, T v) {
  b.append(reinterpret_cast<const char*>(&v), sizeof v);  // little-endian host (trace_format.h)
}

// TSDL string literal.
std::string tsdl_str(const std::string& s) {
  std::string q = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') q += '\\';
    if (c == '\n') {
      q += "\\n";
      continue;
    }
    q += c;
  }
  return q + "\"";
}

// The CTF clock: the node's CLOCK_MONOTONIC in ns (frequency 1e9, so readers
// convert exactly), events converted from TSC through the correlation stream;
// its offset is the recording's CLOCK_REALTIME - CLOCK_MONOTONIC at start. A
// TSC clock would need an integer frequency: rounding the measured one shifts
// every event by ts * (1/f - 1/hz), microseconds after days of uptime.
struct NsClock {
  const ClockMap& map;
  Timeline tl;
  uint64_t origin_mono = 0;  // CLOCK_MONOTONIC of tl.origin
  int64_t rt_minus_mono = 0;
  bool absolute = false;

  NsClock(const TraceReader& r, const Timeline& t) : map(r.clock_map()), tl(t) {
    const TraceMeta& m = r.trace_meta();
    const bool have_mono = m.start.mono_ns.value_or(-1) >= 0;
    if (have_mono)
      origin_mono = uint64_t(*m.start.mono_ns);
    else if (map.points().size() >= 2)
      origin_mono = map.tsc_to_mono(tl.origin);
    if (have_mono && m.start.realtime_ns.value_or(-1) >= 0) {
      rt_minus_mono = *m.start.realtime_ns - *m.start.mono_ns;
      absolute = true;
    }
  }
  uint64_t ns(uint64_t ts) const {
    if (map.points().size() >= 2) return map.tsc_to_mono(ts);
    // No correlation stream to follow: the measured frequency from the origin.
    long double d = (long double)int64_t(ts - tl.origin) * 1e9L / tl.hz;
    return uint64_t(int64_t(origin_mono) + int64_t(std::llroundl(d)));
  }
};

// One stream file: packets of events in non-decreasing timestamp order.
class StreamFile {
 public:
  StreamFile(const OutputDir& dir, const std::string& name, uint16_t cpu) : f_(dir, name), cpu_(cpu) {}
  uint64_t last_ts() const { return last_; }
  bool empty() const { return !any_; }

  // ns: the event's time on the trace's CTF clock (NsClock); period_ns: a
  // `counter` series point's period (its count is e.tuple).
  void append(const TraceEvent& e, const std::string& channel, uint64_t ns, uint64_t period_ns) {
    if (pkt_.empty()) begin_ = ns;
    bool count = e.kind == uint8_t(EventKind::Count);
    put<uint16_t>(pkt_, count                                        ? kEventCounterPeriod
                        : e.kind == uint8_t(EventKind::ChannelClose) ? kEventClose
                                                                     : kEventUser);
    put<uint64_t>(pkt_, ns);
    pkt_.append(channel.c_str(), channel.size() + 1);
    put<uint64_t>(pkt_, e.channel);
    put<uint64_t>(pkt_, e.tuple);
    if (count) {
      put<uint64_t>(pkt_, period_ns);
    } else {
      put<uint32_t>(pkt_, e.pid);
      put<uint32_t>(pkt_, e.tid);
    }
    put<uint16_t>(pkt_, e.cpu);
    put<uint64_t>(pkt_, e.ts);
    last_ = e.ts;
    last_ns_ = ns;
    any_ = true;
    if (pkt_.size() >= kPacketBytes) flush();
  }

  void flush() {
    if (pkt_.empty()) return;
    std::string head;
    uint64_t bits = uint64_t(kPacketHead + pkt_.size()) * 8;
    put<uint32_t>(head, kCtfMagic);
    put<uint32_t>(head, 0);  // stream_id
    put<uint64_t>(head, begin_);
    put<uint64_t>(head, last_ns_);
    put<uint64_t>(head, bits);  // content_size
    put<uint64_t>(head, bits);  // packet_size: no padding
    put<uint32_t>(head, cpu_);
    f_.write(head);
    f_.write(pkt_);
    pkt_.clear();
    packets_++;
  }
  void close() {
    flush();
    f_.close();
  }
  uint64_t packets() const { return packets_; }

 private:
  OutFile f_;
  uint16_t cpu_;
  std::string pkt_;
  uint64_t begin_ = 0, last_ns_ = 0;  // packet bounds on the CTF clock
  uint64_t last_ = 0, packets_ = 0;  // last_: TSC, for the stream's order
  bool any_ = false;
};

struct Later {
  bool operator()(const TraceEvent& a, const TraceEvent& b) const { return a.ts > b.ts; }
};

// A stream with its reorder window; `late` takes what arrives too late for it.
struct Level {
  std::unique_ptr<StreamFile> file;
  std::priority_queue<TraceEvent, std::vector<TraceEvent>, Later> heap;
  bool emitted = false;
};

class CtfWriter {
 public:
  CtfWriter(const TraceReader& r, const NsClock& clock, const OutputDir& dir, size_t window)
      : r_(r), clock_(clock), periods_(r.handler_changes()), dir_(dir), window_(window) {}

  void add(const TraceEvent& e) { add_at(0, e); }

  CtfStats finish() {
    CtfStats s;
    for (auto& [cpu, levels] : chains_)
      for (size_t k = 0; k < levels.size(); ++k) {
        Level& l = levels[k];
        while (!l.heap.empty()) emit(l, pop(l));
        l.file->close();
        s.packets += l.file->packets();
        s.streams++;
        s.late_streams += k > 0;
      }
    s.events = events_;
    return s;
  }

 private:
  void add_at(size_t k, const TraceEvent& e) {
    auto& levels = chains_[e.cpu];
    if (k == levels.size()) {
      std::string name = k ? fmt::format("stream_{}_late{}", e.cpu, k) : fmt::format("stream_{}", e.cpu);
      levels.push_back(Level{std::make_unique<StreamFile>(dir_, name, e.cpu), {}, false});
    }
    Level& l = levels[k];
    if (l.emitted && e.ts < l.file->last_ts()) return add_at(k + 1, e);
    l.heap.push(e);
    if (l.heap.size() > window_) emit(l, pop(l));
  }
  static TraceEvent pop(Level& l) {
    TraceEvent e = l.heap.top();
    l.heap.pop();
    return e;
  }
  void emit(Level& l, const TraceEvent& e) {
    auto it = names_.find(e.channel);
    if (it == names_.end()) it = names_.emplace(e.channel, r_.channel_name(e.channel)).first;
    uint64_t period = e.kind == uint8_t(EventKind::Count) ? periods_.at(e.channel, e.ts).period_ns : 0;
    l.file->append(e, it->second, clock_.ns(e.ts), period);
    l.emitted = true;
    events_++;
  }

  const TraceReader& r_;
  const NsClock& clock_;
  CounterPeriods periods_;
  const OutputDir& dir_;
  size_t window_;
  std::map<uint16_t, std::vector<Level>> chains_;
  std::map<uint64_t, std::string> names_;
  uint64_t events_ = 0;
};

}  // namespace

std::string ctf_metadata(const TraceReader& r, const Timeline& tl) {
  const auto& m = r.meta();
  NsClock clk(r, tl);
  // Clock offset: CLOCK_MONOTONIC 0 in wall-clock time, from the recorder's start
  // instant. Without it the clock is not absolute.
  int64_t off_s = clk.rt_minus_mono >= 0 ? clk.rt_minus_mono / kNsPerSecond
                                         : -((-clk.rt_minus_mono + kNsPerSecond - 1) / kNsPerSecond);
  int64_t off_ns = clk.rt_minus_mono - off_s * kNsPerSecond;
  const std::string node = r.trace_meta().node;
  std::string host = m.contains("machine") && m["machine"].is_object() ? m["machine"].value("host", node) : node;
  const Counters& c = r.counters();

  std::string s = "/* CTF 1.8 */\n\n";
  s += R"(typealias integer { size = 8; align = 8; signed = false; } := uint8_t;
typealias integer { size = 16; align = 8; signed = false; } := uint16_t;
typealias integer { size = 32; align = 8; signed = false; } := uint32_t;
typealias integer { size = 64; align = 8; signed = false; } := uint64_t;
typealias integer { size = 64; align = 8; signed = false; base = hex; } := uint64_hex_t;

trace {
	major = 1;
	minor = 8;
	byte_order = le;
	packet.header := struct {
		uint32_t magic;
		uint32_t stream_id;
	};
};

)";
  s += fmt::format(R"(env {{
	hostname = {};
	node = {};
	tracer_name = "cptrace";
	tracer_major = 0;
	tracer_minor = 1;
	tsc_hz = {};
	origin_tsc = "{}";
	seen_events = {};
	dropped_events = {};
}};

clock {{
	name = monotonic;
	description = {};
	freq = 1000000000;
	precision = 1;
	offset_s = {};
	offset = {};
	absolute = {};
}};

typealias integer {{ size = 64; align = 8; signed = false; map = clock.monotonic.value; }} := uint64_clock_mono_t;

)",
                   tsdl_str(host), tsdl_str(node), tsdl_str(fmt::format("{:.0f}", tl.hz)), tl.origin, c.total_seen(),
                   c.total_dropped(),
                   tsdl_str("CLOCK_MONOTONIC of node " + node + " in ns, from its TSC through the correlation stream"),
                   (long long)off_s, (long long)off_ns, clk.absolute ? "TRUE" : "FALSE");
  s += R"(stream {
	id = 0;
	event.header := struct {
		uint16_t id;
		uint64_clock_mono_t timestamp;
	};
	packet.context := struct {
		uint64_clock_mono_t timestamp_begin;
		uint64_clock_mono_t timestamp_end;
		uint64_t content_size;
		uint64_t packet_size;
		uint32_t cpu_id;
	};
};

)";
  for (auto [id, name] : {std::pair{kEventUser, "cptrace:user"}, std::pair{kEventClose, "cptrace:close"}})
    s += fmt::format(R"(event {{
	name = "{}";
	id = {};
	stream_id = 0;
	fields := struct {{
		string channel;
		uint64_hex_t channel_id;
		uint64_t tuple;
		uint32_t pid;
		uint32_t tid;
		uint16_t cpu;
		uint64_t tsc;
	}};
}};

)",
                     name, id);
  // A `counter` handler's series point: `count` events of the channel on `cpu` in
  // the period of `period_ns` starting at the event's time.
  s += fmt::format(R"(event {{
	name = "cptrace:counter_period";
	id = {};
	stream_id = 0;
	fields := struct {{
		string channel;
		uint64_hex_t channel_id;
		uint64_t count;
		uint64_t period_ns;
		uint16_t cpu;
		uint64_t tsc;
	}};
}};

)",
                   kEventCounterPeriod);
  return s;
}

CtfStats export_ctf(const TraceReader& r, const Timeline& tl, const std::string& out, bool overwrite,
                    size_t reorder_window) {
  // A file already at `out` fails here: it is not a directory.
  OutputDir dir(out, kCtfOutput, overwrite);
  NsClock clock(r, tl);
  CtfWriter w(r, clock, dir, std::max<size_t>(reorder_window, 1));
  r.for_each_event([&](const TraceEvent& e) { w.add(e); });
  CtfStats s = w.finish();
  // Written last, so that a directory with metadata holds a whole trace.
  dir.replace("metadata", ctf_metadata(r, tl));
  return s;
}

}  // namespace cptrace
