// `cptrace export ctf`: a CTF 1.8 trace directory (babeltrace2, Trace Compass).
//
//   OUT/metadata          TSDL text: the clock is the node's CLOCK_MONOTONIC in ns
//                         (event TSC converted through the correlation stream, as
//                         every reader converts it; frequency 1e9, so no rounding
//                         of the TSC frequency), offset = CLOCK_REALTIME -
//                         CLOCK_MONOTONIC at the recorder's start, so readers show
//                         real dates; one stream class; event classes
//                         "cptrace:user" and "cptrace:close" with the fields
//                         channel (string), channel_id, tuple, pid, tid, cpu, tsc
//                         (the raw timestamp, as `dump` prints it);
//                         "cptrace:counter_period" for a `counter` handler's series
//                         point (channel, channel_id, count, period_ns, cpu, tsc;
//                         its time is the period's start).
//   OUT/stream_<cpu>      binary packets (byte-aligned, little-endian) of that CPU's
//   OUT/stream_<cpu>_late<k>   events; packet context carries cpu_id.
//
// CTF wants timestamps non-decreasing within a stream, and a trace file holds
// events only roughly in time order (per ring, per block; a batch is handed over
// after its events happened). Each stream therefore sorts through a bounded
// reorder window (a min-heap of `reorder_window` events); an event older than
// what its stream already wrote goes to the next "late" stream of that CPU
// instead, so nothing is dropped or reordered wrongly and memory stays bounded
// (window × streams), frame by frame.
#pragma once
#include <cstddef>
#include <string>

#include "trace/trace_timeline.h"

namespace cptrace {

struct CtfStats {
  uint64_t events = 0;
  uint64_t packets = 0;
  size_t streams = 0;  // stream files written
  size_t late_streams = 0;  // of which "late" overflow streams
};

// `out` is created; an existing directory is refused if it holds a metadata file,
// unless `overwrite`.
CtfStats export_ctf(const TraceReader& r, const Timeline& tl, const std::string& out, bool overwrite,
                    size_t reorder_window = 1 << 16);

// The TSDL metadata text (exposed for tests).
std::string ctf_metadata(const TraceReader& r, const Timeline& tl);

}  // namespace cptrace
