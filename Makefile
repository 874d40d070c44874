# cptrace — one entry point: make, make test, make demo, make bench, make fuzz, make install.
# `make test` and `make demo` first run tools/install-deps.sh, so they work on a fresh machine.

BUILD    ?= build
CXX      ?= g++
CC       ?= gcc
CLANG    ?= clang
BPFTOOL  ?= bpftool
PREFIX   ?= /usr/local

ARCH_DEF := -D__TARGET_ARCH_x86
CXXFLAGS ?= -O2 -g
CFLAGS   ?= -O2 -g
WARN     := -Wall -Wextra -Wno-missing-field-initializers
CPPFLAGS := -Iinclude -Iuser -I$(BUILD)
LDLIBS   := -lbpf -lelf -lz -lzstd -lfmt -lcrypto -lpthread

BPF_SRCS   := $(wildcard bpf/*.bpf.c)
SKELS      := $(patsubst bpf/%.bpf.c,$(BUILD)/%.skel.h,$(BPF_SRCS))
CORE_SRCS  := $(filter-out user/main.cpp,$(wildcard user/*.cpp))
CORE_OBJS  := $(patsubst user/%.cpp,$(BUILD)/obj/%.o,$(CORE_SRCS))
LIB_SRCS   := $(wildcard lib/*.c) $(wildcard lib/*.S)
LIB_OBJS   := $(patsubst lib/%,$(BUILD)/lib/%.o,$(LIB_SRCS))
TEST_SRCS  := $(wildcard tests/unit/*.cpp) $(wildcard tests/integration/*.cpp)
TEST_OBJS  := $(patsubst tests/%.cpp,$(BUILD)/tests/obj/%.o,$(TEST_SRCS))
WORKLOADS  := $(patsubst tests/workloads/%.c,$(BUILD)/tests/%,$(wildcard tests/workloads/*.c)) \
              $(patsubst tests/workloads/%.cpp,$(BUILD)/tests/%,$(wildcard tests/workloads/*.cpp))
BENCHES    := $(patsubst bench/%.cpp,$(BUILD)/bench/%,$(wildcard bench/*.cpp)) \
              $(patsubst bench/%.c,$(BUILD)/bench/%,$(wildcard bench/*.c))
# The reader and what it needs, built with libFuzzer + ASan.
# Helper programs under tools/ (testbed forwarding element, ...).
TOOLS      := $(patsubst tools/%.cpp,$(BUILD)/%,$(wildcard tools/*.cpp))
FUZZ_SRCS  ?= user/trace_reader.cpp user/block_codec.cpp user/clock_map.cpp user/trace_format.cpp
FUZZ_TIME  ?= 30

.PHONY: all deps test unit-test demo bench fuzz fuzz-run install clean
all: $(BUILD)/cptrace $(BUILD)/libcptrace.so $(BUILD)/libcptrace.a $(WORKLOADS) $(TOOLS)

deps:
	@bash tools/install-deps.sh

# ---- BPF: vmlinux.h from the running kernel's BTF, objects, skeletons ----------
$(BUILD)/vmlinux.h:
	@mkdir -p $(BUILD)
	$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $@.tmp && mv $@.tmp $@

$(BUILD)/bpf/%.bpf.o: bpf/%.bpf.c include/cptrace_records.h $(BUILD)/vmlinux.h $(wildcard include/*.h)
	@mkdir -p $(@D)
	$(CLANG) -g -O2 -target bpf $(ARCH_DEF) -I$(BUILD) -Iinclude -c $< -o $@

$(BUILD)/%.skel.h: $(BUILD)/bpf/%.bpf.o
	$(BPFTOOL) gen skeleton $< > $@.tmp && mv $@.tmp $@

# ---- the cptrace program --------------------------------------------------------
$(BUILD)/obj/%.o: user/%.cpp $(SKELS) $(wildcard user/*.h include/*.h)
	@mkdir -p $(@D)
	$(CXX) -std=c++20 $(CXXFLAGS) $(WARN) $(CPPFLAGS) -c $< -o $@

$(BUILD)/libcptrace_core.a: $(CORE_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/cptrace: $(BUILD)/obj/main.o $(BUILD)/libcptrace_core.a
	$(CXX) -o $@ $^ $(LDLIBS)

# ---- the application library (what applications link) -------------------------
# -fcf-protection=none: no endbr64 before our probe sites; the stubs are assembly
# anyway, tests/unit/test_libcptrace.cpp checks their first bytes.
$(BUILD)/lib/%.c.o: lib/%.c include/cptrace.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -fPIC -fcf-protection=none $(WARN) -Iinclude -c $< -o $@
$(BUILD)/lib/%.S.o: lib/%.S
	@mkdir -p $(@D)
	$(CC) -fPIC -Iinclude -c $< -o $@

$(BUILD)/libcptrace.so: $(LIB_OBJS)
	$(CC) -shared -o $@ $^ -lpthread
$(BUILD)/libcptrace.a: $(LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

# ---- tests ----------------------------------------------------------------------
$(BUILD)/tests/%: tests/workloads/%.c $(BUILD)/libcptrace.so
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Iinclude $< -o $@ -L$(BUILD) -lcptrace -Wl,-rpath,'$$ORIGIN/..' -lpthread
$(BUILD)/tests/%: tests/workloads/%.cpp $(BUILD)/libcptrace.so
	@mkdir -p $(@D)
	$(CXX) -std=c++20 $(CXXFLAGS) -Iinclude $< -o $@ -L$(BUILD) -lcptrace -Wl,-rpath,'$$ORIGIN/..' -lpthread

$(BUILD)/tests/obj/%.o: tests/%.cpp $(SKELS) $(wildcard user/*.h include/*.h tests/*.h)
	@mkdir -p $(@D)
	$(CXX) -std=c++20 $(CXXFLAGS) $(WARN) $(CPPFLAGS) -Itests -c $< -o $@

$(BUILD)/cptrace_tests: $(TEST_OBJS) $(BUILD)/libcptrace_core.a $(BUILD)/libcptrace.so
	$(CXX) -o $@ $(TEST_OBJS) $(BUILD)/libcptrace_core.a -L$(BUILD) -lcptrace -Wl,-rpath,'$$ORIGIN' \
	  -lgtest_main -lgtest -ldl $(LDLIBS)

unit-test: all $(BUILD)/cptrace_tests
	cd $(BUILD) && ./cptrace_tests $(GTEST_ARGS)

test: deps
	$(MAKE) -j$$(nproc) all $(BUILD)/cptrace_tests $(BUILD)/fuzz_trace_reader
	cd $(BUILD) && ./cptrace_tests $(GTEST_ARGS)
	$(MAKE) fuzz-run

# ---- fuzzing --------------------------------------------------------------------
$(BUILD)/fuzz_trace_reader: tests/fuzz/fuzz_trace_reader.cpp $(FUZZ_SRCS) $(wildcard user/*.h)
	@mkdir -p $(@D)
	clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined $(CPPFLAGS) $< $(FUZZ_SRCS) \
	  -o $@ -lzstd -lz -lfmt

fuzz: deps $(BUILD)/fuzz_trace_reader
	mkdir -p $(BUILD)/fuzz-corpus
	$(BUILD)/fuzz_trace_reader $(BUILD)/fuzz-corpus tests/fuzz/corpus -max_total_time=$(or $(FUZZ_SECONDS),600)

# Regression inputs first (every crash ever found lives in tests/fuzz/regressions),
# then a short exploratory run.
fuzz-run: $(BUILD)/fuzz_trace_reader
	$(BUILD)/fuzz_trace_reader -runs=0 tests/fuzz/regressions tests/fuzz/corpus
	mkdir -p $(BUILD)/fuzz-corpus
	$(BUILD)/fuzz_trace_reader $(BUILD)/fuzz-corpus tests/fuzz/corpus -max_total_time=$(FUZZ_TIME) -print_final_stats=0 2>&1 | tail -3

$(BUILD)/%: tools/%.cpp
	@mkdir -p $(@D)
	$(CXX) -std=c++20 $(CXXFLAGS) $(WARN) $(CPPFLAGS) $< -o $@ -lpthread

# ---- demo, benchmarks, install --------------------------------------------------
demo: deps
	$(MAKE) -j$$(nproc) all
	bash tools/demo.sh

$(BUILD)/bench/%: bench/%.cpp $(BUILD)/libcptrace.so $(BUILD)/libcptrace_core.a
	@mkdir -p $(@D)
	$(CXX) -std=c++20 $(CXXFLAGS) $(CPPFLAGS) $< -o $@ $(BUILD)/libcptrace_core.a -L$(BUILD) -lcptrace \
	  -Wl,-rpath,'$$ORIGIN/..' $(LDLIBS)
$(BUILD)/bench/%: bench/%.c $(BUILD)/libcptrace.so
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Iinclude $< -o $@ -L$(BUILD) -lcptrace -Wl,-rpath,'$$ORIGIN/..' -lpthread

bench: deps
	$(MAKE) all $(BENCHES)
	bash bench/run.sh

install: all
	install -D -m 755 $(BUILD)/cptrace $(DESTDIR)$(PREFIX)/bin/cptrace
	install -D -m 644 $(BUILD)/libcptrace.so $(DESTDIR)$(PREFIX)/lib/libcptrace.so
	install -D -m 644 $(BUILD)/libcptrace.a $(DESTDIR)$(PREFIX)/lib/libcptrace.a
	install -D -m 644 include/cptrace.h $(DESTDIR)$(PREFIX)/include/cptrace.h

clean:
	rm -rf $(BUILD)
