// Channel ids (64-bit hashes) to per-frame table indices, for the Events
// frame encoders: a frame's channels are stored once, its events name them by
// index.
#pragma once
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace cptrace::codec {

// Maps channel ids to table indices. Frames usually see a handful of channels, so
// the last hit and a short linear scan beat hashing; a map takes over beyond that.
class ChannelTable {
 public:
  void clear() {
    ids_.clear();
    map_.clear();
    last_ = 0;
  }
  // Inlined where it runs (once per event of every frame written): the last
  // hit and the short scan take no call.
  [[gnu::always_inline]] uint32_t index_of(uint64_t id) {
    if (last_ < ids_.size() && ids_[last_] == id) return last_;
    if (ids_.size() <= kLinear)
      for (uint32_t i = 0; i < ids_.size(); ++i)
        if (ids_[i] == id) return last_ = i;
    return last_ = index_slow(id);
  }
  const std::vector<uint64_t>& ids() const { return ids_; }

 private:
  static constexpr size_t kLinear = 16;
  [[gnu::noinline]] uint32_t index_slow(uint64_t id) {
    if (ids_.size() > kLinear)
      if (auto it = map_.find(id); it != map_.end()) return it->second;
    return add(id);
  }
  uint32_t add(uint64_t id) {
    auto i = static_cast<uint32_t>(ids_.size());
    ids_.push_back(id);
    if (ids_.size() == kLinear + 1)
      for (uint32_t j = 0; j < ids_.size(); ++j) map_.emplace(ids_[j], j);
    else if (ids_.size() > kLinear + 1)
      map_.emplace(id, i);
    return i;
  }
  std::vector<uint64_t> ids_;
  std::unordered_map<uint64_t, uint32_t> map_;
  uint32_t last_ = 0;
};

}  // namespace cptrace::codec
