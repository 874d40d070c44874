// record --all: every process of the node that maps a file holding cptrace
// probe sites, whatever its path, mount or pid namespace.
//
// At the start, every such file any process maps is attached (no pid filter:
// the kernel puts the breakpoints into every process mapping it, now or
// later). A process that loads such a file later (a program started in a
// container with its own copy, a JVM loading libcptrace_jni.so) says hello
// from libcptrace (include/cptrace_records.h) and waits; this stage attaches
// to its file, if new, and answers (record/hello_responder.h).
#pragma once
#include <sys/types.h>

#include <atomic>
#include <functional>
#include <memory>
#include <thread>

#include "collect/ring_waiter.h"
#include "record/hello_responder.h"

struct ring_buffer;

namespace cptrace {

class Probes;

class NodeWatch {
 public:
  // on_process: each process that said hello, while it waits (the recorder
  // reads its pid in its namespace then).
  NodeWatch(Probes& probes, std::function<void(pid_t)> on_process);
  ~NodeWatch();
  NodeWatch(const NodeWatch&) = delete;
  NodeWatch& operator=(const NodeWatch&) = delete;

  const HelloResponder& hello() const { return hello_; }

 private:
  static int on_record(void* self, void* data, size_t size);
  void run();

  HelloResponder hello_;
  std::function<void(pid_t)> on_process_;
  ring_buffer* rb_ = nullptr;
  std::unique_ptr<RingWaiter> waiter_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace cptrace
