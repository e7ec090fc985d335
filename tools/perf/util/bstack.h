/* SPDX-License-Identifier: GPL-2.0 */
#ifndef PERF_UTIL_BSTACK_H
#define PERF_UTIL_BSTACK_H

/*
 * perf bstack: the perf side of stacks sampled by BPF as (build-id, file
 * offset) frames: finding them in a session, the DSOs they name, the
 * report's summary, the conversion to a standard perf.data and
 * 'perf record --bstack'.  The payload itself is in bstack-payload.h.
 */
#include <stdbool.h>
#include <stdio.h>
#include <linux/compiler.h>
#include <linux/err.h>
#include <linux/types.h>
#include "build-id.h"
#include "bstack-payload.h"
#include "header.h"

struct dso;
struct evlist;
struct hashmap;
struct evsel;
struct machine;
struct perf_sample;
struct perf_session;
struct record_opts;
struct strlist;
struct target;

bool bpf_bstack__is_event(struct evsel *evsel);
struct bpf_bstack_rec_hdr *bpf_bstack__sample_record(struct evsel *evsel,
						     struct perf_sample *sample,
						     void **copy, u64 *nr_damaged);
size_t bpf_bstack__id_hash(long key, void *ctx);
bool bpf_bstack__id_equal(long a, long b, void *ctx);
long bpf_bstack__bid_key(const u8 *build_id);
struct dso *bpf_bstack__find_dso(struct machine *machine, const u8 *build_id);

double bpf_bstack__pct(u64 part, u64 total);
int bpf_bstack__scnprintf_lost(char *buf, size_t size, const u64 *stat);

/*
 * The feature sections of a perf.data file, for the writer of another
 * file that copies some of them as they are (fc.copy): the converter and
 * the merge keep those that describe the recording machine
 */
struct bpf_bstack_sections {
	struct feat_copier		fc;
	struct perf_file_section	sec[HEADER_FEAT_BITS];
	int				fd;
};

void bpf_bstack__read_sections(struct bpf_bstack_sections *s, struct perf_header *header,
			       int fd);
int bpf_bstack__copy_section(struct bpf_bstack_sections *s, int feat, struct feat_writer *fw);
void bpf_bstack__keep_features(struct perf_header *header, const int *keep, size_t nr);

/* What perf record learnt of the binaries stacks name, a build-id at a time */
struct bpf_bstack_marks {
	struct hashmap	*states;	/* build-id key -> its state */
	unsigned int	count[4];	/* build-ids in each state */
};

int bpf_bstack__marks_init(struct bpf_bstack_marks *marks);
void bpf_bstack__marks_exit(struct bpf_bstack_marks *marks);
void bpf_bstack__marks_summary(const struct bpf_bstack_marks *marks);
/* marks NULL: mark every DSO named, without looking at the files */
int bpf_bstack__mark_dsos(struct bpf_bstack_marks *marks, struct machine *machine,
			  struct evsel *evsel, struct perf_sample *sample);

/* An event of the recording */
struct bpf_bstack_summary_event {
	char		name[BPF_BSTACK_EVENT_NAME_LEN];
	u32		kind;			/* enum bpf_bstack_event_kind */
	bool		declared;		/* by an EVENT record */
	u64		id;			/* of its evsel in the converted file */
};

/* Where the symbols of the kernel of build-id kernel frames were found */
enum bpf_bstack_kernel_found {
	BPF_BSTACK_KERNEL_UNKNOWN,
	BPF_BSTACK_KERNEL_RUNNING,	/* the running kernel */
	BPF_BSTACK_KERNEL_CACHED,	/* the build-id cache (or debuginfod) */
	BPF_BSTACK_KERNEL_MISSING,
	BPF_BSTACK_KERNEL_GIVEN,	/* report --vmlinux or --kallsyms */
};

/* A machine of a merge of recordings (perf bstack merge) */
struct bpf_bstack_summary_host {
	char		name[BPF_BSTACK_HOST_NAME_LEN];
	u64		start_ns;		/* wall-clock, 0: unknown */
	u64		samples;
	bool		declared;		/* by a HOST record */
};

/* What a report learns about a recording, shown above the report */
struct bpf_bstack_summary {
	struct bpf_bstack_summary_event event[BPF_BSTACK_MAX_EVENTS];
	u32		nr_events;		/* highest index + 1 */
	u64		stat[BPF_BSTACK_MAX_STATS];	/* the recorder's counters */
	bool		has_stats;
	u64		nr_user_stacks;
	u64		nr_kern_stacks;
	u64		nr_counts;
	u64		nr_samples;
	u64		nr_no_stack;		/* samples with neither stack */
	u64		nr_missing_stacks;	/* counts naming a stack not in the file */
	u64		nr_damaged;		/* records skipped */
	u64		nr_valid_frames;
	u64		nr_ip_frames;
	u64		nr_ip_resolved;		/* IP frames found in recorded maps */
	u64		nr_ip_ambiguous;	/* ... in maps of several files while counted */
	u64		nr_weighted;		/* counts too big to write a sample per sample */
	u64		nr_bogus_frames;	/* VALID, but past the end of the file */
	u64		nr_unknown_frames;
	u64		nr_fetched;		/* binaries fetched from debuginfod */
	u64		nr_kern_bid_frames;	/* kernel frames as build-id + offset */
	u64		nr_kern_module_frames;	/* ... of another build-id: modules */
	u64		nr_kern_bogus_frames;	/* ... past the end of any kernel */
	u64		nr_kern_unplaced_frames; /* ... of modules with no map */
	u32		nr_kmods;		/* modules named by kernel frames */
	u32		nr_kmods_missing;	/* ... with no symbols to be found */
	char		kernel_bid[SBUILD_ID_SIZE];	/* of the recorded kernel */
	enum bpf_bstack_kernel_found kernel_found;
	struct strlist	*missing;		/* "build-id path" found in no cache */
	struct bpf_bstack_summary_host *hosts;	/* of a merge, by index */
	u32		nr_hosts;
};

/* How bpf_bstack__convert() writes the counts */
enum bpf_bstack_convert_flags {
	/* a sample of period 1 per sample or hit (off-CPU counts keep their period) */
	BPF_BSTACK_CONVERT_PER_SAMPLE	= 1 << 0,
	/* the counts of tasks alike as one sample: for readers that tell them apart by comm */
	BPF_BSTACK_CONVERT_MERGE_TASKS	= 1 << 1,
};

/*
 * Convert input into a perf.data of resolved callchains at output: a
 * sample per count, of the count's period and with the number of samples
 * or hits it stands for as its weight, unless flags say otherwise.
 */
int bpf_bstack__convert(const char *input, const char *output, bool force,
			const char *events, const char *hosts, unsigned int flags,
			struct bpf_bstack_summary *sum);
/* Write the recordings of inputs, of many machines, as one at output */
int bpf_bstack__merge(const char **inputs, int nr, const char *output, bool force);
void bpf_bstack__summary_add_missing(struct bpf_bstack_summary *sum, const char *sbid,
				     const char *name);
u64 bpf_bstack__summary_lost(const struct bpf_bstack_summary *sum);
void bpf_bstack__summary_fprintf(const struct bpf_bstack_summary *sum, FILE *fp);
void bpf_bstack__summary_kernel_given(struct bpf_bstack_summary *sum);
void bpf_bstack__summary_exit(struct bpf_bstack_summary *sum);

/* The settings of perf record --bstack=CONFIG, which perf bstack record writes */
struct bpf_bstack_opts {
	char		*event;		/* -e: parse_events() syntax, tracepoints too */
	char		*uprobes;	/* --uprobe BINARY:FUNCTION,... */
	bool		off_cpu;
	u64		freq;
	u64		period;
	int		max_stack;
	int		map_entries;	/* unique stacks of each kind */
	int		count_entries;	/* unique {task, stacks} per drain */
	bool		user_only;
	bool		kernel_only;
	bool		no_mmap_tracking;
	bool		ip_stacks;	/* bench: user stacks as IPs, the cost floor */
	bool		walk_cost;	/* bench: time the kernel's two user stack walks */
	bool		no_cfi;		/* user stacks by frame pointer only */
	int		cfi_rows;	/* unwind table rows of all files */
	bool		no_buildid_cache;	/* set by perf record -N, not a CONFIG key */
	unsigned int	interval_ms;
};

struct strbuf;

void bpf_bstack__opts_init(struct bpf_bstack_opts *opts);
void bpf_bstack__opts_exit(struct bpf_bstack_opts *opts);
int bpf_bstack__opts_copy(struct bpf_bstack_opts *to, const struct bpf_bstack_opts *from);
int bpf_bstack__parse_opts(struct bpf_bstack_opts *opts, const char *config);
int bpf_bstack__list_append(char **list, const char *value);
int bpf_bstack__opts_config(const struct bpf_bstack_opts *opts, struct strbuf *sb);

/* One perf record --bstack: its BPF program, events and drain state */
struct bpf_bstack;

#ifdef HAVE_BPF_SKEL
struct bpf_bstack *bpf_bstack__prepare(struct evlist *evlist, struct target *target,
				       const struct bpf_bstack_opts *opts);
void bpf_bstack__start(struct bpf_bstack *b, struct evlist *evlist, const char *workload);
bool bpf_bstack__drain_due(struct bpf_bstack *b);
int bpf_bstack__write(struct bpf_bstack *b, struct perf_session *session, bool final);
void bpf_bstack__switch_output(struct bpf_bstack *b);
int bpf_bstack__mark_sample(struct bpf_bstack *b, struct machine *machine,
			    struct evsel *evsel, struct perf_sample *sample);
void bpf_bstack__finish(struct bpf_bstack *b, bool silent);
void bpf_bstack__delete(struct bpf_bstack *b);
#else
static inline struct bpf_bstack *
bpf_bstack__prepare(struct evlist *evlist __maybe_unused,
		    struct target *target __maybe_unused,
		    const struct bpf_bstack_opts *opts __maybe_unused)
{
	return ERR_PTR(-EOPNOTSUPP);
}

static inline void bpf_bstack__start(struct bpf_bstack *b __maybe_unused,
				     struct evlist *evlist __maybe_unused,
				     const char *workload __maybe_unused)
{
}

static inline bool bpf_bstack__drain_due(struct bpf_bstack *b __maybe_unused)
{
	return false;
}

static inline int bpf_bstack__write(struct bpf_bstack *b __maybe_unused,
				    struct perf_session *session __maybe_unused,
				    bool final __maybe_unused)
{
	return 0;
}

static inline void bpf_bstack__switch_output(struct bpf_bstack *b __maybe_unused)
{
}

static inline int bpf_bstack__mark_sample(struct bpf_bstack *b __maybe_unused,
					  struct machine *machine __maybe_unused,
					  struct evsel *evsel __maybe_unused,
					  struct perf_sample *sample __maybe_unused)
{
	return 0;
}

static inline void bpf_bstack__finish(struct bpf_bstack *b __maybe_unused,
				      bool silent __maybe_unused)
{
}

static inline void bpf_bstack__delete(struct bpf_bstack *b __maybe_unused)
{
}
#endif

#endif /* PERF_UTIL_BSTACK_H */
