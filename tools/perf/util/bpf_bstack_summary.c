// SPDX-License-Identifier: GPL-2.0
/*
 * What a perf record --bstack recorded and lost, printed at its end: one
 * line when all went well, the details with -v or when they tell of
 * trouble.
 */
#define pr_fmt(fmt) "perf bstack: " fmt

#include <inttypes.h>
#include <stdio.h>
#include <linux/kernel.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "util/bstack.h"
#include "util/bstack-cfi.h"
#include "util/debug.h"

#include "bpf_skel/bstack.h"
#include "bpf_skel/bstack.skel.h"
#include "util/bpf_bstack_record.h"

/* --walk-cost with the unwind tables: where the time of a sample went */
static void print_part_cost(struct bpf_bstack *b, u64 taken)
{
	static const char * const names[BPF_BSTACK_PARTS] = {
		[BPF_BSTACK_PART_TASK]		= "task and filter",
		[BPF_BSTACK_PART_MAPPINGS]	= "mappings",
		[BPF_BSTACK_PART_WALK]		= "walk",
		[BPF_BSTACK_PART_USER_STORE]	= "user stack's store",
		[BPF_BSTACK_PART_KERNEL]	= "kernel stack",
		[BPF_BSTACK_PART_COUNT]		= "count",
	};
	const __u64 *ns = b->skel->bss->part_ns;
	u64 frames = b->last_stats.stat[BPF_BSTACK_STAT_USER_FRAMES];
	int i;

	fprintf(stderr, "[ perf bstack: ns per sample by part:");
	for (i = 0; i < BPF_BSTACK_PARTS; i++)
		fprintf(stderr, "%s %s %" PRIu64, i ? "," : "", names[i], (u64)ns[i] / taken);
	fprintf(stderr, "; %.1f user frames a sample, the walk %" PRIu64 " ns a frame ]\n",
		(double)frames / taken, frames ? (u64)ns[BPF_BSTACK_PART_WALK] / frames : 0);
}

/*
 * --walk-cost: the kernel walked every user stack twice, as IPs and with
 * build-ids, each between two clock reads, and a third time nothing.  The
 * programs that take stacks, less one walk or the other and the six clock
 * reads, are what they would have cost with that walk alone, on the same
 * samples.  With the unwind tables, the parts of a sample were timed.
 */
static void print_walk_cost(struct bpf_bstack *b, u64 stack_progs_ns, u64 taken)
{
	const __u64 *ns = b->skel->bss->walk_cost_ns;
	u64 clock = ns[BPF_BSTACK_WALK_NONE];
	u64 ip = ns[BPF_BSTACK_WALK_IP], bid = ns[BPF_BSTACK_WALK_BUILD_ID];

	if (!b->opts.walk_cost)
		return;
	if (b->cfi) {
		print_part_cost(b, taken);
		return;
	}
	/* each walk's time holds a clock read too */
	ip -= min(ip, clock);
	bid -= min(bid, clock);
	fprintf(stderr, "[ perf bstack: user stacks of %" PRIu64 " samples", taken);
	fprintf(stderr, " each walked twice by the kernel: %" PRIu64 " ns per sample as IPs,",
		ip / taken);
	fprintf(stderr, " %" PRIu64 " ns with build-ids ]\n", bid / taken);
	/* with kernel.bpf_stats_enabled=1 */
	if (stack_progs_ns < ip + bid + 6 * clock)
		return;
	stack_progs_ns -= 6 * clock;
	fprintf(stderr, "[ perf bstack: BPF programs taking stacks, one walk each:");
	fprintf(stderr, " %" PRIu64 " ns per sample with build-ids, %" PRIu64 " ns with IPs ]\n",
		(stack_progs_ns - ip) / taken, (stack_progs_ns - bid) / taken);
}

/* with kernel.bpf_stats_enabled=1, what each program that ran cost */
static void print_prog_stats(struct bpf_bstack *b)
{
	u64 taken = max(b->last_stats.stat[BPF_BSTACK_STAT_SAMPLES], 1ULL);
	u64 stack_progs_ns = 0;
	struct bpf_prog_info info;
	struct bpf_program *prog;
	int i;

	for (i = 0; i < BPF_BSTACK_PROGS; i++) {
		prog = bpf_bstack__prog(b, i);
		if (bpf_bstack__prog_info(prog, &info) || !info.run_cnt)
			continue;
		if (i < BPF_BSTACK_STACK_PROGS)
			stack_progs_ns += info.run_time_ns;
		/* runs include hits of tasks the filter rejected */
		fprintf(stderr,
			"[ perf bstack: BPF program %s ran %llu times, %llu ns per run, %llu ns per sample taken ]\n",
			bpf_program__name(prog), (unsigned long long)info.run_cnt,
			(unsigned long long)(info.run_time_ns / info.run_cnt),
			(unsigned long long)(info.run_time_ns / taken));
	}
	print_walk_cost(b, stack_progs_ns, taken);
}

/* How the user stacks were walked, and why the table walks that ended early did */
static void print_unwind_summary(struct bpf_bstack *b, const u64 *s)
{
	u64 cfi = s[BPF_BSTACK_STAT_CFI_STACKS];

	if (!b->cfi)
		return;
	fprintf(stderr, "[ perf bstack: user stacks: %" PRIu64 " walked with unwind tables", cfi);
	fprintf(stderr, " (%.1f%% to the bottom, %" PRIu64 " of them the CPU's last walk again)",
		bpf_bstack__pct(s[BPF_BSTACK_STAT_CFI_COMPLETE], cfi),
		s[BPF_BSTACK_STAT_CFI_WALKS_RECALLED]);
	fprintf(stderr, ", %" PRIu64 " by frame pointer", s[BPF_BSTACK_STAT_FP_STACKS]);
	fprintf(stderr, " (tables not loaded yet: %" PRIu64 " of them after new code was mapped,",
		s[BPF_BSTACK_STAT_CFI_NO_MAP]);
	fprintf(stderr, " %" PRIu64 " inside execve()", s[BPF_BSTACK_STAT_CFI_IN_EXEC]);
	fprintf(stderr, ") ]\n");
	fprintf(stderr, "[ perf bstack: table walks took %" PRIu64 " frames by frame pointer: ",
		s[BPF_BSTACK_STAT_CFI_FP_FRAMES]);
	fprintf(stderr, "%" PRIu64 " in code without a file (JIT, vDSO), %" PRIu64
		" where a file had no unwind rule; %" PRIu64
		" frames through CPython's perf trampolines ]\n",
		s[BPF_BSTACK_STAT_CFI_FP_FRAMES] - s[BPF_BSTACK_STAT_CFI_FP_GUESSED],
		s[BPF_BSTACK_STAT_CFI_FP_GUESSED], s[BPF_BSTACK_STAT_CFI_TRAMPOLINES]);
	if (cfi > s[BPF_BSTACK_STAT_CFI_COMPLETE]) {
		fprintf(stderr, "[ perf bstack: table walks ended early at: %" PRIu64
			" code without unwind rule, %" PRIu64 " unreadable stack,",
			s[BPF_BSTACK_STAT_CFI_NO_ROW], s[BPF_BSTACK_STAT_CFI_UNREADABLE]);
		fprintf(stderr, " %" PRIu64 " rules not followed, %" PRIu64
			" CFA from a register a callee saved, %" PRIu64 " max-stack ]\n",
			s[BPF_BSTACK_STAT_CFI_BAD_RULE], s[BPF_BSTACK_STAT_CFI_REG_UNKNOWN],
			s[BPF_BSTACK_STAT_CFI_DEPTH]);
	}
	bpf_bstack_cfi__summary(b->cfi, stderr);
}

/* Samples, stacks or hits lost */
static bool lost_any(struct bpf_bstack *b, const u64 *s)
{
	return s[BPF_BSTACK_STAT_COUNTS_FULL] || bpf_bstack__lost_stacks(s, true) ||
	       bpf_bstack__lost_stacks(s, false) || s[BPF_BSTACK_STAT_RECURSION_MISSES] ||
	       s[BPF_BSTACK_STAT_NESTED_LOST] || b->nr_missing_stacks || b->nr_jit_failed;
}

/*
 * The share of user stacks the tables walked to the bottom, of all user
 * stacks, below which the summary tells why the others ended early: those
 * walked by frame pointer before their tables were loaded are whole only
 * in code built with frame pointers
 */
#define BSTACK_WHOLE_ENOUGH	90.0

static double whole_pct(const u64 *s)
{
	return bpf_bstack__pct(s[BPF_BSTACK_STAT_CFI_COMPLETE],
			       s[BPF_BSTACK_STAT_CFI_STACKS] + s[BPF_BSTACK_STAT_FP_STACKS]);
}

/*
 * The details of a recording, after its one line: with -v, or when they
 * tell of trouble, something lost or stacks that ended early
 */
static bool summary_details(struct bpf_bstack *b, const u64 *s)
{
	if (verbose > 0 || b->opts.walk_cost || lost_any(b, s))
		return true;
	return b->cfi && (whole_pct(s) < BSTACK_WHOLE_ENOUGH ||
			  bpf_bstack_cfi__troubled(b->cfi));
}

void bpf_bstack__print_summary(struct bpf_bstack *b)
{
	u64 s[BPF_BSTACK_STAT_MAX];
	char lost[256];
	int i;

	for (i = 0; i < BPF_BSTACK_STAT_MAX; i++)
		s[i] = b->last_stats.stat[i];

	fprintf(stderr,
		"[ perf bstack: %" PRIu64 " samples, %" PRIu64 " unique user and %" PRIu64
		" kernel stacks, %.1f%% of %" PRIu64 " user frames without build-id",
		s[BPF_BSTACK_STAT_SAMPLES], b->nr_user_stacks, b->nr_kern_stacks,
		bpf_bstack__pct(s[BPF_BSTACK_STAT_USER_IP_FRAMES], s[BPF_BSTACK_STAT_USER_FRAMES]),
		s[BPF_BSTACK_STAT_USER_FRAMES]);
	if (b->cfi)
		fprintf(stderr, ", %.1f%% of user stacks to the bottom", whole_pct(s));
	if (!summary_details(b, s)) {
		fprintf(stderr, ", nothing lost ]\n");
		return;
	}
	fprintf(stderr, " ]\n");
	bpf_bstack__scnprintf_lost(lost, sizeof(lost), s);
	fprintf(stderr, "[ perf bstack: %s ]\n", lost);
	if (b->nr_missing_stacks)
		fprintf(stderr,
			"[ perf bstack: %" PRIu64
			" stacks vanished from the map before they were written ]\n",
			b->nr_missing_stacks);
	if (b->nr_early_drains)
		fprintf(stderr, "[ perf bstack: %" PRIu64 " of %" PRIu64
			" drains before the maps filled (half of --count-entries %d or --map-entries %d new) ]\n",
			b->nr_early_drains, b->nr_drains, b->opts.count_entries,
			b->opts.map_entries);
	/* not a loss: a stack that comes back after aging out is written again */
	pr_debug("%" PRIu64 " stack ids unused for %d drains were forgotten\n",
		 b->nr_aged_out, BSTACK_WRITTEN_AGE);
	print_unwind_summary(b, s);
	if (b->nr_jit_pids || b->nr_jit_failed) {
		fprintf(stderr,
			"[ perf bstack: JIT symbols (perf-PID.map, jit-PID.dump) of %u processes ",
			b->nr_jit_pids);
		fprintf(stderr, "kept in %u images, %u failed ]\n", b->nr_jit_images,
			b->nr_jit_failed);
	}
	if (s[BPF_BSTACK_STAT_KERN_RECALLED])
		fprintf(stderr, "[ perf bstack: %" PRIu64
			" kernel stacks at system call entries known from their user stacks, not walked ]\n",
			s[BPF_BSTACK_STAT_KERN_RECALLED]);
	print_prog_stats(b);
	if (b->nr_kern_stacks && b->skel->rodata->kern_build_id)
		fprintf(stderr, "[ perf bstack: kernel frames %s ]\n",
			b->skel->bss->kern_build_id_failed ?
			"as IPs: this kernel has no BPF_F_KERNEL_BUILD_ID" :
			"as build-id + offset");
	if (b->opts.no_mmap_tracking)
		fprintf(stderr,
			"[ perf bstack: no mmap tracking: binaries of processes that exited before a drain are left to the build-id cache and debuginfod ]\n");
}
