/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The state of a conversion of a perf bstack recording into a standard
 * perf.data (bstack-convert.c), shared with the placement of its kernel
 * and module frames (bstack-convert-kernel.c).
 */
#ifndef PERF_UTIL_BSTACK_CONVERT_H
#define PERF_UTIL_BSTACK_CONVERT_H

#include <stdbool.h>
#include <stddef.h>
#include <linux/types.h>

#include "util/build-id.h"
#include "util/tool.h"

struct bpf_bstack_frame;
struct bpf_bstack_rec_count;
struct bpf_bstack_summary;
struct dso;
struct evlist;
struct hashmap;
struct machine;
struct perf_sample;
struct perf_session;
struct strlist;
union perf_event;

/* an address in no map, for frames that cannot be placed: shown as 0x1 */
#define UNKNOWN_IP	0x1ULL

/*
 * The user maps of a process in the order perf record saw them.  An IP frame
 * (the kernel could not read the build-id) is resolved through the map its
 * process had when it was sampled: after a library was dlclose()d and
 * another one dlopen()ed at its address, the last maps of the process only
 * know the second one.  perf's threads and maps are not built for this:
 * for a recording of thousands of short-lived processes, their namespaces,
 * maps copied at each fork and vDSO lookups were most of the conversion.
 */
struct bstack_map_rec {
	u64		start;
	u64		end;
	u64		pgoff;
	u64		time;
	struct dso	*dso;		/* NULL: anonymous memory */
};

struct bstack_conv {
	struct perf_tool		tool;
	struct perf_session		*session;
	struct bpf_bstack_summary	*sum;
	struct hashmap			*stacks;	/* id -> struct bpf_bstack_rec_stack * */
	struct bpf_bstack_rec_count	*counts;
	size_t				nr_counts, alloc_counts;

	int				fd;
	u64				bytes;
	char				*out;		/* records not written yet */
	size_t				out_len;
	int				err;
	struct evlist			*evlist;
	struct hashmap			*slots;		/* build-id key -> struct bstack_slot * */
	u64				nr_slots;
	struct hashmap			*mapped;	/* pid << 32 | slot index -> slot */
	struct hashmap			*comms;		/* pid << 32 | tid -> comm */
	struct hashmap			*map_history;	/* pid -> struct bstack_map_history * */
	struct strlist			*wanted;	/* --event, NULL: all */
	struct strlist			*wanted_hosts;	/* --host, NULL: all */
	bool				one_per_sample;	/* not a sample per count */
	bool				merge_tasks;	/* tasks alike in one sample */
	u32				*rec_counts_of;	/* of each count: see merge_tasks() */
	u32				rec_counts;	/* counts the record written stands for */
	u64				expanded;	/* samples written for counts */
	bool				has_kern_bid;	/* kernel stacks as build-id + offset */
	struct build_id			kernel_bid;	/* of the kernel they were taken in */
	u64				kernel_text;	/* where its _text is placed */
	u64				kernel_len;	/* up to the first module */
	struct hashmap			*kmods;		/* build-id key -> its map, or NULL */
	int				nr_new_kmods;	/* placed from KMOD_BID_BASE on */
	u64				*chain;
	union perf_event		*event;
};

int bstack_conv__write_with_id(struct bstack_conv *c, union perf_event *event, size_t size,
			       u32 pid, u32 tid, u64 time);
int bstack_conv__synthesized(const struct perf_tool *tool, union perf_event *event,
			     struct perf_sample *sample, struct machine *machine);
bool bstack_conv__fetch_from_debuginfod(struct dso *dso, bool debuginfo_too);
bool bstack_conv__find_or_fetch_binary(struct bstack_conv *c, struct dso *dso,
				       bool debuginfo_too, char *path, u64 *size);

/* bstack-convert-maps.c */
int bstack_conv__fork(const struct perf_tool *tool, union perf_event *event,
		      struct perf_sample *sample, struct machine *machine);
int bstack_conv__mmap(const struct perf_tool *tool, union perf_event *event,
		      struct perf_sample *sample, struct machine *machine);
int bstack_conv__mmap2(const struct perf_tool *tool, union perf_event *event,
		       struct perf_sample *sample, struct machine *machine);
const struct bstack_map_rec *bstack_conv__user_map_at(struct bstack_conv *c, u32 pid, u64 ip,
						      u64 first, u64 last, bool *ambiguous,
						      const struct bstack_map_rec **latest);
void bstack_conv__free_map_history(struct bstack_conv *c);

/* bstack-convert-kernel.c */
int bstack_conv__kernel_maps(struct bstack_conv *c, struct machine *machine);
u64 bstack_conv__kernel_frame_ip(struct bstack_conv *c, const struct bpf_bstack_frame *f);

#endif /* PERF_UTIL_BSTACK_CONVERT_H */
