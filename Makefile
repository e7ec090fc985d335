# SPDX-License-Identifier: GPL-2.0
#
# perf-bstack: build upstream perf 6.12 from Debian's linux-source-6.12 with
# our overlay files and patches, and test it.
#
#   make          install build deps (apt), prepare build/linux, build ./perf
#   make check    build, run the bstack perf tests and checkpatch
#   make demo     record and report the bundled workload
#   make series   write the work as a git format-patch series (build/series)
#   make bench    benchmarks into bench/RESULTS*.md (sampling, events, same-run counts)
#   make asan     perf with ASan+UBSan in build/perf-asan, and the bstack tests on it
#   make fuzz     libFuzzer on the payload decoder, 20,000 mutated files through
#                 every reader under ASan
#   make stress   10 minutes of --interval over churn: memory must stay bounded
#   make soak     30 minutes always-on over real programs, rotated: nothing decays
#   make kernel-check  our kernel patches on 6.12, the bstack tests in QEMU

BUILD     := $(CURDIR)/build
PERF_OUT  := $(BUILD)/perf
# where 'make install' puts perf: perf finds its scripts and share files
# (exec path, tips) under the prefix it was built with
prefix    ?= /usr/local
# without libLLVM (disassembly and source lines fall back to capstone,
# objdump and addr2line): loading it took 60 ms of CPU at every start
# of perf, a sixth of recording 'true' with perf bstack record
PERF_MAKE := NO_LIBPERL=1 NO_LIBLLVM=1 prefix=$(prefix) $(PERF_EXTRA)
JOBS      ?= $(shell nproc)

all: perf

deps:
	@scripts/install-deps.sh

tree: deps
	@scripts/prepare-tree.sh

perf: tree
	@mkdir -p $(PERF_OUT)
	@$(MAKE) --no-print-directory -C $(BUILD)/linux/tools/perf \
		O=$(PERF_OUT) $(PERF_MAKE) -j$(JOBS) >$(BUILD)/perf-build.log 2>&1 || \
		{ tail -n 40 $(BUILD)/perf-build.log; \
		  echo "error: perf build failed, see build/perf-build.log" >&2; exit 1; }
	@ln -sfn build/perf/perf perf
	@echo "  PERF    ./perf -> build/perf/perf"
	@# the share files perf run from build/perf finds beside it (its exec
	@# path), as an in-tree build has them: perf script's Python scripts,
	@# perf report's tips
	@mkdir -p $(PERF_OUT)/scripts/python/Perf-Trace-Util $(PERF_OUT)/Documentation
	@cp $(BUILD)/linux/tools/perf/Documentation/tips.txt $(PERF_OUT)/Documentation/
	@cp -r $(BUILD)/linux/tools/perf/scripts/python/bin \
		$(BUILD)/linux/tools/perf/scripts/python/*.py $(PERF_OUT)/scripts/python/
	@cp -r $(BUILD)/linux/tools/perf/scripts/python/Perf-Trace-Util/lib \
		$(PERF_OUT)/scripts/python/Perf-Trace-Util/
	@scripts/fetch-flamegraph.sh $(PERF_OUT) || \
		echo "warning: no d3-flame-graph: perf bstack report --flamegraph will not work" >&2

# perf as upstream installs it (binaries, scripts, tests, tips, bash
# completion, man pages), and the share files of perf bstack
install: perf
	@$(MAKE) --no-print-directory -C $(BUILD)/linux/tools/perf O=$(PERF_OUT) $(PERF_MAKE) \
		USE_ASCIIDOCTOR=1 DESTDIR=$(DESTDIR) install >$(BUILD)/install.log 2>&1 || \
		{ tail -n 20 $(BUILD)/install.log; echo "error: install failed" >&2; exit 1; }
	@mkdir -p $(DESTDIR)$(prefix)/libexec/perf-core/bstack
	@cp -r $(PERF_OUT)/bstack/flamegraph $(DESTDIR)$(prefix)/libexec/perf-core/bstack/
	@echo "  INSTALL perf in $(DESTDIR)$(prefix)"

check: perf
	@scripts/check.sh

ASAN_OUT   := $(BUILD)/perf-asan
# perf.data records are not all 8-byte aligned (PERF_RECORD_COMPRESSED
# sizes are not), and perf reads them in place, as x86 allows: UBSan's
# alignment check would flag perf's design, not bugs
ASAN_FLAGS := -fsanitize=address,undefined -fno-sanitize=alignment -fno-omit-frame-pointer
# perf's Python module links libperf-util into a shared object, which the
# sanitized objects (built without -fPIC) cannot go into
ASAN_MAKE  := $(PERF_MAKE) NO_LIBPYTHON=1

asan-build: tree
	@mkdir -p $(ASAN_OUT)
	@$(MAKE) --no-print-directory -C $(BUILD)/linux/tools/perf O=$(ASAN_OUT) $(ASAN_MAKE) \
		DEBUG=1 EXTRA_CFLAGS="$(ASAN_FLAGS)" LDFLAGS="$(ASAN_FLAGS)" \
		-j$(JOBS) >$(BUILD)/perf-asan-build.log 2>&1 || \
		{ tail -n 40 $(BUILD)/perf-asan-build.log; \
		  echo "error: ASan perf build failed, see build/perf-asan-build.log" >&2; exit 1; }
	@scripts/fetch-flamegraph.sh $(ASAN_OUT) || \
		echo "warning: no d3-flame-graph: the ASan perf cannot draw flame graphs" >&2
	@mkdir -p $(ASAN_OUT)/Documentation
	@cp $(BUILD)/linux/tools/perf/Documentation/tips.txt $(ASAN_OUT)/Documentation/
	@echo "  PERF    $(patsubst $(CURDIR)/%,%,$(ASAN_OUT))/perf (ASan, UBSan)"

asan: asan-build
	@PERF_BUILD=$(ASAN_OUT) scripts/check.sh --tests-only

fuzz: perf asan-build
	@scripts/fuzz.sh $${FUZZ_SECONDS:-600}
	@PERF_BUILD=$(ASAN_OUT) BSTACK_FUZZ_COUNT=$${FUZZ_COUNT:-20000} \
		scripts/check.sh --tests-only --only 'survives mutated'

demo: perf
	@scripts/demo.sh

series: tree
	@scripts/make-series.sh

clean:
	rm -rf $(BUILD) perf

.PHONY: all deps tree perf install check asan-build asan fuzz demo series clean

bench: perf
	@python3 bench/run.py
	@python3 bench/events.py
	@python3 bench/volume.py
	@python3 bench/report_time.py
	@python3 bench/same_run.py
	@python3 bench/export.py
	@python3 bench/unwind.py --long 20

stress: perf
	@python3 bench/stress.py --seconds $${STRESS_SECONDS:-600}

soak: perf
	@python3 bench/soak.py --seconds $${SOAK_SECONDS:-1800}

bench-smoke: perf
	@python3 bench/run.py --smoke --out $(BUILD)/RESULTS-smoke.md
	@python3 bench/events.py --smoke --out $(BUILD)/RESULTS-smoke.md

.PHONY: bench bench-smoke stress soak

kernel-check: perf
	@scripts/kernel-check.sh $(KERNEL_TESTS)

.PHONY: kernel-check
