// `cptrace netlat`: the summary (text or --json) or --csv rows of netlat().
#pragma once
#include "netlat/netlat.h"

namespace cptrace {

enum class NetlatFormat { Text, Json, Csv };

int run_netlat(const NetlatOptions& opt, NetlatFormat format);

}  // namespace cptrace
