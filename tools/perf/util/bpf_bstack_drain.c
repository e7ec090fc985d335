// SPDX-License-Identifier: GPL-2.0
/*
 * perf record --bstack's drains: the BPF maps' stacks, counts and
 * counters, the JIT images of the processes whose stacks have IP frames,
 * written into perf.data as the records of the bstack event, at each
 * --interval, when the maps fill, at a switch of output and at the end.
 */
#define pr_fmt(fmt) "perf bstack: " fmt

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <linux/string.h>
#include <linux/zalloc.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "util/bpf-event.h"
#include "util/bpf_counter.h"
#include "util/bstack.h"
#include "util/bstack-cfi.h"
#include "util/bstack-jit.h"
#include "util/debug.h"
#include "util/dso.h"
#include "util/env.h"
#include "util/event.h"
#include "util/evlist.h"
#include "util/evsel.h"
#include "util/hashmap.h"
#include "util/machine.h"
#include "util/namespaces.h"
#include "util/sample.h"
#include "util/session.h"
#include "util/symbol.h"
#include "util/synthetic-events.h"
#include "util/time-utils.h"

#include "bpf_skel/bstack.h"
#include "bpf_skel/bstack.skel.h"
#include "util/bpf_bstack_record.h"

/* what can be in the bstack evsel's samples, see write_record() */
#define BSTACK_SAMPLE_TYPES (PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP |	\
			     PERF_SAMPLE_TID | PERF_SAMPLE_TIME |	\
			     PERF_SAMPLE_ID | PERF_SAMPLE_STREAM_ID |	\
			     PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD |	\
			     PERF_SAMPLE_RAW)

/* A JIT's perf map as last made into images: made again when it changes */
struct bstack_jit_map {
	off_t		size;
	struct timespec	mtime;
};

union bstack_event {
	struct perf_event_header hdr;
	u64 array[(PERF_SAMPLE_MAX_SIZE) / sizeof(u64)];
};

/* New counts or stacks took half of a map since the last drain */
static bool maps_filling(struct bpf_bstack *b)
{
	const struct bstack_bpf__bss *bss = b->skel->bss;

	return bss->counts_added[bss->active_counts & 1] >= (u64)b->opts.count_entries / 2 ||
	       bss->stacks_added >= (u64)b->opts.map_entries / 2;
}

bool bpf_bstack__drain_due(struct bpf_bstack *b)
{
	u64 expirations;
	bool timer, woken;

	if (b->timer_fd < 0)
		return false;
	timer = read(b->timer_fd, &expirations, sizeof(expirations)) == sizeof(expirations);
	woken = b->wake && ring_buffer__consume(b->wake) > 0;
	if (timer && b->opts.interval_ms)
		return true;
	if ((timer || woken) && maps_filling(b)) {
		b->nr_early_drains++;
		return true;
	}
	return false;
}

/* What a drain read of a stack map, a batch at a time */
struct bstack_map_dump {
	struct hashmap	*stacks;	/* id -> its value: nr, then nr frames */
	u64		*ids;		/* every id read, written or not */
	size_t		nr_ids;
	bool		complete;	/* the whole map was read */
};

#define BSTACK_STACK_KINDS	4	/* enum bpf_bstack_stack_kind */
/* the stack maps: one of each kind, and the short user stacks' */
#define BSTACK_USER_SHORT	(BSTACK_STACK_KINDS + 1)
#define BSTACK_STACK_MAPS	BSTACK_USER_SHORT

struct bstack_writer {
	struct bpf_bstack	*b;
	struct perf_session	*session;
	u64			sample_type;
	bool			sample_id_all;
	u64			sid;
	u64			now;
	int			bytes;
	union bstack_event	event;
	u64			payload[(sizeof(struct bpf_bstack_rec_stack) +
				 sizeof(struct bpf_bstack_user_stack)) / sizeof(u64) + 1];
	struct bpf_bstack_user_stack	value;	/* of a stack map (any: nr first) */
	struct bstack_map_dump	dump[BSTACK_STACK_MAPS];	/* by map - 1 */
	/* the counts of the drain, written packed at its end */
	struct bpf_bstack_rec_count	*counts;
	size_t			nr_counts;
	size_t			alloc_counts;
	u64			packed[BPF_BSTACK_COUNTS_MAX_SIZE / sizeof(u64) + 1];
	/* with perf record -z: records gathered here, written compressed */
	char			*zbuf;
	size_t			zlen;
	size_t			zsize;
	char			*zout;		/* twice zsize: zstd's output, in records */
};

/* As perf record's own: each compressed record gets a header */
static size_t bstack_comp_header(void *record, size_t increment)
{
	struct perf_record_compressed *event = record;

	if (increment) {
		event->header.size += increment;
		return increment;
	}
	event->header.type = PERF_RECORD_COMPRESSED;
	event->header.size = sizeof(*event);
	return sizeof(*event);
}

static int write_out(struct bstack_writer *w, void *buf, size_t size)
{
	if (perf_data_file__write(&w->session->data->file, buf, size) < 0) {
		pr_err("failed to write perf.data: %m\n");
		return -errno;
	}
	w->bytes += size;
	return 0;
}

/* The gathered records as PERF_RECORD_COMPRESSED, in perf record's zstd stream */
static int flush_compressed(struct bstack_writer *w)
{
	size_t max_record = PERF_SAMPLE_MAX_SIZE - sizeof(struct perf_record_compressed) - 1;
	ssize_t size;

	if (!w->zlen)
		return 0;
	size = zstd_compress_stream_to_records(&w->session->zstd_data, w->zout,
					       2 * w->zsize, w->zbuf, w->zlen,
					       max_record, bstack_comp_header);
	if (size < 0)
		return -EIO;
	w->session->bytes_transferred += w->zlen;
	w->session->bytes_compressed += size;
	w->zlen = 0;
	return write_out(w, w->zout, size);
}

/* An event into perf.data, compressed when perf record compresses its own */
static int write_event(struct bstack_writer *w, void *event, size_t size)
{
	int err;

	if (!w->zbuf)
		return write_out(w, event, size);
	if (w->zlen + size > w->zsize) {
		err = flush_compressed(w);
		if (err)
			return err;
	}
	memcpy(w->zbuf + w->zlen, event, size);
	w->zlen += size;
	return 0;
}

static int write_payload(struct bstack_writer *w, void *payload, u32 pid, u32 tid, u32 cpu,
			 u64 time, u64 period)
{
	struct bpf_bstack_rec_hdr *hdr = payload;
	struct perf_sample sample = {
		.pid		= pid,
		.tid		= tid,
		.cpu		= cpu,
		.time		= time,
		.period		= period,
		.id		= w->sid,
		.stream_id	= w->sid,
		.raw_data	= payload,
		/* the kernel keeps raw_size + its u32 size field 8-byte aligned */
		.raw_size	= hdr->size + sizeof(u32),
	};
	size_t size;

	size = perf_event__sample_event_size(&sample, w->sample_type, 0);
	if (size > sizeof(w->event) || size > UINT16_MAX)
		return -E2BIG;

	w->event.hdr.type = PERF_RECORD_SAMPLE;
	w->event.hdr.misc = PERF_RECORD_MISC_USER;
	w->event.hdr.size = size;
	perf_event__synthesize_sample((union perf_event *)&w->event, w->sample_type, 0, &sample);
	return write_event(w, &w->event, size);
}

/* The record in w->payload, of no task, at the drain's time */
static int write_record(struct bstack_writer *w)
{
	return write_payload(w, w->payload, -1, -1, 0, w->now, 0);
}

static_assert(offsetof(struct bpf_bstack_user_stack, frame) ==
	      offsetof(struct bpf_bstack_kern_stack, ip), "frames after nr in both");

/*
 * Stack map 'map': that of a kind of stack (a kernel one may also be in
 * the build-id map), or BSTACK_USER_SHORT
 */
static struct bpf_map *stack_map(struct bstack_bpf *skel, u32 map)
{
	if (map == BSTACK_USER_SHORT)
		return skel->maps.bstack_user_short_stacks;
	if (map == BPF_BSTACK_STACK_USER)
		return skel->maps.bstack_user_stacks;
	if (map == BPF_BSTACK_STACK_USER_IP)
		return skel->maps.bstack_user_ip_stacks;
	if (map == BPF_BSTACK_STACK_KERNEL_BID)
		return skel->maps.bstack_kern_bid_stacks;
	return skel->maps.bstack_kern_stacks;
}

/* The kind of the stacks of stack map 'map' */
static u32 map_kind(u32 map)
{
	return map == BSTACK_USER_SHORT ? BPF_BSTACK_STACK_USER : map;
}

static size_t stack_value_size(u32 kind, u64 nr)
{
	return bpf_bstack__stack_size(kind, nr) - sizeof(struct bpf_bstack_rec_stack) +
	       offsetof(struct bpf_bstack_user_stack, frame);
}

/* A batch of a stack map's entries into the dump: those not written yet kept */
static int dump_stacks(struct bstack_writer *w, u32 map, const u64 *ids, const void *values,
		       u32 count, size_t value_size)
{
	struct bstack_map_dump *d = &w->dump[map - 1];
	u32 max = w->b->skel->rodata->max_frames, kind = map_kind(map), i;
	void *p;

	p = realloc(d->ids, (d->nr_ids + count) * sizeof(*d->ids));
	if (!p)
		return -ENOMEM;
	d->ids = p;
	for (i = 0; i < count; i++) {
		const struct bpf_bstack_user_stack *v = values + i * value_size;
		size_t size = stack_value_size(kind, min_t(u64, v->nr, max));

		d->ids[d->nr_ids++] = ids[i];
		if (hashmap__find(w->b->written, ids[i], NULL))
			continue;
		p = memdup(v, size);
		if (!p || hashmap__add(d->stacks, ids[i], p)) {
			free(p);
			return -ENOMEM;
		}
	}
	return 0;
}

#define STACK_BATCH	256

/*
 * Read a stack map whole, a batch at a time, before the counts that name
 * its stacks: a program that takes many new stacks (deep recursion, short
 * processes) made a lookup for each of them, and a get-next-key and a
 * delete when forgetting it, and those system calls grew perf's CPU time
 * with the stacks.  A stack added after the read is looked up alone.
 */
static void dump_stack_map(struct bstack_writer *w, u32 m)
{
	struct bstack_map_dump *d = &w->dump[m - 1];
	struct bpf_map *map = stack_map(w->b->skel, m);
	size_t value_size = bpf_map__value_size(map);
	int fd = bpf_map__fd(map), err = 0;
	u64 batch, *ids;
	bool first = true;
	void *values;

	d->stacks = hashmap__new(bpf_bstack__id_hash, bpf_bstack__id_equal, NULL);
	ids = calloc(STACK_BATCH, sizeof(*ids));
	values = calloc(STACK_BATCH, value_size);
	if (IS_ERR(d->stacks) || !ids || !values)
		goto out;
	while (!err) {
		u32 count = STACK_BATCH;
		int ret = bpf_map_lookup_batch(fd, first ? NULL : &batch, &batch, ids, values,
					       &count, NULL);
		int batch_errno = ret ? errno : 0;

		first = false;
		err = dump_stacks(w, m, ids, values, count, value_size);
		if (!err && (batch_errno == ENOENT || (!ret && !count))) {
			d->complete = true;	/* ENOENT: that was the last batch */
			break;
		}
		if (batch_errno) {
			pr_debug("stacks read one at a time: %s\n", strerror(batch_errno));
			break;
		}
	}
out:
	if (IS_ERR(d->stacks))
		d->stacks = NULL;
	free(ids);
	free(values);
}

static void free_dumps(struct bstack_writer *w)
{
	struct hashmap_entry *cur;
	size_t bkt;
	int i;

	for (i = 0; i < BSTACK_STACK_MAPS; i++) {
		if (w->dump[i].stacks) {
			hashmap__for_each_entry(w->dump[i].stacks, cur, bkt)
				free(cur->pvalue);
			hashmap__free(w->dump[i].stacks);
		}
		free(w->dump[i].ids);
	}
}

/* A stack of map 'map' into w->value, if the drain's read of the map has it */
static bool read_dumped_stack(struct bstack_writer *w, u32 map, u64 id)
{
	struct hashmap *dumped = w->dump[map - 1].stacks;
	struct bpf_bstack_user_stack *v;

	if (!dumped || !hashmap__find(dumped, id, &v))
		return false;
	memcpy(&w->value, v, stack_value_size(map_kind(map), v->nr));
	return true;
}

/*
 * A stack of a kind into w->value: from the drain's read, or else the
 * map's.  A user stack is in one of two maps: both reads are looked in
 * before either map, so that a deep stack costs no failed lookup.
 */
static int read_stack(struct bstack_writer *w, u32 kind, u64 id)
{
	struct bstack_bpf *skel = w->b->skel;
	bool user = kind == BPF_BSTACK_STACK_USER;

	if ((user && read_dumped_stack(w, BSTACK_USER_SHORT, id)) ||
	    read_dumped_stack(w, kind, id))
		return 0;
	if (user && !bpf_map_lookup_elem(bpf_map__fd(stack_map(skel, BSTACK_USER_SHORT)),
					 &id, &w->value))
		return 0;
	return bpf_map_lookup_elem(bpf_map__fd(stack_map(skel, kind)), &id, &w->value);
}

/* Write a stack the first time a count refers to it: 1 when it did */
static int write_stack(struct bstack_writer *w, u64 id, u32 kind)
{
	struct bpf_bstack *b = w->b;
	struct bpf_bstack_rec_stack *rec = (void *)w->payload;
	u32 max = b->skel->rodata->max_frames, nr;
	int err;

	if (!id)
		return 0;
	/* written already: note the drain, in the same lookup */
	err = hashmap__update(b->written, id, b->drain_gen, NULL, NULL);
	if (err != -ENOENT)
		return err;

	/* a kernel stack has build-ids unless the kernel refused them */
	if (kind == BPF_BSTACK_STACK_KERNEL && b->skel->rodata->kern_build_id &&
	    !read_stack(w, BPF_BSTACK_STACK_KERNEL_BID, id)) {
		kind = BPF_BSTACK_STACK_KERNEL_BID;
	} else if (read_stack(w, kind, id)) {
		b->nr_missing_stacks++;
		return 0;
	}
	if (kind == BPF_BSTACK_STACK_USER || kind == BPF_BSTACK_STACK_USER_IP)
		b->nr_user_stacks++;
	else
		b->nr_kern_stacks++;
	/* both kinds of value have nr, then the frames: the stale ones stay behind */
	nr = min_t(u64, w->value.nr, max);
	memcpy(rec + 1, w->value.frame, bpf_bstack__stack_size(kind, nr) - sizeof(*rec));
	rec->id = id;
	rec->kind = kind;
	rec->nr = nr;
	bpf_bstack__init_hdr(&rec->hdr, BPF_BSTACK_REC_STACK,
			     bpf_bstack__stack_size(kind, nr));

	err = write_record(w);
	if (!err)
		err = hashmap__add(b->written, id, b->drain_gen);
	return err ?: 1;
}

/*
 * --no-mmap-tracking: learn the paths of the build-ids a stack names from
 * the maps of the (live) process, through /proc/PID/root for processes in
 * other mount namespaces.  Binaries of processes that already exited are
 * left to the build-id cache and debuginfod at report time.
 */
static void harvest_maps(struct bpf_bstack *b, struct machine *machine, pid_t pid)
{
	char path[PATH_MAX], line[PATH_MAX + 128];
	struct nsinfo *nsi = nsinfo__new(pid);
	FILE *fp;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	fp = fopen(path, "r");
	if (!fp)
		goto out;

	while (fgets(line, sizeof(line), fp)) {
		char perm[8], *file = strchr(line, '/');
		struct build_id bid;
		struct dso *dso;
		long key;

		if (!file || sscanf(line, "%*x-%*x %7s", perm) != 1 || !strchr(perm, 'x'))
			continue;
		file[strcspn(file, "\n")] = '\0';
		snprintf(path, sizeof(path), "/proc/%d/root%s", pid, file);
		if (filename__read_build_id(path, &bid) <= 0)
			continue;
		key = bpf_bstack__bid_key(bid.data);
		if (hashmap__find(b->known_bids, key, NULL))
			continue;

		dso = machine__findnew_dso(machine, file);
		if (!dso)
			continue;
		if (!dso__has_build_id(dso))
			dso__set_build_id(dso, &bid);
		if (nsi && nsinfo__need_setns(nsi) && !dso__nsinfo(dso))
			dso__set_nsinfo(dso, nsinfo__get(nsi));
		dso__put(dso);
		hashmap__add(b->known_bids, key, 1);
	}
	fclose(fp);
out:
	nsinfo__put(nsi);
}

/* Does a user stack just written name a binary no harvest has found yet? */
static bool names_unknown_binary(struct bpf_bstack *b, const struct bpf_bstack_rec_stack *rec)
{
	const struct bpf_bstack_frame *f = bpf_bstack__user_frames((void *)rec);
	u32 i;

	for (i = 0; i < rec->nr; i++) {
		if (f[i].status == BPF_STACK_BUILD_ID_VALID &&
		    !hashmap__find(b->known_bids, bpf_bstack__bid_key(f[i].build_id), NULL))
			return true;
	}
	return false;
}

/* Does a user stack just written have frames the kernel gave as IPs (JIT code)? */
static bool has_ip_frames(const struct bpf_bstack_rec_stack *rec)
{
	const struct bpf_bstack_frame *f = bpf_bstack__user_frames((void *)rec);
	u32 i;

	if (rec->kind == BPF_BSTACK_STACK_USER_IP)
		return rec->nr;
	for (i = 0; i < rec->nr; i++) {
		if (f[i].status == BPF_STACK_BUILD_ID_IP)
			return true;
	}
	return false;
}

/* pid may run JIT code: look for its perf map at the end of the drain */
static void note_jit_candidate(struct bpf_bstack *b, u32 pid)
{
	struct bstack_jit_map *m;

	if (hashmap__find(b->jit_maps, (long)pid, NULL))
		return;
	m = zalloc(sizeof(*m));
	if (m && hashmap__add(b->jit_maps, (long)pid, m))
		free(m);
}

/* Write the stacks of a count the first time, and keep it for write_packed_counts() */
static int write_count(struct bstack_writer *w, const struct bpf_bstack_key *key,
		       const struct bpf_bstack_count *val)
{
	struct bpf_bstack *b = w->b;
	struct bpf_bstack_rec_count *rec;
	int err;

	err = write_stack(w, key->user_stack, b->opts.ip_stacks ?
			  BPF_BSTACK_STACK_USER_IP : BPF_BSTACK_STACK_USER);
	/* a new build-id stack is still in the payload buffer */
	if (err > 0 && b->opts.no_mmap_tracking && !b->opts.ip_stacks &&
	    names_unknown_binary(b, (void *)w->payload))
		harvest_maps(b, &w->session->machines.host, key->pid);
	if (err > 0 && has_ip_frames((void *)w->payload))
		note_jit_candidate(b, key->pid);
	if (err >= 0)
		err = write_stack(w, key->kern_stack, BPF_BSTACK_STACK_KERNEL);
	if (err < 0)
		return err;

	if (w->nr_counts == w->alloc_counts) {
		size_t n = w->alloc_counts ? 2 * w->alloc_counts : 1024;
		void *p = realloc(w->counts, n * sizeof(*w->counts));

		if (!p)
			return -ENOMEM;
		w->counts = p;
		w->alloc_counts = n;
	}
	rec = &w->counts[w->nr_counts++];
	memset(rec, 0, sizeof(*rec));
	rec->user_stack = key->user_stack;
	rec->kern_stack = key->kern_stack;
	rec->count = val->count;
	rec->first_ns = val->first_ns;
	rec->last_ns = val->last_ns;
	rec->pid = key->pid;
	rec->tid = key->tid;
	rec->cpu = key->cpu;
	rec->event = key->event;
	memcpy(rec->comm, key->comm, sizeof(rec->comm));
	return 0;
}

static int cmp_first_ns(const void *a, const void *b)
{
	const struct bpf_bstack_rec_count *ca = a, *cb = b;

	if (ca->first_ns != cb->first_ns)
		return ca->first_ns < cb->first_ns ? -1 : 1;
	return 0;
}

/*
 * The counts of the drain, packed a few hundred to a COUNTS record: side
 * by side, sorted by time, the ids of the stacks tasks share and the
 * times compress to a tenth of what COUNT records take.  At the drain's
 * time, not the hits': a record older than what perf has read from the
 * ring buffers would reach readers out of order.
 */
static int write_packed_counts(struct bstack_writer *w)
{
	struct bpf_bstack_rec_counts *rec = (void *)w->packed;
	size_t i, j;
	int err = 0;

	if (w->nr_counts)
		qsort(w->counts, w->nr_counts, sizeof(*w->counts), cmp_first_ns);
	for (i = 0; i < w->nr_counts && !err; i += BPF_BSTACK_COUNTS_PER_RECORD) {
		u32 n = min_t(size_t, w->nr_counts - i, BPF_BSTACK_COUNTS_PER_RECORD);
		u64 period = 0;

		if (!bpf_bstack__pack_counts(rec, sizeof(w->packed), &w->counts[i], n))
			return -EINVAL;
		for (j = i; j < i + n; j++)
			period += w->counts[j].count;
		err = write_payload(w, rec, -1, -1, 0, w->now, period);
	}
	w->nr_counts = 0;
	return err;
}

/*
 * Take every count out of one map, key by key.  Keys are collected first,
 * then each entry is taken with an atomic lookup-and-delete, so a sample
 * that the BPF program adds meanwhile is either in what we read or left
 * for the next drain, never lost.
 */
static int drain_counts_by_key(struct bstack_writer *w, int fd, int max)
{
	struct bpf_bstack_key *keys, *prev = NULL;
	struct bpf_bstack_count val;
	int n = 0, i, err = 0;

	keys = calloc(max, sizeof(*keys));
	if (!keys)
		return -ENOMEM;
	while (n < max && !bpf_map_get_next_key(fd, prev, &keys[n])) {
		prev = &keys[n];
		n++;
	}
	for (i = 0; i < n && !err; i++) {
		if (bpf_map_lookup_and_delete_elem(fd, &keys[i], &val)) {
			if (bpf_map_lookup_elem(fd, &keys[i], &val))
				continue;
			bpf_map_delete_elem(fd, &keys[i]);
		}
		err = write_count(w, &keys[i], &val);
	}
	free(keys);
	return err;
}

#define DRAIN_BATCH	1024

/*
 * Take every count out of one map, a thousand at a time: a drain of a busy
 * system-wide recording has tens of thousands, and two system calls each
 * were a third of perf's CPU time.  The batch is taken bucket by bucket
 * under the bucket's lock, as the single lookup-and-delete takes an entry.
 * Where the kernel cannot (or a bucket does not fit), key by key.
 */
static int drain_counts(struct bstack_writer *w, struct bpf_map *map)
{
	int fd = bpf_map__fd(map), err = 0;
	struct bpf_bstack_count *vals;
	struct bpf_bstack_key *keys;
	u32 batch, count, i;
	bool first = true;

	keys = calloc(DRAIN_BATCH, sizeof(*keys));
	vals = calloc(DRAIN_BATCH, sizeof(*vals));
	if (!keys || !vals) {
		err = -ENOMEM;
		goto out;
	}
	for (;;) {
		int ret, batch_errno;

		count = DRAIN_BATCH;
		ret = bpf_map_lookup_and_delete_batch(fd, first ? NULL : &batch, &batch, keys,
						      vals, &count, NULL);
		batch_errno = ret ? errno : 0;
		first = false;
		/* what was taken out, even with an error, is written */
		for (i = 0; i < count && !err; i++)
			err = write_count(w, &keys[i], &vals[i]);
		if (err || batch_errno == ENOENT || (!ret && !count))
			break;	/* ENOENT: that was the last batch */
		if (batch_errno) {
			pr_debug("counts drained key by key: %s\n", strerror(batch_errno));
			err = drain_counts_by_key(w, fd, bpf_map__max_entries(map));
			break;
		}
	}
out:
	free(keys);
	free(vals);
	return err;
}

struct jit_writer {
	struct bstack_writer	*w;
	u32			pid;
	int			write_err;	/* perf.data: the drain fails */
};

/* An MMAP2 that places a JIT image in the process, and its DSO as hit */
static int write_jit_mmap(const struct bpf_bstack_jit_image *img, void *arg)
{
	struct jit_writer *jw = arg;
	struct bstack_writer *w = jw->w;
	struct perf_record_mmap2 *mm = (void *)&w->event;
	struct perf_sample id = {
		.pid = jw->pid, .tid = jw->pid, .time = w->now, .id = w->sid, .stream_id = w->sid,
	};
	size_t len = strlen(img->name) + 1, size;
	struct dso *dso;

	memset(mm, 0, sizeof(*mm));
	mm->header.type = PERF_RECORD_MMAP2;
	mm->header.misc = PERF_RECORD_MISC_USER | PERF_RECORD_MISC_MMAP_BUILD_ID;
	mm->pid = mm->tid = jw->pid;
	mm->start = img->start;
	mm->len = img->end - img->start;
	mm->pgoff = img->pgoff;
	mm->build_id_size = img->bid.size;
	memcpy(mm->build_id, img->bid.data, img->bid.size);
	mm->prot = PROT_READ | PROT_EXEC;
	mm->flags = MAP_PRIVATE;
	memcpy(mm->filename, img->name, len);
	size = PERF_ALIGN(offsetof(struct perf_record_mmap2, filename) + len, sizeof(u64));
	if (w->sample_id_all)
		size += perf_event__synthesize_id_sample((void *)mm + size, w->sample_type, &id);
	mm->header.size = size;
	jw->write_err = write_event(w, mm, size);
	if (jw->write_err)
		return jw->write_err;
	w->b->nr_jit_images++;

	/* into HEADER_BUILD_ID */
	dso = machine__findnew_dso(&w->session->machines.host, img->name);
	if (dso) {
		struct build_id bid = img->bid;

		dso__set_build_id(dso, &bid);
		dso__set_hit(dso);
		dso__put(dso);
	}
	return 0;
}

/*
 * The perf map of pid, or else its jitdump (python -X perf_jit writes one,
 * not both): in the /tmp of its mount namespace, under the pid it has
 * there, while it lives; in ours once it is gone.
 */
static void jit_map_path(pid_t pid, char *path, size_t size)
{
	static const char * const kinds[] = { "perf-%d.map", "jit-%d.dump", };
	struct nsinfo *nsi = nsinfo__new(pid);
	pid_t nspid = nsi ? nsinfo__nstgid(nsi) : pid;
	char name[32];
	size_t i;

	nsinfo__put(nsi);
	for (i = 0; i < ARRAY_SIZE(kinds); i++) {
		snprintf(name, sizeof(name), kinds[i], nspid);
		snprintf(path, size, "/proc/%d/root/tmp/%s", pid, name);
		if (!access(path, R_OK))
			return;
		snprintf(name, sizeof(name), kinds[i], pid);
		snprintf(path, size, "/tmp/%s", name);
		if (!access(path, R_OK))
			return;
	}
	snprintf(path, size, "/tmp/perf-%d.map", pid);
}

/*
 * Make the perf maps of the processes whose stacks have IP frames into
 * images, the first time and whenever they changed (a JIT appends).
 */
static int write_jit_images(struct bstack_writer *w)
{
	struct bpf_bstack *b = w->b;
	struct hashmap_entry *cur, *tmp;
	char path[PATH_MAX];
	struct stat st;
	size_t bkt;

	hashmap__for_each_entry_safe(b->jit_maps, cur, tmp, bkt) {
		struct bstack_jit_map *m = cur->pvalue;
		struct jit_writer jw = { .w = w, .pid = cur->key, };
		/* a process gone has its last map now: -a over churn sees many */
		bool gone = kill(jw.pid, 0) && errno == ESRCH;

		jit_map_path(jw.pid, path, sizeof(path));
		if (!stat(path, &st) && (st.st_size != m->size ||
					 memcmp(&st.st_mtim, &m->mtime, sizeof(m->mtime)))) {
			if (!m->size)
				b->nr_jit_pids++;
			m->size = st.st_size;
			m->mtime = st.st_mtim;
			/* a map that cannot be made into images costs its names, not the drain */
			if (bpf_bstack__jit_images(jw.pid, path, write_jit_mmap, &jw))
				b->nr_jit_failed++;
			if (jw.write_err)
				return jw.write_err;
		}
		if (gone) {
			hashmap__delete(b->jit_maps, cur->key, NULL, NULL);
			free(m);
		}
	}
	return 0;
}

/*
 * Hits the kernel did not run a program of ours for, as another BPF
 * program was running on that CPU.  The kernel counts them for tracepoint
 * and tp_btf programs, not for sampling events (bpf_overflow_handler()):
 * samples skipped that way stay unknown.
 */
static u64 recursion_misses(struct bpf_bstack *b)
{
	struct bpf_prog_info info;
	u64 misses = 0;
	int i;

	for (i = 0; i < BPF_BSTACK_STACK_PROGS; i++) {
		if (!bpf_bstack__prog_info(bpf_bstack__prog(b, i), &info))
			misses += info.recursion_misses;
	}
	return misses;
}

static void read_stats(struct bpf_bstack *b, struct bpf_bstack_stats *sum)
{
	int ncpus = libbpf_num_possible_cpus();
	struct bpf_bstack_stats *percpu;
	u32 zero = 0;
	int cpu, i;

	memset(sum, 0, sizeof(*sum));
	percpu = calloc(ncpus, sizeof(*percpu));
	if (!percpu)
		return;
	if (!bpf_map_lookup_elem(bpf_map__fd(b->skel->maps.bstack_stats), &zero, percpu)) {
		for (cpu = 0; cpu < ncpus; cpu++)
			for (i = 0; i < BPF_BSTACK_STAT_MAX; i++)
				sum->stat[i] += percpu[cpu].stat[i];
	}
	free(percpu);
	sum->stat[BPF_BSTACK_STAT_RECURSION_MISSES] = recursion_misses(b);
	if (b->cfi)
		bpf_bstack_cfi__stats(b->cfi, sum->stat);
}

/* Counters that tell a state, not a sum since the start */
static bool stat_is_gauge(int i)
{
	return i == BPF_BSTACK_STAT_TABLE_ROWS || i == BPF_BSTACK_STAT_TABLE_ROWS_MAX;
}

/* The counters since the file began: a file of --switch-output stands alone */
static int write_stats(struct bstack_writer *w)
{
	struct bpf_bstack *b = w->b;
	struct bpf_bstack_rec_stats *rec = (void *)w->payload;
	int i;

	bpf_bstack__init_hdr(&rec->hdr, BPF_BSTACK_REC_STATS,
			     bpf_bstack__stats_size(BPF_BSTACK_STAT_MAX));
	rec->nr = BPF_BSTACK_STAT_MAX;
	rec->reserved = 0;
	for (i = 0; i < BPF_BSTACK_STAT_MAX; i++) {
		rec->stat[i] = b->last_stats.stat[i];
		if (!stat_is_gauge(i))
			rec->stat[i] -= b->file_base.stat[i];
	}
	return write_record(w);
}

/* Name the events, once, before the first count that refers to them */
static int write_events(struct bstack_writer *w)
{
	struct bpf_bstack *b = w->b;
	struct bpf_bstack_rec_event *rec = (void *)w->payload;
	int i, err;

	for (i = 0; i < b->nr_events; i++) {
		memset(rec, 0, sizeof(*rec));
		bpf_bstack__init_hdr(&rec->hdr, BPF_BSTACK_REC_EVENT, sizeof(*rec));
		rec->index = i;
		rec->kind = b->events[i].kind;
		memcpy(rec->name, b->events[i].name, sizeof(rec->name));
		rec->name[sizeof(rec->name) - 1] = '\0';
		err = write_record(w);
		if (err)
			return err;
	}
	b->events_written = true;
	return 0;
}

/* Delete ids from a map, past any that is gone already */
static void delete_stacks(int fd, const u64 *ids, size_t nr)
{
	size_t done = 0;

	while (done < nr) {
		u32 count = min_t(size_t, nr - done, UINT32_MAX);

		if (!bpf_map_delete_batch(fd, ids + done, &count, NULL)) {
			done += count;
		} else if (errno == ENOENT) {
			done += count + 1;	/* it stopped at one that is gone */
		} else {
			/* no batches here: count is not an answer */
			for (; done < nr; done++)
				bpf_map_delete_elem(fd, &ids[done]);
		}
	}
}

/* Stacks already in perf.data are dropped from the kernel maps between drains */
static void forget_written_stacks(struct bstack_writer *w, u32 map)
{
	struct bstack_map_dump *d = &w->dump[map - 1];
	int fd = bpf_map__fd(stack_map(w->b->skel, map));
	struct hashmap *written = w->b->written;
	u64 key, next, *prev = NULL;
	size_t i, n = 0;

	if (d->complete) {
		/* those read this time; any added since stay for the next drain */
		for (i = 0; i < d->nr_ids; i++) {
			if (hashmap__find(written, d->ids[i], NULL))
				d->ids[n++] = d->ids[i];
		}
		delete_stacks(fd, d->ids, n);
		return;
	}
	while (!bpf_map_get_next_key(fd, prev, &next)) {
		if (prev && hashmap__find(written, key, NULL))
			bpf_map_delete_elem(fd, &key);
		key = next;
		prev = &key;
	}
	if (prev && hashmap__find(written, key, NULL))
		bpf_map_delete_elem(fd, &key);
}

static void age_written_stacks(struct bpf_bstack *b)
{
	struct hashmap_entry *cur, *tmp;
	size_t bkt;

	if (++b->drain_gen < BSTACK_WRITTEN_AGE)
		return;
	hashmap__for_each_entry_safe(b->written, cur, tmp, bkt) {
		if ((unsigned long)cur->value + BSTACK_WRITTEN_AGE > b->drain_gen)
			continue;
		hashmap__delete(b->written, cur->key, NULL, NULL);
		b->nr_aged_out++;
	}
}

static void forget_prog_info(struct perf_env *env, u32 id)
{
	struct bpf_prog_info_node *node = perf_env__find_bpf_prog_info(env, id);

	if (!node)
		return;
	down_write(&env->bpf_progs.lock);
	rb_erase(&node->rb_node, &env->bpf_progs.infos);
	env->bpf_progs.infos_cnt--;
	up_write(&env->bpf_progs.lock);
	zfree(&node->info_linear);
	free(node);
}

static void forget_btf(struct perf_env *env, u32 id)
{
	struct btf_node *node = id ? perf_env__find_btf(env, id) : NULL;

	if (!node)
		return;
	down_write(&env->bpf_progs.lock);
	rb_erase(&node->rb_node, &env->bpf_progs.btfs);
	env->bpf_progs.btfs_cnt--;
	up_write(&env->bpf_progs.lock);
	free(node);
}

/*
 * perf record keeps the bpf_prog_info and BTF of every BPF program loaded
 * while it runs, for the symbols of BPF code in kernel stacks.  Ours are
 * in no stack of the recording (their frames are skipped), and took some
 * 55 KB of every perf.data, more than the stacks of a short run: leave
 * them out of the header.
 */
static void forget_own_progs(struct bpf_bstack *b, struct perf_env *env)
{
	struct bpf_program *prog;

	bpf_object__for_each_program(prog, b->skel->obj) {
		struct bpf_prog_info info = {};
		__u32 len = sizeof(info);
		int fd = bpf_program__fd(prog);

		if (fd < 0 || bpf_prog_get_info_by_fd(fd, &info, &len))
			continue;
		forget_prog_info(env, info.id);
		forget_btf(env, info.btf_id);
	}
}

/*
 * perf record switches to a new output file (--switch-output) after the
 * next drain: the stacks, the events and the JIT images the new file's
 * counts name are written again, into it, so that it reports alone, and
 * its counters start from zero.  That drain leaves the stacks it wrote in
 * the maps: counts taken while it ran name them, and go into the new file.
 */
void bpf_bstack__switch_output(struct bpf_bstack *b)
{
	b->switching = true;
}

static void start_new_file(struct bpf_bstack *b)
{
	struct hashmap_entry *cur;
	size_t bkt;

	b->switching = false;
	hashmap__clear(b->written);
	b->events_written = false;
	hashmap__for_each_entry(b->jit_maps, cur, bkt) {
		struct bstack_jit_map *m = cur->pvalue;

		m->size = 0;
	}
	b->file_base = b->last_stats;
}

int bpf_bstack__write(struct bpf_bstack *b, struct perf_session *session, bool final)
{
	struct bstack_writer *w;
	struct evsel *evsel;
	int active, err, bytes;
	u32 map;

	/* perf record failed to open its events: nothing was recorded */
	if (b->drained_final || !session->evlist)
		return 0;

	evsel = evlist__find_evsel_by_str(session->evlist, BPF_BSTACK_EVENT);
	if (!evsel) {
		pr_err("%s event not found\n", BPF_BSTACK_EVENT);
		return 0;
	}
	if (evsel->core.attr.sample_type & ~BSTACK_SAMPLE_TYPES) {
		pr_err("unsupported sample type %#" PRIx64 "\n",
		       (u64)evsel->core.attr.sample_type);
		return 0;
	}

	w = zalloc(sizeof(*w));
	if (!w)
		return 0;
	w->b = b;
	w->session = session;
	w->sample_type = evsel->core.attr.sample_type;
	w->sample_id_all = evsel->core.attr.sample_id_all;
	if (evsel->core.id)
		w->sid = evsel->core.id[0];
	w->now = rdclock();	/* CLOCK_MONOTONIC, as bpf_ktime_get_ns() */
	/* a reader decompresses each batch into a buffer of perf record's mmap size */
	w->zsize = session->header.env.comp_mmap_len;
	if (session->zstd_data.comp_level > 0 && w->zsize >= PERF_SAMPLE_MAX_SIZE) {
		w->zbuf = malloc(w->zsize);
		w->zout = malloc(2 * w->zsize);
		if (!w->zbuf || !w->zout) {
			zfree(&w->zbuf);	/* written as they come, then */
			zfree(&w->zout);
		}
	}

	if (final)
		b->skel->bss->enabled = 0;

	/* BPF fills the other count map while this one is read */
	active = b->skel->bss->active_counts;
	b->skel->bss->active_counts = !active;
	/* the counters as the counts drained now have them, not the next ones */
	read_stats(b, &b->last_stats);
	/* after the switch: the stacks its counts name are all in the maps */
	for (map = 1; map <= BSTACK_STACK_MAPS; map++)
		dump_stack_map(w, map);
	err = b->events_written ? 0 : write_events(w);
	if (!err)
		err = drain_counts(w, active ? b->skel->maps.bstack_counts1 :
					       b->skel->maps.bstack_counts0);
	/* what is added from now on counts toward the next drain */
	b->skel->bss->counts_added[active] = 0;
	b->skel->bss->stacks_added = 0;
	b->skel->bss->wake_sent = 0;
	b->nr_drains++;
	if (!err && final)
		err = drain_counts(w, active ? b->skel->maps.bstack_counts0 :
					       b->skel->maps.bstack_counts1);
	if (!err)
		err = write_packed_counts(w);
	if (!err)
		err = write_jit_images(w);
	if (!err)
		err = write_stats(w);
	if (!err)
		err = flush_compressed(w);
	if (!err && final)
		forget_own_progs(b, &session->header.env);
	if (!err && !final && !b->switching) {
		/* the BPF program's recalls look the stacks they name up again */
		__atomic_fetch_add(&b->skel->bss->stacks_gen, 1, __ATOMIC_SEQ_CST);
		for (map = 1; map <= BSTACK_STACK_MAPS; map++)
			forget_written_stacks(w, map);
		__atomic_fetch_add(&b->skel->bss->stacks_gen, 1, __ATOMIC_SEQ_CST);
		age_written_stacks(b);
	}
	if (b->switching)
		start_new_file(b);
	if (err)
		pr_err("draining the BPF maps failed: %s\n", strerror(-err));

	b->drained_final = final;
	bytes = w->bytes;
	free_dumps(w);
	free(w->counts);
	free(w->zbuf);
	free(w->zout);
	free(w);
	return bytes;
}
