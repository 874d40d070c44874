// tables/background_job: the table writers' one-job-at-a-time worker.
#include <gtest/gtest.h>

#include <stdexcept>
#include <thread>
#include <vector>

#include "tables/background_job.h"

using cptrace::BackgroundJob;

TEST(BackgroundJob, EachStartRunsTheJobOnceOnAnotherThread) {
  std::vector<int> in, out;  // the job's alone between start() and wait()
  std::thread::id ran_on;
  BackgroundJob job([&] {
    ran_on = std::this_thread::get_id();
    for (int v : in) out.push_back(v * 2);
  });
  for (int round = 0; round < 100; ++round) {
    in = {round, round + 1};
    job.start();
    job.wait();
  }
  ASSERT_EQ(out.size(), 200u);
  EXPECT_EQ(out[0], 0);
  EXPECT_EQ(out[199], 200);
  EXPECT_NE(ran_on, std::this_thread::get_id());
}

TEST(BackgroundJob, TheJobsErrorComesBackAtTheNextWaitOnce) {
  int runs = 0;
  BackgroundJob job([&] {
    if (++runs == 2) throw std::runtime_error("disk full");
  });
  job.start();
  EXPECT_NO_THROW(job.wait());
  job.start();
  EXPECT_THROW(job.wait(), std::runtime_error);
  EXPECT_NO_THROW(job.wait());  // rethrown once: the caller has it
  job.start();
  EXPECT_NO_THROW(job.wait());
  EXPECT_EQ(runs, 3);
}

TEST(BackgroundJob, EndsWhetherOrNotAJobRan) {
  {
    BackgroundJob idle([] {});
  }
  int runs = 0;
  {
    BackgroundJob job([&] { ++runs; });
    job.start();
    job.wait();
  }
  EXPECT_EQ(runs, 1);
  {
    BackgroundJob job([&] { ++runs; });
    job.start();  // not waited for: it runs or is dropped, and the thread ends either way
  }
  EXPECT_LE(runs, 2);
}
