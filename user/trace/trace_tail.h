// Following events.cpt while a recorder writes it (`cptrace top`).
//
// The writer appends one frame per writev and never rewrites one, so the bytes
// up to the end of a frame whose CRC verifies are final. The tail remembers that
// offset and each poll() decodes only the frames after it: a frame not yet whole,
// or not yet verifying (a reader may see a writev half done), is simply not read
// yet and is looked at again next time. The file is opened read-only and never
// locked, so the recorder cannot notice the reader.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "trace/sync_round.h"
#include "trace/trace_format.h"

namespace cptrace {

class TraceTail {
 public:
  // Opens `events_path` read-only. Throws TraceError when it is not a regular file.
  explicit TraceTail(const std::string& events_path);
  ~TraceTail();
  TraceTail(const TraceTail&) = delete;
  TraceTail& operator=(const TraceTail&) = delete;

  // Decodes the complete frames after offset(): Events frames go to `on_events`
  // with the timestamps as recorded (Timebase MonoNs or Tsc); Clock, Channels
  // Counters and Sync frames update the state below. Returns the frames read. Throws
  // TraceError for a bad file header, or a frame that verifies but does not decode.
  size_t poll(const std::function<void(const std::vector<TraceEvent>&)>& on_events);

  const std::vector<ClockPoint>& clock() const { return clock_; }
  const std::map<uint64_t, ChannelInfo>& channels() const { return channels_; }
  const Counters& counters() const { return counters_; }
  bool has_counters() const { return has_counters_; }
  // MinRTT rounds this node initiated (Sync frames), in file order.
  const std::vector<SyncRound>& sync_rounds() const { return sync_; }
  // Event records decoded so far (every kind), in file order: the first
  // records() events of the finished file are exactly those handed out.
  uint64_t records() const { return records_; }
  // The end of the last complete frame, and the file size seen by the last poll.
  uint64_t offset() const { return offset_; }
  uint64_t file_bytes() const { return size_; }
  // Why the bytes after offset() are not read ("" when there are none): only a
  // problem once the writer has finished.
  const std::string& pending_reason() const { return pending_; }
  const std::string& path() const { return path_; }

 private:
  bool next_frame(FrameHeader& h, std::vector<uint8_t>& payload);
  void take(const FrameHeader& h, const std::vector<uint8_t>& payload,
            const std::function<void(const std::vector<TraceEvent>&)>& on_events);

  std::string path_;
  int fd_ = -1;
  uint64_t offset_ = 0, size_ = 0;
  std::string pending_;
  std::vector<ClockPoint> clock_;
  std::map<uint64_t, ChannelInfo> channels_;
  Counters counters_;
  bool has_counters_ = false;
  std::vector<SyncRound> sync_;
  uint64_t records_ = 0;
  std::vector<TraceEvent> events_;  // reused between frames
};

}  // namespace cptrace
