// SPDX-License-Identifier: GPL-2.0
/*
 * perf record --bstack: load the unwind tables of the processes the BPF
 * program walks.
 *
 * The BPF program asks, through a ring buffer, for each process it has no
 * mappings of (a new one, one that exec'd, or one that mapped new code).
 * A thread reads the process's executable mappings from /proc/PID/maps,
 * builds the table of each file it has not seen (libc's once for all
 * processes), reaching the file through /proc/PID/map_files, so that
 * binaries deleted or replaced since, or in another mount namespace, are
 * read as the process maps them, and gives the BPF program the process's
 * list of mappings.  Each file also goes into the build-id cache then,
 * while a process maps it: a binary that only lived in a container's
 * mount namespace, or was deleted or replaced since, is still there for
 * the report; and so does its table, which the next recording reads from
 * there instead of building it again.
 *
 * The rows are a budget for the tables in use, not for every file seen:
 * when a table the BPF program asks for finds no room, the tables of files
 * no process maps any more are reclaimed (reclaim_tables()), then those
 * not walked for a while are evicted (evict_tables()); a table comes back
 * from the build-id cache when its code runs again (reload_table()).
 */
#define pr_fmt(fmt) "perf bstack: " fmt

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>
#include <limits.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <linux/bpf.h>
#include <linux/bitmap.h>
#include <linux/compiler.h>
#include <linux/err.h>
#include <linux/kernel.h>
#include <linux/time64.h>
#include <linux/zalloc.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "util/bstack-cfi.h"
#include "util/bstack-preload.h"
#include "util/build-id.h"
#include "util/debug.h"
#include "util/hashmap.h"
#include "util/symbol.h"
#include "util/time-utils.h"

#include "bpf_skel/bstack.h"
#include "bpf_skel/bstack.skel.h"



/* entries [first, first + nr) of an array: of rows, or of pages */
struct cfi_range {
	u32	first;
	u32	nr;
};

/* What is free of an array, in ranges in order */
struct cfi_alloc {
	struct cfi_range	*free;
	u32			nr_free, max_free;
	u32			used, size;
	u64			nr_frees;	/* times ranges were given back */
};

/* What may have made room for a table: rows given back, processes gone, time */
struct cfi_room {
	u64	frees;
	u64	procs_freed;
	u32	now;
};

/*
 * A file index in use: the file's id (the key of files), its entry as the
 * BPF program has it (but for the times it stamps), its rows, and where it
 * was mapped, to build its table again if it is evicted and not cached.
 */
struct cfi_slot {
	struct bpf_bstack_cfi_file_id	*key;	/* NULL: the index is free */
	struct bpf_bstack_cfi_file	f;
	char				*path;
	struct cfi_room			tried;	/* when it last found no room */
};

struct bpf_bstack_cfi {
	struct bstack_bpf	*skel;
	struct ring_buffer	*ask;
	pthread_t		thread;
	bool			running;
	int			stop_fd;	/* eventfd: the thread is to end */
	bool			save_binaries;	/* into the build-id cache */
	struct bpf_bstack_cfi_row *rows;	/* bstack_cfi_rows, mmap'ed */
	struct bpf_bstack_cfi_page *pages;	/* bstack_cfi_pages, mmap'ed */
	size_t			rows_size, pages_size;
	struct cfi_alloc	row_alloc, page_alloc;
	u32			nr_files, max_files;	/* files with an index, and in all */
	struct cfi_slot		*slots;		/* by file index */
	struct hashmap		*files;		/* struct bpf_bstack_cfi_file_id * -> file index */
	/* the process being loaded: its files are in use before the BPF program has it */
	const struct bpf_bstack_cfi_proc *loading;
	struct hashmap		*reclaimed;	/* ids of files whose table was reclaimed */
	struct bpf_link		*dl_links[8];	/* on each dynamic linker seen */
	int			nr_dl_links;
	/* for the summary */
	u64			nr_loads, nr_load_errors;
	u32			nr_no_table, nr_table_full, nr_too_many_maps;
	u32			nr_saved, nr_save_failed;
	u32			nr_from_cache;
	u32			nr_too_large;	/* tables of more rows than the whole budget */
	u32			nr_added;	/* files given an index */
	u32			nr_loaded;	/* tables loaded, again after they left too */
	u32			nr_deferred;	/* tables left to load until their code runs */
	u32			nr_reclaimed, nr_evicted, nr_reloaded;
	u64			rows_reclaimed, rows_evicted;
	u32			reloading;	/* the file whose table is loaded again */
	u32			nr_preloaded;	/* before the workload ran */
	u64			nr_asks_read;	/* asks the BPF program answered itself */
	struct bpf_bstack_cfi_proc *proc_buf;	/* a process's entry, looked at */
};

static size_t file_key_hash(long key, void *ctx __maybe_unused)
{
	const struct bpf_bstack_cfi_file_id *k = (const void *)key;

	return (k->dev * 0x9e3779b97f4a7c15ULL) ^ k->ino ^ (k->mtime * 0xc2b2ae3d27d4eb4fULL);
}

static bool file_key_equal(long a, long b, void *ctx __maybe_unused)
{
	return !memcmp((const void *)a, (const void *)b, sizeof(struct bpf_bstack_cfi_file_id));
}

/* Take nr entries from the first free range that has them */
static s64 range_alloc(struct cfi_alloc *a, u32 nr)
{
	struct cfi_range *r;
	u32 i, first;

	for (i = 0; i < a->nr_free; i++) {
		r = &a->free[i];
		if (r->nr < nr)
			continue;
		first = r->first;
		r->first += nr;
		r->nr -= nr;
		if (!r->nr) {
			memmove(r, r + 1, (a->nr_free - i - 1) * sizeof(*r));
			a->nr_free--;
		}
		a->used += nr;
		return first;
	}
	return -ENOSPC;
}

/* Give entries back, joined to the free ranges they touch */
static void range_free(struct cfi_alloc *a, struct cfi_range r)
{
	struct cfi_range *f = a->free;
	u32 i = 0;

	if (!r.nr)
		return;
	a->used -= r.nr;
	a->nr_frees++;
	while (i < a->nr_free && f[i].first < r.first)
		i++;
	if (i && f[i - 1].first + f[i - 1].nr == r.first) {
		f[i - 1].nr += r.nr;
		if (i < a->nr_free && r.first + r.nr == f[i].first) {
			f[i - 1].nr += f[i].nr;
			memmove(&f[i], &f[i + 1], (a->nr_free - i - 1) * sizeof(*f));
			a->nr_free--;
		}
		return;
	}
	if (i < a->nr_free && r.first + r.nr == f[i].first) {
		f[i].first = r.first;
		f[i].nr += r.nr;
		return;
	}
	/* a range between two in use: there are fewer than max_free */
	memmove(&f[i + 1], &f[i], (a->nr_free - i) * sizeof(*f));
	f[i] = r;
	a->nr_free++;
}

static int range_alloc_init(struct cfi_alloc *a, u32 size, u32 max_free)
{
	a->free = calloc(max_free, sizeof(*a->free));
	if (!a->free)
		return -ENOMEM;
	a->free[0] = (struct cfi_range){ .first = 0, .nr = size };
	a->nr_free = 1;
	a->max_free = max_free;
	a->size = size;
	return 0;
}

/* The rows of f's pages, and its pages, given back */
static void unplace_table(struct bpf_bstack_cfi *cfi, struct bpf_bstack_cfi_file *f)
{
	u32 i;

	for (i = 0; i < f->nr_pages; i++) {
		range_free(&cfi->row_alloc, (struct cfi_range){
			.first = cfi->pages[f->first + i].first,
			.nr = cfi->pages[f->first + i].nr, });
	}
	range_free(&cfi->page_alloc, (struct cfi_range){ .first = f->first, .nr = f->nr_pages });
	f->nr = 0;
	f->nr_pages = 0;
}

/*
 * The rows of a table, sorted by offset, into pages of the shared arrays:
 * each page gets the row that covers its start, then the rows that start
 * in it, wherever they find room.  -ENOSPC if they do not all find some.
 */
static int place_table(struct bpf_bstack_cfi *cfi, struct bpf_bstack_cfi_file *f,
		       const struct bpf_bstack_cfi_row *rows, size_t nr)
{
	u32 base = rows[0].offset & ~((1U << BPF_BSTACK_CFI_PAGE_SHIFT) - 1);
	u32 nr_pages = ((rows[nr - 1].offset - base) >> BPF_BSTACK_CFI_PAGE_SHIFT) + 1;
	size_t lo = 0, hi;
	s64 pages, first;
	u64 end;
	u32 p;

	pages = range_alloc(&cfi->page_alloc, nr_pages);
	if (pages < 0)
		return -ENOSPC;
	f->first = pages;
	f->nr_pages = 0;
	f->base = base;
	f->nr = 0;
	for (p = 0; p < nr_pages; p++) {
		end = base + ((u64)(p + 1) << BPF_BSTACK_CFI_PAGE_SHIFT);
		/* lo: the row that covers the page's start; hi: past its last */
		for (hi = lo; hi < nr && rows[hi].offset < end; hi++)
			;
		first = range_alloc(&cfi->row_alloc, hi - lo);
		if (first < 0) {
			/* the pages placed so far, and the rest of the pages */
			range_free(&cfi->page_alloc, (struct cfi_range){
				.first = pages + p, .nr = nr_pages - p, });
			unplace_table(cfi, f);
			return -ENOSPC;
		}
		memcpy(cfi->rows + first, rows + lo, (hi - lo) * sizeof(*rows));
		cfi->pages[pages + p] = (struct bpf_bstack_cfi_page){
			.first = first, .nr = hi - lo, };
		f->nr_pages++;
		f->nr += hi - lo;
		lo = hi - 1;
	}
	return 0;
}

/* Mark the file index of each mapping of proc */
static void mark_proc_files(struct bpf_bstack_cfi *cfi, const struct bpf_bstack_cfi_proc *proc,
			    unsigned long *used)
{
	u32 i;

	for (i = 0; i < proc->nr && i < BPF_BSTACK_CFI_MAPS; i++)
		if (proc->map[i].file < cfi->max_files)
			__set_bit(proc->map[i].file, used);
}

/*
 * Mark the files the BPF program's processes map, and the process being
 * loaded.  A process that exits leaves the map; one added while the map is
 * read only maps files that are in use anyway.
 */
static int mark_used_files(struct bpf_bstack_cfi *cfi, unsigned long *used)
{
	int fd = bpf_map__fd(cfi->skel->maps.bstack_cfi_procs);
	u32 key, next, n = 0, max = 2 * bpf_map__max_entries(cfi->skel->maps.bstack_cfi_procs);
	u32 *prev = NULL;

	bitmap_zero(used, cfi->max_files);
	if (cfi->loading)
		mark_proc_files(cfi, cfi->loading, used);
	while (!bpf_map_get_next_key(fd, prev, &next)) {
		/* a key deleted while read starts the walk again: bounded */
		if (++n > max)
			return -EAGAIN;
		if (!bpf_map_lookup_elem(fd, &next, cfi->proc_buf))
			mark_proc_files(cfi, cfi->proc_buf, used);
		key = next;
		prev = &key;
	}
	return errno == ENOENT ? 0 : -errno;
}

/* Forget file i: its rows go back, a mapping of it later loads it again */
static void free_file(struct bpf_bstack_cfi *cfi, u32 i)
{
	struct bpf_bstack_cfi_file none = {};
	struct cfi_slot *slot = &cfi->slots[i];
	struct bpf_bstack_cfi_file_id *key = slot->key;

	bpf_map_update_elem(bpf_map__fd(cfi->skel->maps.bstack_cfi_files), &i, &none, BPF_ANY);
	hashmap__delete(cfi->files, key, NULL, NULL);
	/* remembered, a bounded number of them, to count the tables loaded again */
	if (hashmap__size(cfi->reclaimed) >= cfi->max_files || hashmap__add(cfi->reclaimed, key, 0))
		free(key);
	cfi->rows_reclaimed += slot->f.nr;
	unplace_table(cfi, &slot->f);
	cfi->nr_reclaimed++;
	zfree(&slot->path);
	memset(slot, 0, sizeof(*slot));
	cfi->nr_files--;
}

/* how long a withdrawn file waits for a walk or an exec that found it before */
#define CFI_RECLAIM_WAIT_US	20000

/*
 * Reclaim the tables of files no process maps any more, to make room.  The
 * BPF program may still be walking a stack with mappings it looked up a
 * moment ago, or storing the mappings of an exec that found such a file in
 * bstack_cfi_file_ids: a file no mapping refers to is first withdrawn from
 * there, and freed only if a second look, a little later, finds no mapping
 * of it still.  Returns how many were reclaimed.
 */
static int reclaim_tables(struct bpf_bstack_cfi *cfi)
{
	int ids = bpf_map__fd(cfi->skel->maps.bstack_cfi_file_ids);
	unsigned long *used = bitmap_zalloc(cfi->max_files);
	unsigned long *idle = bitmap_zalloc(cfi->max_files);
	int nr = 0, nr_idle = 0;
	u32 i;

	if (!used || !idle || mark_used_files(cfi, used))
		goto out;
	for (i = 0; i < cfi->max_files; i++) {
		if (cfi->slots[i].key && !test_bit(i, used) && i != cfi->reloading) {
			bpf_map_delete_elem(ids, cfi->slots[i].key);
			__set_bit(i, idle);
			nr_idle++;
		}
	}
	if (!nr_idle)
		goto out;
	usleep(CFI_RECLAIM_WAIT_US);
	if (mark_used_files(cfi, used))
		bitmap_fill(used, cfi->max_files);	/* none freed: all withdrawn come back */
	for_each_set_bit(i, idle, cfi->max_files) {
		if (test_bit(i, used)) {
			bpf_map_update_elem(ids, cfi->slots[i].key, &i, BPF_ANY);
		} else {
			free_file(cfi, i);
			nr++;
		}
	}
	pr_debug("unwind tables of %d files no process maps reclaimed, %u rows in use\n", nr,
		 cfi->row_alloc.used);
out:
	bitmap_free(used);
	bitmap_free(idle);
	return nr;
}

/* The clock of the BPF program's stamps: bpf_ktime_get_ns() >> 30 */
static u32 cfi_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((u64)ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec) >> 30;
}

/* A table walked this long ago (in about seconds) or less is not evicted */
#define CFI_EVICT_MIN_AGE	2

struct cfi_lru {
	u32	file;
	u32	used;
};

static int cfi_lru_cmp(const void *a, const void *b)
{
	const struct cfi_lru *x = a, *y = b;

	return x->used < y->used ? -1 : x->used > y->used;
}

/*
 * Evict the tables walked least recently, none walked in the last seconds,
 * until want rows are free in all: the BPF program asks for each again
 * when the code of its file runs (reload_table()).  Only tables that can
 * be loaded again are evicted: of a file with a build-id, which tells its
 * table in the build-id cache, or its file, as it is.  As with reclaimed
 * tables, their rows are reused once a walk that found them has ended.
 */
static int evict_tables(struct bpf_bstack_cfi *cfi, size_t want)
{
	int fd = bpf_map__fd(cfi->skel->maps.bstack_cfi_files);
	struct bpf_bstack_cfi_file f;
	size_t free_rows = cfi->row_alloc.size - cfi->row_alloc.used;
	struct cfi_lru *lru = calloc(cfi->max_files, sizeof(*lru));
	u32 i, nr = 0, n, now = cfi_now();
	struct cfi_slot *slot;

	if (!lru)
		return 0;
	for (i = 0; i < cfi->max_files; i++) {
		slot = &cfi->slots[i];
		if (!slot->key || !slot->f.nr || !slot->f.build_id_size || i == cfi->reloading ||
		    bpf_map_lookup_elem(fd, &i, &f) || now - f.used < CFI_EVICT_MIN_AGE)
			continue;
		lru[nr++] = (struct cfi_lru){ .file = i, .used = f.used };
	}
	qsort(lru, nr, sizeof(*lru), cfi_lru_cmp);
	for (n = 0; n < nr && free_rows < want; n++) {
		slot = &cfi->slots[lru[n].file];
		free_rows += slot->f.nr;
		/* no rows for the BPF program: it walks by frame pointer, and asks */
		f = slot->f;
		f.nr = 0;
		f.flags |= BPF_BSTACK_CFI_FILE_UNLOADED;
		f.used = lru[n].used;
		f.asked = 0;
		bpf_map_update_elem(fd, &lru[n].file, &f, BPF_ANY);
	}
	if (n)
		usleep(CFI_RECLAIM_WAIT_US);
	for (i = 0; i < n; i++) {
		slot = &cfi->slots[lru[i].file];
		cfi->rows_evicted += slot->f.nr;
		unplace_table(cfi, &slot->f);
		slot->f.flags |= BPF_BSTACK_CFI_FILE_UNLOADED;
	}
	cfi->nr_evicted += n;
	pr_debug("unwind tables of %u files not used for a while evicted, %u rows in use\n", n,
		 cfi->row_alloc.used);
	free(lru);
	return n;
}

/*
 * The rows of a table into the shared arrays, f pointed at them: 0, or
 * -ENOSPC, -E2BIG (counted).  A table the BPF program asked for, its code
 * running (cfi->reloading), makes room when there is none: tables of files
 * no process maps go first, then tables not used for a while, more of them
 * at each round.  A process's files, loaded when it is first seen, take
 * the rows that are free: the rest wait until their code runs.
 */
static int load_rows(struct bpf_bstack_cfi *cfi, struct bpf_bstack_cfi_file *f,
		     const struct bpf_bstack_cfi_row *rows, size_t nr)
{
	size_t want = nr;
	int err, round;

	if (!nr) {
		f->nr = 0;
		f->nr_pages = 0;
		return 0;
	}
	if (nr > cfi->row_alloc.size) {
		cfi->nr_too_large++;
		return -E2BIG;
	}
	err = place_table(cfi, f, rows, nr);
	if (!err || cfi->reloading == BPF_BSTACK_CFI_NO_FILE)
		return err;
	if (reclaim_tables(cfi))
		err = place_table(cfi, f, rows, nr);
	for (round = 0; err && round < 4; round++, want *= 2) {
		if (!evict_tables(cfi, min_t(size_t, want, cfi->row_alloc.size)))
			break;
		err = place_table(cfi, f, rows, nr);
	}
	if (err) {
		cfi->nr_table_full++;
		pr_debug("no room for a table of %zu rows: %u of %u rows in use\n", nr,
			 cfi->row_alloc.used, cfi->row_alloc.size);
	}
	return err;
}

/*
 * The rows of f into the shared arrays, from the build-id cache or built
 * from the file open at fd (-1: from the cache only), and f pointed at
 * them.  -ENOSPC when they found no room, which a later load may have.
 */
static int add_file_rows(struct bpf_bstack_cfi *cfi, struct bpf_bstack_cfi_file *f, int fd)
{
	bool cached = cfi->save_binaries && f->build_id_size;
	struct bpf_bstack_cfi_row *rows = NULL;
	size_t nr = 0;
	ssize_t ret;
	int err;

	f->used = cfi_now();	/* new: not the first to be evicted */
	ret = cached ? bstack_cfi_cache__read(f, &rows) : -ENOENT;
	if (ret >= 0) {
		nr = ret;
	} else {
		if (fd < 0)
			return -ENOENT;
		err = bpf_bstack__cfi_table(fd, &rows, &nr, NULL);
		if (err) {
			cfi->nr_no_table++;	/* walked by frame pointer */
			return err;
		}
		if (cached)
			bstack_cfi_cache__write(f, rows, nr);
	}
	err = load_rows(cfi, f, rows, nr);
	free(rows);
	if (!err) {
		cfi->nr_loaded++;
		cfi->nr_from_cache += ret >= 0;
	}
	return err;
}

static struct cfi_room room_now(struct bpf_bstack_cfi *cfi)
{
	return (struct cfi_room){
		.frees		= cfi->row_alloc.nr_frees,
		.procs_freed	= READ_ONCE(cfi->skel->bss->procs_freed),
		.now		= cfi_now(),
	};
}

/*
 * The BPF program found file i, whose table is not loaded, in a walk: load
 * it, from the build-id cache or its file, if that is still the file of
 * the same build-id.  After it found no room, not again until rows were
 * freed, a process went away or a second has passed: tables get older and
 * may be evicted.
 */
static void reload_table(struct bpf_bstack_cfi *cfi, u32 i)
{
	struct bpf_bstack_cfi_file f;
	struct cfi_room room;
	struct cfi_slot *slot;
	struct build_id bid;
	int fd = -1, err;

	if (i >= cfi->max_files || !cfi->slots[i].key ||
	    !(cfi->slots[i].f.flags & BPF_BSTACK_CFI_FILE_UNLOADED))
		return;		/* reclaimed, or loaded again already */
	slot = &cfi->slots[i];
	room = room_now(cfi);
	if (room.frees == slot->tried.frees && room.procs_freed == slot->tried.procs_freed &&
	    room.now == slot->tried.now)
		return;
	f = slot->f;
	if (slot->path && filename__read_build_id(slot->path, &bid) == (int)f.build_id_size &&
	    !memcmp(bid.data, f.build_id, f.build_id_size))
		fd = open(slot->path, O_RDONLY | O_CLOEXEC);
	cfi->reloading = i;
	err = add_file_rows(cfi, &f, fd);
	cfi->reloading = BPF_BSTACK_CFI_NO_FILE;
	if (fd >= 0)
		close(fd);
	if (err == -ENOSPC) {
		slot->tried = room_now(cfi);
	} else if (err) {
		/* no table to be had any more: frame pointers, and no more asks */
		slot->f.flags &= ~BPF_BSTACK_CFI_FILE_UNLOADED;
		bpf_map_update_elem(bpf_map__fd(cfi->skel->maps.bstack_cfi_files), &i,
				    &slot->f, BPF_ANY);
	}
	if (err || !f.nr)
		return;
	f.flags &= ~BPF_BSTACK_CFI_FILE_UNLOADED;
	if (bpf_map_update_elem(bpf_map__fd(cfi->skel->maps.bstack_cfi_files), &i, &f, BPF_ANY)) {
		unplace_table(cfi, &f);
		return;
	}
	slot->f = f;
	cfi->nr_reloaded++;
}

/*
 * A dynamic linker tells debuggers of each dlopen() and dlclose() by
 * calling _dl_debug_state(): follow it, so that a library loaded where
 * another one was is not unwound with the other's table.  Each dynamic
 * linker file (a container has its own) gets its uprobe once.
 */
static void follow_dynamic_linker(struct bpf_bstack_cfi *cfi, const char *path,
				  const char *name)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .func_name = "_dl_debug_state");
	const char *base = strrchr(name, '/');
	struct bpf_link *link;

	if (!base || strncmp(base + 1, "ld-", 3) || cfi->nr_dl_links == ARRAY_SIZE(cfi->dl_links))
		return;
	link = bpf_program__attach_uprobe_opts(cfi->skel->progs.on_dl_change, -1, path, 0,
					       &opts);
	if (!link) {
		pr_debug("no uprobe on _dl_debug_state of %s: %m\n", name);
		return;
	}
	cfi->dl_links[cfi->nr_dl_links++] = link;
}

/*
 * Keep the file under its path, as mapped (no " (deleted)"), in the
 * build-id cache, copied from path, the process's view of it.
 */
static void save_binary(struct bpf_bstack_cfi *cfi, const char *path, const char *name,
			const struct bpf_bstack_cfi_file *f)
{
	char sbid[SBUILD_ID_SIZE], *proper;
	struct build_id bid;
	size_t len;

	if (!cfi->save_binaries || !f->build_id_size)
		return;
	proper = strndup(name, strcspn(name, "\n"));
	if (!proper)
		return;
	len = strlen(proper);
	if (len > 10 && !strcmp(proper + len - 10, " (deleted)"))
		proper[len - 10] = '\0';
	build_id__init(&bid, f->build_id, f->build_id_size);
	build_id__sprintf(&bid, sbid);
	if (build_id_cache__add(sbid, path, path, NULL, false, false, proper, NULL))
		cfi->nr_save_failed++;
	else
		cfi->nr_saved++;
	free(proper);
}

/*
 * Add the file at path, whose device and inode are key, named name where
 * it is mapped: its build-id, its copy in the build-id cache, its table,
 * and its index for the BPF program.  BPF_BSTACK_CFI_NO_FILE if it cannot
 * be read.
 */
static u32 add_file(struct bpf_bstack_cfi *cfi, const struct bpf_bstack_cfi_file_id *key,
		    const char *path, const char *name)
{
	struct bpf_bstack_cfi_file f = {};
	struct bpf_bstack_cfi_file_id *k, *old;
	char fd_path[32];
	struct build_id bid;
	u32 i;
	int fd;

	if (cfi->nr_files == cfi->max_files && !reclaim_tables(cfi))
		return BPF_BSTACK_CFI_NO_FILE;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return BPF_BSTACK_CFI_NO_FILE;
	/*
	 * Read through the open file from here: path, in /proc/PID/map_files,
	 * is gone as soon as the process exits or execs.
	 */
	snprintf(fd_path, sizeof(fd_path), "/proc/self/fd/%d", fd);
	if (filename__read_build_id(fd_path, &bid) > 0 && bid.size <= sizeof(f.build_id)) {
		memcpy(f.build_id, bid.data, bid.size);
		f.build_id_size = bid.size;
	}
	/* first: the table is kept in the binary's directory of the cache */
	save_binary(cfi, fd_path, name, &f);
	/* no room now: loaded when its code runs, making room then */
	if (add_file_rows(cfi, &f, fd) == -ENOSPC) {
		if (f.build_id_size) {
			f.flags |= BPF_BSTACK_CFI_FILE_UNLOADED;
			cfi->nr_deferred++;
		} else {
			cfi->nr_table_full++;
		}
	}
	follow_dynamic_linker(cfi, fd_path, name);
	close(fd);

	k = malloc(sizeof(*k));
	if (!k)
		goto err;
	*k = *key;
	for (i = 0; cfi->slots[i].key; i++)	/* there is a free one */
		;
	f.gen = cfi->nr_added + 1;
	if (bpf_map_update_elem(bpf_map__fd(cfi->skel->maps.bstack_cfi_files), &i, &f, BPF_ANY) ||
	    hashmap__add(cfi->files, k, i)) {
		free(k);
		goto err;
	}
	/* for the BPF program to find it in the VMAs of a process, after an exec or dlopen() */
	bpf_map_update_elem(bpf_map__fd(cfi->skel->maps.bstack_cfi_file_ids), key, &i, BPF_ANY);
	cfi->slots[i].key = k;
	cfi->slots[i].f = f;
	/* the file as mapped, to build its table again: not /proc/PID/map_files */
	cfi->slots[i].path = name[0] == '/' ? strndup(name, strcspn(name, "\n")) : NULL;
	cfi->nr_files++;
	cfi->nr_added++;
	if (hashmap__delete(cfi->reclaimed, key, &old, NULL)) {
		cfi->nr_reloaded++;
		free(old);
	}
	return i;
err:
	unplace_table(cfi, &f);
	return BPF_BSTACK_CFI_NO_FILE;
}

/* A file's modification time, as the BPF program reads it from its inode */
static u64 file_mtime(const struct stat *st)
{
	return (u64)st->st_mtim.tv_sec * NSEC_PER_SEC + st->st_mtim.tv_nsec;
}

/*
 * The index of the file mapped at start-end in pid, whose device and inode
 * are in key: its table is built the first time it is seen, and again for
 * a binary rebuilt in place.  BPF_BSTACK_CFI_NO_FILE if it cannot be read.
 */
static u32 file_index(struct bpf_bstack_cfi *cfi, int pid, u64 start, u64 end,
		      struct bpf_bstack_cfi_file_id *key, const char *name)
{
	char path[64];
	struct stat st;
	long idx;

	/* the file as mapped: deleted, replaced or in another namespace */
	snprintf(path, sizeof(path), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, pid, start, end);
	if (stat(path, &st))
		return BPF_BSTACK_CFI_NO_FILE;
	key->mtime = file_mtime(&st);
	if (hashmap__find(cfi->files, key, &idx))
		return idx;
	return add_file(cfi, key, path, name);
}

/* start_stack of /proc/PID/stat, the 28th field: it changes at each exec */
static int read_start_stack(int pid, __u64 *start_stack)
{
	char path[64], buf[1024], *p;
	ssize_t n;
	int fd, i;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -EINVAL;
	buf[n] = '\0';
	p = strrchr(buf, ')');	/* the comm may hold spaces */
	for (i = 3; p && i <= 28; i++)
		p = strchr(p + 1, ' ');
	if (!p)
		return -EINVAL;
	*start_stack = strtoull(p + 1, NULL, 10);
	return 0;
}

/* The kernel's dev_t of a device, as the BPF program reads it from an inode */
static u64 kernel_dev(unsigned int dev_major, unsigned int dev_minor)
{
	return ((u64)dev_major << 20) | dev_minor;
}

/* One line of /proc/PID/maps, if it maps code, into proc */
static void add_mapping(struct bpf_bstack_cfi *cfi, int pid, struct bpf_bstack_cfi_proc *proc,
			const char *line)
{
	struct bpf_bstack_cfi_map *m;
	struct bpf_bstack_cfi_file_id key;
	unsigned int major, minor;
	u64 start, end, pgoff, ino;
	char perms[5];
	int pos = 0;

	if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %4s %" SCNx64 " %x:%x %" SCNu64 " %n",
		   &start, &end, perms, &pgoff, &major, &minor, &ino, &pos) < 7 ||
	    perms[2] != 'x' || !strncmp(line + pos, "[vsyscall]", 10))
		return;
	if (proc->nr == BPF_BSTACK_CFI_MAPS) {
		cfi->nr_too_many_maps++;
		return;
	}
	m = &proc->map[proc->nr++];
	m->start = start;
	m->end = end;
	m->pgoff = pgoff;
	/* the vDSO and JIT code: by frame pointer, as IPs */
	m->file = BPF_BSTACK_CFI_NO_FILE;
	if (ino && line[pos] == '/') {
		key.dev = kernel_dev(major, minor);
		key.ino = ino;
		m->file = file_index(cfi, pid, start, end, &key, line + pos);
	}
}

/* Give the BPF program the mappings of pid, with the tables of their files */
int bpf_bstack_cfi__load_pid(struct bpf_bstack_cfi *cfi, int pid)
{
	struct bpf_bstack_cfi_proc *proc;
	char path[64], *line = NULL;
	u32 key = pid, files = cfi->nr_added;
	u64 start = rdclock();
	size_t len = 0;
	FILE *fp;
	int err;

	proc = zalloc(sizeof(*proc));
	if (!proc)
		return -ENOMEM;
	/* the BPF program checks it against the last dlopen() or dlclose() */
	proc->read_ns = start;
	err = read_start_stack(pid, &proc->start_stack);
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	fp = err ? NULL : fopen(path, "r");
	if (!fp) {
		/* gone already: its samples keep the kernel's walk */
		free(proc);
		cfi->nr_load_errors++;
		return -ENOENT;
	}
	cfi->loading = proc;
	while (getline(&line, &len, fp) > 0)
		add_mapping(cfi, pid, proc, line);
	cfi->loading = NULL;
	free(line);
	fclose(fp);

	err = bpf_map_update_elem(bpf_map__fd(cfi->skel->maps.bstack_cfi_procs), &key, proc,
				  BPF_ANY);
	/* the BPF program's walks recalled were of the mappings before */
	__atomic_fetch_add(&cfi->skel->bss->procs_gen, 1, __ATOMIC_SEQ_CST);
	free(proc);
	if (err) {
		cfi->nr_load_errors++;
		return -errno;
	}
	cfi->nr_loads++;
	pr_debug("unwind tables of pid %d: %u new files, %.1f ms\n", pid, cfi->nr_added - files,
		 (rdclock() - start) / 1e6);
	return 0;
}

/*
 * Load the tables of the program perf starts, cmd, and of the files it
 * will map first, before it runs: its exec then finds them all, and its
 * first samples are unwound with them.  Without that, a program that ends
 * within milliseconds is walked by frame pointer until user space has
 * read its mappings.  Libraries are looked for as the dynamic linker
 * would, bar its cache: one missed is loaded when it is mapped, as before.
 */
void bpf_bstack_cfi__preload(struct bpf_bstack_cfi *cfi, const char *cmd)
{
	struct bpf_bstack_cfi_file_id key;
	struct bstack_preload p;
	struct stat st;
	long idx;
	int i;

	if (bstack_preload__find(&p, cmd))
		return;
	for (i = 0; i < p.nr_files; i++) {
		if (stat(p.files[i], &st))
			continue;
		key.dev = kernel_dev(major(st.st_dev), minor(st.st_dev));
		key.ino = st.st_ino;
		key.mtime = file_mtime(&st);
		if (!hashmap__find(cfi->files, &key, &idx) &&
		    add_file(cfi, &key, p.files[i], p.files[i]) != BPF_BSTACK_CFI_NO_FILE)
			cfi->nr_preloaded++;
	}
	pr_debug("unwind tables of %s and %d files it needs loaded before it runs\n", cmd,
		 p.nr_files - 1);
	bstack_preload__exit(&p);
}

/*
 * The BPF program holds mappings of the process read after it asked: it
 * read them itself at the exec or dlopen() that followed (a sample taken
 * inside execve(), after the new image replaced the old one, asks for a
 * process the exec will read), or a load of an earlier ask did.
 */
static bool read_since(struct bpf_bstack_cfi *cfi, const struct bpf_bstack_cfi_ask *ask)
{
	u32 key = ask->tgid;

	return !bpf_map_lookup_elem(bpf_map__fd(cfi->skel->maps.bstack_cfi_procs), &key,
				    cfi->proc_buf) &&
	       cfi->proc_buf->read_ns > ask->time;
}

static int on_ask(void *ctx, void *data, size_t size)
{
	struct bpf_bstack_cfi *cfi = ctx;
	const struct bpf_bstack_cfi_ask *ask = data;

	if (size < sizeof(*ask))
		return 0;
	if (ask->file != BPF_BSTACK_CFI_NO_FILE) {
		reload_table(cfi, ask->file);
		return 0;
	}
	if (read_since(cfi, ask)) {
		cfi->nr_asks_read++;
		return 0;
	}
	bpf_bstack_cfi__load_pid(cfi, ask->tgid);
	return 0;
}

/*
 * Asleep until the BPF program asks for tables or perf stops it: a thread
 * woken by a timeout, ten times a second, was most of what an idle
 * recording cost.
 */
static void *cfi_thread(void *arg)
{
	struct bpf_bstack_cfi *cfi = arg;
	struct pollfd fds[2] = {
		{ .fd = ring_buffer__epoll_fd(cfi->ask), .events = POLLIN },
		{ .fd = cfi->stop_fd, .events = POLLIN },
	};

	while (poll(fds, ARRAY_SIZE(fds), -1) >= 0 || errno == EINTR) {
		if (fds[1].revents)
			break;
		if (fds[0].revents)
			ring_buffer__consume(cfi->ask);
	}
	return NULL;
}

int bpf_bstack_cfi__start(struct bpf_bstack_cfi *cfi)
{
	int err;

	cfi->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (cfi->stop_fd < 0) {
		pr_err("cannot start the unwind table thread: %m\n");
		return -errno;
	}
	err = pthread_create(&cfi->thread, NULL, cfi_thread, cfi);
	if (err) {
		pr_err("cannot start the unwind table thread: %s\n", strerror(err));
		return -err;
	}
	cfi->running = true;
	return 0;
}

/* After the skeleton is loaded: map its rows */
struct bpf_bstack_cfi *bpf_bstack_cfi__new(struct bstack_bpf *skel, bool save_binaries)
{
	struct bpf_bstack_cfi *cfi = zalloc(sizeof(*cfi));
	struct bpf_map *rows = skel->maps.bstack_cfi_rows, *pages = skel->maps.bstack_cfi_pages;
	long page = sysconf(_SC_PAGESIZE);
	u32 max_rows, max_pages;

	if (!cfi)
		return NULL;
	cfi->stop_fd = -1;
	cfi->skel = skel;
	cfi->save_binaries = save_binaries;
	cfi->proc_buf = malloc(sizeof(*cfi->proc_buf));
	if (!cfi->proc_buf)
		goto err;
	max_rows = bpf_map__max_entries(rows);
	max_pages = bpf_map__max_entries(pages);
	cfi->max_files = bpf_map__max_entries(skel->maps.bstack_cfi_files);
	cfi->rows_size = roundup((size_t)max_rows * sizeof(*cfi->rows), page);
	cfi->pages_size = roundup((size_t)max_pages * sizeof(*cfi->pages), page);
	cfi->rows = mmap(NULL, cfi->rows_size, PROT_READ | PROT_WRITE, MAP_SHARED,
			 bpf_map__fd(rows), 0);
	cfi->pages = mmap(NULL, cfi->pages_size, PROT_READ | PROT_WRITE, MAP_SHARED,
			  bpf_map__fd(pages), 0);
	if (cfi->rows == MAP_FAILED || cfi->pages == MAP_FAILED) {
		pr_err("cannot map the unwind table: %m\n");
		if (cfi->rows == MAP_FAILED)
			cfi->rows = NULL;
		if (cfi->pages == MAP_FAILED)
			cfi->pages = NULL;
		goto err;
	}
	cfi->slots = calloc(cfi->max_files, sizeof(*cfi->slots));
	/* a range free between two in use: fewer of them than pages, or files */
	if (!cfi->slots || range_alloc_init(&cfi->row_alloc, max_rows, max_pages + 1) ||
	    range_alloc_init(&cfi->page_alloc, max_pages, cfi->max_files + 1))
		goto err;
	cfi->reloading = BPF_BSTACK_CFI_NO_FILE;
	cfi->files = hashmap__new(file_key_hash, file_key_equal, NULL);
	cfi->reclaimed = hashmap__new(file_key_hash, file_key_equal, NULL);
	if (IS_ERR(cfi->files) || IS_ERR(cfi->reclaimed)) {
		if (IS_ERR(cfi->files))
			cfi->files = NULL;
		if (IS_ERR(cfi->reclaimed))
			cfi->reclaimed = NULL;
		goto err;
	}
	cfi->ask = ring_buffer__new(bpf_map__fd(skel->maps.bstack_cfi_ask), on_ask, cfi, NULL);
	if (!cfi->ask)
		goto err;
	return cfi;
err:
	bpf_bstack_cfi__delete(cfi);
	return NULL;
}

void bpf_bstack_cfi__summary(struct bpf_bstack_cfi *cfi, FILE *fp)
{
	double mib = sizeof(*cfi->rows) / 1048576.0;

	fprintf(fp, "[ perf bstack: unwind tables: %u files (%u read from the build-id cache,",
		cfi->nr_added, cfi->nr_from_cache);
	fprintf(fp, " %u loaded before the command ran,", cfi->nr_preloaded);
	fprintf(fp, " %u without .eh_frame,", cfi->nr_no_table);
	fprintf(fp, " %u loaded when their code ran, %u found no room", cfi->nr_deferred,
		cfi->nr_table_full);
	if (cfi->nr_too_large)
		fprintf(fp, ", %u larger than all the rows", cfi->nr_too_large);
	fprintf(fp, "), %u tables loaded, %u reclaimed (%" PRIu64 " rows), %u evicted (%"
		PRIu64 " rows), %u loaded again,", cfi->nr_loaded, cfi->nr_reclaimed,
		cfi->rows_reclaimed, cfi->nr_evicted, cfi->rows_evicted, cfi->nr_reloaded);
	fprintf(fp, " %u files and %u rows of %u in use (%.1f of %.1f MiB),",
		cfi->nr_files, cfi->row_alloc.used, cfi->row_alloc.size,
		cfi->row_alloc.used * mib, cfi->row_alloc.size * mib);
	fprintf(fp, " %" PRIu64 " process loads (%" PRIu64 " more asked for, read by BPF since)",
		cfi->nr_loads, cfi->nr_asks_read);
	if (cfi->save_binaries)
		fprintf(fp, ", %u binaries saved as mapped (%u failed)", cfi->nr_saved,
			cfi->nr_save_failed);
	if (cfi->nr_load_errors)
		fprintf(fp, ", %" PRIu64 " of exited processes", cfi->nr_load_errors);
	if (cfi->nr_too_many_maps)
		fprintf(fp, ", %u mappings past %d per process", cfi->nr_too_many_maps,
			BPF_BSTACK_CFI_MAPS);
	fprintf(fp, " ]\n");
}

/* Tables that found no room, binaries not saved: the summary says it all */
bool bpf_bstack_cfi__troubled(struct bpf_bstack_cfi *cfi)
{
	return cfi->nr_table_full || cfi->nr_too_large || cfi->nr_too_many_maps ||
	       cfi->nr_save_failed;
}

/* The tables' counters, for the recording's stats record */
void bpf_bstack_cfi__stats(struct bpf_bstack_cfi *cfi, __u64 *stat)
{
	stat[BPF_BSTACK_STAT_TABLES_LOADED] = cfi->nr_loaded;
	stat[BPF_BSTACK_STAT_TABLES_RELOADED] = cfi->nr_reloaded;
	stat[BPF_BSTACK_STAT_TABLES_RECLAIMED] = cfi->nr_reclaimed;
	stat[BPF_BSTACK_STAT_TABLES_EVICTED] = cfi->nr_evicted;
	stat[BPF_BSTACK_STAT_TABLES_NO_ROOM] = cfi->nr_table_full;
	stat[BPF_BSTACK_STAT_TABLES_TOO_LARGE] = cfi->nr_too_large;
	stat[BPF_BSTACK_STAT_TABLE_ROWS] = cfi->row_alloc.used;
	stat[BPF_BSTACK_STAT_TABLE_ROWS_MAX] = cfi->row_alloc.size;
}

void bpf_bstack_cfi__delete(struct bpf_bstack_cfi *cfi)
{
	struct hashmap_entry *cur;
	size_t bkt;
	int i;

	if (!cfi)
		return;
	if (cfi->running) {
		eventfd_write(cfi->stop_fd, 1);
		pthread_join(cfi->thread, NULL);
	}
	if (cfi->stop_fd >= 0)
		close(cfi->stop_fd);
	for (i = 0; i < cfi->nr_dl_links; i++)
		bpf_link__destroy(cfi->dl_links[i]);
	ring_buffer__free(cfi->ask);
	if (cfi->files) {
		hashmap__for_each_entry(cfi->files, cur, bkt)
			free((void *)cur->pkey);
		hashmap__free(cfi->files);
	}
	if (cfi->reclaimed) {
		hashmap__for_each_entry(cfi->reclaimed, cur, bkt)
			free((void *)cur->pkey);
		hashmap__free(cfi->reclaimed);
	}
	for (i = 0; cfi->slots && i < (int)cfi->max_files; i++)
		free(cfi->slots[i].path);
	free(cfi->slots);
	free(cfi->row_alloc.free);
	free(cfi->page_alloc.free);
	if (cfi->rows)
		munmap(cfi->rows, cfi->rows_size);
	if (cfi->pages)
		munmap(cfi->pages, cfi->pages_size);
	free(cfi->proc_buf);
	free(cfi);
}
