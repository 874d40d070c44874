// A translated trace's relations (meta.json "translated") as DurationBounds.
#include "latency/duration_bounds.h"

#include "translate/translate.h"

namespace cptrace {

using nlohmann::json;

DurationBounds DurationBounds::from_translated(const json& tr) {
  const Method method = parse_method(tr.at("method").get<std::string>(), "meta.json translated.method");
  DurationBounds d;
  std::map<std::string, size_t> index;
  for (const json& n : tr.at("nodes")) {
    index[n.at("node").get<std::string>()] = d.to_ref.size();
    d.names.push_back(n.at("node").get<std::string>());
    d.to_ref.push_back(relation_from_json(n.at("to_reference")));
    d.errs.push_back(StampErrors::from_json(n.value("max_ts_err", uint64_t(0)), n.value("cpu_ts_err", json())));
  }
  d.ref = index.at(tr.at("reference").get<std::string>());
  for (const json& p : tr.at("pairs")) {
    RelationPtr r = pair_relation(p, method);
    if (r) d.direct[{index.at(p.at("from").get<std::string>()), index.at(p.at("to").get<std::string>())}] = r;
  }
  return d;
}

}  // namespace cptrace
