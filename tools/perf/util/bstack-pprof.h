/* SPDX-License-Identifier: GPL-2.0 */
#ifndef PERF_UTIL_BSTACK_PPROF_H
#define PERF_UTIL_BSTACK_PPROF_H

/*
 * perf bstack report --pprof: the resolved stacks as a pprof profile
 * (github.com/google/pprof, proto/profile.proto), gzipped, for go tool
 * pprof and the profiling services that read it (Pyroscope, Parca).
 */
#include <stdbool.h>
#include <linux/types.h>

struct bpf_bstack_pprof;
struct callchain_cursor_node;

/* Labels of a sample */
struct bpf_bstack_pprof_labels {
	const char	*comm;
	const char	*event;
	u32		pid, tid, cpu;
};

/* raw: no symbols for user code; readers symbolize it by build-id */
struct bpf_bstack_pprof *bpf_bstack_pprof__new(bool raw);
void bpf_bstack_pprof__delete(struct bpf_bstack_pprof *p);

/* Sample types, all of them before the first sample: returns the index */
int bpf_bstack_pprof__add_type(struct bpf_bstack_pprof *p, const char *type, const char *unit);

/* One stack, nodes[0] its leaf, counted value times in the given sample type */
int bpf_bstack_pprof__add_sample(struct bpf_bstack_pprof *p,
				 struct callchain_cursor_node **nodes, u64 nr,
				 int type, u64 value,
				 const struct bpf_bstack_pprof_labels *labels);

/* When the profile starts (ns since the epoch, 0: unknown) and its length */
void bpf_bstack_pprof__set_time(struct bpf_bstack_pprof *p, u64 time_ns, u64 duration_ns);

int bpf_bstack_pprof__write(struct bpf_bstack_pprof *p, const char *path);

/*
 * Put the binary of each user mapping with a build-id into
 * dir/<build-id>/<basename>, where go tool pprof looks for it
 * (PPROF_BINARY_PATH).  Returns how many were not found, or a negative
 * error when dir cannot be created.
 */
int bpf_bstack_pprof__copy_binaries(struct bpf_bstack_pprof *p, const char *dir);

#endif /* PERF_UTIL_BSTACK_PPROF_H */
