// libFuzzer target: what the cluster controller reads from a node it does not
// control. The first byte splits the input:
//  - even: the agent's stdout (cluster/agent_wire.h), fed in chunks whose sizes
//    come from the input: frames must come out the same however the bytes are
//    cut, never longer than kWireMaxPayload, and a bad header must end the
//    stream with a runtime_error, nothing else; a Done frame is refused by
//    parse_done or read as the controller reads it without an exception;
//  - odd: a nodes file (cluster/nodes_file.h): a ClusterSpec or an exception
//    naming the problem, and every node's name a plain file name (the
//    controller writes into RUN/NAME/).
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster/agent_wire.h"
#include "cluster/nodes_file.h"

using namespace cptrace;

namespace {

// A Done frame as the controller reads it: parse_done refuses it with a
// runtime_error, or every read the controller makes of it then works.
void read_done(const std::string& data) {
  try {
    nlohmann::json d = parse_done(data);
    uint64_t sum = uint64_t(d.value("status", -1)) + uint64_t(d.value("signal", 0)) +
                   d.value("events_bytes", uint64_t(0)) + d.value("running", false) +
                   d.value("stopped_by", std::string()).size() + d.value("stderr_tail", std::string()).size();
    if (d.contains("ended_mono_ns"))
      sum += d["ended_mono_ns"][0].get<uint64_t>() + d["ended_mono_ns"][1].get<uint64_t>();
    if (sum == 42) printable(data, 8);  // keep the reads
  } catch (const std::runtime_error&) {
  }
}

struct Decoded {
  std::vector<WireFrame> frames;
  bool refused = false;
};

Decoded decode_in_chunks(const std::string& bytes, const uint8_t* cuts, size_t ncuts) {
  Decoded d;
  WireDecoder dec;
  size_t at = 0, k = 0;
  try {
    while (at < bytes.size()) {
      size_t n = ncuts ? 1 + cuts[k++ % ncuts] : bytes.size();
      n = std::min(n, bytes.size() - at);
      dec.feed(bytes.data() + at, n);
      at += n;
      WireFrame f;
      while (dec.next(f)) {
        if (f.data.size() > kWireMaxPayload) __builtin_trap();
        if (f.type == WireType::Done) read_done(f.data);
        d.frames.push_back(f);
      }
    }
  } catch (const std::runtime_error&) {
    d.refused = true;
  }
  return d;
}

bool same(const Decoded& a, const Decoded& b) {
  if (a.refused != b.refused || a.frames.size() != b.frames.size()) return false;
  for (size_t i = 0; i < a.frames.size(); ++i)
    if (a.frames[i].type != b.frames[i].type || a.frames[i].offset != b.frames[i].offset ||
        a.frames[i].data != b.frames[i].data)
      return false;
  return true;
}

void check_stream(const uint8_t* data, size_t size) {
  size_t ncuts = size ? data[0] % 8 : 0;
  if (ncuts > size) ncuts = size;
  std::string bytes(reinterpret_cast<const char*>(data + ncuts), size - ncuts);
  Decoded whole = decode_in_chunks(bytes, nullptr, 0), cut = decode_in_chunks(bytes, data, ncuts);
  if (!same(whole, cut)) __builtin_trap();
}

void check_nodes_file(const uint8_t* data, size_t size) {
  nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, false);
  if (j.is_discarded()) return;
  try {
    ClusterSpec spec = parse_nodes(j);
    for (const ClusterNode& n : spec.nodes)
      if (n.name.empty() || n.name == "." || n.name == ".." || n.name.find('/') != std::string::npos) __builtin_trap();
  } catch (const std::exception&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (data[0] % 2 == 0)
    check_stream(data + 1, size - 1);
  else
    check_nodes_file(data + 1, size - 1);
  return 0;
}
