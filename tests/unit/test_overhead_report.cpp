// The overhead report's "other load present" flag, on fed numbers: the flag is
// what the report says about a measurement, so it must not depend on timing.
#include <gtest/gtest.h>

#include "load/overhead.h"

using namespace cptrace;

namespace {

OverheadReport fed(double displaced, double uncertainty, double user, double sys, double irq = 0, double softirq = 0) {
  OverheadReport r;
  r.displaced_s = displaced;
  r.uncertainty_s = uncertainty;
  r.rusage_user_s = user;
  r.rusage_sys_s = sys;
  r.irq_s = irq;
  r.softirq_s = softirq;
  return r;
}

}  // namespace

// The case seen: another session's busy loop displaced the spinners while the
// command (--nice -20) slept: 2.68 s displaced for 1.51 s of rusage.
TEST(OverheadReport, FlagsDisplacementBeyondTheCommandsCpu) {
  OverheadReport r = fed(2.68, 0.02, 1.21, 0.30);
  EXPECT_NEAR(r.unexplained_s(), 1.17, 1e-9);
  EXPECT_TRUE(r.other_load());
  EXPECT_TRUE(r.to_json().at("other_load").get<bool>());
}

TEST(OverheadReport, NoFlagWithinTheUncertainty) {
  EXPECT_FALSE(fed(1.53, 0.03, 1.21, 0.30).other_load());  // 0.02 s over, +-0.03
  EXPECT_TRUE(fed(1.55, 0.03, 1.21, 0.30).other_load());  // 0.04 s over, +-0.03
  EXPECT_FALSE(fed(1.40, 0.01, 1.21, 0.30).other_load());  // below the rusage: nothing extra
}

// Interrupt and softirq time /proc/stat shows on the measured CPUs is the
// command's own cost the displacement is meant to catch, not other load.
TEST(OverheadReport, IrqAndSoftirqAreNotOtherLoad) {
  OverheadReport r = fed(1.80, 0.03, 1.21, 0.30, 0.10, 0.17);
  EXPECT_NEAR(r.unexplained_s(), 0.02, 1e-9);
  EXPECT_FALSE(r.other_load());
  EXPECT_NEAR(r.to_json().at("unexplained_s").get<double>(), 0.02, 1e-9);
}
