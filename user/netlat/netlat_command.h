// `cptrace netlat`: the summary (text or --json) or --csv rows of netlat().
#pragma once
#include "netlat/netlat.h"
#include "tables/output_form.h"

namespace cptrace {

int run_netlat(const NetlatOptions& opt, Output format);

}  // namespace cptrace
