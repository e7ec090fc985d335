// SPDX-License-Identifier: GPL-2.0
/*
 * The user maps of the processes of a perf bstack recording, from its MMAP,
 * MMAP2 and FORK records, in the conversion to a standard perf.data: they
 * place the IP frames of user stacks (frames whose build-id the kernel
 * could not read) in the binary their process had mapped there when the
 * frame was sampled.
 */
#define pr_fmt(fmt) "perf bstack: " fmt

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <linux/kernel.h>
#include <linux/zalloc.h>

#include "util/bstack-convert.h"
#include "util/dso.h"
#include "util/dsos.h"
#include "util/event.h"
#include "util/hashmap.h"
#include "util/machine.h"
#include "util/map.h"
#include "util/sample.h"

struct bstack_map_history {
	struct bstack_map_rec	*rec;
	size_t			nr, alloc;
	u64			born;		/* its FORK's time; 0: before the recording */
	u32			parent;		/* whose maps it had at the fork */
	bool			forked;
	struct bstack_map_history *prev;	/* an earlier process of the pid */
};

static struct bstack_map_history *map_history(struct bstack_conv *c, u32 pid, bool create)
{
	/* hashmap__find() leaves h alone when pid has no history */
	struct bstack_map_history *h = NULL;

	if (hashmap__find(c->map_history, (long)pid, &h) || !create)
		return h;
	h = zalloc(sizeof(*h));
	if (h && hashmap__add(c->map_history, (long)pid, h))
		zfree(&h);
	return h;
}

/* The process behind pid at time, of those it stood for */
static struct bstack_map_history *history_at(struct bstack_conv *c, u32 pid, u64 time)
{
	struct bstack_map_history *h = map_history(c, pid, /*create=*/false);

	while (h && h->born > time)
		h = h->prev;
	return h;
}

/* A new process (not a thread): a new history for its pid, the old one kept */
int bstack_conv__fork(const struct perf_tool *tool, union perf_event *event,
		     struct perf_sample *sample, struct machine *machine __maybe_unused)
{
	struct bstack_conv *c = container_of(tool, struct bstack_conv, tool);
	struct bstack_map_history *h, *old = NULL;

	if (event->fork.pid == event->fork.ppid)
		return 0;
	h = zalloc(sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->born = sample->time;
	h->parent = event->fork.ppid;
	h->forked = true;
	if (hashmap__set(c->map_history, (long)event->fork.pid, h, NULL, &old)) {
		free(h);
		return -ENOMEM;
	}
	h->prev = old;
	return 0;
}

/*
 * The binary of a user map, as perf's map__new() finds it: by build-id
 * where the MMAP2 has one, else by name and inode, taking the build-id
 * the header has for that name.  Memory that is not a file has none.
 */
static struct dso *user_map_dso(struct machine *machine, const char *filename,
				struct dso_id *id, struct build_id *bid)
{
	struct dso *dso, *header_dso;

	if (filename[0] != '/' || is_anon_memory(filename) || is_no_dso_memory(filename)) {
		/* [vdso] and the like: the header names them with their build-id */
		dso = dsos__find(&machine->dsos, filename, false);
		if (dso && !dso__has_build_id(dso))
			dso__zput(dso);
		return dso;
	}
	dso = machine__findnew_dso_id(machine, filename, id);
	if (!dso)
		return NULL;
	if (bid) {
		dso__set_build_id(dso, bid);
		return dso;
	}
	header_dso = dsos__find(&machine->dsos, filename, false);
	if (header_dso && dso__header_build_id(header_dso)) {
		dso__set_build_id(dso, dso__bid(header_dso));
		dso__set_header_build_id(dso, 1);
	}
	dso__put(header_dso);
	return dso;
}

static struct bstack_map_rec *new_map_rec(struct bstack_map_history *h)
{
	if (h->nr == h->alloc) {
		size_t n = h->alloc ? h->alloc * 2 : 16;
		void *p = realloc(h->rec, n * sizeof(*h->rec));

		if (!p)
			return NULL;
		h->rec = p;
		h->alloc = n;
	}
	return &h->rec[h->nr++];
}

/* Keep a user map of an MMAP or MMAP2 */
static int note_map(struct bstack_conv *c, struct machine *machine, u32 pid, u64 start,
		    u64 len, u64 pgoff, const char *filename, size_t max_len,
		    struct dso_id *id, struct build_id *bid, u64 time)
{
	struct bstack_map_history *h;
	struct bstack_map_rec *rec;

	/* damage: a name that does not end in the record, a map that wraps around */
	if (strnlen(filename, max_len) == max_len || start + len < start)
		return 0;
	h = map_history(c, pid, /*create=*/true);
	rec = h ? new_map_rec(h) : NULL;
	if (!rec)
		return -ENOMEM;
	rec->start = start;
	rec->end = start + len;
	rec->pgoff = pgoff;
	rec->time = time;
	rec->dso = user_map_dso(machine, filename, id, bid);
	return 0;
}

static size_t filename_room(union perf_event *event, void *filename)
{
	size_t off = filename - (void *)event;

	return event->header.size > off ? event->header.size - off : 0;
}

/* Kernel maps go to perf's machine, for the kernel and module maps written out */
int bstack_conv__mmap(const struct perf_tool *tool, union perf_event *event,
		     struct perf_sample *sample, struct machine *machine)
{
	struct bstack_conv *c = container_of(tool, struct bstack_conv, tool);
	struct perf_record_mmap *mm = &event->mmap;

	if ((event->header.misc & PERF_RECORD_MISC_CPUMODE_MASK) != PERF_RECORD_MISC_USER)
		return perf_event__process_mmap(tool, event, sample, machine);
	return note_map(c, machine, mm->pid, mm->start, mm->len, mm->pgoff, mm->filename,
			filename_room(event, mm->filename), NULL, NULL, sample->time);
}

int bstack_conv__mmap2(const struct perf_tool *tool, union perf_event *event,
		      struct perf_sample *sample, struct machine *machine)
{
	struct bstack_conv *c = container_of(tool, struct bstack_conv, tool);
	struct perf_record_mmap2 *mm = &event->mmap2;
	struct dso_id id = {
		.maj = mm->maj,
		.min = mm->min,
		.ino = mm->ino,
		.ino_generation = mm->ino_generation,
	};
	struct build_id bid, *bidp = NULL;

	if ((event->header.misc & PERF_RECORD_MISC_CPUMODE_MASK) != PERF_RECORD_MISC_USER)
		return perf_event__process_mmap2(tool, event, sample, machine);
	if ((event->header.misc & PERF_RECORD_MISC_MMAP_BUILD_ID) &&
	    mm->build_id_size <= BUILD_ID_SIZE) {
		build_id__init(&bid, mm->build_id, mm->build_id_size);
		bidp = &bid;
	}
	return note_map(c, machine, mm->pid, mm->start, mm->len, mm->pgoff, mm->filename,
			filename_room(event, mm->filename), &id, bidp, sample->time);
}

/*
 * The map of ip that samples from first to last were in, among the maps
 * of h since it was born: the one in effect at first, or one that came
 * later (before last).  NULL for none, and for several of different files
 * (*ambiguous): the samples may be in any.  *latest, unless NULL, is the
 * last map at ip whenever it came.
 */
static const struct bstack_map_rec *map_during(const struct bstack_map_history *h, u64 ip,
					       u64 first, u64 last, bool *ambiguous,
					       const struct bstack_map_rec **latest)
{
	const struct bstack_map_rec *found = NULL;
	size_t i;

	for (i = 0; i < h->nr; i++) {
		const struct bstack_map_rec *rec = &h->rec[i];

		if (rec->time < h->born || ip < rec->start || ip >= rec->end)
			continue;
		if (latest)
			*latest = rec;
		if (rec->time > last || *ambiguous)
			continue;
		if (rec->time > first && found && found->dso != rec->dso) {
			*ambiguous = true;
			found = NULL;
			continue;
		}
		found = rec;
	}
	return found;
}

/* fork within fork: a loop of damaged FORK records ends here */
#define MAX_FORK_DEPTH	16

/*
 * The map of ip in the process pid was from first to last: its own since
 * its fork, or else one it had from its parent, as it was at the fork.
 * As in perf's maps of a thread, an exec does not drop the parent's: until
 * the exec returns, the user stack is still the old program's.  *latest:
 * its own last map at ip.
 */
const struct bstack_map_rec *bstack_conv__user_map_at(struct bstack_conv *c, u32 pid, u64 ip,
						u64 first, u64 last, bool *ambiguous,
						const struct bstack_map_rec **latest)
{
	struct bstack_map_history *h = history_at(c, pid, first);
	const struct bstack_map_rec *rec;
	int depth;

	*ambiguous = false;
	*latest = NULL;
	for (depth = 0; h && depth < MAX_FORK_DEPTH; depth++) {
		rec = map_during(h, ip, first, last, ambiguous, depth ? NULL : latest);
		if (rec || *ambiguous || !h->forked)
			return rec;
		first = last = h->born;
		h = history_at(c, h->parent, h->born);
	}
	return NULL;
}


void bstack_conv__free_map_history(struct bstack_conv *c)
{
	struct hashmap_entry *cur;
	size_t bkt;

	if (!c->map_history)
		return;
	hashmap__for_each_entry(c->map_history, cur, bkt) {
		struct bstack_map_history *h = cur->pvalue, *prev;

		for (; h; h = prev) {
			while (h->nr)
				dso__put(h->rec[--h->nr].dso);
			prev = h->prev;
			free(h->rec);
			free(h);
		}
	}
	hashmap__free(c->map_history);
	c->map_history = NULL;
}
