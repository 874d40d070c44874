// The latency pair's events handed from `export table`'s events pass to its
// latency join (export/export_table.cpp), so that the trace is decoded once
// for both tables.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <vector>

#include "latency/latency.h"
#include "translate/translated_frame.h"

namespace cptrace {

// The latency pair's events as the events table's pass decodes them, handed
// to the latency join in file order (its feed), so that the trace is decoded
// once for both tables. The pass keeps a segment's User events of the two
// channels; at most `limit` segments wait for the join, and their vectors
// are used again. The join's end (or error) lets the pass run on alone; the
// pass's end or error ends the feed, the error raised there too.
constexpr size_t kHandOffSegments = 2;
class EventHandOff {
 public:
  EventHandOff(uint64_t from, uint64_t to, size_t limit) : from_(from), to_(to), limit_(limit) {}
  bool wanted(const TranslatedEvent& e) const {
    return e.kind == uint8_t(EventKind::User) && (e.channel == from_ || e.channel == to_);
  }
  // A segment's events, in file order; `v` is left empty (with room).
  void push(std::vector<TranslatedEvent>& v) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return queue_.size() < limit_ || gone_; });
    if (!gone_) {
      queue_.push_back(std::move(v));
      v = spare();
      cv_.notify_all();
    }
    v.clear();
  }
  void close(std::exception_ptr error = nullptr) {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    error_ = error;
    cv_.notify_all();
  }
  // The join's side: fn on every segment until close(), whose error it raises.
  void feed(const TranslatedSink& fn) {
    for (;;) {
      std::vector<TranslatedEvent> v;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return !queue_.empty() || closed_; });
        if (queue_.empty()) {
          if (error_) std::rethrow_exception(error_);
          return;
        }
        v = std::move(queue_.front());
        queue_.pop_front();
        cv_.notify_all();
      }
      fn(v);
      std::lock_guard<std::mutex> lock(mu_);
      spares_.push_back(std::move(v));
    }
  }
  // The join stopped reading (done, or failed): nothing more is kept for it.
  void leave() {
    std::lock_guard<std::mutex> lock(mu_);
    gone_ = true;
    queue_.clear();
    spares_.clear();
    cv_.notify_all();
  }

 private:
  std::vector<TranslatedEvent> spare() {
    if (spares_.empty()) return {};
    std::vector<TranslatedEvent> v = std::move(spares_.back());
    spares_.pop_back();
    return v;
  }
  const uint64_t from_, to_;
  const size_t limit_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::vector<TranslatedEvent>> queue_;
  std::vector<std::vector<TranslatedEvent>> spares_;
  bool closed_ = false, gone_ = false;
  std::exception_ptr error_;
};

}  // namespace cptrace
