/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The state of one perf record --bstack, shared by its parts: the record
 * context (bpf_bstack.c), the drains (bpf_bstack_drain.c) and the summary
 * at the end (bpf_bstack_summary.c).
 */
#ifndef PERF_UTIL_BPF_BSTACK_RECORD_H
#define PERF_UTIL_BPF_BSTACK_RECORD_H

#include <stdbool.h>
#include <linux/types.h>

#include "util/bstack.h"
#include "bpf_skel/bstack.h"

struct bstack_bpf;
struct bpf_bstack_cfi;
struct bpf_link;
struct evlist;
struct evsel;
struct hashmap;
struct ring_buffer;

/*
 * The events stacks are taken at, in the order of their index: the BPF
 * attach cookie, the event of each count, and of the EVENT records that
 * name them in perf.data.
 */
struct bstack_source {
	char		name[BPF_BSTACK_EVENT_NAME_LEN];
	u32		kind;		/* enum bpf_bstack_event_kind */
	struct evsel	*evsel;		/* sampling events and tracepoints */
	char		*binary;	/* --uprobe BINARY:FUNCTION */
	char		*function;
};

/*
 * A written stack id is remembered for BSTACK_WRITTEN_AGE drains after a
 * count last named it.  One that comes back later is written again (report
 * keeps the first copy), so in --interval mode memory follows the rate of
 * new stacks, not the length of the run: the stacks of short-lived
 * processes are all new.
 */
#define BSTACK_WRITTEN_AGE	16

/* One perf record --bstack, from bpf_bstack__prepare() to bpf_bstack__finish() */
struct bpf_bstack {
	struct bpf_bstack_opts	opts;
	struct bstack_bpf	*skel;
	struct evlist		*sampling;	/* our events, not in perf.data */
	struct bpf_link		**links;
	int			nr_links, max_links;
	struct bstack_source	events[BPF_BSTACK_MAX_EVENTS];
	int			nr_events;
	bool			events_written;
	bool			drained_final;
	/* a command given to record, not the 'sleep' of -d beside -p or -t */
	bool			profile_workload;
	int			timer_fd;	/* wakes the poll loop: drain_due() */
	int			stats_fd;	/* --walk-cost: the kernel times programs */
	struct ring_buffer	*wake;		/* the BPF program's: maps half full */
	u64			nr_drains, nr_early_drains;	/* ... of these, maps filling */
	/* user space state across drains */
	struct hashmap		*written;	/* stack id -> drain that last named it */
	struct hashmap		*known_bids;	/* build-ids with a DSO (no tracking mode) */
	unsigned long		drain_gen;
	struct bpf_bstack_stats	last_stats;
	struct bpf_bstack_stats	file_base;	/* last_stats when the output switched */
	bool			switching;	/* the next drain is the last of a file */
	u64			nr_user_stacks, nr_kern_stacks;
	u64			nr_missing_stacks, nr_aged_out;
	struct bpf_bstack_marks	marks;		/* the DSOs of the stacks, for perf.data */
	struct bpf_bstack_cfi	*cfi;		/* unwind tables, NULL: frame pointers only */
	struct hashmap		*jit_maps;	/* pid with IP frames -> struct bstack_jit_map */
	u32			nr_jit_pids, nr_jit_images, nr_jit_failed;
};

/*
 * The BPF programs of a recording, BPF_BSTACK_PROGS of them, the
 * BPF_BSTACK_STACK_PROGS that take stacks first; the kernel's counters of
 * each (0), or an error
 */
#define BPF_BSTACK_STACK_PROGS	4
#define BPF_BSTACK_PROGS	6

struct bpf_prog_info;
struct bpf_program;

struct bpf_program *bpf_bstack__prog(struct bpf_bstack *b, int i);
int bpf_bstack__prog_info(struct bpf_program *prog, struct bpf_prog_info *info);

/* What was recorded and lost, at the end (bpf_bstack_summary.c) */
void bpf_bstack__print_summary(struct bpf_bstack *b);

#endif /* PERF_UTIL_BPF_BSTACK_RECORD_H */
