/* SPDX-License-Identifier: GPL-2.0 */
#ifndef PERF_UTIL_BSTACK_PRELOAD_H
#define PERF_UTIL_BSTACK_PRELOAD_H

/*
 * The files of a program perf is about to start: the binary, its dynamic
 * linker and the libraries it needs, at most this many
 */
#define BSTACK_PRELOAD_MAX_FILES	32
#define BSTACK_PRELOAD_MAX_DIRS		8

struct bstack_preload {
	char	*files[BSTACK_PRELOAD_MAX_FILES];	/* real paths, the command's first */
	int	nr_files;
	char	*dirs[BSTACK_PRELOAD_MAX_DIRS];		/* where libraries are looked for */
	int	nr_dirs;
};

#ifdef HAVE_LIBELF_SUPPORT
int bstack_preload__find(struct bstack_preload *p, const char *cmd);
void bstack_preload__exit(struct bstack_preload *p);
#else
static inline int bstack_preload__find(struct bstack_preload *p __maybe_unused,
				       const char *cmd __maybe_unused)
{
	return -1;
}

static inline void bstack_preload__exit(struct bstack_preload *p __maybe_unused)
{
}
#endif

#endif /* PERF_UTIL_BSTACK_PRELOAD_H */
