// SPDX-License-Identifier: GPL-2.0
/*
 * The perf bstack payload: encoding helpers, validation, byte swapping,
 * and the build-id bookkeeping perf record needs for bstack samples.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <byteswap.h>
#include <linux/bpf.h>
#include <linux/kernel.h>
#include <linux/err.h>
#include <linux/zalloc.h>

#include "util/bstack.h"
#include "util/build-id.h"
#include "util/debug.h"
#include "util/dso.h"
#include "util/dsos.h"
#include "util/evsel.h"
#include "util/hashmap.h"
#include "util/machine.h"
#include "util/map.h"
#include "util/namespaces.h"
#include "util/sample.h"
#include "util/strlist.h"
#include "util/symbol.h"
#include "bpf_skel/bstack.h"

static_assert(sizeof(struct bpf_bstack_frame) == sizeof(struct bpf_stack_build_id),
	      "bstack frames must have the kernel's layout");
static_assert(sizeof(struct bpf_bstack_rec_stack) % sizeof(u64) == 0, "aligned");
static_assert(sizeof(struct bpf_bstack_rec_count) % sizeof(u64) == 0, "aligned");

struct bpf_bstack_opts bpf_bstack__opts = {
	.event		= "cpu-clock",
	.freq		= 99,
	.max_stack	= BPF_BSTACK_MAX_STACK,
	.map_entries	= 16384,
	.count_entries	= 65536,
};

static const char * const stat_names[BPF_BSTACK_STAT_MAX] = {
	[BPF_BSTACK_STAT_SAMPLES]	 = "samples",
	[BPF_BSTACK_STAT_USER_NONE]	 = "samples without user stack",
	[BPF_BSTACK_STAT_USER_ERR]	 = "user stacks lost (bpf_get_stack failed)",
	[BPF_BSTACK_STAT_KERN_ERR]	 = "kernel stacks lost (bpf_get_stack failed)",
	[BPF_BSTACK_STAT_USER_FULL]	 = "user stacks lost (stack map full)",
	[BPF_BSTACK_STAT_KERN_FULL]	 = "kernel stacks lost (stack map full)",
	[BPF_BSTACK_STAT_COUNTS_FULL]	 = "samples lost (counts map full)",
	[BPF_BSTACK_STAT_USER_FRAMES]	 = "user frames",
	[BPF_BSTACK_STAT_USER_IP_FRAMES] = "user frames as IP (no build-id)",
};

const char *bpf_bstack__stat_name(int stat)
{
	if (stat < 0 || stat >= BPF_BSTACK_STAT_MAX)
		return "unknown counter";
	return stat_names[stat];
}

static size_t frame_size(u32 kind)
{
	switch (kind) {
	case BPF_BSTACK_STACK_USER:
		return sizeof(struct bpf_bstack_frame);
	case BPF_BSTACK_STACK_KERNEL:
	case BPF_BSTACK_STACK_USER_IP:
		return sizeof(u64);
	default:
		return 0;
	}
}

size_t bpf_bstack__stack_size(u32 kind, u32 nr)
{
	return sizeof(struct bpf_bstack_rec_stack) + frame_size(kind) * nr;
}

size_t bpf_bstack__stats_size(u32 nr)
{
	return sizeof(struct bpf_bstack_rec_stats) + nr * sizeof(u64);
}

void bpf_bstack__init_hdr(struct bpf_bstack_rec_hdr *hdr, u16 type, u32 size)
{
	hdr->version = BPF_BSTACK_PAYLOAD_VERSION;
	hdr->type = type;
	hdr->size = size;
}

static void swap_hdr(struct bpf_bstack_rec_hdr *hdr)
{
	hdr->version = bswap_16(hdr->version);
	hdr->type = bswap_16(hdr->type);
	hdr->size = bswap_32(hdr->size);
}

static void swap_u64s(u64 *p, size_t n)
{
	while (n--) {
		*p = bswap_64(*p);
		p++;
	}
}

static void swap_stack(struct bpf_bstack_rec_stack *stack, bool to_host)
{
	u32 kind, nr, i;

	if (!to_host) {
		kind = stack->kind;
		nr = stack->nr;
	}
	stack->id = bswap_64(stack->id);
	stack->kind = bswap_32(stack->kind);
	stack->nr = bswap_32(stack->nr);
	if (to_host) {
		kind = stack->kind;
		nr = stack->nr;
	}
	if (bpf_bstack__stack_size(kind, nr) > stack->hdr.size)
		return;		/* left for bpf_bstack__decode() to reject */

	if (kind == BPF_BSTACK_STACK_KERNEL || kind == BPF_BSTACK_STACK_USER_IP) {
		swap_u64s(bpf_bstack__kernel_ips(stack), nr);
	} else if (kind == BPF_BSTACK_STACK_USER) {
		struct bpf_bstack_frame *f = bpf_bstack__user_frames(stack);

		for (i = 0; i < nr; i++) {
			f[i].status = bswap_32(f[i].status);
			f[i].offset = bswap_64(f[i].offset);
		}
	}
}

static void swap_count(struct bpf_bstack_rec_count *c)
{
	swap_u64s(&c->user_stack, 5);
	c->pid = bswap_32(c->pid);
	c->tid = bswap_32(c->tid);
	c->cpu = bswap_32(c->cpu);
	c->reserved = bswap_32(c->reserved);
}

static void swap_stats(struct bpf_bstack_rec_stats *s, bool to_host)
{
	u32 nr = s->nr;

	s->nr = bswap_32(s->nr);
	s->reserved = bswap_32(s->reserved);
	if (to_host)
		nr = s->nr;
	if (bpf_bstack__stats_size(nr) <= s->hdr.size)
		swap_u64s(s->stat, nr);
}

/*
 * Swap a record between the recording machine's byte order and ours.
 * The header tells how much there is, so it is read in host order: after
 * swapping when coming from a file (to_host), before when going to one.
 * Sizes are checked against the header's size, not trusted.
 */
void bpf_bstack__swap(void *rec, bool to_host)
{
	struct bpf_bstack_rec_hdr *hdr = rec;
	u16 type;
	u32 size;

	if (to_host)
		swap_hdr(hdr);
	type = hdr->type;
	size = hdr->size;

	if (type == BPF_BSTACK_REC_STACK && size >= sizeof(struct bpf_bstack_rec_stack))
		swap_stack(rec, to_host);
	else if (type == BPF_BSTACK_REC_COUNT && size >= sizeof(struct bpf_bstack_rec_count))
		swap_count(rec);
	else if (type == BPF_BSTACK_REC_STATS && size >= sizeof(struct bpf_bstack_rec_stats))
		swap_stats(rec, to_host);

	if (!to_host)
		swap_hdr(hdr);
}

static int check_stack(const struct bpf_bstack_rec_stack *stack)
{
	if (stack->hdr.size < sizeof(*stack))
		return -EBADMSG;
	if (!frame_size(stack->kind))
		return -ENOTSUP;
	if (stack->nr > BPF_BSTACK_MAX_FRAMES)
		return -E2BIG;
	if (bpf_bstack__stack_size(stack->kind, stack->nr) != stack->hdr.size)
		return -EBADMSG;
	if (!stack->id)
		return -EINVAL;
	return 0;
}

static int check_record(const struct bpf_bstack_rec_hdr *hdr)
{
	const struct bpf_bstack_rec_stats *stats;

	switch (hdr->type) {
	case BPF_BSTACK_REC_STACK:
		return check_stack((const void *)hdr);
	case BPF_BSTACK_REC_COUNT:
		return hdr->size == sizeof(struct bpf_bstack_rec_count) ? 0 : -EBADMSG;
	case BPF_BSTACK_REC_STATS:
		stats = (const void *)hdr;
		if (hdr->size < sizeof(*stats))
			return -EBADMSG;
		if (stats->nr > BPF_BSTACK_MAX_STATS)
			return -E2BIG;
		return bpf_bstack__stats_size(stats->nr) == hdr->size ? 0 : -EBADMSG;
	default:
		return -ENOTSUP;
	}
}

/*
 * Check a bstack payload from a file and return it in host byte order:
 * *rec points into raw, or into *copy (to be freed) when it had to be
 * swapped.  Records are 8-byte aligned in the file; raw may be padded.
 */
int bpf_bstack__decode(const void *raw, u32 raw_size, bool needs_swap,
		       struct bpf_bstack_rec_hdr **rec, void **copy)
{
	struct bpf_bstack_rec_hdr hdr;
	int err;

	*rec = NULL;
	*copy = NULL;
	if (!raw || raw_size < sizeof(hdr))
		return -EBADMSG;

	memcpy(&hdr, raw, sizeof(hdr));
	if (needs_swap)
		swap_hdr(&hdr);
	if (hdr.version != BPF_BSTACK_PAYLOAD_VERSION)
		return -EPROTO;
	if (hdr.size < sizeof(hdr) || hdr.size > raw_size)
		return -EBADMSG;

	if (needs_swap || ((unsigned long)raw % sizeof(u64))) {
		*copy = malloc(hdr.size);
		if (!*copy)
			return -ENOMEM;
		memcpy(*copy, raw, hdr.size);
		if (needs_swap)
			bpf_bstack__swap(*copy, /*to_host=*/true);
		*rec = *copy;
	} else {
		*rec = (struct bpf_bstack_rec_hdr *)raw;
	}

	err = check_record(*rec);
	if (err) {
		zfree(copy);
		*rec = NULL;
	}
	return err;
}

const char *bpf_bstack__strerror(int err)
{
	switch (err) {
	case -EBADMSG:
		return "record size does not match its contents";
	case -EPROTO:
		return "unknown payload version";
	case -ENOTSUP:
		return "unknown record or stack type";
	case -E2BIG:
		return "too many frames or counters";
	case -EINVAL:
		return "stack without id";
	case -ENOMEM:
		return "out of memory";
	default:
		return "invalid record";
	}
}

/*
 * The bstack record of a sample, or NULL for samples of other events and
 * for damaged records, which are warned about and counted in *nr_damaged.
 */
struct bpf_bstack_rec_hdr *bpf_bstack__sample_record(struct evsel *evsel,
						     struct perf_sample *sample,
						     void **copy, u64 *nr_damaged)
{
	struct bpf_bstack_rec_hdr *hdr;
	int err;

	*copy = NULL;
	if (!bpf_bstack__is_event(evsel))
		return NULL;
	err = bpf_bstack__decode(sample->raw_data, sample->raw_size, evsel->needs_swap,
				 &hdr, copy);
	if (err) {
		if (nr_damaged)
			(*nr_damaged)++;
		pr_warning("bstack: skipping a damaged record at time %" PRIu64 ": %s\n",
			   sample->time, bpf_bstack__strerror(err));
		return NULL;
	}
	return hdr;
}

bool bpf_bstack__is_event(struct evsel *evsel)
{
	return evsel && evsel__name_is(evsel, BPF_BSTACK_EVENT);
}

/*
 * perf marks the DSOs that sample->ip lands in, and bstack samples have no
 * IP: mark the DSO of every build-id a stack names instead, so it goes into
 * HEADER_BUILD_ID and the build-id cache (perf record), or counts as hit
 * (perf buildid-list --with-hits, perf archive).  The DSOs come from the
 * header, the MMAP2 records (which carry build-ids) or the maps of live
 * processes read while draining.  With check_files, as when recording, a
 * file whose build-id changed since it was mapped is not marked: the cache
 * would get the wrong binary.
 */
enum bid_state {
	BID_MARKED = 1,
	BID_UNSEEN,	/* no mapping with this build-id was seen */
	BID_CHANGED,	/* the file is gone or was rebuilt */
};

static struct hashmap *bid_states;
static unsigned int bid_count[BID_CHANGED + 1];

static size_t bid_hash(long key, void *ctx __maybe_unused)
{
	return key;
}

static bool bid_equal(long a, long b, void *ctx __maybe_unused)
{
	return a == b;
}

struct find_bid {
	struct build_id bid;
	struct dso *dso;
};

static int find_bid_cb(struct dso *dso, void *data)
{
	struct find_bid *args = data;

	if (dso__has_build_id(dso) && dso__build_id_equal(dso, &args->bid)) {
		args->dso = dso;
		return 1;
	}
	return 0;
}

struct dso *bpf_bstack__find_dso(struct machine *machine, const u8 *build_id)
{
	struct find_bid args = { .dso = NULL, };

	build_id__init(&args.bid, build_id, BUILD_ID_SIZE);
	dsos__for_each_dso(&machine->dsos, find_bid_cb, &args);
	return args.dso;
}

static bool dso_file_matches(struct dso *dso)
{
	struct build_id bid;
	struct nscookie nsc;
	int ret;

	nsinfo__mountns_enter(dso__nsinfo(dso), &nsc);
	ret = filename__read_build_id(dso__long_name(dso), &bid);
	nsinfo__mountns_exit(&nsc);
	return ret > 0 && dso__build_id_equal(dso, &bid);
}

static int mark_build_id(struct machine *machine, const u8 *build_id, bool check_files)
{
	long key, state;
	struct dso *dso;

	memcpy(&key, build_id, sizeof(key));
	if (hashmap__find(bid_states, key, &state))
		return 0;

	dso = bpf_bstack__find_dso(machine, build_id);
	if (!dso) {
		state = BID_UNSEEN;
	} else if (check_files && (dso__is_kcore(dso) || !dso_file_matches(dso))) {
		state = BID_CHANGED;
	} else {
		dso__set_hit(dso);
		state = BID_MARKED;
	}
	bid_count[state]++;
	return hashmap__add(bid_states, key, state);
}

int bpf_bstack__mark_dsos(struct machine *machine, struct evsel *evsel,
			  struct perf_sample *sample, bool check_files)
{
	struct bpf_bstack_rec_hdr *hdr;
	struct bpf_bstack_rec_stack *stack;
	struct bpf_bstack_frame *f;
	void *copy;
	int err = 0;
	u32 i;

	hdr = bpf_bstack__sample_record(evsel, sample, &copy, NULL);
	if (!hdr || hdr->type != BPF_BSTACK_REC_STACK)
		goto out;

	stack = (void *)hdr;
	if (stack->kind == BPF_BSTACK_STACK_KERNEL) {
		struct map *kmap = machine__kernel_map(machine);

		if (kmap)
			dso__set_hit(map__dso(kmap));
		goto out;
	}

	if (!bid_states) {
		bid_states = hashmap__new(bid_hash, bid_equal, NULL);
		if (IS_ERR(bid_states)) {
			bid_states = NULL;
			err = -ENOMEM;
			goto out;
		}
	}

	f = bpf_bstack__user_frames(stack);
	for (i = 0; i < stack->nr && !err; i++) {
		if (f[i].status != BPF_STACK_BUILD_ID_VALID)
			continue;
		if (i && !memcmp(f[i].build_id, f[i - 1].build_id, BUILD_ID_SIZE))
			continue;
		err = mark_build_id(machine, f[i].build_id, check_files);
	}
out:
	free(copy);
	return err;
}

void bpf_bstack__mark_summary(void)
{
	if (bid_count[BID_UNSEEN] || bid_count[BID_CHANGED])
		pr_warning("bstack: %u binaries saved, %u never seen mapped, %u gone or rebuilt since: left to the build-id cache and debuginfod at report time\n",
			   bid_count[BID_MARKED], bid_count[BID_UNSEEN],
			   bid_count[BID_CHANGED]);
	else
		pr_debug("bstack: %u binaries saved\n", bid_count[BID_MARKED]);
	hashmap__free(bid_states);
	bid_states = NULL;
	memset(bid_count, 0, sizeof(bid_count));
}

void bpf_bstack__summary_add_missing(struct bpf_bstack_summary *sum, const char *sbid,
				     const char *name)
{
	char *entry;

	if (!sum->missing)
		sum->missing = strlist__new(NULL, NULL);
	if (!sum->missing || asprintf(&entry, "%s %s", sbid, name ?: "") < 0)
		return;
	strlist__add(sum->missing, entry);
	free(entry);
}

u64 bpf_bstack__summary_lost(const struct bpf_bstack_summary *sum)
{
	return sum->stat[BPF_BSTACK_STAT_COUNTS_FULL];
}

static double pct(u64 part, u64 total)
{
	return total ? 100.0 * part / total : 0.0;
}

void bpf_bstack__summary_fprintf(const struct bpf_bstack_summary *s, FILE *fp)
{
	u64 frames = s->nr_valid_frames + s->nr_ip_frames;
	struct str_node *pos;

	fprintf(fp, "# bstack: %" PRIu64 " samples in %" PRIu64 " counts, %" PRIu64
		" unique user and %" PRIu64 " kernel stacks\n",
		s->has_stats ? s->stat[BPF_BSTACK_STAT_SAMPLES] : s->nr_samples,
		s->nr_counts, s->nr_user_stacks, s->nr_kern_stacks);
	if (s->has_stats)
		fprintf(fp, "# bstack: lost %" PRIu64 " samples (counts map full), %" PRIu64
			" user stacks (%" PRIu64 " map full), %" PRIu64 " kernel stacks (%" PRIu64
			" map full)\n",
			s->stat[BPF_BSTACK_STAT_COUNTS_FULL],
			s->stat[BPF_BSTACK_STAT_USER_ERR] + s->stat[BPF_BSTACK_STAT_USER_FULL],
			s->stat[BPF_BSTACK_STAT_USER_FULL],
			s->stat[BPF_BSTACK_STAT_KERN_ERR] + s->stat[BPF_BSTACK_STAT_KERN_FULL],
			s->stat[BPF_BSTACK_STAT_KERN_FULL]);
	else
		fprintf(fp, "# bstack: no recorder counters in the file: losses unknown\n");
	fprintf(fp, "# bstack: user frames: %.1f%% with build-id, %.1f%% as IP (%" PRIu64
		" of %" PRIu64 " found in recorded maps), %" PRIu64 " bogus offsets, %" PRIu64
		" unknown\n",
		pct(s->nr_valid_frames, frames), pct(s->nr_ip_frames, frames),
		s->nr_ip_resolved, s->nr_ip_frames, s->nr_bogus_frames, s->nr_unknown_frames);
	if (s->nr_damaged || s->nr_missing_stacks || s->nr_no_stack)
		fprintf(fp, "# bstack: %" PRIu64 " damaged records skipped, %" PRIu64
			" counts of missing stacks, %" PRIu64 " samples without stacks\n",
			s->nr_damaged, s->nr_missing_stacks, s->nr_no_stack);
	if (s->nr_fetched)
		fprintf(fp, "# bstack: %" PRIu64 " binaries fetched from debuginfod\n",
			s->nr_fetched);
	if (!s->missing)
		return;
	fprintf(fp, "# bstack: %u binaries found in no build-id cache (add them with\n"
		"# bstack: 'perf buildid-cache -a FILE', or set DEBUGINFOD_URLS):\n",
		strlist__nr_entries(s->missing));
	strlist__for_each_entry(pos, s->missing)
		fprintf(fp, "# bstack:   %s\n", pos->s);
}

void bpf_bstack__summary_exit(struct bpf_bstack_summary *sum)
{
	strlist__delete(sum->missing);
	sum->missing = NULL;
}
