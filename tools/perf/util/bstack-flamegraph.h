/* SPDX-License-Identifier: GPL-2.0 */
#ifndef PERF_UTIL_BSTACK_FLAMEGRAPH_H
#define PERF_UTIL_BSTACK_FLAMEGRAPH_H

/*
 * perf bstack report --flamegraph: one self-contained HTML page, a flame
 * graph per recorded event, drawn by d3-flame-graph.
 */
#include <linux/types.h>

struct bpf_bstack_flamegraph;

struct bpf_bstack_flamegraph *bpf_bstack_flamegraph__new(void);
void bpf_bstack_flamegraph__delete(struct bpf_bstack_flamegraph *fg);

/* A graph for the event, before its samples: returns its index */
int bpf_bstack_flamegraph__add_graph(struct bpf_bstack_flamegraph *fg, const char *event,
				     const char *unit);

/* A stack of frame names, outermost (the comm) first, counted value times */
int bpf_bstack_flamegraph__add_stack(struct bpf_bstack_flamegraph *fg, int graph,
				     const char **names, u64 nr, u64 value);

/*
 * Write the page, with the scripts of d3 and d3-flame-graph read from
 * assets (d3.min.js, d3-flamegraph.umd.min.js) inlined: it needs no
 * network to be viewed.
 */
int bpf_bstack_flamegraph__write(struct bpf_bstack_flamegraph *fg, const char *path,
				 const char *assets, const char *title);

#endif /* PERF_UTIL_BSTACK_FLAMEGRAPH_H */
