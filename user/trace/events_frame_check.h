// A cheaper check of an Events or Events2 frame than decoding it, for the reader's scan on
// open: the scan only needs to know that the frame decodes, how many events it
// holds and whether any is stamped in CLOCK_MONOTONIC ns. Decoding every frame
// there and again when the events are read cost a full decode per event.
//
// events_frame_decodes() walks the decompressed columns without building events.
// It is conservative: true only when decode_events_into() would succeed, false
// on anything it does not recognise as certainly good (the caller then decodes
// the frame, which gives the exact error of a bad one).
#pragma once
#include <cstddef>
#include <cstdint>

#include "trace/trace_format.h"

namespace cptrace {

// The decoded (decompressed) column bytes of an Events frame (version 1) or an
// Events2 frame of `count` events. On true, `mono` says whether any event's
// timebase is MonoNs.
bool event_columns_decode(const uint8_t* raw, size_t len, uint32_t count, bool& mono);
bool event2_columns_decode(const uint8_t* raw, size_t len, uint32_t count, bool& mono);

// The whole frame: header checks, decompression and the columns. Never throws.
bool events_frame_decodes(const FrameHeader& h, const uint8_t* payload, size_t len, bool& mono);

}  // namespace cptrace
