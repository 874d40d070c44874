// One dispatch by frame type for every reader of events.cpt: TraceReader (the
// validating scan) and TraceTail (a trace followed while it is written).
//
// dispatch_frame() decodes a frame whose CRC verified into the value its type
// carries and hands it to that type's handler. A reader sets the handlers of the
// types it keeps; a type it leaves unset is not decoded at all, so a damaged
// frame of a type a reader ignores cannot fail that reader. Decoding is all or
// nothing: a handler is called only with a fully decoded frame, so a frame that
// throws leaves the reader's state as it was.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include <nlohmann/json.hpp>

#include "clock/clock_adjustment.h"
#include "trace/sync_round.h"
#include "trace/trace_format.h"

namespace cptrace {

struct FrameHandlers {
  // Events and Net frames as stored: how much to decode is the reader's choice
  // (the scan only checks them, the tail decodes them).
  std::function<void(const FrameHeader&, const uint8_t*, size_t)> events, net;
  std::function<void(std::vector<ClockPoint>)> clock;  // Clock and Clock2
  std::function<void(std::vector<ChannelInfo>)> channels;
  std::function<void(nlohmann::json)> counters;  // the whole object: TraceReader also reads "net"
  std::function<void(std::vector<SyncRound>)> sync;
  std::function<void(std::vector<ClockAdjustment>)> clock_adjust;
  std::function<void(nlohmann::json)> processes;
  std::function<void(nlohmann::json)> handlers;  // a JSON array
};

// Decodes the frame (header h, its verified payload) and calls its handler.
// False when it has none: Translated, a type newer than this build, or one the
// caller left unset. Throws std::exception for a payload that does not decode.
bool dispatch_frame(const FrameHeader& h, const uint8_t* payload, size_t len, const FrameHandlers& on);

// The per-CPU seen/dropped/filtered/series_lost of a Counters frame's JSON;
// throws std::runtime_error when it is not an object.
Counters counters_from_json(const nlohmann::json& j);
// The entries of a Channels frame's JSON; throws std::runtime_error when malformed.
std::vector<ChannelInfo> channels_from_json(const nlohmann::json& j);

}  // namespace cptrace
