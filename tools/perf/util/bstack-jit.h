/* SPDX-License-Identifier: GPL-2.0 */
#ifndef PERF_UTIL_BSTACK_JIT_H
#define PERF_UTIL_BSTACK_JIT_H

/*
 * perf bstack: ELF images of the symbols of a JIT's /tmp/perf-PID.map, in
 * the build-id cache, so that its frames resolve like those of any binary.
 */
#include <errno.h>
#include <stdbool.h>
#include <sys/types.h>
#include <linux/compiler.h>
#include <linux/types.h>

#include "util/build-id.h"

/* not a path: perf must not take the image for the map file itself */
#define BPF_BSTACK_JIT_PREFIX	"//jit/"

/* Where the process had the code an image names, and the image */
struct bpf_bstack_jit_image {
	u64		start, end;	/* of the symbols */
	u64		pgoff;		/* where .text is in the image's offsets */
	size_t		nr_syms;
	struct build_id	bid;
	char		name[64];	/* BPF_BSTACK_JIT_PREFIX "perf-PID.map" */
};

typedef int (*bpf_bstack_jit_image_cb)(const struct bpf_bstack_jit_image *img, void *arg);

#ifdef HAVE_LIBELF_SUPPORT
int bpf_bstack__jit_images(pid_t pid, const char *map_path, bpf_bstack_jit_image_cb cb,
			   void *arg);
#else
static inline int bpf_bstack__jit_images(pid_t pid __maybe_unused,
					 const char *map_path __maybe_unused,
					 bpf_bstack_jit_image_cb cb __maybe_unused,
					 void *arg __maybe_unused)
{
	return -EOPNOTSUPP;
}
#endif

#endif /* PERF_UTIL_BSTACK_JIT_H */
