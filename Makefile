# SPDX-License-Identifier: GPL-2.0
#
# perf-bstack: build upstream perf 6.12 from Debian's linux-source-6.12 with
# our overlay files and patches, and test it.
#
#   make          install build deps (apt), prepare build/linux, build ./perf
#   make check    build, run the bstack perf tests and checkpatch
#   make demo     record and report the bundled workload
#   make series   write the work as a git format-patch series (build/series)

BUILD     := $(CURDIR)/build
PERF_OUT  := $(BUILD)/perf
PERF_MAKE := NO_LIBPYTHON=1 NO_LIBPERL=1 $(PERF_EXTRA)
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

check: perf
	@scripts/check.sh

demo: perf
	@scripts/demo.sh

series: tree
	@scripts/make-series.sh

clean:
	rm -rf $(BUILD) perf

.PHONY: all deps tree perf check demo series clean
