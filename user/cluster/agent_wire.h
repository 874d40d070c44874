// The byte stream between `cptrace cluster agent` (on a node) and the controller.
//
// Controller -> agent (the agent's stdin): one JSON line, the request
// ({"op": "record", ...} or {"op": "fetch", ...}, see agent.h), then, while
// recording, command lines ("stop", "release"). The MinRTT key travels in the request
// line, so it is never on any command line.
//
// Agent -> controller (the agent's stdout): frames of a 24-byte header
// {magic "CPAG", type, offset, length} and `length` bytes. Events frames carry
// bytes of the node's events.cpt at `offset`, in order, so the controller's copy
// is the node's file byte for byte; Meta carries the whole meta.json at the end;
// MetaStart the meta.json the recorder wrote at its start (complete=false: the
// live view needs its node name and TSC skew before the end); Hello and Done are
// JSON; Stopped (empty JSON) says the node's MinRTT stop
// phase is over and its responder waits for "release".
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace cptrace {

enum class WireType : uint32_t { Hello = 1, Events = 2, Meta = 3, Done = 4, MetaStart = 5, Stopped = 6 };

struct WireFrame {
  WireType type;
  uint64_t offset = 0;
  std::string data;
};

constexpr uint32_t kWireMagic = 0x47415043;  // "CPAG"
constexpr size_t kWireHeader = 24;
constexpr uint32_t kWireMaxPayload = 16u << 20;

// The frame's bytes (header + data).
std::string encode_wire(WireType type, uint64_t offset, const char* data, size_t len);

// Incremental decoding of the agent's stdout, fed as bytes arrive.
class WireDecoder {
 public:
  void feed(const char* p, size_t n) { buf_.append(p, n); }
  // The next complete frame into `out`: true; false when more bytes are needed.
  // Throws std::runtime_error on a bad header (not an agent on the other end).
  bool next(WireFrame& out);
  size_t pending() const { return buf_.size(); }

 private:
  std::string buf_;
};

// A Done frame's JSON, checked before anything reads it: an object whose
// fields the controller uses have their types ("status", "signal": integers;
// "events_bytes": unsigned; "running": bool; "stopped_by", "stderr_tail":
// strings; "ended_mono_ns": two unsigned). Throws std::runtime_error naming
// what is wrong: a node's bytes must not stop the controller.
nlohmann::json parse_done(const std::string& data);

// The controller's request line (agent.h lists each op and its fields), checked
// before the agent acts on it: a JSON object, a known op, every field it uses of
// its type (strings without NUL bytes, which would cut a path short; a key
// without a line break; non-negative finite seconds; an unsigned offset).
// Fields the op does not use are ignored. Throws std::runtime_error starting
// "request: " and naming the field.
struct AgentRequest {
  std::string op;  // "record", "follow" or "fetch"
  std::string dir, node;  // node: record only
  std::optional<std::string> key;
  std::vector<std::string> record_args, command;
  double controller_timeout = 30, wait = 0;  // seconds
  bool hold = false, stop = false;
  uint64_t offset = 0;
};
AgentRequest parse_agent_request(const std::string& line);

// Up to `max` bytes of `s` as text a terminal shows as is: other bytes as \xNN.
std::string printable(const std::string& s, size_t max);

// write(2) until every byte is out; false on an error (EPIPE: the reader is gone).
bool write_all(int fd, const char* p, size_t n);

}  // namespace cptrace
