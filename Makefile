# cptrace — one entry point: make, make test, make demo, make bench, make fuzz, make install.
# `make test` and `make demo` first run tools/install-deps.sh, so they work on a fresh machine.

BUILD    ?= build
CXX      ?= g++
CC       ?= gcc
CLANG    ?= clang
BPFTOOL  ?= bpftool
PREFIX   ?= /usr/local
# The one place the version is written: `cptrace --version`, cptrace.pc, cptraceConfigVersion.cmake.
VERSION  := $(shell cat VERSION)

ARCH_DEF := -D__TARGET_ARCH_x86
CXXFLAGS ?= -O2 -g
CFLAGS   ?= -O2 -g
WARN     := -Wall -Wextra -Wno-missing-field-initializers
CPPFLAGS := -Iinclude -Iuser -I$(BUILD)
# Probe sites written in C/C++ files `.include "probe_site.h"` (lib/probe_site.h).
SITE_AS  := -Wa,-Ilib
LDLIBS   := -lbpf -lelf -lz -ldeflate -lzstd -lfmt -lcrypto -lpthread

BPF_SRCS   := $(wildcard bpf/*.bpf.c)
SKELS      := $(patsubst bpf/%.bpf.c,$(BUILD)/%.skel.h,$(BPF_SRCS))
# user/ is one folder per group of stages. Which folder may include which is the
# layer table of docs/architecture.md (two branches, recording and analysis, that
# meet in trace/); LAYERS is the link order, bottom-up, every folder after all it
# may include. tools/check-layers.sh checks the includes against the table and
# LAYERS against it; linking the archives in this order checks the calls.
LAYERS     := os clock trace tables collect probe net sync record translate latency netlat analyze export cluster load cli
reverse    = $(if $(1),$(call reverse,$(wordlist 2,$(words $(1)),$(1))) $(firstword $(1)))
# Everything below the CLI, linked top-down: a call into a higher layer fails to link.
CORE_LIBS  := $(foreach l,$(call reverse,$(filter-out cli,$(LAYERS))),$(BUILD)/user/lib$(l).a)
LIB_SRCS   := $(wildcard lib/*.c) $(wildcard lib/*.S)
LIB_OBJS   := $(patsubst lib/%,$(BUILD)/lib/%.o,$(LIB_SRCS))
TEST_SRCS  := $(wildcard tests/unit/*.cpp) $(wildcard tests/integration/*.cpp)
TEST_OBJS  := $(patsubst tests/%.cpp,$(BUILD)/tests/obj/%.o,$(TEST_SRCS))
WORKLOADS  := $(patsubst tests/workloads/%.c,$(BUILD)/tests/%,$(wildcard tests/workloads/*.c)) \
              $(patsubst tests/workloads/%.cpp,$(BUILD)/tests/%,$(wildcard tests/workloads/*.cpp)) \
              $(BUILD)/tests/clock_truth $(BUILD)/tests/non_pie
BENCHES    := $(patsubst bench/%.cpp,$(BUILD)/bench/%,$(wildcard bench/*.cpp)) \
              $(patsubst bench/%.c,$(BUILD)/bench/%,$(wildcard bench/*.c))
# The reader and what it needs, built with libFuzzer + ASan.
# Helper programs under tools/ (testbed forwarding element, ...).
TOOLS      := $(patsubst tools/%.cpp,$(BUILD)/%,$(wildcard tools/*.cpp))
FUZZ_SRCS  ?= $(addprefix user/trace/,trace_reader.cpp frame_dispatch.cpp trace_file.cpp block_codec.cpp events2_codec.cpp recorded_events.cpp events_frame_check.cpp trace_format.cpp net_codec.cpp pid_table.cpp clock_adjust.cpp tsc_skew_history.cpp json_text.cpp trace_meta.cpp) \
              $(addprefix user/clock/,ntp_state.cpp clock_bounds.cpp raw_witness.cpp tsc_frequency.cpp clock_map.cpp clock_adjustment.cpp \
                clock_change_candidates.cpp clock_history.cpp clock_rate_envelope.cpp)
FUZZ_TIME  ?= 30

# Java (jni/): the JDK is the one `javac` on PATH resolves to (Debian's
# /usr/bin/javac is an alternatives symlink into it); its include/ has jni.h.
JAVAC      ?= javac
JAR        ?= jar
JDK_HOME   ?= $(patsubst %/bin/javac,%,$(realpath $(shell command -v $(JAVAC) 2>/dev/null)))
JNI_CFLAGS := -I$(JDK_HOME)/include -I$(JDK_HOME)/include/linux
JNI_OBJS   := $(patsubst jni/%,$(BUILD)/jni/%.o,$(wildcard jni/*.c jni/*.S))
JAVA_SRCS  := $(wildcard jni/cp/*.java)
JAVA_TESTS := $(wildcard tests/java/*.java)
JAVA_BENCH := $(wildcard bench/java/*.java)
JAVA_ALL   := $(if $(wildcard $(JDK_HOME)/include/jni.h),$(BUILD)/cptrace.jar $(BUILD)/libcptrace_jni.so \
              $(BUILD)/tests/java/.built,$(warning no JDK (javac with include/jni.h) found: skipping cptrace.jar and libcptrace_jni.so))

.PHONY: all deps guest-kernels runtime-profiles test sanitize sanitize-threads sanitize-cptrace check-root unit-test check-layers check-architecture check-commits check-js format check-format demo bench fuzz fuzz-run install deb clean
all: $(BUILD)/cptrace $(BUILD)/libcptrace.so $(BUILD)/libcptrace.a $(WORKLOADS) $(TOOLS) $(JAVA_ALL)

deps:
	@bash tools/install-deps.sh

# The Debian kernels the kernel-matrix test boots under QEMU (tests/integration/
# test_kernel_matrix.cpp): the newest 6.1 and 6.12 cloud images apt knows, into
# $(BUILD)/kernels; downloads only when a newer package appeared.
guest-kernels:
	@bash tools/guest-kernels.sh $(BUILD)/kernels

# Docker's and containerd's default seccomp profiles, which the node-wide tests run programs under
# (tools/runtime-profiles.sh): into $(BUILD)/profiles.
runtime-profiles:
	@bash tools/runtime-profiles.sh $(BUILD)/profiles

# ---- BPF: vmlinux.h from the running kernel's BTF, objects, skeletons ----------
$(BUILD)/vmlinux.h:
	@mkdir -p $(BUILD)
	$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $@.tmp && mv $@.tmp $@

$(BUILD)/bpf/%.bpf.o: bpf/%.bpf.c $(wildcard bpf/*.h) $(BUILD)/vmlinux.h $(wildcard include/*.h)
	@mkdir -p $(@D)
	$(CLANG) -g -O2 -target bpf $(ARCH_DEF) -I$(BUILD) -Iinclude -c $< -o $@

# Kept: as an intermediate make would delete it and regenerate every skeleton
# (and recompile their includers) on each run.
.SECONDARY: $(patsubst bpf/%.bpf.c,$(BUILD)/bpf/%.bpf.o,$(BPF_SRCS))

$(BUILD)/%.skel.h: $(BUILD)/bpf/%.bpf.o
	$(BPFTOOL) gen skeleton $< > $@.tmp && mv $@.tmp $@

# ---- the cptrace program --------------------------------------------------------
# -MMD: each object depends on the headers it really includes (build/**/*.d), so
# changing one stage's header rebuilds only the files above it.
$(BUILD)/obj/%.o: user/%.cpp | $(SKELS)
	@mkdir -p $(@D)
	$(CXX) -std=c++20 $(CXXFLAGS) $(WARN) $(CPPFLAGS) $(SITE_AS) -MMD -MP -c $< -o $@

$(BUILD)/obj/cli/main.o: CPPFLAGS += -DCPTRACE_VERSION='"$(VERSION)"'
$(BUILD)/obj/cli/main.o: VERSION

# Report assets: the HTML report's script and stylesheet are real files
# (user/analyze/report.js, report.css), each turned into one C++ raw string
# literal that report_js.cpp includes. The literal's end marker must not occur in
# the file, else the string would end early: checked, not assumed.
REPORT_ASSETS := $(BUILD)/report.js.inc $(BUILD)/report.css.inc
$(BUILD)/report.%.inc: user/analyze/report.%
	@mkdir -p $(@D)
	@if grep -qF ')CPTRACE_ASSET"' $<; then echo "$<: contains )CPTRACE_ASSET\", the end of its C++ literal" >&2; exit 1; fi
	{ printf 'R"CPTRACE_ASSET(\n'; cat $<; printf ')CPTRACE_ASSET"\n'; } > $@.tmp && mv $@.tmp $@
$(BUILD)/obj/analyze/report_js.o: $(REPORT_ASSETS)

# The report's script parses (syntax only: it runs in a browser, where
# tests/integration/test_report.cpp runs it under Chromium).
check-js:
	@node --check user/analyze/report.js && echo "check-js: user/analyze/report.js parses"

# `.include`d by the assembler, which -MMD does not see.
$(BUILD)/obj/probe/probe_selftest.o: lib/probe_site.h

# One archive per stage folder (user/X/*.cpp -> build/user/libX.a).
stage_objs = $(patsubst user/%.cpp,$(BUILD)/obj/%.o,$(wildcard user/$(1)/*.cpp))
define stage_lib
$(BUILD)/user/lib$(1).a: $(call stage_objs,$(1))
	@mkdir -p $$(@D)
	@rm -f $$@
	ar rcs $$@ $$^
endef
$(foreach l,$(LAYERS),$(eval $(call stage_lib,$(l))))

# libcptrace.a: the generator and sink call cp_logTS, so the probe sites live in cptrace itself.
# The recorder puts uprobes on its own probe sites (cp_*: the stage flush, the
# self-tests); exported, they stay findable in .dynsym when the binary is stripped
# (the Debian package strips it).
$(BUILD)/cptrace: $(BUILD)/user/libcli.a $(CORE_LIBS) $(BUILD)/libcptrace.a
	$(CXX) -Wl,--export-dynamic-symbol='cp_*' -o $@ $^ $(LDLIBS)

# ---- the application library (what applications link) -------------------------
# -fcf-protection=none: no endbr64 before our probe sites; the stubs are assembly
# anyway, tests/unit/test_libcptrace.cpp checks their first bytes.
$(BUILD)/lib/%.c.o: lib/%.c include/cptrace.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -fPIC -fcf-protection=none $(WARN) -Iinclude -c $< -o $@
$(BUILD)/lib/%.S.o: lib/%.S lib/probe_site.h
	@mkdir -p $(@D)
	$(CC) -fPIC -Iinclude -Ilib -c $< -o $@

$(BUILD)/libcptrace.so: $(LIB_OBJS)
	$(CC) -shared -Wl,-soname,libcptrace.so -o $@ $^ -lpthread
$(BUILD)/libcptrace.a: $(LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

# ---- Java API and the JNI stub library (jni/) -------------------------------------
# libcptrace's objects are linked in: channel announce, registry (late attach)
# and close work as in C. --release 8: the jar runs on every JVM still in use.
$(BUILD)/cptrace.jar: $(JAVA_SRCS)
	@rm -rf $(BUILD)/java-classes && mkdir -p $(BUILD)/java-classes
	$(JAVAC) --release 8 -Xlint:-options -d $(BUILD)/java-classes $^
	$(JAR) cf $@ -C $(BUILD)/java-classes .
$(BUILD)/jni/%.c.o: jni/%.c include/cptrace.h include/cptrace_records.h jni/jni_stubs.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -fPIC -fcf-protection=none $(WARN) -Iinclude $(JNI_CFLAGS) -c $< -o $@
$(BUILD)/jni/%.S.o: jni/%.S lib/probe_site.h
	@mkdir -p $(@D)
	$(CC) -fPIC -Ilib -c $< -o $@
# -Bsymbolic: its calls bind to its own stubs and registry even when a libcptrace.so
# is loaded too, so a recorder attached to this file sees everything Java does.
$(BUILD)/libcptrace_jni.so: $(JNI_OBJS) $(LIB_OBJS)
	$(CC) -shared -Wl,-Bsymbolic -o $@ $^ -lpthread
# Java programs of the tests and benchmarks, compiled against the jar.
$(BUILD)/tests/java/.built: $(JAVA_TESTS) $(BUILD)/cptrace.jar
	@mkdir -p $(@D)
	$(JAVAC) -cp $(BUILD)/cptrace.jar -d $(@D) $(JAVA_TESTS)
	@touch $@
$(BUILD)/bench/java/.built: $(JAVA_BENCH) $(BUILD)/cptrace.jar
	@mkdir -p $(@D)
	$(JAVAC) -cp $(BUILD)/cptrace.jar -d $(@D) $(JAVA_BENCH)
	@touch $@

# ---- tests ----------------------------------------------------------------------
# forkgate loads libcptrace with dlopen, after registering its own atfork
# handler (which must run before the library's): not linked with it.
$(BUILD)/tests/forkgate: tests/workloads/forkgate.c $(BUILD)/libcptrace.so
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Iinclude $< -o $@ -lpthread
$(BUILD)/tests/%: tests/workloads/%.c $(BUILD)/libcptrace.so
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Iinclude $< -o $@ -L$(BUILD) -lcptrace -Wl,-rpath,'$$ORIGIN/..' -lpthread
# Runs a command under a runtime's seccomp profile (libseccomp); not instrumented.
$(BUILD)/tests/under_profile: tests/workloads/under_profile.cpp
	@mkdir -p $(@D)
	$(CXX) -std=c++20 $(CXXFLAGS) $< -o $@ -lseccomp
# Not position-independent, libcptrace.a inside (tests/workloads/static/).
$(BUILD)/tests/non_pie: tests/workloads/static/non_pie.c $(BUILD)/libcptrace.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -no-pie -Iinclude $< -o $@ $(BUILD)/libcptrace.a -lpthread
$(BUILD)/tests/%: tests/workloads/%.cpp $(BUILD)/libcptrace.so
	@mkdir -p $(@D)
	$(CXX) -std=c++20 $(CXXFLAGS) -Iinclude $< -o $@ -L$(BUILD) -lcptrace -Wl,-rpath,'$$ORIGIN/..' -lpthread

# A Go program logging through cgo (Debian's golang-go): built with the tests, not
# by `all`, so the demo needs no Go. Its build cache stays in $(BUILD).
$(BUILD)/tests/cgo_logger: tests/workloads/go/cgo_logger.go $(BUILD)/libcptrace.so include/cptrace.h
	@mkdir -p $(@D)
	cd tests/workloads/go && GOCACHE=$(CURDIR)/$(BUILD)/go-cache GOPATH=$(CURDIR)/$(BUILD)/go GO111MODULE=off \
	  CGO_CFLAGS="-I$(CURDIR)/include" CGO_LDFLAGS="-L$(CURDIR)/$(BUILD) -lcptrace -Wl,-rpath,\$$ORIGIN/.." \
	  go build -o $(CURDIR)/$@ cgo_logger.go

# The kernel-matrix guest's clock check: logs through libcptrace and reads traces
# with the trace layer (the bottom one: it needs no other).
$(BUILD)/tests/clock_truth: tests/kernels/clock_truth.cpp tests/truth_sampler.h $(BUILD)/user/libtrace.a $(BUILD)/user/libclock.a $(BUILD)/user/libos.a $(BUILD)/libcptrace.so
	@mkdir -p $(@D)
	$(CXX) -std=c++20 $(CXXFLAGS) $(WARN) $(CPPFLAGS) -Itests $< -o $@ $(BUILD)/user/libtrace.a $(BUILD)/user/libclock.a $(BUILD)/user/libos.a -L$(BUILD) -lcptrace \
	  -Wl,-rpath,'$$ORIGIN/..' $(LDLIBS)

$(BUILD)/tests/obj/%.o: tests/%.cpp | $(SKELS)
	@mkdir -p $(@D)
	$(CXX) -std=c++20 $(CXXFLAGS) $(WARN) $(CPPFLAGS) -Itests -MMD -MP -c $< -o $@

$(BUILD)/cptrace_tests: $(TEST_OBJS) $(CORE_LIBS) $(BUILD)/libcptrace.so
	$(CXX) -o $@ $(TEST_OBJS) $(CORE_LIBS) -L$(BUILD) -lcptrace -Wl,-rpath,'$$ORIGIN' \
	  -lgtest_main -lgtest -ldl $(LDLIBS)

# The suites of tests/unit/ only: in process, no BPF, no root, seconds.
LPAREN := (
UNIT_FILTER = $(shell grep -ho '^TEST\w*[$(LPAREN)]\w*' tests/unit/*.cpp | sed 's/.*[$(LPAREN)]//' | sort -u | sed 's/$$/.*/' | paste -sd:)
unit-test: all $(BUILD)/cptrace_tests
	cd $(BUILD) && ./cptrace_tests --gtest_filter='$(UNIT_FILTER)' $(GTEST_ARGS)

check-layers:
	@bash tools/check-layers.sh $(LAYERS)

# One format, applied by `make format` and checked by `make test` (clang-format 14,
# Debian 12's): C++ in the style of .clang-format, C (and the C headers) in the
# kernel's, tools/clang-format-c. lib/probe_site.h is assembler macros.
FMT_CXX := $(wildcard user/*/*.cpp user/*/*.h tests/*.h tests/*/*.cpp bench/*.cpp tools/*.cpp)
FMT_C   := $(filter-out lib/probe_site.h,$(wildcard bpf/*.c bpf/*.h lib/*.c lib/*.h jni/*.c jni/*.h include/*.h \
             tests/workloads/*.c bench/*.c tests/install/*.c))
C_STYLE  = "$$(grep -v '^\#' tools/clang-format-c)"
format:
	@clang-format -i --style=file $(FMT_CXX)
	@clang-format -i --style=$(C_STYLE) $(FMT_C)
	@echo "format: $(words $(FMT_CXX)) C++ and $(words $(FMT_C)) C files formatted"

check-format:
	@clang-format --dry-run -Werror --style=file $(FMT_CXX)
	@clang-format --dry-run -Werror --style=$(C_STYLE) $(FMT_C)
	@echo "format: $(words $(FMT_CXX)) C++ and $(words $(FMT_C)) C files as clang-format writes them"

# Commit subjects of at most 72 characters since the rule was adopted.
check-commits:
	@bash tools/check-commit-subjects.sh

# docs/architecture.md names every module of user/.
check-architecture:
	@bash tools/check-architecture.sh
	@bash tools/check-commands.sh

# Fails on a failed test, on a skipped one not in tests/skip-allowlist.txt (a skip
# is a test that did not run), and on a fuzz failure. The BPF tests need root, so
# running as another user fails at once instead of skipping them.
test: check-root deps guest-kernels runtime-profiles check-layers check-architecture check-commits check-format check-js
	$(MAKE) -j$$(nproc) all $(BUILD)/cptrace_tests $(FUZZ_BINS) $(BUILD)/tests/cgo_logger
	rm -f $(BUILD)/test-report.xml
	cd $(BUILD) && ./cptrace_tests --gtest_output=xml:test-report.xml $(GTEST_ARGS)
	bash tools/check-skips.sh $(BUILD)/test-report.xml tests/skip-allowlist.txt
	$(MAKE) sanitize-threads
	$(MAKE) fuzz-run

check-root:
	@if [ "$$(id -u)" != 0 ]; then \
	  echo "make test: must run as root (sudo make test): it installs dependencies and its BPF," \
	       "network-namespace and recording tests need root; as another user they could only be skipped." >&2; \
	  exit 1; fi

# ---- sanitizers -------------------------------------------------------------------
# The unit suites of the parsers and of the threaded code, built again under the
# sanitizers (tests/unit/, their modules only: no BPF, no root).
#   sanitize-threads  ThreadSanitizer over the parallel join and the skew watch's
#                     thread (part of `make test`: a minute to build);
#   sanitize          that, and AddressSanitizer + UBSan over the trace format,
#                     the clock model, the tables and the MinRTT wire format
#                     (~8 min to build on 2 vCPUs: not in `make test`).
# The integration tests drive cptrace as a root process with BPF programs: see
# docs/developing.md ("Sanitizers") for why they run under neither.
SAN        := $(BUILD)/san
SAN_FLAGS   = -std=c++20 -O1 -g -fno-omit-frame-pointer $(CPPFLAGS) $(SITE_AS) -Itests
ASAN_TESTS := trace_format clock_map clock_bounds clock_adjust tsc_skew_history events_frame_check trace_tail \
              tuple_join tsc_frequency tsc_skew minrtt_protocol stop_signals rank_select
ASAN_SRCS  := $(wildcard user/os/*.cpp user/clock/*.cpp user/trace/*.cpp user/tables/*.cpp) \
              user/sync/minrtt_protocol.cpp user/sync/kernel_timestamps.cpp \
              user/sync/minrtt_rounds.cpp
TSAN_TESTS := tuple_join tsc_skew background_job zstd_csv_writer
TSAN_SRCS  := $(wildcard user/tables/*.cpp user/os/*.cpp) user/clock/tsc_skew.cpp user/clock/skew_watch.cpp
san_objs    = $(patsubst %.cpp,$(SAN)/$(1)/%.o,$(2) $(patsubst %,tests/unit/test_%.cpp,$(3)))

$(SAN)/asan/%.o: %.cpp | $(SKELS)
	@mkdir -p $(@D)
	$(CXX) $(SAN_FLAGS) -fsanitize=address,undefined -fno-sanitize-recover=undefined -MMD -MP -c $< -o $@
$(SAN)/tsan/%.o: %.cpp | $(SKELS)
	@mkdir -p $(@D)
	$(CXX) $(SAN_FLAGS) -fsanitize=thread -MMD -MP -c $< -o $@
$(SAN)/unit_asan: $(call san_objs,asan,$(ASAN_SRCS),$(ASAN_TESTS))
	$(CXX) -fsanitize=address,undefined -o $@ $^ -lgtest_main -lgtest $(LDLIBS)
$(SAN)/unit_tsan: $(call san_objs,tsan,$(TSAN_SRCS),$(TSAN_TESTS))
	$(CXX) -fsanitize=thread -o $@ $^ -lgtest_main -lgtest $(LDLIBS)

# cptrace itself under ASan + UBSan (every module; libcptrace, the traced
# programs' side, stays as built): what `make sanitize-cptrace` runs the
# integration suites of SAN_SUITES with, through CPTRACE_TEST_CPTRACE. Beside
# cptrace: it finds libcptrace.so next to itself.
$(SAN)/asan/user/analyze/report_js.o: $(REPORT_ASSETS)
$(SAN)/asan/user/cli/main.o: CPPFLAGS += -DCPTRACE_VERSION='"$(VERSION)"'
$(SAN)/asan/user/probe/probe_selftest.o: lib/probe_site.h
$(BUILD)/cptrace-asan: $(patsubst %.cpp,$(SAN)/asan/%.o,$(wildcard user/*/*.cpp)) $(BUILD)/libcptrace.a
	$(CXX) -fsanitize=address,undefined -Wl,--export-dynamic-symbol='cp_*' -o $@ $^ $(LDLIBS)

# die_after_fork=0: one test (ParallelFor.AForkedChildStartsItsOwnHelpers) starts
# threads in a child forked after threads, which is what it checks; TSan would
# stop the child.
sanitize-threads: $(SAN)/unit_tsan
	cd $(BUILD) && TSAN_OPTIONS=halt_on_error=1:die_after_fork=0 san/unit_tsan $(GTEST_ARGS)
sanitize: sanitize-threads $(SAN)/unit_asan
	cd $(BUILD) && ASAN_OPTIONS=detect_leaks=1 san/unit_asan $(GTEST_ARGS)

# The integration suites that drive cptrace on traces, runs and clusters (the
# commands that read what others wrote: traces, cluster.json, agents' frames),
# with cptrace-asan in place of cptrace (~10 min to build, ~3 to run on 2
# vCPUs: not in `make test`). A sanitizer's report fails the command, so the test.
# Not AnalysisBudget nor Export.MemoryStaysBoundedOnLargeTrace: they measure
# cptrace's memory (ASan's own is several times it).
SAN_RUNS    := TopRun.*:Top.*:Netlat.*:Report.*:ClusterHostile.*:TranslateCli.*
SAN_FILES   := BadInput.*:ExtremeTimestamps.*:ExportTable.*:Export.*
SAN_SUITES ?= $(SAN_RUNS):$(SAN_FILES):-Export.MemoryStaysBoundedOnLargeTrace
sanitize-cptrace: check-root deps
	$(MAKE) -j$$(nproc) all $(BUILD)/cptrace_tests $(BUILD)/cptrace-asan
	cd $(BUILD) && CPTRACE_TEST_CPTRACE=$(CURDIR)/$(BUILD)/cptrace-asan ASAN_OPTIONS=detect_leaks=1 \
	  ./cptrace_tests --gtest_filter='$(SAN_SUITES)' $(GTEST_ARGS)

# ---- fuzzing --------------------------------------------------------------------
# One target per parser of outside input: tests/fuzz/fuzz_NAME.cpp, its seeds in
# tests/fuzz/NAME/corpus, every input that ever crashed it in
# tests/fuzz/NAME/regressions (the trace reader's, the first, in tests/fuzz/corpus
# and tests/fuzz/regressions).
FUZZERS    := trace_reader minrtt agent_wire handler_rules maps_line meta_json control_request registry agent_request
FUZZ_BINS  := $(addprefix $(BUILD)/fuzz_,$(FUZZERS))
FUZZ_CXX   := clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined $(CPPFLAGS)
fuzz_dir    = $$(if [ $(1) = trace_reader ]; then echo tests/fuzz; else echo tests/fuzz/$(1); fi)

$(BUILD)/fuzz_trace_reader: tests/fuzz/fuzz_trace_reader.cpp $(FUZZ_SRCS) $(wildcard user/trace/*.h user/clock/*.h)
	@mkdir -p $(@D)
	$(FUZZ_CXX) $< $(FUZZ_SRCS) -o $@ -lzstd -ldeflate -lz -lfmt

$(BUILD)/fuzz_minrtt: tests/fuzz/fuzz_minrtt.cpp user/sync/minrtt_protocol.cpp user/sync/minrtt_protocol.h user/os/say.cpp
	@mkdir -p $(@D)
	$(FUZZ_CXX) $< user/sync/minrtt_protocol.cpp user/os/say.cpp -o $@ -lcrypto -lfmt

$(BUILD)/fuzz_agent_wire: tests/fuzz/fuzz_agent_wire.cpp user/cluster/agent_wire.cpp user/cluster/nodes_file.cpp \
  user/cluster/agent_wire.h user/cluster/nodes_file.h
	@mkdir -p $(@D)
	$(FUZZ_CXX) $< user/cluster/agent_wire.cpp user/cluster/nodes_file.cpp -o $@ -lfmt

$(BUILD)/fuzz_agent_request: tests/fuzz/fuzz_agent_request.cpp user/cluster/agent_wire.cpp user/cluster/agent_wire.h
	@mkdir -p $(@D)
	$(FUZZ_CXX) $< user/cluster/agent_wire.cpp -o $@ -lfmt

$(BUILD)/fuzz_handler_rules: tests/fuzz/fuzz_handler_rules.cpp user/probe/handler_rules.cpp user/probe/handler_rules.h
	@mkdir -p $(@D)
	$(FUZZ_CXX) $< user/probe/handler_rules.cpp -o $@ -lfmt

$(BUILD)/fuzz_maps_line: tests/fuzz/fuzz_maps_line.cpp user/probe/maps_line.cpp user/probe/maps_line.h
	@mkdir -p $(@D)
	$(FUZZ_CXX) $< user/probe/maps_line.cpp -o $@ -lfmt

$(BUILD)/fuzz_registry: tests/fuzz/fuzz_registry.cpp user/probe/proc_registry.cpp user/probe/maps_line.cpp \
  user/probe/proc_registry.h include/cptrace_registry.h
	@mkdir -p $(@D)
	$(FUZZ_CXX) $< user/probe/proc_registry.cpp user/probe/maps_line.cpp -o $@ -lelf -lfmt

# The control socket's requests: the handler table, instrumented, and the trace
# format its history frames use.
CONTROL_FUZZ_SRCS := user/probe/handler_table.cpp user/probe/handler_rules.cpp user/trace/json_text.cpp
$(BUILD)/fuzz_control_request: tests/fuzz/fuzz_control_request.cpp $(CONTROL_FUZZ_SRCS) $(BUILD)/user/libtrace.a $(BUILD)/user/libclock.a $(BUILD)/user/libos.a \
  user/probe/handler_table.h user/probe/handler_rules.h
	@mkdir -p $(@D)
	$(FUZZ_CXX) $< $(CONTROL_FUZZ_SRCS) -o $@ $(BUILD)/user/libtrace.a $(BUILD)/user/libclock.a $(BUILD)/user/libos.a -lfmt -lzstd -ldeflate -lz

# meta.json's readers, instrumented; what they call into (pair relations and
# the translate stages behind them) from the project's own libraries.
META_FUZZ_SRCS := user/latency/duration_bounds.cpp user/translate/clock_relation.cpp \
  user/translate/drift_bound.cpp user/trace/tsc_skew_history.cpp user/trace/trace_meta.cpp
META_FUZZ_LIBS := $(addprefix $(BUILD)/user/lib,translate.a sync.a tables.a trace.a clock.a os.a)
$(BUILD)/fuzz_meta_json: tests/fuzz/fuzz_meta_json.cpp $(META_FUZZ_SRCS) $(META_FUZZ_LIBS)
	@mkdir -p $(@D)
	$(FUZZ_CXX) $< $(META_FUZZ_SRCS) -o $@ $(META_FUZZ_LIBS) -lfmt -lzstd -ldeflate -lz -lcrypto -lpthread

fuzz: deps $(FUZZ_BINS)
	@set -e; for f in $(FUZZERS); do d=$(call fuzz_dir,$$f); mkdir -p $(BUILD)/fuzz-corpus/$$f; \
	  $(BUILD)/fuzz_$$f $(BUILD)/fuzz-corpus/$$f $$d/corpus -max_total_time=$(or $(FUZZ_SECONDS),600); done

# Per target: its regression inputs and seeds first, then a short exploratory
# run. Each run's output goes to a log, so the fuzzer's exit status reaches make;
# on failure the log's end (the crash report) is shown.
fuzz-run: $(FUZZ_BINS)
	@set -e; for f in $(FUZZERS); do d=$(call fuzz_dir,$$f); log=$(BUILD)/fuzz-run-$$f.log; \
	  mkdir -p $(BUILD)/fuzz-corpus/$$f; \
	  echo "fuzz-run: $$f ($$d)"; \
	  $(BUILD)/fuzz_$$f -runs=0 $$d/regressions $$d/corpus >$$log 2>&1 \
	    || { tail -40 $$log; echo "fuzz-run: fuzz_$$f failed on a regression or seed (log: $$log)" >&2; exit 1; }; \
	  $(BUILD)/fuzz_$$f $(BUILD)/fuzz-corpus/$$f $$d/corpus -max_total_time=$(FUZZ_TIME) -print_final_stats=0 \
	    >$$log 2>&1 || { tail -40 $$log; echo "fuzz-run: fuzz_$$f failed (log: $$log)" >&2; exit 1; }; \
	  tail -2 $$log; done

$(BUILD)/%: tools/%.cpp
	@mkdir -p $(@D)
	$(CXX) -std=c++20 $(CXXFLAGS) $(WARN) $(CPPFLAGS) $< -o $@ -lpthread

# ---- demo, benchmarks, install --------------------------------------------------
demo: deps
	$(MAKE) -j$$(nproc) all
	bash tools/demo.sh

$(BUILD)/bench/%: bench/%.cpp $(BUILD)/libcptrace.so $(CORE_LIBS)
	@mkdir -p $(@D)
	$(CXX) -std=c++20 $(CXXFLAGS) $(CPPFLAGS) $(SITE_AS) $< -o $@ $(CORE_LIBS) -L$(BUILD) -lcptrace \
	  -Wl,-rpath,'$$ORIGIN/..' $(LDLIBS)
$(BUILD)/bench/%: bench/%.c $(BUILD)/libcptrace.so
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Iinclude $(SITE_AS) $< -o $@ -L$(BUILD) -lcptrace -Wl,-rpath,'$$ORIGIN/..' -lpthread

bench: deps
	$(MAKE) all $(BENCHES) $(BUILD)/tests/burn $(if $(JAVA_ALL),$(BUILD)/bench/java/.built)
	bash bench/run.sh

# The build-system files (tools/pkg/*.in) name PREFIX, never DESTDIR: a DESTDIR tree
# is a staging copy that will be unpacked at PREFIX. The CMake files compute their
# prefix from their own place; pkg-config's file names it, so it must be absolute.
# Where the pieces go: LIBDIR (a Debian package: /usr/lib/x86_64-linux-gnu), the
# jar in JARDIR (/usr/share/java), the JNI library in JNIDIR (LIBDIR/jni), which
# the jar finds through java.library.path when it is not beside it.
LIBDIR ?= $(PREFIX)/lib
JARDIR ?= $(LIBDIR)
JNIDIR ?= $(LIBDIR)
from_lib = $(shell realpath -m --relative-to=$(LIBDIR) $(1))
PKG_SED := sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' \
  -e 's|@JARDIR@|$(JARDIR)|g' -e 's|@INCLUDE_FROM_LIB@|$(call from_lib,$(PREFIX)/include)|g' \
  -e 's|@JAR_FROM_LIB@|$(call from_lib,$(JARDIR))|g' $(if $(JAVA_ALL),,-e '/^jar=/d')
PKG_DIR := $(DESTDIR)$(LIBDIR)

install: all
	@for v in PREFIX='$(PREFIX)' LIBDIR='$(LIBDIR)' JARDIR='$(JARDIR)' JNIDIR='$(JNIDIR)'; do \
	  case "$${v#*=}" in /*) ;; *) echo "make install: $${v%%=*} must be an absolute path, got '$${v#*=}'" >&2; exit 1;; esac; done
	install -D -m 755 $(BUILD)/cptrace $(DESTDIR)$(PREFIX)/bin/cptrace
	install -D -m 644 $(BUILD)/libcptrace.so $(DESTDIR)$(LIBDIR)/libcptrace.so
	install -D -m 644 $(BUILD)/libcptrace.a $(DESTDIR)$(LIBDIR)/libcptrace.a
	install -D -m 644 include/cptrace.h $(DESTDIR)$(PREFIX)/include/cptrace.h
	$(if $(JAVA_ALL),install -D -m 644 $(BUILD)/libcptrace_jni.so $(DESTDIR)$(JNIDIR)/libcptrace_jni.so)
	$(if $(JAVA_ALL),install -D -m 644 $(BUILD)/cptrace.jar $(DESTDIR)$(JARDIR)/cptrace.jar)
	install -d $(PKG_DIR)/pkgconfig $(PKG_DIR)/cmake/cptrace
	$(PKG_SED) tools/pkg/cptrace.pc.in > $(PKG_DIR)/pkgconfig/cptrace.pc
	$(PKG_SED) tools/pkg/cptraceConfig.cmake.in > $(PKG_DIR)/cmake/cptrace/cptraceConfig.cmake
	$(PKG_SED) tools/pkg/cptraceConfigVersion.cmake.in > $(PKG_DIR)/cmake/cptrace/cptraceConfigVersion.cmake

# The Debian package of what `make install` installs, plus man pages, docs and the
# minrttd unit (tools/deb/build-deb.sh); `apt install ./cptrace_*.deb` on each node.
DEB := $(BUILD)/cptrace_$(VERSION)_amd64.deb
deb: all
	@bash tools/deb/build-deb.sh $(BUILD) $(DEB)

clean:
	rm -rf $(BUILD)

-include $(wildcard $(BUILD)/obj/*/*.d $(BUILD)/tests/obj/*/*.d $(SAN)/*/*/*/*.d)
