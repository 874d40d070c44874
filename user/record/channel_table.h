// The channel table of a recording: channel id -> name and pid, learnt from the
// BPF announce probe and from process registries. New entries (or a name that
// arrives for an id seen without one) become Channels frames as they appear;
// the whole table goes into meta.json at stop.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <vector>

#include <nlohmann/json.hpp>

#include "trace/block_codec.h"

namespace cptrace {

class ChannelTable {
 public:
  std::function<void(const ChannelInfo&)> on_new;  // a channel (or its name) became known

  // Called from the drain thread and the main thread.
  void add(const ChannelInfo& announced);
  // The names of a process's registry (cptrace_registry.h); nothing if the
  // process is gone or does not use libcptrace's registry. Also notes how many
  // names the registry refused (it keeps CP_REGISTRY_MAX_NAMES).
  void add_registry(pid_t pid);
  // Entries not yet written, as a frame (false: nothing new).
  bool take_pending(EncodedFrame& f);
  nlohmann::json all_json();
  // {"PID": names its registry refused, ...}, for the processes that refused any:
  // channels opened before the recorder attached whose names it may lack.
  nlohmann::json refused_json();

 private:
  std::mutex mu_;
  std::map<uint64_t, ChannelInfo> all_;
  std::vector<ChannelInfo> pending_;
  std::map<pid_t, uint64_t> refused_;  // the last count read (it only grows)
};

}  // namespace cptrace
