// ClockAdjust frames (FrameType::ClockAdjust, a JSON array of ClockAdjustment,
// clock/clock_adjustment.h), and the conversion of the watch's BPF record.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cptrace_clockadj.h"
#include "clock/clock_adjustment.h"

namespace cptrace {

// The record bpf/clockadj.bpf.c wrote (mono_ns = its exit; tsc left 0).
ClockAdjustment from_syscall_record(const cp_clockadj_rec& r);

std::string clock_adjust_frame_json(const std::vector<ClockAdjustment>& a);
std::vector<ClockAdjustment> clock_adjust_from_frame_json(const nlohmann::json& j);

}  // namespace cptrace
