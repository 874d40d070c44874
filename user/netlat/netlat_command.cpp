// `cptrace netlat`: see netlat_command.h.
#include "netlat/netlat_command.h"

#include <cstdio>
#include <optional>

#include <fmt/format.h>

#include "netlat/netlat_output.h"

namespace cptrace {

int run_netlat(const NetlatOptions& opt, Output format) {
  if (format == Output::Csv && opt.writes) {
    NetlatCsv csv(stdout, kWritesCsvHeader);
    netlat(opt, nullptr, [&](const NetlatResult& res, const WriteDelay& d) { csv.row(res.nodes, d); });
    return 0;
  }
  if (format == Output::Csv) {
    NetlatCsv csv(stdout);
    netlat(opt, [&](const NetlatResult& res, const PacketDelay& d) { csv.row(res.nodes, d); });
    return 0;
  }
  const NetlatResult res = netlat(opt);
  if (format == Output::Json)
    fmt::print("{}\n", netlat_json(res).dump(2));
  else
    print_netlat_text(res, stdout);
  return 0;
}

}  // namespace cptrace
