// Loading bpf/clockadj.bpf.c and reading its ring (clock_adjust_watch.h).
#include "probe/clock_adjust_watch.h"

#include "probe/link_release.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "clockadj.skel.h"
#include "probe/bpf_load_log.h"
#include "probe/kernel_features.h"

namespace cptrace {

ClockAdjustWatch::ClockAdjustWatch() {
  if (!kernel_features().syscall_tracepoints)
    throw std::runtime_error("no syscall tracepoints (CONFIG_FTRACE_SYSCALLS or tracefs)");
  skel_ = clockadj_bpf::open();
  if (!skel_) throw std::runtime_error(explain_bpf_error(errno, "opening the clock-adjustment BPF object"));
  {
    BpfLoadLog log;
    if (int err = clockadj_bpf::load(skel_)) {
      std::string why = explain_load_failure(err, log.text(), "loading the clock-adjustment BPF programs");
      clockadj_bpf::destroy(skel_);
      throw std::runtime_error(why);
    }
  }
  if (int err = clockadj_bpf::attach(skel_)) {
    clockadj_bpf::destroy(skel_);
    throw std::runtime_error(explain_bpf_error(err, "attaching to the clock syscalls' tracepoints"));
  }
  rb_ = ring_buffer__new(bpf_map__fd(skel_->maps.clockadj_ring), &ClockAdjustWatch::on_record, this, nullptr);
  if (!rb_) {
    int err = -errno;
    clockadj_bpf::destroy(skel_);
    throw std::runtime_error(explain_bpf_error(err, "opening the clock-adjustment ring"));
  }
}

ClockAdjustWatch::~ClockAdjustWatch() {
  ring_buffer__free(rb_);
  if (skel_) detach_skeleton_together(skel_->skeleton);
  clockadj_bpf::destroy(skel_);
}

int ClockAdjustWatch::fd() const { return ring_buffer__epoll_fd(rb_); }

int ClockAdjustWatch::on_record(void* self, void* data, size_t len) {
  cp_clockadj_rec r{};
  std::memcpy(&r, data, std::min(len, sizeof r));
  static_cast<ClockAdjustWatch*>(self)->pending_.push_back(r);
  return 0;
}

std::vector<cp_clockadj_rec> ClockAdjustWatch::take() {
  ring_buffer__consume(rb_);
  std::vector<cp_clockadj_rec> out;
  out.swap(pending_);
  return out;
}

uint64_t ClockAdjustWatch::counter(int i) const {
  uint32_t key = uint32_t(i);
  uint64_t v = 0;
  bpf_map_lookup_elem(bpf_map__fd(skel_->maps.clockadj_counters), &key, &v);
  return v;
}

uint64_t ClockAdjustWatch::seen() const { return counter(CP_CLKADJ_CNT_SEEN); }
uint64_t ClockAdjustWatch::dropped() const { return counter(CP_CLKADJ_CNT_DROPPED); }

std::unique_ptr<ClockAdjustWatch> start_clock_adjust_watch(std::string& why_not) {
  try {
    return std::make_unique<ClockAdjustWatch>();
  } catch (const std::exception& e) {
    why_not = e.what();
    return nullptr;
  }
}

}  // namespace cptrace
