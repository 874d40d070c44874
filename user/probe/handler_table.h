// The handler table: what the BPF `handlers` map holds per channel, the rules
// that fill it (config file, globs, the control socket) and the history of
// changes written to the trace (probe/handlers.h describes the handlers). No BPF
// here: the map is written through a callback, so the control socket's requests,
// which come from outside the recorder, can be tested and fuzzed alone.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cptrace_records.h"
#include "probe/handler_rules.h"
#include "trace/block_codec.h"

namespace cptrace {

// Instant bracket of a map update.
struct Instant {
  uint64_t mono_ns = 0, tsc = 0;
};

// Owns the BPF `handlers` map contents and the change history. Thread-safe:
// called by the recorder's main thread, the drain thread (channel names) and the
// control socket thread.
class HandlerTable {
 public:
  // Writes one map entry (0 or -errno); injectable so the table is testable
  // without BPF. enable: called once before the first install.
  // capacity: how many channels the map holds (its max_entries, the default's
  // entry included): a change that would need more is refused before any write.
  using MapUpdate = std::function<int(uint64_t channel, const cp_handler&)>;
  HandlerTable(MapUpdate update, std::function<void()> enable, double tsc_hz, size_t capacity = 16384);

  // Globs the control socket may keep at once (a pattern set again replaces itself).
  static constexpr size_t kMaxControlGlobs = 4096;
  // History entries kept in memory for `get` and meta.json: a long recording
  // changed every second would otherwise grow by one entry a change. Every entry
  // still reaches the trace (Handlers frames), where readers take the history
  // from; only entries already written are forgotten, oldest first.
  static constexpr size_t kHistoryKept = 1024;

  // The config file's rules: installs the default and every exact name now.
  void set_rules(std::vector<ConfigRule> rules);
  // A channel name became known: installs the first matching glob rule (once).
  void on_channel(uint64_t id, const std::string& name);
  // Control socket "set CHANNEL HANDLER...": CHANNEL is a known channel's name,
  // its id as 0x..., "*" (the default) or a glob matching known channels (it then
  // also applies to channels announced later). Returns the changes made; throws
  // std::invalid_argument (nothing changed) on an unknown channel, a map that
  // cannot hold the new channels, or a glob beyond kMaxControlGlobs; a map
  // update that fails midway throws std::runtime_error saying which changed.
  nlohmann::json set(const std::string& channel, const HandlerSpec& spec);
  // Current configuration (per channel and default), for `cptrace config get`.
  nlohmann::json current() const;

  // History entries not yet written, as a Handlers frame (or nothing).
  bool take_pending(EncodedFrame& f);
  // The last kHistoryKept changes (and any not yet written), oldest first.
  nlohmann::json history() const;
  // Changes forgotten from history(): they are in the trace only.
  uint64_t history_omitted() const;
  bool any() const;

 private:
  nlohmann::json install(uint64_t id, const std::string& name, const HandlerSpec& spec, const std::string& source,
                         const std::string& rule);
  const ConfigRule* first_match(const std::string& name) const;
  void trim_history();
  void check_room(const std::vector<std::pair<uint64_t, std::string>>& targets, const std::string& glob) const;

  mutable std::mutex mu_;
  MapUpdate update_;
  std::function<void()> enable_;
  bool enabled_ = false;
  double tsc_hz_;
  size_t capacity_;
  uint64_t next_gen_ = 1;
  std::vector<ConfigRule> rules_;  // control-socket globs first, then the file's
  std::map<uint64_t, std::string> known_;  // channel id -> name
  std::map<uint64_t, std::pair<std::string, HandlerSpec>> installed_;  // id -> (name, spec)
  // id -> the map value of its current rule, the next install's `prev`. Only the
  // current ones: a held counter slot carries its own period (cp_count_slot).
  std::map<uint64_t, cp_handler_rule> rule_of_;
  nlohmann::json history_ = nlohmann::json::array();
  size_t written_ = 0;  // of history_'s entries, the first written_ are in the trace
  uint64_t omitted_ = 0;
};

// The recorder's side of the control socket (user/record/control_socket.h):
//   {"cmd":"set","channel":C,"handler":[words]} -> {"ok":true,"changes":[history entries]}
//   {"cmd":"get"}                                -> {"ok":true,"handlers":[...],"history":[...],
//                                                   "history_omitted":N}
// A bad request changes nothing and answers {"ok":false,"error":...}.
nlohmann::json handle_control(HandlerTable& table, const nlohmann::json& request);

}  // namespace cptrace
