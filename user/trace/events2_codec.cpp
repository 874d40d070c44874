// Events2 payload (layout in events2_codec.h). The encoder writes into a
// thread-local buffer sized for the worst case plus 8 bytes, so a value is
// always stored as a whole 8-byte word (the next value overwrites its excess).
// The decoder checks a group's bytes once and then loads whole words too,
// except near the end of the payload.
#include "trace/events2_codec.h"

#include <endian.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "trace/block_codec.h"
#include "trace/channel_table.h"
#include "trace/varint.h"

namespace cptrace {
namespace {

using namespace codec;

// Per event at most: a run (rows 3, pid 5, tid 5, cpu 3, kind and timebase 2),
// a table entry 8, three values of 8 and their share of a group's width.
constexpr size_t kWorstEventBytes = 18 + 8 + 24 + 1;

// Bytes needed for the widest of a group's values (their OR).
inline unsigned byte_width(uint64_t any) { return any ? (71u - unsigned(__builtin_clzll(any))) >> 3 : 0u; }

// A group: the width of its widest value, then each value at that width; or,
// when every value is the same (tuple ids counting up, a steady rate), that
// value once. The widths of a busy recording's deltas (1 and 2 bytes) get
// stores of their own size, the others one 8-byte store per value, each
// overwriting the excess of the last.
template <size_t K = 0>
inline uint8_t* put_group(uint8_t* p, const uint64_t* z, size_t k, uint64_t any) {
  if (K) k = K;  // a full group: every loop of constant length
  uint64_t differ = 0;
  for (size_t i = 0; i < k; ++i) differ |= z[i] ^ z[0];
  if (!differ && any) {
    *p++ = kEvents2SameValue;
    return put_varint(p, z[0]);
  }
  const unsigned w = byte_width(any);
  *p++ = static_cast<uint8_t>(w);
  switch (w) {
    case 0:
      return p;
    case 1:
      for (size_t i = 0; i < k; ++i) p[i] = static_cast<uint8_t>(z[i]);
      return p + k;
    case 2:
      for (size_t i = 0; i < k; ++i) {
        uint16_t le = htole16(static_cast<uint16_t>(z[i]));
        std::memcpy(p + 2 * i, &le, 2);
      }
      return p + 2 * k;
    default:
      for (size_t i = 0; i < k; ++i) {
        uint64_t le = htole64(z[i]);
        std::memcpy(p + i * w, &le, 8);
      }
      return p + k * w;
  }
}

// The groups of a column of plain values (the channel index).
template <class Get>
uint8_t* put_groups(uint8_t* p, size_t n, Get get) {
  uint64_t z[kEvents2Group];
  for (size_t g = 0; g < n; g += kEvents2Group) {
    const size_t k = std::min(kEvents2Group, n - g);
    uint64_t any = 0;
    for (size_t i = 0; i < k; ++i) any |= z[i] = get(g + i);
    p = put_group(p, z, k, any);
  }
  return p;
}

// One group of the ts and tuple columns' zigzag deltas, rows [g, g + k), and
// whether a channel there is not `first`. A pure function of the row in a loop
// of constant length (K, a full group): no dependence between values.
template <size_t K, class Rows>
inline void delta_group(const Rows& r, size_t g, size_t k, uint64_t first, uint64_t* zt, uint64_t* zu, uint64_t& at,
                        uint64_t& au, uint64_t& differ) {
  if (K) k = K;
  for (size_t i = 0; i < k; ++i) {
    const size_t j = g + i;
    at |= zt[i] = zigzag_delta<uint64_t>(r.ts(j - 1), r.ts(j));
    au |= zu[i] = zigzag_delta<uint64_t>(r.tuple(j - 1), r.tuple(j));
    differ |= r.channel(j) ^ first;
  }
}

// The ts column into p and the tuple column into q in one pass over the rows
// (a row's cache line is read once, not once per column); returns both ends,
// and in `differ` whether any channel is not the first row's.
template <class Rows>
std::pair<uint8_t*, uint8_t*> put_ts_tuple(uint8_t* p, uint8_t* q, size_t n, const Rows& r, uint64_t& differ) {
  differ = 0;
  if (n == 0) return {p, q};
  const uint64_t first = r.channel(0);
  uint64_t zt[kEvents2Group], zu[kEvents2Group];
  zt[0] = zigzag_delta<uint64_t>(0, r.ts(0));  // the first row against 0
  zu[0] = zigzag_delta<uint64_t>(0, r.tuple(0));
  uint64_t at = zt[0], au = zu[0];
  size_t k = std::min(kEvents2Group, n);
  delta_group<0>(r, 1, k - 1, first, zt + 1, zu + 1, at, au, differ);
  p = put_group(p, zt, k, at);
  q = put_group(q, zu, k, au);
  for (size_t g = k; g < n; g += kEvents2Group) {
    k = std::min(kEvents2Group, n - g);
    at = au = 0;
    if (k == kEvents2Group) {
      delta_group<kEvents2Group>(r, g, k, first, zt, zu, at, au, differ);
      p = put_group<kEvents2Group>(p, zt, k, at);
      q = put_group<kEvents2Group>(q, zu, k, au);
    } else {
      delta_group<0>(r, g, k, first, zt, zu, at, au, differ);
      p = put_group(p, zt, k, at);
      q = put_group(q, zu, k, au);
    }
  }
  return {p, q};
}

uint8_t* put_runs(uint8_t* p, const std::vector<EventRun>& runs) {
  p = put_varint(p, runs.size());
  EventRun prev{};
  uint32_t start = 0;
  for (const EventRun& r : runs) {
    p = put_varint(p, r.end - start);
    p = put_varint(p, zigzag_delta<uint32_t>(prev.pid, r.pid));
    p = put_varint(p, zigzag_delta<uint32_t>(prev.tid, r.tid));
    p = put_varint(p, zigzag_delta<uint16_t>(prev.cpu, r.cpu));
    *p++ = r.kind;
    *p++ = r.timebase;
    start = r.end;
    prev = r;
  }
  return p;
}

// Rows as RecordedEvents or TraceEvent rows hold them: ts(i), channel(i), tuple(i).
template <class Rows>
void encode(size_t n, const std::vector<EventRun>& runs, const Rows& r, int level, EncodedFrame& out) {
  if (n > kMaxFrameEvents) throw std::invalid_argument("encode_events: more than kMaxFrameEvents events");
  thread_local std::vector<uint8_t> raw, tuples;
  thread_local std::vector<uint32_t> idx;
  thread_local ChannelTable table;
  const size_t worst = 32 + n * kWorstEventBytes + 8;
  if (raw.size() < worst) raw.resize(worst);
  if (tuples.size() < 16 + 9 * n) tuples.resize(16 + 9 * n);
  // The ts column goes to its place after the tables, which are known only at
  // the end: written first at the far end of raw, moved down once.
  uint8_t* ts_at = raw.data() + raw.size() - (16 + 9 * n);
  uint64_t differ = 0;
  auto [ts_end, tu_end] = put_ts_tuple(ts_at, tuples.data(), n, r, differ);

  // A frame of one channel (a busy thread's batches) needs no index column.
  table.clear();
  if (n) table.index_of(r.channel(0));
  uint32_t* ix = nullptr;
  if (differ) {
    if (idx.size() < n) idx.resize(n);
    ix = idx.data();
    uint64_t last_id = r.channel(0);  // one lookup per run of a channel
    uint32_t last_k = 0;
    for (size_t i = 0; i < n; ++i) {
      uint64_t c = r.channel(i);
      if (c != last_id) {
        last_k = table.index_of(c);
        last_id = c;
      }
      ix[i] = last_k;
    }
  }

  uint8_t* p = put_varint(raw.data(), table.ids().size());
  if (!table.ids().empty()) std::memcpy(p, table.ids().data(), table.ids().size() * sizeof(uint64_t));
  p += table.ids().size() * sizeof(uint64_t);
  p = put_runs(p, runs);
  std::memmove(p, ts_at, static_cast<size_t>(ts_end - ts_at));
  p += ts_end - ts_at;
  if (!ix) {  // every index 0: groups of width 0
    const size_t groups = (n + kEvents2Group - 1) / kEvents2Group;
    std::memset(p, 0, groups);
    p += groups;
  } else {
    p = put_groups(p, n, [ix](size_t i) { return uint64_t{ix[i]}; });
  }
  std::memcpy(p, tuples.data(), static_cast<size_t>(tu_end - tuples.data()));
  p += tu_end - tuples.data();
  finish_frame(out, FrameType::Events2, raw.data(), static_cast<size_t>(p - raw.data()), static_cast<uint32_t>(n),
               level);
}

struct RecordedRows {
  const EventEntry* e;
  uint64_t ts(size_t i) const { return e[i].tsc; }
  uint64_t channel(size_t i) const { return e[i].channel; }
  uint64_t tuple(size_t i) const { return e[i].tuple; }
};

struct TraceRows {
  const TraceEvent* e;
  uint64_t ts(size_t i) const { return e[i].ts; }
  uint64_t channel(size_t i) const { return e[i].channel; }
  uint64_t tuple(size_t i) const { return e[i].tuple; }
};

// ---- decoder --------------------------------------------------------------------------

// set(i, value) for each of the n values of a grouped column, in order.
template <class Set>
void get_groups(Cursor& c, size_t n, const char* what, Set set) {
  for (size_t g = 0; g < n; g += kEvents2Group) {
    const size_t k = std::min(kEvents2Group, n - g);
    const unsigned w = *c.take(1, what);
    if (w == kEvents2SameValue) {
      const uint64_t v = c.varint();
      for (size_t i = 0; i < k; ++i) set(g + i, v);
      continue;
    }
    if (w > 8) fail(fmt::format("{} column: a group {} bytes wide", what, w));
    const uint8_t* p = c.take(k * w, what);
    if (c.remaining() >= 8) {  // the last value's whole word ends within the payload
      const uint64_t mask = w == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * w)) - 1;
      for (size_t i = 0; i < k; ++i) {
        uint64_t v;
        std::memcpy(&v, p + i * w, 8);
        set(g + i, le64toh(v) & mask);
      }
      continue;
    }
    for (size_t i = 0; i < k; ++i) {
      uint64_t v = 0;
      for (unsigned b = 0; b < w; ++b) v |= uint64_t{p[i * w + b]} << (8 * b);
      set(g + i, v);
    }
  }
}

void get_runs(Cursor& c, std::vector<TraceEvent>& out) {
  const size_t count = out.size();
  const uint64_t nruns = c.varint_max(count, "run count");
  size_t row = 0;
  uint32_t pid = 0, tid = 0;
  uint16_t cpu = 0;
  for (uint64_t r = 0; r < nruns; ++r) {
    const uint64_t rows = c.varint_max(count - row, "run rows");
    if (rows == 0) fail("a run of no rows");
    pid = static_cast<uint32_t>(pid + unzigzag<uint32_t>(uint32_t(c.varint_max(UINT32_MAX, "pid"))));
    tid = static_cast<uint32_t>(tid + unzigzag<uint32_t>(uint32_t(c.varint_max(UINT32_MAX, "tid"))));
    cpu = static_cast<uint16_t>(cpu + unzigzag<uint16_t>(uint16_t(c.varint_max(UINT16_MAX, "cpu"))));
    const uint8_t* kt = c.take(2, "run kind and timebase");
    // Unknown kinds are passed on (readers skip what they do not know); an
    // unknown timebase is not, because nobody could convert the timestamp.
    if (kt[1] > kLastTimebase) fail("unknown timebase");
    for (size_t i = row; i < row + rows; ++i) {
      TraceEvent& e = out[i];
      e.pid = pid;
      e.tid = tid;
      e.cpu = cpu;
      e.kind = kt[0];
      e.timebase = kt[1];
      e.ts_err = 0;  // not stored; the vector is reused, so a stale reader-set value would stay
    }
    row += rows;
  }
  if (row != count) fail(fmt::format("runs cover {} of {} events", row, count));
}

}  // namespace

void encode_events2_recorded(const RecordedEvents& ev, int zstd_level, EncodedFrame& out) {
  encode(ev.size(), ev.runs(), RecordedRows{ev.rows()}, zstd_level, out);
}

void encode_events2_rows(const TraceEvent* ev, size_t n, int zstd_level, EncodedFrame& out) {
  // Before the rows are read: n is what the caller claims they hold.
  if (n > kMaxFrameEvents) throw std::invalid_argument("encode_events: more than kMaxFrameEvents events");
  thread_local std::vector<EventRun> runs;
  runs_of_rows(ev, n, runs);
  encode(n, runs, TraceRows{ev}, zstd_level, out);
}

uint64_t events2_min_raw_len(uint32_t count) {
  const uint64_t groups = (uint64_t{count} + kEvents2Group - 1) / kEvents2Group;
  // nchan and nruns; with events, one table entry and one run of one-byte fields.
  return 2 + (count ? 8 + 6 : 0) + 3 * groups;
}

void decode_events2(const uint8_t* raw, size_t len, std::vector<TraceEvent>& out) {
  Cursor c(raw, len);
  const size_t count = out.size();
  const uint64_t nchan = c.varint_max(count, "channel table size");
  const uint8_t* table = c.take(nchan * sizeof(uint64_t), "channel table");
  if (count > 0 && nchan == 0) fail("channel index without a channel table");
  get_runs(c, out);
  uint64_t prev = 0;
  get_groups(c, count, "ts", [&](size_t i, uint64_t z) { out[i].ts = prev += unzigzag<uint64_t>(z); });
  get_groups(c, count, "channel index", [&](size_t i, uint64_t k) {
    if (k >= nchan) [[unlikely]]
      out_of_range("channel index");
    std::memcpy(&out[i].channel, table + k * sizeof(uint64_t), sizeof(uint64_t));
    out[i].channel = le64toh(out[i].channel);
  });
  prev = 0;
  get_groups(c, count, "tuple", [&](size_t i, uint64_t z) { out[i].tuple = prev += unzigzag<uint64_t>(z); });
  if (c.remaining() != 0) fail("trailing bytes after the last column");
}

}  // namespace cptrace
