// os/say: every line a command says on stderr carries its name, in one place.
#include <gtest/gtest.h>
#include <stdio.h>
#include <unistd.h>

#include <string>

#include "os/say.h"

namespace {

// What `f` wrote to fd 2, through a temporary file put in its place.
template <typename F>
std::string stderr_of(F f) {
  FILE* tmp = tmpfile();
  int saved = dup(2);
  dup2(fileno(tmp), 2);
  f();
  dup2(saved, 2);
  close(saved);
  std::string out(4096, '\0');
  out.resize(pread(fileno(tmp), out.data(), out.size(), 0));
  fclose(tmp);
  return out;
}

}  // namespace

TEST(Say, EveryLineNamesTheCommandTheUserRan) {
  EXPECT_EQ(stderr_of([] { cptrace::say("no command yet: {}", 1); }), "cptrace: no command yet: 1\n");
  cptrace::set_command_name("cluster");
  EXPECT_EQ(cptrace::command_prefix(), "cptrace cluster");
  EXPECT_EQ(stderr_of([] {
              cptrace::say("node {}: stream resumed", "n1");
              cptrace::say_line("a text with {braces} as it is");
            }),
            "cptrace cluster: node n1: stream resumed\ncptrace cluster: a text with {braces} as it is\n");
  cptrace::set_command_name("");
}
