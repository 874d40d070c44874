// Trace reader: one validating scan at construction, streaming decode afterwards.
#include "trace/trace_reader.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string_view>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "cptrace.h"  // cp_channel_id, CP_CHANNEL_NAME_MAX
#include "trace/block_codec.h"
#include "clock/clock_change_candidates.h"
#include "clock/clock_rate_envelope.h"
#include "trace/events_frame_check.h"
#include "trace/trace_file.h"
#include "trace/tsc_skew_history.h"

namespace cptrace {

// A conversion's error plus the TSC skew across CPUs, saturating.
static uint64_t saturating_err(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

namespace fs = std::filesystem;
using nlohmann::json;

// Random access to the bytes of events.cpt: a file (pread) or memory.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual uint64_t size() const = 0;
  // Reads exactly n bytes at off; false if the source ends before that.
  virtual bool read(uint64_t off, void* dst, size_t n) const = 0;
};

namespace {

class MemorySource : public ByteSource {
 public:
  explicit MemorySource(std::string data) : data_(std::move(data)) {}
  uint64_t size() const override { return data_.size(); }
  bool read(uint64_t off, void* dst, size_t n) const override {
    if (off > data_.size() || n > data_.size() - off) return false;
    if (n > 0) std::memcpy(dst, data_.data() + off, n);
    return true;
  }

 private:
  std::string data_;
};

// The size is taken once at open: a file still being written is read up to there.
class FileSource : public ByteSource {
 public:
  explicit FileSource(const std::string& path) : path_(path), fd_(open_trace_file(path)) {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) {
      std::string why = std::strerror(errno);
      ::close(fd_);
      throw TraceError(path, 0, "cannot stat: " + why);
    }
    size_ = static_cast<uint64_t>(st.st_size);
  }
  ~FileSource() override { ::close(fd_); }
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;

  uint64_t size() const override { return size_; }
  bool read(uint64_t off, void* dst, size_t n) const override { return read_trace_bytes(fd_, path_, off, dst, n); }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

std::string type_name(uint16_t type) {
  switch (static_cast<FrameType>(type)) {
    case FrameType::Events:
      return "events";
    case FrameType::Events2:
      return "events (version 2)";
    case FrameType::Clock:
      return "clock";
    case FrameType::Clock2:
      return "clock (version 2)";
    case FrameType::ClockAdjust:
      return "clock adjustments";
    case FrameType::Channels:
      return "channels";
    case FrameType::Counters:
      return "counters";
    case FrameType::Net:
      return "net";
    case FrameType::Net2:
      return "net (version 2)";
    case FrameType::Sync:
      return "sync";
    case FrameType::Handlers:
      return "handlers";
    case FrameType::Translated:
      return "translated";
    case FrameType::Processes:
      return "processes";
  }
  return "type-" + std::to_string(type);
}

std::string events_path_of(const std::string& path) {
  return fs::is_directory(path) ? (fs::path(path) / "events.cpt").string() : path;
}

}  // namespace

// ---- construction and the validating scan ----------------------------------------------

TraceReader::TraceReader(std::shared_ptr<const ByteSource> src, std::string file)
    : src_(std::move(src)), file_(std::move(file)) {
  scan();
}

TraceReader::TraceReader(const std::string& path)
    : TraceReader(std::make_shared<FileSource>(events_path_of(path)), events_path_of(path)) {
  load_meta((fs::path(file_).parent_path() / "meta.json").string());
  add_change_candidates();
  read_tsc_skew();
}

TraceReader TraceReader::from_bytes(std::string events_cpt, json meta) {
  TraceReader r(std::make_shared<MemorySource>(std::move(events_cpt)), "events.cpt");
  if (meta.is_object()) {
    try {
      r.trace_meta_ = TraceMeta::from_json(meta);
      r.meta_ = std::move(meta);
    } catch (const std::exception& e) {
      r.meta_problem_ = std::string("meta.json: ") + e.what();
    }
  }
  r.add_change_candidates();
  r.read_tsc_skew();
  return r;
}

namespace {

// meta.json's one version key, "format_version" (written by TraceWriter; traces
// of earlier builds also wrote "version", the same number): the events file's
// version, whose fields this build knows. Another one is refused, not guessed at.
void check_meta_version(const json& j) {
  const json* v = j.contains("format_version") ? &j["format_version"] : j.contains("version") ? &j["version"] : nullptr;
  if (!v) return;  // hand-made or older than the key: the events file's header decides
  if (!v->is_number_unsigned() || v->get<uint64_t>() < kOldestFormatVersion || v->get<uint64_t>() > kFormatVersion)
    throw std::runtime_error(fmt::format("format_version {}: this build reads format versions {} to {}", v->dump(),
                                         kOldestFormatVersion, kFormatVersion));
}

}  // namespace

// A missing meta.json is noted; one that exists but is not a regular file (a FIFO
// would block the reader) or cannot be read throws, like events.cpt would.
void TraceReader::load_meta(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(path, ec)) && !fs::exists(path, ec)) {
    meta_problem_ = path + ": missing";
    return;
  }
  std::string text = read_trace_file(path);
  try {
    json j = json::parse(text);
    if (!j.is_object()) throw std::runtime_error("not a JSON object");
    check_meta_version(j);
    trace_meta_ = TraceMeta::from_json(j);
    meta_ = std::move(j);
  } catch (const json::parse_error& e) {
    // e.byte: 1-based position of the character that failed.
    meta_problem_ = fmt::format("{} at byte {}: not valid JSON: {}", path, e.byte > 0 ? e.byte - 1 : 0, e.what());
  } catch (const std::exception& e) {
    meta_problem_ = path + ": " + e.what();
  }
}

void TraceReader::scan() {
  file_bytes_ = src_->size();
  char head[kFileHeaderSize] = {};
  size_t n = static_cast<size_t>(std::min<uint64_t>(file_bytes_, kFileHeaderSize));
  src_->read(0, head, n);
  check_file_header(file_, head, n);

  uint64_t off = kFileHeaderSize;
  FrameHeader h{};
  std::vector<uint8_t> payload;
  while (off < file_bytes_ && read_frame(off, h, payload)) {
    try {
      take_frame(off, h, payload);
    } catch (const std::exception& e) {
      error_.emplace(file_, off, "undecodable " + type_name(h.type) + " frame: " + e.what());
      break;
    }
    off += sizeof h + h.payload_len;
    ++frame_count_;
  }
  valid_bytes_ = off;
  clock_map_ = ClockMap(clock_);
  if (clock_map_.points().size() >= 2)  // a syscall's instant is between points: interpolated
    for (ClockAdjustment& a : clock_adjustments_)
      if (a.kind == ClockAdjustKind::Syscall) a.tsc = clock_map_.mono_to_tsc(a.mono_ns);
}

// The skew every stamp carries: what the recorder measured at start, at stop
// and meanwhile (trace/tsc_skew_history.h).
void TraceReader::read_tsc_skew() { skew_ = TscSkewHistory::from_meta(meta_); }

// Again, now with the spans where the clock's rate may have changed: the
// conversion model checks its assumption against them (clock_bounds.h). After
// meta.json is read: it says whether the watch of clock calls dropped any.
void TraceReader::add_change_candidates() {
  if (clock_map_.points().size() < 2) return;
  // The recorder's measured reading quanta (clock_quantum.h); 1 ns in traces
  // from before it measured them.
  const nlohmann::json& cd = meta_.value("clock_discipline", nlohmann::json::object());
  auto quantum = [&](const char* key) {
    auto it = cd.is_object() ? cd.find(key) : cd.end();
    return it != cd.end() && it->is_number_unsigned() ? std::max<uint64_t>(1, it->get<uint64_t>()) : uint64_t(1);
  };
  ClockReading reading{quantum("quantum_ns"), quantum("raw_quantum_ns")};
  // Clocksource switches (clock/clocksource_watch.h): faults of the clock. One
  // that cannot be read covers the whole stream: wider, never wrong.
  std::vector<ClockChange> faults;
  auto sw = cd.is_object() ? cd.find("clocksource_switches") : cd.end();
  if (sw != cd.end() && sw->is_array())
    for (const nlohmann::json& s : *sw) {
      auto f = s.is_object() ? s.find("from_ns") : s.end(), t = s.is_object() ? s.find("to_ns") : s.end();
      if (f != s.end() && t != s.end() && f->is_number_unsigned() && t->is_number_unsigned())
        faults.push_back({f->get<uint64_t>(), t->get<uint64_t>()});
      else
        faults.push_back({0, UINT64_MAX});
    }
  ClockHistory history = clock_history();
  clock_map_ =
      ClockMap(clock_, clock_change_candidates(history), reading, std::move(faults), clock_rate_envelope(history));
}

// Whether the frame magic occurs anywhere in [from, end of file). A file that ends
// inside a frame is what a killed writer leaves only when no frame follows: a
// payload_len damaged into "longer than the rest of the file" has the magic of
// the frames after it in that rest. (Compressed payloads hold these four bytes
// by chance with odds of about 2^-32 per position.)
bool TraceReader::magic_after(uint64_t from) const {
  const uint32_t magic = kFrameMagic;
  char m[sizeof magic];
  std::memcpy(m, &magic, sizeof magic);
  std::string buf;
  for (uint64_t off = from; off < file_bytes_;) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(file_bytes_ - off, 1 << 20));
    buf.resize(n);
    if (!src_->read(off, buf.data(), n)) return false;
    if (buf.find(std::string_view(m, sizeof m)) != std::string::npos) return true;
    if (off + n >= file_bytes_) break;
    off += n - (sizeof m - 1);  // a magic straddling two chunks is found in the next
  }
  return false;
}

// Reads and checks the frame at off; on a problem records it in error_.
bool TraceReader::read_frame(uint64_t off, FrameHeader& h, std::vector<uint8_t>& payload) {
  uint64_t left = file_bytes_ - off;
  auto bad = [&](const std::string& what) {
    error_.emplace(file_, off, what);
    return false;
  };
  if (left < sizeof h) {
    truncated_tail_ = !magic_after(off + 1);
    return bad(fmt::format("truncated frame header ({} of {} bytes)", left, sizeof h));
  }
  if (!src_->read(off, &h, sizeof h)) return bad("file shrank while reading");
  if (h.magic != kFrameMagic) return bad(fmt::format("bad frame magic 0x{:08x}", h.magic));
  if (const char* problem = frame_header_problem(h)) return bad(std::string("bad frame header: ") + problem);
  if (left - sizeof h < h.payload_len) {
    truncated_tail_ = !magic_after(off + sizeof h);
    return bad(
        fmt::format("truncated {} frame payload ({} of {} bytes)", type_name(h.type), left - sizeof h, h.payload_len));
  }
  payload.resize(h.payload_len);
  if (!src_->read(off + sizeof h, payload.data(), payload.size())) return bad("file shrank while reading");
  if (!frame_crc_ok(h, payload.data(), payload.size()))
    return bad(fmt::format("CRC mismatch in {} frame (stored 0x{:08x}, computed 0x{:08x})", type_name(h.type), h.crc32,
                           frame_crc(h, payload.data(), payload.size())));
  return true;
}

// Decodes one good frame. Throws on an undecodable payload before changing any
// state (frame_dispatch.h), so a bad frame leaves nothing half-applied.
void TraceReader::take_frame(uint64_t off, const FrameHeader& h, const std::vector<uint8_t>& payload) {
  FrameHandlers on;
  on.events = [&](const FrameHeader& fh, const uint8_t*, size_t) { take_events(off, fh, payload); };
  on.net = [&](const FrameHeader& fh, const uint8_t*, size_t) { take_net(off, fh, payload); };
  on.clock = [&](std::vector<ClockPoint> pts) { clock_.insert(clock_.end(), pts.begin(), pts.end()); };
  on.channels = [&](std::vector<ChannelInfo> add) {
    for (ChannelInfo& c : add) channels_[c.id] = std::move(c);
  };
  on.counters = [&](json j) { take_counters(std::move(j)); };
  on.sync = [&](std::vector<SyncRound> rounds) { sync_.insert(sync_.end(), rounds.begin(), rounds.end()); };
  on.clock_adjust = [&](std::vector<ClockAdjustment> a) {
    clock_adjustments_.insert(clock_adjustments_.end(), a.begin(), a.end());
  };
  on.processes = [&](json j) { pids_.merge(j); };
  on.handlers = [&](json changes) {
    for (auto& c : changes) handler_changes_.push_back(std::move(c));
  };
  // Translated and newer types: their offsets, for the stages that read them.
  if (!dispatch_frame(h, payload.data(), payload.size(), on)) other_frames_.push_back({off, h});
}

// The frame is decoded again when its events are read: here a walk over its
// columns says it decodes (events_frame_check.h), and only a frame that walk
// does not accept is decoded, for the decoder's verdict and error text.
void TraceReader::take_events(uint64_t off, const FrameHeader& h, const std::vector<uint8_t>& payload) {
  bool mono = false;
  if (!events_frame_decodes(h, payload.data(), payload.size(), mono)) {
    thread_local std::vector<TraceEvent> evs;
    decode_events_into(h, payload.data(), payload.size(), evs);
    mono = std::any_of(evs.begin(), evs.end(),
                       [](const TraceEvent& e) { return e.timebase == static_cast<uint8_t>(Timebase::MonoNs); });
  }
  if (mono && !first_mono_frame_) first_mono_frame_ = off;
  event_frames_.push_back({off, h});
  event_count_ += h.count;
}

void TraceReader::take_net(uint64_t off, const FrameHeader& h, const std::vector<uint8_t>& payload) {
  thread_local std::vector<cp_net_rec> recs;
  decode_net_into(h, payload.data(), payload.size(), recs);
  if (!recs.empty() && !first_mono_frame_) first_mono_frame_ = off;  // kernel timestamps only
  net_frames_.push_back({off, h});
  net_count_ += recs.size();
}

void TraceReader::take_counters(json j) {
  Counters c = counters_from_json(j), net;
  if (j.contains("net")) {
    const json& n = j.at("net");
    if (!n.is_object()) throw std::runtime_error("counters frame: \"net\" is not an object");
    net.seen = n.value("seen", std::vector<uint64_t>{});
    net.dropped = n.value("dropped", std::vector<uint64_t>{});
  }
  counters_ = std::move(c);
  net_counters_ = std::move(net);
  counters_json_ = std::move(j);
}

// ---- streaming ------------------------------------------------------------------------

// A name the recorder truncated (to CP_CHANNEL_NAME_MAX-1 bytes, the announce
// record and registry limit) is shared by every longer name with that beginning;
// the id, the hash of the full name, tells them apart.
std::string TraceReader::channel_name(uint64_t id) const { return channel_label(channels_, id); }

std::string channel_label(const std::map<uint64_t, ChannelInfo>& channels, uint64_t id) {
  auto it = channels.find(id);
  if (it == channels.end()) return fmt::format("0x{:016x}", id);
  const std::string& name = it->second.name;
  if (name.size() >= CP_CHANNEL_NAME_MAX - 1 && cp_channel_id(name.c_str()) != id)
    return fmt::format("{}...[0x{:016x}]", name, id);
  return name;
}

void TraceReader::check_convertible() const {
  if (!first_mono_frame_ || clock_map_.points().size() >= 2) return;
  throw TraceError(file_, *first_mono_frame_,
                   clock_map_.empty() ? "no clock-correlation points; cannot convert kernel timestamps to TSC"
                                      : "only one clock-correlation point; cannot convert kernel timestamps "
                                        "to TSC (needs two)");
}

void TraceReader::convert(std::vector<TraceEvent>& evs) const {
  for (TraceEvent& e : evs) {
    if (e.timebase != static_cast<uint8_t>(Timebase::MonoNs)) {
      // Stamped on some CPU's TSC; one that names its CPU carries that CPU's skew.
      e.ts_err = skew_.err_of(e);
      continue;
    }
    // A System.nanoTime() read in a time namespace (the only MonoNs user
    // events): back onto the host's CLOCK_MONOTONIC first (pid_table.h).
    if (e.kind == static_cast<uint8_t>(EventKind::User)) {
      auto p = pids_.by_pid.find(e.pid);
      if (p != pids_.by_pid.end() && p->second.mono_offset_unknown) {
        e.ts_err = UINT64_MAX / 4;  // no offset known: any instant (docs/java.md)
        e.timebase = static_cast<uint8_t>(Timebase::Tsc);
        e.ts = clock_map_.mono_to_tsc(e.ts);
        continue;
      }
      if (p != pids_.by_pid.end()) e.ts = uint64_t(int64_t(e.ts) - p->second.mono_offset_ns);
    }
    // Through points whose TSC was read on the recorder's CPU.
    ClockMap::Stamp s = clock_map_.mono_to_stamp(e.ts);
    e.ts = s.ts;
    e.ts_err = saturating_err(s.err, skew_.err);
    e.timebase = static_cast<uint8_t>(Timebase::Tsc);
  }
}

void TraceReader::for_each_batch(const std::function<void(const std::vector<TraceEvent>&)>& fn) const {
  check_convertible();
  std::vector<uint8_t> payload;
  std::vector<TraceEvent> evs;
  for (const EventFrame& f : event_frames_) {
    FrameHeader h{};
    reread(f, h, payload);
    decode_events_into(h, payload.data(), payload.size(), evs);
    convert(evs);
    fn(evs);
  }
}

void TraceReader::read_events(size_t i, std::vector<TraceEvent>& out) const {
  check_convertible();
  thread_local std::vector<uint8_t> payload;
  FrameHeader h{};
  reread(event_frames_.at(i), h, payload);
  decode_events_into(h, payload.data(), payload.size(), out);
  convert(out);
}

// Checked again: the scan's verdict only holds for the bytes it saw.
void TraceReader::reread(const EventFrame& f, FrameHeader& h, std::vector<uint8_t>& payload) const {
  payload.resize(f.hdr.payload_len);
  if (!src_->read(f.offset, &h, sizeof h) || std::memcmp(&h, &f.hdr, sizeof h) != 0 ||
      !src_->read(f.offset + sizeof h, payload.data(), payload.size()) ||
      !frame_crc_ok(h, payload.data(), payload.size()))
    throw TraceError(file_, f.offset, "frame changed since the file was opened");
}

void TraceReader::for_each_net_event(const std::function<void(const NetEvent&)>& fn) const {
  check_convertible();
  std::vector<uint8_t> payload;
  std::vector<cp_net_rec> recs;
  NetEvent e;
  for (const EventFrame& f : net_frames_) {
    FrameHeader h{};
    reread(f, h, payload);
    decode_net_into(h, payload.data(), payload.size(), recs);
    for (const cp_net_rec& r : recs) {
      e.r = r;
      ClockMap::Stamp s = clock_map_.mono_to_stamp(r.ktime_ns);
      e.ts = s.ts;
      e.ts_err = saturating_err(s.err, skew_.err);
      e.call_ts = e.call_err = 0;
      if (r.kind == CP_NET_SOCK_SEND && (r.flags & CP_NETF_CALL_START) && r.call_ns <= r.ktime_ns) {
        ClockMap::Stamp c = clock_map_.mono_to_stamp(r.ktime_ns - r.call_ns);
        e.call_ts = c.ts;
        e.call_err = saturating_err(c.err, skew_.err);
      }
      fn(e);
    }
  }
}

void TraceReader::for_each_frame(FrameType type,
                                 const std::function<void(const FrameHeader&, const std::vector<uint8_t>&)>& fn) const {
  std::vector<uint8_t> payload;
  for (const EventFrame& f : other_frames_) {
    if (f.hdr.type != uint16_t(type)) continue;
    FrameHeader h{};
    reread(f, h, payload);
    fn(h, payload);
  }
}

std::vector<size_t> TraceReader::frame_positions(FrameType type) const {
  std::vector<size_t> out;
  for (size_t i = 0; i < other_frames_.size(); ++i)
    if (other_frames_[i].hdr.type == uint16_t(type)) out.push_back(i);
  return out;
}

void TraceReader::read_frame(size_t position, FrameHeader& h, std::vector<uint8_t>& payload) const {
  reread(other_frames_.at(position), h, payload);
}

void TraceReader::for_each_event(const std::function<void(const TraceEvent&)>& fn) const {
  for_each_batch([&](const std::vector<TraceEvent>& evs) {
    for (const TraceEvent& e : evs) fn(e);
  });
}

std::vector<TraceEvent> TraceReader::events() const {
  std::vector<TraceEvent> all;
  all.reserve(event_count_);
  for_each_batch([&](const std::vector<TraceEvent>& evs) { all.insert(all.end(), evs.begin(), evs.end()); });
  return all;
}

}  // namespace cptrace
