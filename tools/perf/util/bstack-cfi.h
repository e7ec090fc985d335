/* SPDX-License-Identifier: GPL-2.0 */
#ifndef PERF_UTIL_BSTACK_CFI_H
#define PERF_UTIL_BSTACK_CFI_H

/*
 * perf bstack: unwind tables built from the .eh_frame of x86-64 binaries,
 * for the BPF program's walk of stacks without frame pointers.  The row
 * layout is in bpf_skel/bstack.h.
 */
#include <errno.h>
#include <stddef.h>
#include <sys/types.h>
#include <linux/compiler.h>
#include <linux/types.h>

struct bpf_bstack_cfi_row;

/* Counts of what a table holds, for the tests and the summary */
struct bpf_bstack_cfi_table_info {
	size_t	nr_fdes;
	size_t	nr_invalid;	/* rows the walk cannot follow */
	size_t	nr_signal;
	size_t	nr_stop;
	size_t	nr_plt;
	size_t	nr_cfa_reg;	/* rows with the CFA from another register */
	size_t	nr_cfa_deref;	/* ... from the stack pointer saved in the frame */
	size_t	nr_cfa_expr;	/* ... by an expression the walk cannot follow */
};

struct bpf_bstack_cfi_file;

/* A table in the build-id cache, beside its binary (bstack-cfi-cache.c) */
ssize_t bstack_cfi_cache__read(const struct bpf_bstack_cfi_file *f,
			       struct bpf_bstack_cfi_row **rowsp);
void bstack_cfi_cache__write(const struct bpf_bstack_cfi_file *f,
			     const struct bpf_bstack_cfi_row *rows, size_t nr);

#if defined(HAVE_DWARF_SUPPORT) && defined(__x86_64__)
int bpf_bstack__cfi_table(int fd, struct bpf_bstack_cfi_row **rows, size_t *nr,
			  struct bpf_bstack_cfi_table_info *info);
#else
static inline int bpf_bstack__cfi_table(int fd __maybe_unused,
					struct bpf_bstack_cfi_row **rows __maybe_unused,
					size_t *nr __maybe_unused,
					struct bpf_bstack_cfi_table_info *info __maybe_unused)
{
	return -EOPNOTSUPP;
}
#endif

struct bstack_bpf;
struct bpf_bstack_cfi;

#ifdef HAVE_BPF_SKEL
struct bpf_bstack_cfi *bpf_bstack_cfi__new(struct bstack_bpf *skel, bool save_binaries);
int bpf_bstack_cfi__start(struct bpf_bstack_cfi *cfi);
int bpf_bstack_cfi__load_pid(struct bpf_bstack_cfi *cfi, int pid);
void bpf_bstack_cfi__preload(struct bpf_bstack_cfi *cfi, const char *cmd);
void bpf_bstack_cfi__summary(struct bpf_bstack_cfi *cfi, FILE *fp);
bool bpf_bstack_cfi__troubled(struct bpf_bstack_cfi *cfi);
void bpf_bstack_cfi__stats(struct bpf_bstack_cfi *cfi, __u64 *stat);
void bpf_bstack_cfi__delete(struct bpf_bstack_cfi *cfi);
#endif

#endif /* PERF_UTIL_BSTACK_CFI_H */
