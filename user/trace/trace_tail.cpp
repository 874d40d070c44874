// Incremental reading of a trace being written: only frames after the last complete one.
#include "trace/trace_tail.h"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "trace/block_codec.h"
#include "trace/frame_dispatch.h"
#include "trace/trace_file.h"

namespace cptrace {

TraceTail::TraceTail(const std::string& events_path) : path_(events_path), fd_(open_trace_file(events_path)) {}

TraceTail::~TraceTail() { ::close(fd_); }

size_t TraceTail::poll(const std::function<void(const std::vector<TraceEvent>&)>& on_events) {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) throw TraceError(path_, 0, std::string("cannot stat: ") + std::strerror(errno));
  size_ = uint64_t(st.st_size);
  if (offset_ == 0) {
    // The writer creates the file and then writes its header: wait for all of it.
    if (size_ < kFileHeaderSize) {
      pending_ = size_ ? "incomplete file header" : "empty file";
      return 0;
    }
    char head[kFileHeaderSize];
    if (!read_trace_bytes(fd_, path_, 0, head, sizeof head)) return 0;
    check_file_header(path_, head, sizeof head);
    offset_ = kFileHeaderSize;
  }
  size_t frames = 0;
  FrameHeader h{};
  std::vector<uint8_t> payload;
  pending_.clear();
  while (offset_ < size_ && next_frame(h, payload)) {
    try {
      take(h, payload, on_events);
    } catch (const std::exception& e) {
      throw TraceError(path_, offset_, fmt::format("undecodable frame of type {}: {}", h.type, e.what()));
    }
    offset_ += sizeof h + h.payload_len;
    ++frames;
  }
  return frames;
}

// The frame at offset_ if it is whole and verifies; otherwise says why in pending_.
bool TraceTail::next_frame(FrameHeader& h, std::vector<uint8_t>& payload) {
  uint64_t left = size_ - offset_;
  if (left < sizeof h || !read_trace_bytes(fd_, path_, offset_, &h, sizeof h)) {
    pending_ = fmt::format("incomplete frame header ({} of {} bytes)", left, sizeof h);
    return false;
  }
  if (const char* problem = h.magic != kFrameMagic ? "bad magic" : frame_header_problem(h)) {
    pending_ = std::string("bad frame header: ") + problem;
    return false;
  }
  if (left - sizeof h < h.payload_len) {
    pending_ = fmt::format("incomplete frame ({} of {} payload bytes)", left - sizeof h, h.payload_len);
    return false;
  }
  payload.resize(h.payload_len);
  if (!read_trace_bytes(fd_, path_, offset_ + sizeof h, payload.data(), payload.size()) ||
      !frame_crc_ok(h, payload.data(), payload.size())) {
    pending_ = "frame CRC does not verify";
    return false;
  }
  return true;
}

void TraceTail::take(const FrameHeader& h, const std::vector<uint8_t>& payload,
                     const std::function<void(const std::vector<TraceEvent>&)>& on_events) {
  // Net, Handlers, ClockAdjust, Processes and newer types are not part of the
  // live view: left unset, they are not even decoded.
  FrameHandlers on;
  on.events = [&](const FrameHeader& fh, const uint8_t* p, size_t len) {
    decode_events_into(fh, p, len, events_);
    records_ += events_.size();
    on_events(events_);
  };
  on.clock = [&](std::vector<ClockPoint> pts) { clock_.insert(clock_.end(), pts.begin(), pts.end()); };
  on.channels = [&](std::vector<ChannelInfo> add) {
    for (ChannelInfo& c : add) channels_[c.id] = std::move(c);
  };
  on.counters = [&](const nlohmann::json& j) {
    counters_ = counters_from_json(j);
    has_counters_ = true;
  };
  on.sync = [&](std::vector<SyncRound> rounds) { sync_.insert(sync_.end(), rounds.begin(), rounds.end()); };
  dispatch_frame(h, payload.data(), payload.size(), on);
}

}  // namespace cptrace
