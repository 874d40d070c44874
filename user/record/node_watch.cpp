#include "record/node_watch.h"

#include <bpf/libbpf.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "probe/probe_attach.h"

namespace cptrace {

// The thread starts before the scan: a process that says hello meanwhile is
// answered (it waits for us), and the scan finds the files of those that said
// it before we were there.
NodeWatch::NodeWatch(Probes& probes, std::function<void(pid_t)> on_process)
    : hello_(probes, probes.targets()), on_process_(std::move(on_process)) {
  int fd = probes.proc_events_fd();
  rb_ = fd >= 0 ? ring_buffer__new(fd, &NodeWatch::on_record, this, nullptr) : nullptr;
  if (!rb_) throw std::runtime_error(fmt::format("record --all: the hello ring: {}", strerror(errno)));
  try {
    waiter_ = std::make_unique<RingWaiter>(rb_, "record --all");
  } catch (...) {
    ring_buffer__free(rb_);
    throw;
  }
  thread_ = std::thread([this] { run(); });
  hello_.scan_node();
}

NodeWatch::~NodeWatch() {
  stop_ = true;
  waiter_->wake();
  thread_.join();
  waiter_.reset();
  ring_buffer__free(rb_);
}

int NodeWatch::on_record(void* self, void* data, size_t size) {
  auto* w = static_cast<NodeWatch*>(self);
  if (size < sizeof(cp_proc_rec)) return 0;
  const auto* r = static_cast<const cp_proc_rec*>(data);
  if (r->kind != CP_PROC_HELLO) return 0;
  if (w->on_process_) w->on_process_(pid_t(r->tgid));
  w->hello_.on_hello(*r);
  return 0;
}

void NodeWatch::run() {
  while (!stop_) {
    if (!waiter_->wait(-1)) break;
    ring_buffer__consume(rb_);
  }
  ring_buffer__consume(rb_);
}

}  // namespace cptrace
