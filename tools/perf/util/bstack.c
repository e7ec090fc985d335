// SPDX-License-Identifier: GPL-2.0
/*
 * perf bstack: decoding the records of samples, the build-id bookkeeping
 * of the binaries they name, and the summary shown above reports.
 */
#define pr_fmt(fmt) "perf bstack: " fmt

#include <errno.h>
#include <limits.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/time64.h>
#include <linux/bpf.h>
#include <linux/kernel.h>
#include <linux/err.h>
#include <linux/string.h>
#include <linux/zalloc.h>

#include "util/bstack.h"
#include "util/build-id.h"
#include "util/debug.h"
#include "util/dso.h"
#include "util/dsos.h"
#include "util/evsel.h"
#include "util/hashmap.h"
#include "util/header.h"
#include "util/machine.h"
#include "util/map.h"
#include "util/namespaces.h"
#include "util/sample.h"
#include "util/strbuf.h"
#include "util/strlist.h"
#include "util/symbol.h"
#include "bpf_skel/bstack.h"

/* damaged records shown one by one; the others are only counted */
#define BSTACK_DAMAGED_SHOWN	10

/*
 * The settings of perf record --bstack=CONFIG: a comma-separated list of
 * KEY=VALUE and of flags.  The value of a list key (event, uprobe) runs up
 * to the next KEY= or flag, so that it may hold commas itself, and the key
 * may be given again: the values are joined with commas.
 */
enum bstack_opt_type {
	BSTACK_OPT_LIST,
	BSTACK_OPT_U64,
	BSTACK_OPT_INT,
	BSTACK_OPT_UINT,
	BSTACK_OPT_FLAG,
};

static const struct bstack_opt_key {
	const char		*name;
	enum bstack_opt_type	type;
	size_t			offset;
} bstack_opt_keys[] = {
#define BSTACK_OPT(name, type, field) { name, type, offsetof(struct bpf_bstack_opts, field) }
	BSTACK_OPT("event",		BSTACK_OPT_LIST, event),
	BSTACK_OPT("uprobe",		BSTACK_OPT_LIST, uprobes),
	BSTACK_OPT("off-cpu",		BSTACK_OPT_FLAG, off_cpu),
	BSTACK_OPT("freq",		BSTACK_OPT_U64,  freq),
	BSTACK_OPT("count",		BSTACK_OPT_U64,  period),
	BSTACK_OPT("max-stack",		BSTACK_OPT_INT,  max_stack),
	BSTACK_OPT("map-entries",	BSTACK_OPT_INT,  map_entries),
	BSTACK_OPT("count-entries",	BSTACK_OPT_INT,  count_entries),
	BSTACK_OPT("user-stack-only",	BSTACK_OPT_FLAG, user_only),
	BSTACK_OPT("kernel-stack-only",	BSTACK_OPT_FLAG, kernel_only),
	BSTACK_OPT("interval",		BSTACK_OPT_UINT, interval_ms),
	BSTACK_OPT("no-mmap-tracking",	BSTACK_OPT_FLAG, no_mmap_tracking),
	BSTACK_OPT("ip-stacks",		BSTACK_OPT_FLAG, ip_stacks),
	BSTACK_OPT("walk-cost",		BSTACK_OPT_FLAG, walk_cost),
	BSTACK_OPT("no-cfi",		BSTACK_OPT_FLAG, no_cfi),
	BSTACK_OPT("cfi-rows",		BSTACK_OPT_INT,  cfi_rows),
#undef BSTACK_OPT
};

void bpf_bstack__opts_init(struct bpf_bstack_opts *opts)
{
	memset(opts, 0, sizeof(*opts));
	opts->freq = 99;
	opts->max_stack = BPF_BSTACK_MAX_STACK;
	opts->map_entries = 16384;
	opts->count_entries = 65536;
	opts->cfi_rows = 4 << 20;
}

void bpf_bstack__opts_exit(struct bpf_bstack_opts *opts)
{
	zfree(&opts->event);
	zfree(&opts->uprobes);
}

int bpf_bstack__opts_copy(struct bpf_bstack_opts *to, const struct bpf_bstack_opts *from)
{
	*to = *from;
	to->event = from->event ? strdup(from->event) : NULL;
	to->uprobes = from->uprobes ? strdup(from->uprobes) : NULL;
	if ((from->event && !to->event) || (from->uprobes && !to->uprobes)) {
		bpf_bstack__opts_exit(to);
		return -ENOMEM;
	}
	return 0;
}

/* The key a token of CONFIG starts with, NULL: none, the token continues a list */
static const struct bstack_opt_key *bstack_opt_key(const char *token, const char **value)
{
	size_t i, len = strcspn(token, "=");

	for (i = 0; i < ARRAY_SIZE(bstack_opt_keys); i++) {
		const struct bstack_opt_key *key = &bstack_opt_keys[i];

		if (strlen(key->name) != len || strncmp(token, key->name, len))
			continue;
		if ((key->type == BSTACK_OPT_FLAG) != !token[len])
			return NULL;
		*value = token[len] ? token + len + 1 : NULL;
		return key;
	}
	return NULL;
}

/* Append value to the comma-separated list at *list (NULL: empty) */
int bpf_bstack__list_append(char **list, const char *value)
{
	char *joined;

	if (!*list) {
		*list = strdup(value);
		return *list ? 0 : -ENOMEM;
	}
	if (asprintf(&joined, "%s,%s", *list, value) < 0)
		return -ENOMEM;
	free(*list);
	*list = joined;
	return 0;
}

static int bstack_opt_set(struct bpf_bstack_opts *opts, const struct bstack_opt_key *key,
			  const char *value)
{
	void *field = (void *)opts + key->offset;
	unsigned long long n;
	char *end;

	if (key->type == BSTACK_OPT_FLAG) {
		*(bool *)field = true;
		return 0;
	}
	if (key->type == BSTACK_OPT_LIST)
		return bpf_bstack__list_append(field, value);
	errno = 0;
	n = strtoull(value, &end, 0);
	if (!*value || *end || errno ||
	    (key->type == BSTACK_OPT_INT && n > INT_MAX) ||
	    (key->type == BSTACK_OPT_UINT && n > UINT_MAX))
		return -EINVAL;
	if (key->type == BSTACK_OPT_U64)
		*(u64 *)field = n;
	else if (key->type == BSTACK_OPT_INT)
		*(int *)field = n;
	else
		*(unsigned int *)field = n;
	return 0;
}

int bpf_bstack__parse_opts(struct bpf_bstack_opts *opts, const char *config)
{
	const struct bstack_opt_key *key, *list = NULL;
	char *copy = strdup(config), *token, *saveptr = NULL;
	const char *value;
	int err = copy ? 0 : -ENOMEM;

	for (token = strtok_r(copy, ",", &saveptr); token && !err;
	     token = strtok_r(NULL, ",", &saveptr)) {
		key = bstack_opt_key(token, &value);
		if (key) {
			list = key->type == BSTACK_OPT_LIST ? key : NULL;
			err = bstack_opt_set(opts, key, value);
		} else if (list) {
			err = bpf_bstack__list_append((void *)opts + list->offset, token);
		} else {
			err = -EINVAL;
		}
		if (err == -EINVAL)
			pr_err("--bstack: bad setting '%s' in '%s'\n", token, config);
	}
	free(copy);
	return err;
}

/* The CONFIG of perf record --bstack that gives opts */
int bpf_bstack__opts_config(const struct bpf_bstack_opts *opts, struct strbuf *sb)
{
	const void *base = opts;
	size_t i, start = sb->len;
	int err = 0;

	for (i = 0; i < ARRAY_SIZE(bstack_opt_keys) && !err; i++) {
		const struct bstack_opt_key *key = &bstack_opt_keys[i];
		const void *field = base + key->offset;
		const char *sep = sb->len > start ? "," : "";

		switch (key->type) {
		case BSTACK_OPT_LIST:
			if (*(char * const *)field)
				err = strbuf_addf(sb, "%s%s=%s", sep, key->name,
						  *(char * const *)field);
			break;
		case BSTACK_OPT_FLAG:
			if (*(const bool *)field)
				err = strbuf_addf(sb, "%s%s", sep, key->name);
			break;
		case BSTACK_OPT_U64:
			err = strbuf_addf(sb, "%s%s=%" PRIu64, sep, key->name, *(const u64 *)field);
			break;
		case BSTACK_OPT_INT:
			err = strbuf_addf(sb, "%s%s=%d", sep, key->name, *(const int *)field);
			break;
		case BSTACK_OPT_UINT:
		default:
			err = strbuf_addf(sb, "%s%s=%u", sep, key->name,
					  *(const unsigned int *)field);
			break;
		}
	}
	return err;
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
		/* the first few say why; the summaries count them all */
		if (!nr_damaged || *nr_damaged < BSTACK_DAMAGED_SHOWN)
			pr_warning("skipping a damaged record at time %" PRIu64 ": %s%s\n",
				   sample->time, bpf_bstack__strerror(err),
				   nr_damaged && *nr_damaged == BSTACK_DAMAGED_SHOWN - 1 ?
				   " (more are only counted)" : "");
		if (nr_damaged)
			(*nr_damaged)++;
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
 * processes read while draining; those of kernel modules from the module
 * list of the machine, with their build-ids from sysfs.  With marks, as
 * when recording, each build-id is looked at once, and a file whose
 * build-id changed since it was mapped is not marked: the cache would get
 * the wrong binary.
 */
enum bid_state {
	BID_MARKED = 1,
	BID_UNSEEN,	/* no mapping with this build-id was seen */
	BID_CHANGED,	/* the file is gone or was rebuilt */
};

/* Keys that are already hashes: stack ids, and the head of build-ids */
size_t bpf_bstack__id_hash(long key, void *ctx __maybe_unused)
{
	return key;
}

bool bpf_bstack__id_equal(long a, long b, void *ctx __maybe_unused)
{
	return a == b;
}

long bpf_bstack__bid_key(const u8 *build_id)
{
	long key;

	memcpy(&key, build_id, sizeof(key));
	return key;
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

static int mark_build_id(struct bpf_bstack_marks *marks, struct machine *machine,
			 const u8 *build_id)
{
	long key = bpf_bstack__bid_key(build_id), state;
	struct dso *dso;

	if (marks && hashmap__find(marks->states, key, &state))
		return 0;

	dso = bpf_bstack__find_dso(machine, build_id);
	if (!dso) {
		state = BID_UNSEEN;
	} else if (marks && (dso__is_kcore(dso) ||
			     /* a module's build-id is read from sysfs, not its file */
			     (!dso__kernel(dso) && !dso_file_matches(dso)))) {
		state = BID_CHANGED;
	} else {
		dso__set_hit(dso);
		state = BID_MARKED;
	}
	if (!marks)
		return 0;
	marks->count[state]++;
	return hashmap__add(marks->states, key, state);
}

int bpf_bstack__mark_dsos(struct bpf_bstack_marks *marks, struct machine *machine,
			  struct evsel *evsel, struct perf_sample *sample)
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
	if (stack->kind == BPF_BSTACK_STACK_USER_IP)
		goto out;	/* no build-ids: left to the MMAP2 records */
	if (stack->kind == BPF_BSTACK_STACK_KERNEL || stack->kind == BPF_BSTACK_STACK_KERNEL_BID) {
		struct map *kmap = machine__kernel_map(machine);

		if (kmap)
			dso__set_hit(map__dso(kmap));
		/* and the modules that kernel frames with build-ids name */
		if (stack->kind == BPF_BSTACK_STACK_KERNEL)
			goto out;
	}

	f = bpf_bstack__user_frames(stack);
	for (i = 0; i < stack->nr && !err; i++) {
		if (f[i].status != BPF_STACK_BUILD_ID_VALID)
			continue;
		if (i && !memcmp(f[i].build_id, f[i - 1].build_id, BUILD_ID_SIZE))
			continue;
		err = mark_build_id(marks, machine, f[i].build_id);
	}
out:
	free(copy);
	return err;
}

int bpf_bstack__marks_init(struct bpf_bstack_marks *marks)
{
	memset(marks, 0, sizeof(*marks));
	marks->states = hashmap__new(bpf_bstack__id_hash, bpf_bstack__id_equal, NULL);
	if (IS_ERR(marks->states)) {
		marks->states = NULL;
		return -ENOMEM;
	}
	return 0;
}

void bpf_bstack__marks_exit(struct bpf_bstack_marks *marks)
{
	hashmap__free(marks->states);
	marks->states = NULL;
}

void bpf_bstack__marks_summary(const struct bpf_bstack_marks *marks)
{
	if (marks->count[BID_UNSEEN] || marks->count[BID_CHANGED])
		pr_warning("%u binaries saved, %u never seen mapped, %u gone or rebuilt since: left to the build-id cache and debuginfod at report time\n",
			   marks->count[BID_MARKED], marks->count[BID_UNSEEN],
			   marks->count[BID_CHANGED]);
	else
		pr_debug("%u binaries saved\n", marks->count[BID_MARKED]);
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

double bpf_bstack__pct(u64 part, u64 total)
{
	return total ? 100.0 * part / total : 0.0;
}

static int save_section(struct perf_file_section *section, struct perf_header *ph __maybe_unused,
			int feat, int fd __maybe_unused, void *data)
{
	struct bpf_bstack_sections *s = data;

	s->sec[feat] = *section;
	return 0;
}

void bpf_bstack__read_sections(struct bpf_bstack_sections *s, struct perf_header *header, int fd)
{
	s->fd = fd;
	perf_header__process_sections(header, fd, s, save_section);
}

/* Feature section feat, as it is: 1 when written, 0 if there is none (or a huge one) */
int bpf_bstack__copy_section(struct bpf_bstack_sections *s, int feat, struct feat_writer *fw)
{
	struct perf_file_section *sec = &s->sec[feat];
	void *buf;
	int ret;

	if (!sec->offset || !sec->size || sec->size > (64 << 20))
		return 0;
	buf = malloc(sec->size);
	if (!buf)
		return -ENOMEM;
	ret = pread(s->fd, buf, sec->size, sec->offset) == (ssize_t)sec->size ?
	      fw->write(fw, buf, sec->size) : -EIO;
	free(buf);
	return ret < 0 ? ret : 1;
}

/*
 * The features of header but those of keep cleared; the build-id table and
 * the samples' first and last time set, which the writer makes anew
 */
void bpf_bstack__keep_features(struct perf_header *header, const int *keep, size_t nr)
{
	int feat;
	size_t i;

	for (feat = HEADER_FIRST_FEATURE; feat < HEADER_LAST_FEATURE; feat++) {
		for (i = 0; i < nr; i++)
			if (keep[i] == feat)
				break;
		if (i == nr)
			perf_header__clear_feat(header, feat);
	}
	perf_header__set_feat(header, HEADER_BUILD_ID);
	perf_header__set_feat(header, HEADER_SAMPLE_TIME);
}

/* What the recorder lost, by cause, as both summaries print it */
int bpf_bstack__scnprintf_lost(char *buf, size_t size, const u64 *stat)
{
	int n = scnprintf(buf, size, "lost %" PRIu64 " samples (counts map full), %" PRIu64
			  " user stacks (%" PRIu64 " map full), %" PRIu64 " kernel stacks (%" PRIu64
			  " map full)", stat[BPF_BSTACK_STAT_COUNTS_FULL],
			  bpf_bstack__lost_stacks(stat, true), stat[BPF_BSTACK_STAT_USER_FULL],
			  bpf_bstack__lost_stacks(stat, false), stat[BPF_BSTACK_STAT_KERN_FULL]);

	/* the kernel did not run the program: another BPF program was running on the CPU */
	n += scnprintf(buf + n, size - n, ", %" PRIu64 " hits skipped by the kernel (%" PRIu64
		       " nested too deep)", stat[BPF_BSTACK_STAT_RECURSION_MISSES] +
		       stat[BPF_BSTACK_STAT_NESTED_LOST], stat[BPF_BSTACK_STAT_NESTED_LOST]);
	return n;
}

static const char *kernel_found_str(enum bpf_bstack_kernel_found found)
{
	switch (found) {
	case BPF_BSTACK_KERNEL_RUNNING:
		return "running here";
	case BPF_BSTACK_KERNEL_CACHED:
		return "symbols from the build-id cache";
	case BPF_BSTACK_KERNEL_MISSING:
		return "no symbols: its vmlinux is in no build-id cache";
	case BPF_BSTACK_KERNEL_GIVEN:
		return "symbols from --vmlinux or --kallsyms, when their build-id matches";
	case BPF_BSTACK_KERNEL_UNKNOWN:
	default:
		return "not in the header";
	}
}

/* The machines of a merge, as its comm names call them: "host:comm" */
static void print_hosts(const struct bpf_bstack_summary *s, FILE *fp)
{
	u32 i;

	fprintf(fp, "# bstack: a merge of %u machines (comm is host:comm):\n", s->nr_hosts);
	for (i = 0; i < s->nr_hosts; i++) {
		const struct bpf_bstack_summary_host *h = &s->hosts[i];
		time_t sec = h->start_ns / NSEC_PER_SEC;
		char date[64] = "an unknown time";
		struct tm tm;

		if (h->start_ns && gmtime_r(&sec, &tm))
			strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S UTC", &tm);
		fprintf(fp, "# bstack:   %s: %" PRIu64 " samples, from %s\n",
			h->declared ? h->name : "?", h->samples, date);
	}
}

/* What the recorder's unwind tables did within their rows (--cfi-rows) */
static void print_tables(const u64 *stat, FILE *fp)
{
	fprintf(fp, "# bstack: unwind tables: %" PRIu64 " loaded (%" PRIu64
		" again after they left), %" PRIu64 " reclaimed (no process mapped them), %"
		PRIu64 " evicted (not used for a while)",
		stat[BPF_BSTACK_STAT_TABLES_LOADED], stat[BPF_BSTACK_STAT_TABLES_RELOADED],
		stat[BPF_BSTACK_STAT_TABLES_RECLAIMED], stat[BPF_BSTACK_STAT_TABLES_EVICTED]);
	fprintf(fp, ", %" PRIu64 " found no room", stat[BPF_BSTACK_STAT_TABLES_NO_ROOM]);
	if (stat[BPF_BSTACK_STAT_TABLES_TOO_LARGE])
		fprintf(fp, " (%" PRIu64 " larger than all the rows)",
			stat[BPF_BSTACK_STAT_TABLES_TOO_LARGE]);
	fprintf(fp, ", %" PRIu64 " rows of %" PRIu64 " in use at the end, %" PRIu64
		" frames by frame pointer while their table was not loaded\n",
		stat[BPF_BSTACK_STAT_TABLE_ROWS], stat[BPF_BSTACK_STAT_TABLE_ROWS_MAX],
		stat[BPF_BSTACK_STAT_CFI_FP_UNLOADED]);
}

void bpf_bstack__summary_fprintf(const struct bpf_bstack_summary *s, FILE *fp)
{
	u64 frames = s->nr_valid_frames + s->nr_ip_frames;
	struct str_node *pos;
	char lost[256];

	fprintf(fp, "# bstack: %" PRIu64 " samples in %" PRIu64 " counts, %" PRIu64
		" unique user and %" PRIu64 " kernel stacks\n",
		s->has_stats ? s->stat[BPF_BSTACK_STAT_SAMPLES] : s->nr_samples,
		s->nr_counts, s->nr_user_stacks, s->nr_kern_stacks);
	if (s->nr_hosts > 1)
		print_hosts(s, fp);
	if (s->has_stats) {
		bpf_bstack__scnprintf_lost(lost, sizeof(lost), s->stat);
		fprintf(fp, "# bstack: %s\n", lost);
	} else
		fprintf(fp, "# bstack: no recorder counters in the file: losses unknown\n");
	if (s->stat[BPF_BSTACK_STAT_CFI_STACKS]) {
		u64 cfi = s->stat[BPF_BSTACK_STAT_CFI_STACKS];

		fprintf(fp, "# bstack: user stacks: %" PRIu64 " walked with unwind tables", cfi);
		fprintf(fp, " (%.1f%% to the bottom, %" PRIu64
			" of them the CPU's last walk again)",
			bpf_bstack__pct(s->stat[BPF_BSTACK_STAT_CFI_COMPLETE], cfi),
			s->stat[BPF_BSTACK_STAT_CFI_WALKS_RECALLED]);
		fprintf(fp, ", %" PRIu64 " by frame pointer", s->stat[BPF_BSTACK_STAT_FP_STACKS]);
		if (s->stat[BPF_BSTACK_STAT_CFI_IN_EXEC])
			fprintf(fp, " (%" PRIu64 " of them inside execve())",
				s->stat[BPF_BSTACK_STAT_CFI_IN_EXEC]);
		fprintf(fp, "\n");
	}
	if (s->stat[BPF_BSTACK_STAT_TABLE_ROWS_MAX])
		print_tables(s->stat, fp);
	fprintf(fp, "# bstack: user frames: %.1f%% with build-id, %.1f%% as IP (%" PRIu64
		" of %" PRIu64 " found in recorded maps), %" PRIu64 " bogus offsets, %" PRIu64
		" unknown\n",
		bpf_bstack__pct(s->nr_valid_frames, frames),
		bpf_bstack__pct(s->nr_ip_frames, frames),
		s->nr_ip_resolved, s->nr_ip_frames, s->nr_bogus_frames, s->nr_unknown_frames);
	if (s->nr_weighted)
		fprintf(fp, "# bstack: %" PRIu64 " counts too big to write sample by sample\n"
			"# bstack: are one sample each, weighted by their count\n", s->nr_weighted);
	if (s->nr_ip_ambiguous)
		fprintf(fp, "# bstack: %" PRIu64 " of the unknown are IP frames at an address\n"
			"# bstack: that held several files while counted (--interval counts for\n"
			"# bstack: less time)\n", s->nr_ip_ambiguous);
	if (s->nr_damaged || s->nr_missing_stacks || s->nr_no_stack)
		fprintf(fp, "# bstack: %" PRIu64 " damaged records skipped, %" PRIu64
			" counts of missing stacks, %" PRIu64 " samples without stacks\n",
			s->nr_damaged, s->nr_missing_stacks, s->nr_no_stack);
	if (s->nr_kern_bid_frames) {
		fprintf(fp, "# bstack: %" PRIu64 " kernel frames as build-id + offset, %" PRIu64
			" of them in %u module%s (%u without symbols), %" PRIu64
			" bogus and %" PRIu64 " of no module map (shown as unknown)\n",
			s->nr_kern_bid_frames, s->nr_kern_module_frames, s->nr_kmods,
			s->nr_kmods == 1 ? "" : "s", s->nr_kmods_missing,
			s->nr_kern_bogus_frames, s->nr_kern_unplaced_frames);
		fprintf(fp, "# bstack: kernel %s: %s\n", s->kernel_bid,
			kernel_found_str(s->kernel_found));
	}
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

/* The report was given the kernel's symbols: it is missing no more */
void bpf_bstack__summary_kernel_given(struct bpf_bstack_summary *sum)
{
	struct str_node *pos, *tmp;

	if (sum->kernel_found != BPF_BSTACK_KERNEL_MISSING)
		return;
	sum->kernel_found = BPF_BSTACK_KERNEL_GIVEN;
	if (!sum->missing)
		return;
	strlist__for_each_entry_safe(pos, tmp, sum->missing)
		if (strstarts(pos->s, sum->kernel_bid))
			strlist__remove(sum->missing, pos);
	if (!strlist__nr_entries(sum->missing)) {
		strlist__delete(sum->missing);
		sum->missing = NULL;
	}
}

void bpf_bstack__summary_exit(struct bpf_bstack_summary *sum)
{
	strlist__delete(sum->missing);
	sum->missing = NULL;
	zfree(&sum->hosts);
	sum->nr_hosts = 0;
}
