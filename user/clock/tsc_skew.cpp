#include "clock/tsc_skew.h"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#include <x86intrin.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>

#include "clock/clock_now.h"
#include "os/node_info.h"

namespace cptrace {

namespace {

using Clock = std::chrono::steady_clock;

// The TSC after every earlier load is globally visible (an lfence before rdtsc
// waits for them, as the SDM says; not rdtscp, which some VMs' CPUs fault on):
// a stamp taken after seeing a message is later than the message's arrival.
// The lfence after keeps the store that publishes it from going before it.
inline uint64_t stamp_after_loads() {
  _mm_lfence();
  uint64_t t = __rdtsc();
  _mm_lfence();
  return t;
}

// One cache line between the two threads, as the kernel's boot-time TSC sync
// check uses one. `turn` odd: a message from the reference thread; even and
// non-zero: from the partner. `tsc` is the sender's stamp.
struct alignas(64) Mailbox {
  std::atomic<uint64_t> turn{0};
  std::atomic<uint64_t> tsc{0};
  std::atomic<int> ready{0};
  std::atomic<bool> stop{false};
};

struct Side {
  int64_t bound;  // reference: the largest lower bound seen; partner: the smallest upper bound
  uint64_t hops = 0;
  bool pinned = false;
};

bool pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(0, sizeof set, &set) == 0 && sched_getcpu() == cpu;
}

// The lowest real-time priority for thread `t`: on a loaded machine two
// ordinary threads rarely run at the same instant, and every message then
// waits for a time slice (intervals of milliseconds instead of a round trip).
// At SCHED_FIFO 1 both run at once and the exchange takes a few milliseconds.
// Set by the creating thread, so that a new thread does not first wait for a
// slice to raise itself. Refused (no CAP_SYS_NICE): the exchange at normal
// priority.
void run_realtime(std::thread& t) {
  sched_param p{};
  p.sched_priority = 1;
  pthread_setschedparam(t.native_handle(), SCHED_FIFO, &p);
}

// Spins until `turn` is `want`, the other side gave up, or the deadline; a
// clock read only every 256 spins, so the wait stays a tight loop.
bool wait_turn(Mailbox& box, uint64_t want, Clock::time_point deadline) {
  for (unsigned spins = 0;; ++spins) {
    if (box.turn.load(std::memory_order_acquire) == want) return true;
    if (box.stop.load(std::memory_order_relaxed)) return false;
    if ((spins & 255) == 0 && Clock::now() >= deadline) return false;
    _mm_pause();
  }
}

bool both_ready(Mailbox& box, Clock::time_point deadline) {
  box.ready.fetch_add(1);
  while (box.ready.load() < 2) {
    if (box.stop.load() || Clock::now() >= deadline) return false;
    _mm_pause();
  }
  return true;
}

void publish(Mailbox& box, uint64_t tsc, uint64_t turn) {
  box.tsc.store(tsc, std::memory_order_relaxed);
  box.turn.store(turn, std::memory_order_release);  // x86 keeps the two stores in order
}

// One side of the exchange for CPU k, up to `receives` messages received. Each
// receive stamp is also the next message's send stamp, taken before that
// message was published.
//   partner receives (s from ref, r own): TSC_k(t2) = r and TSC_ref(t1) = s with
//     t1 < t2, so TSC_k - TSC_ref <= r - s: an upper bound.
//   reference receives (s from k, r own): TSC_ref(t2) = r >= TSC_ref(t1) =
//     s - (TSC_k - TSC_ref), so TSC_k - TSC_ref >= s - r: a lower bound.
void exchange(Mailbox& box, int cpu, bool reference, uint64_t receives, Clock::time_point deadline, Side& out) {
  out.bound = reference ? INT64_MIN : INT64_MAX;
  out.pinned = pin_to(cpu);
  if (!out.pinned || !both_ready(box, deadline)) {
    box.stop.store(true);
    return;
  }
  uint64_t want = 1;  // the partner waits for odd turns, the reference for even ones
  if (reference) {
    publish(box, stamp_after_loads(), 1);
    want = 2;
  }
  while (out.hops < receives && wait_turn(box, want, deadline)) {
    uint64_t s = box.tsc.load(std::memory_order_relaxed);
    uint64_t r = stamp_after_loads();
    int64_t d = reference ? int64_t(s - r) : int64_t(r - s);
    out.bound = reference ? std::max(out.bound, d) : std::min(out.bound, d);
    out.hops++;
    publish(box, r, want + 1);
    want += 2;
  }
  box.stop.store(true);
}

// One CPU against the reference, until max_hops messages or the deadline.
std::optional<CpuSkew> measure_cpu(int ref, int cpu, Clock::time_point deadline, bool realtime) {
  constexpr uint64_t kReceives = 10000;  // per side; the extremes settle within a few hundred
  Mailbox box;
  Side a, b;
  std::thread tr([&] { exchange(box, ref, true, kReceives, deadline, a); });
  std::thread tp([&] { exchange(box, cpu, false, kReceives, deadline, b); });
  if (realtime) {
    run_realtime(tr);
    run_realtime(tp);
  }
  tr.join();
  tp.join();
  if (a.bound == INT64_MIN || b.bound == INT64_MAX) return std::nullopt;
  return CpuSkew{cpu, a.bound, b.bound, a.hops + b.hops};
}

// An interval wider than this (~20 us at 2-3 GHz, a hundred cache-line round
// trips) means the exchange rarely had both threads running.
constexpr int64_t kRetryWidthTicks = 50000;
// The real-time retry's time per CPU, beyond the budget: 10,000 messages each
// way take 2-5 ms when both threads run.
constexpr auto kRetryBudget = std::chrono::milliseconds(10);
constexpr int kRetries = 8;
// Each CPU gets kSureRetries; the rest only within kAllRetries, for all retries
// of one measure together. Recorders started at once (a cluster's
// nodes on one machine) measure at once, and their real-time threads take the
// CPUs from each other: 3 retries in a row left a node of 64 with a 28 ms
// interval at start, hence a 56 ms bound on every duration it took part in.
constexpr int kSureRetries = 3;
constexpr auto kAllRetries = std::chrono::milliseconds(250);

// Two intervals that each hold TSC_k - TSC_ref hold it together: their
// intersection. Disjoint ones (the skew moved between them) give their hull.
CpuSkew combine(const CpuSkew& a, const CpuSkew& b) {
  CpuSkew c{a.cpu, std::max(a.lo, b.lo), std::min(a.hi, b.hi), a.hops + b.hops};
  if (c.lo > c.hi) c.lo = std::min(a.lo, b.lo), c.hi = std::max(a.hi, b.hi);
  return c;
}

// A pause of 0-10 ms before a retry, different in each process: measures that
// collided once do not collide again in step.
void stagger() {
  thread_local unsigned seed = unsigned(getpid()) * 2654435761u ^ unsigned(__rdtsc());
  std::this_thread::sleep_for(std::chrono::microseconds(rand_r(&seed) % 10000));
}

// Measures `cpu` again at real-time priority while its interval is wide, up to
// kRetries times (past kSureRetries, only until `until`).
std::optional<CpuSkew> retry_wide(int ref, int cpu, std::optional<CpuSkew> got, Clock::time_point until) {
  for (int k = 0;
       k < kRetries && (!got || got->width() > kRetryWidthTicks) && (k < kSureRetries || Clock::now() < until); ++k) {
    if (k > 0) stagger();
    auto again = measure_cpu(ref, cpu, Clock::now() + kRetryBudget, true);
    if (again) got = got ? combine(*got, *again) : *again;
  }
  return got;
}

// "0-3,5,7-8" (/sys/devices/system/cpu/online).
std::vector<int> parse_cpu_list(const std::string& s) {
  std::vector<int> cpus;
  std::istringstream in(s);
  for (std::string part; std::getline(in, part, ',');) {
    if (part.empty()) continue;
    auto dash = part.find('-');
    int lo = std::atoi(part.c_str()), hi = dash == std::string::npos ? lo : std::atoi(part.c_str() + dash + 1);
    for (int c = lo; c <= hi; ++c) cpus.push_back(c);
  }
  return cpus;
}

// CPU 0 when this process may run there, else the first online CPU it may.
int reference_cpu(const std::vector<int>& online) {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return online.empty() ? -1 : online.front();
  for (int c : online)
    if (CPU_ISSET(c, &allowed)) return c;
  return -1;
}

}  // namespace

std::optional<std::pair<int64_t, int64_t>> TscSkew::widest() const {
  if (!complete()) return std::nullopt;
  std::pair<int64_t, int64_t> w{0, 0};
  for (const CpuSkew& c : cpus) w = {std::min(w.first, c.lo), std::max(w.second, c.hi)};
  return w;
}

int64_t TscSkew::max_abs() const {
  int64_t m = 0;
  for (const CpuSkew& c : cpus) m = std::max({m, std::abs(c.lo), std::abs(c.hi)});
  return m;
}

nlohmann::json TscSkew::to_json() const {
  nlohmann::json per = nlohmann::json::array();
  for (const CpuSkew& c : cpus) per.push_back({{"cpu", c.cpu}, {"lo", c.lo}, {"hi", c.hi}, {"hops", c.hops}});
  return {{"reference_cpu", reference_cpu}, {"cpus", per},
          {"unmeasured_cpus", unmeasured},  {"elapsed_ms", elapsed_ms},
          {"tsc_begin", tsc_begin},         {"tsc_end", tsc_end}};
}

TscSkew measure_tsc_skew(std::chrono::microseconds budget, SkewRetry retry) {
  TscSkew out;
  auto t0 = Clock::now();
  int64_t raw0 = clock_now_ns(CLOCK_MONOTONIC_RAW);
  uint64_t tsc0 = __rdtsc();
  std::vector<int> online = parse_cpu_list(read_text_file("/sys/devices/system/cpu/online"));
  out.reference_cpu = reference_cpu(online);
  std::vector<int> others;
  for (int c : online)
    if (c != out.reference_cpu) others.push_back(c);
  if (out.reference_cpu < 0) {  // nowhere to run the reference side: nothing is bounded
    out.unmeasured = others;
    others.clear();
  }
  auto end = t0 + budget, retry_end = end + kAllRetries;
  for (size_t i = 0; i < others.size(); ++i) {
    // An equal share of what is left, so a CPU whose thread waited for its
    // turn on a busy machine does not starve the ones after it.
    auto now = Clock::now();
    auto share = (end - now) / int64_t(others.size() - i);
    auto got = now < end ? measure_cpu(out.reference_cpu, others[i], now + share, false) : std::nullopt;
    // Wider than a loaded round trip: the two threads seldom ran at once. Again
    // at real-time priority, a few times (a vCPU the host deschedules stalls
    // them too), each interval narrowing the last: each holds the skew on its own.
    if (retry == SkewRetry::Realtime) got = retry_wide(out.reference_cpu, others[i], got, retry_end);
    if (got)
      out.cpus.push_back(*got);
    else
      out.unmeasured.push_back(others[i]);
  }
  uint64_t tsc1 = __rdtsc();
  int64_t raw1 = clock_now_ns(CLOCK_MONOTONIC_RAW);
  out.elapsed_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  out.tsc_begin = tsc0, out.tsc_end = tsc1;
  if (raw1 > raw0) out.tsc_hz = double(tsc1 - tsc0) * 1e9 / double(raw1 - raw0);
  return out;
}

}  // namespace cptrace
