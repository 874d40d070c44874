// Frame dispatch: each frame type decoded once, for every reader.
#include "trace/frame_dispatch.h"

#include <charconv>
#include <stdexcept>
#include <string>
#include <system_error>

#include "trace/block_codec.h"
#include "trace/clock_adjust.h"

namespace cptrace {

using nlohmann::json;

namespace {

// Channel ids are JSON numbers; "0x..." strings are accepted for hand-written files.
uint64_t channel_id(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    uint64_t id = 0;
    if (s.size() > 2 && s.compare(0, 2, "0x") == 0) {
      auto [end, ec] = std::from_chars(s.data() + 2, s.data() + s.size(), id, 16);
      if (ec == std::errc() && end == s.data() + s.size()) return id;
    }
  }
  throw std::runtime_error("channel id is not an unsigned number");
}

// All or nothing: a frame with one malformed round gives none of its rounds.
std::vector<SyncRound> sync_rounds_from_json(const json& j) {
  std::vector<SyncRound> rounds;
  for (const auto& r : j) rounds.push_back(sync_round_from_json(r));
  return rounds;
}

json handler_changes_from_json(json j) {
  if (!j.is_array()) throw std::runtime_error("handlers frame is not a JSON array");
  return j;
}

}  // namespace

bool dispatch_frame(const FrameHeader& h, const uint8_t* payload, size_t len, const FrameHandlers& on) {
  auto parsed = [&] { return json::parse(decode_json(h, payload, len)); };
  switch (static_cast<FrameType>(h.type)) {
    case FrameType::Events:
    case FrameType::Events2:
      if (!on.events) return false;
      on.events(h, payload, len);
      return true;
    case FrameType::Net:
    case FrameType::Net2:
      if (!on.net) return false;
      on.net(h, payload, len);
      return true;
    case FrameType::Clock:
    case FrameType::Clock2:
      if (!on.clock) return false;
      on.clock(decode_clock(h, payload, len));
      return true;
    case FrameType::Channels:
      if (!on.channels) return false;
      on.channels(channels_from_json(parsed()));
      return true;
    case FrameType::Counters:
      if (!on.counters) return false;
      on.counters(parsed());
      return true;
    case FrameType::Sync:
      if (!on.sync) return false;
      on.sync(sync_rounds_from_json(parsed()));
      return true;
    case FrameType::ClockAdjust:
      if (!on.clock_adjust) return false;
      on.clock_adjust(clock_adjust_from_frame_json(parsed()));
      return true;
    case FrameType::Processes:
      if (!on.processes) return false;
      on.processes(parsed());
      return true;
    case FrameType::Handlers:
      if (!on.handlers) return false;
      on.handlers(handler_changes_from_json(parsed()));
      return true;
    case FrameType::Translated:
      return false;  // read by the stages that own it (translated_frame.h)
  }
  return false;  // a newer writer's type: skipped
}

std::vector<ChannelInfo> channels_from_json(const json& j) {
  if (!j.is_array()) throw std::runtime_error("channels frame is not a JSON array");
  std::vector<ChannelInfo> add;
  for (const json& e : j) {
    if (!e.is_object()) throw std::runtime_error("channel entry is not an object");
    add.push_back({channel_id(e.at("id")), e.at("name").get<std::string>(), e.value("pid", uint32_t{0})});
  }
  return add;
}

Counters counters_from_json(const json& j) {
  if (!j.is_object()) throw std::runtime_error("counters frame is not a JSON object");
  Counters c;
  c.seen = j.value("seen", std::vector<uint64_t>{});
  c.dropped = j.value("dropped", std::vector<uint64_t>{});
  c.filtered = j.value("filtered", std::vector<uint64_t>{});
  c.series_lost = j.value("series_lost", std::vector<uint64_t>{});
  return c;
}

}  // namespace cptrace
