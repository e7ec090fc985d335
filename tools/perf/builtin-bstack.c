// SPDX-License-Identifier: GPL-2.0
/*
 * builtin-bstack.c
 *
 * perf bstack: record user stacks as (build-id, file offset) with BPF
 * build-id stack maps, and report them through the build-id cache.
 */
#define pr_fmt(fmt) "perf bstack: " fmt

#include "builtin.h"

#include <subcmd/exec-cmd.h>
#include <subcmd/parse-options.h>
#include <linux/string.h>
#include <linux/compiler.h>
#include <string.h>

#include "util/bstack.h"
#include "util/bstack-flamegraph.h"
#include "util/bstack-pprof.h"
#include "util/addr_location.h"
#include "util/callchain.h"
#include "util/config.h"
#include "util/data.h"
#include "util/dso.h"
#include "util/hashmap.h"
#include "util/machine.h"
#include "util/map.h"
#include "util/strbuf.h"
#include "util/symbol.h"
#include "util/thread.h"
#include "util/debug.h"
#include "util/event.h"
#include "util/evlist.h"
#include "util/evsel.h"
#include "util/sample.h"
#include "util/session.h"
#include "util/tool.h"
#include "util/util.h"

#include <inttypes.h>
#include <linux/bpf.h>
#include <linux/err.h>

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <stdlib.h>
#include <linux/zalloc.h>

/* What 'perf bstack record' hands on to 'perf record' */
struct bstack_record_args {
	struct bpf_bstack_opts	opts;	/* as --bstack=CONFIG */
	bool		system_wide;
	bool		quiet;
	bool		no_buildid_cache;
	const char	*pid;
	const char	*tid;
	const char	*cpu_list;
	const char	*uid;
	const char	*output;
	const char	*duration;
	const char	*comp_level;	/* -z: zstd level of perf record */
	const char	*switch_output;	/* signal, a size or a time, as perf record's */
	const char	*switch_max_files;
};

static const char * const bstack_record_usage[] = {
	"perf bstack record [<options>] [<command>]",
	NULL
};

static const char * const bstack_script_usage[] = {
	"perf bstack script [<options>]",
	NULL
};

static const char * const bstack_inject_usage[] = {
	"perf bstack inject -i <bstack perf.data> -o <perf.data>",
	NULL
};

static const char * const bstack_merge_usage[] = {
	"perf bstack merge -o <perf.data> <bstack perf.data>...",
	NULL
};

static const char * const bstack_report_usage[] = {
	"perf bstack report [<options>] [<perf report options>]",
	NULL
};

/* -e and --uprobe may be given many times: a comma-separated list of all */
static int append_list(const struct option *opt, const char *arg, int unset)
{
	char **list = opt->value;

	if (unset) {
		zfree(list);
		return 0;
	}
	return bpf_bstack__list_append(list, arg);
}

/* With -v: the perf command line a subcommand runs, as one message */
static void print_calling(const char **argv, int argc)
{
	struct strbuf sb = STRBUF_INIT;
	int i;

	if (verbose <= 0)
		return;
	for (i = 0; i < argc; i++)
		strbuf_addf(&sb, " %s", argv[i]);
	pr_debug("calling: perf%s\n", sb.buf ?: "");
	strbuf_release(&sb);
}

static void add_arg(const char **argv, int *argc, const char *opt, const char *val)
{
	if (!val)
		return;
	argv[(*argc)++] = opt;
	argv[(*argc)++] = val;
}

static bool has_target(const struct bstack_record_args *a)
{
	return a->system_wide || a->pid || a->tid || a->cpu_list || a->uid;
}

/*
 * Build a perf record command line: target handling, output, signals and
 * header features all come from perf record, and --bstack does the rest.
 * The sampling events are our own per-CPU events, so perf record itself
 * only opens the bstack placeholder and a dummy event for tracking.
 */
static int bstack_record(struct bstack_record_args *rec_args, int argc, const char **argv)
{
	struct strbuf config = STRBUF_INIT;
	const char **rec_argv;
	char comp[64], so[64];
	int i = 0, j, ret;

	if (rec_args->duration && argc) {
		pr_err("record: --duration and a command exclude each other\n");
		return -EINVAL;
	}

	rec_argv = calloc(argc + 32, sizeof(char *));
	if (!rec_argv || strbuf_addstr(&config, "--bstack=") ||
	    bpf_bstack__opts_config(&rec_args->opts, &config)) {
		free(rec_argv);
		strbuf_release(&config);
		return -ENOMEM;
	}

	rec_argv[i++] = "record";
	rec_argv[i++] = config.buf;
	rec_argv[i++] = "-e";
	rec_argv[i++] = "dummy";
	if (rec_args->opts.no_mmap_tracking) {
		rec_argv[i++] = "--synth=no";
		rec_argv[i++] = "--no-bpf-event";
	}
	/* no target and no command: the whole system, like -a */
	if (rec_args->system_wide || (!has_target(rec_args) && !argc))
		rec_argv[i++] = "-a";
	add_arg(rec_argv, &i, "-p", rec_args->pid);
	add_arg(rec_argv, &i, "-t", rec_args->tid);
	add_arg(rec_argv, &i, "-C", rec_args->cpu_list);
	add_arg(rec_argv, &i, "-u", rec_args->uid);
	add_arg(rec_argv, &i, "-o", rec_args->output);
	if (rec_args->quiet)
		rec_argv[i++] = "-q";
	if (rec_args->no_buildid_cache)
		rec_argv[i++] = "-N";
	if (rec_args->comp_level) {
		snprintf(comp, sizeof(comp), "--compression-level=%s", rec_args->comp_level);
		rec_argv[i++] = comp;
	}
	if (rec_args->switch_output) {
		snprintf(so, sizeof(so), "--switch-output=%s", rec_args->switch_output);
		rec_argv[i++] = so;
	}
	add_arg(rec_argv, &i, "--switch-max-files", rec_args->switch_max_files);
	if (rec_args->duration) {
		rec_argv[i++] = "--";
		rec_argv[i++] = "sleep";
		rec_argv[i++] = rec_args->duration;
	} else if (argc) {
		rec_argv[i++] = "--";
		for (j = 0; j < argc; j++)
			rec_argv[i++] = argv[j];
	}

	print_calling(rec_argv, i);
	ret = cmd_record(i, rec_argv);
	free(rec_argv);
	strbuf_release(&config);
	return ret;
}

static bool force;
static bool report_folded;
static bool inject_aggregate;	/* inject --aggregate */
static const char *report_pprof;	/* --pprof FILE */
static const char *report_flamegraph;	/* --flamegraph FILE.html */
static bool report_pprof_raw;
static const char *report_pprof_binaries;
static char *report_events;	/* --event: the events to report, NULL: all */
static char *report_hosts;	/* --host: the machines of a merge to report, NULL: all */

struct bstack_script {
	struct perf_tool	tool;
	u64			nr_records;
	u64			nr_damaged;
};

static void script_stack(struct bpf_bstack_rec_stack *stack)
{
	char sbid[SBUILD_ID_SIZE];
	struct build_id bid;
	u32 i;

	bool frames = stack->kind == BPF_BSTACK_STACK_USER ||
		      stack->kind == BPF_BSTACK_STACK_KERNEL_BID;

	printf("STACK %016" PRIx64 " %s %u\n", stack->id,
	       stack->kind == BPF_BSTACK_STACK_USER ? "user" :
	       stack->kind == BPF_BSTACK_STACK_USER_IP ? "user-ip" :
	       stack->kind == BPF_BSTACK_STACK_KERNEL_BID ? "kernel-bid" : "kernel", stack->nr);
	for (i = 0; i < stack->nr; i++) {
		struct bpf_bstack_frame *f = &bpf_bstack__user_frames(stack)[i];

		if (!frames) {
			printf("  IP %#" PRIx64 "\n", bpf_bstack__kernel_ips(stack)[i]);
			continue;
		}

		if (f->status == BPF_STACK_BUILD_ID_VALID) {
			build_id__init(&bid, f->build_id, BUILD_ID_SIZE);
			build_id__sprintf(&bid, sbid);
			printf("  VALID %s %#" PRIx64 "\n", sbid, f->offset);
		} else {
			printf("  IP %#" PRIx64 "\n", f->offset);
		}
	}
}

static void script_event(struct bpf_bstack_rec_event *ev)
{
	printf("EVENT %u %s %s\n", ev->index, bpf_bstack__event_kind_name(ev->kind), ev->name);
}

static void script_count(struct bpf_bstack_rec_count *c)
{
	printf("COUNT %" PRIu64 " %u/%u cpu %u comm %.16s user %016" PRIx64
	       " kernel %016" PRIx64 " time %" PRIu64 ".%09" PRIu64 "-%" PRIu64 ".%09" PRIu64
	       " event %u\n",
	       c->count, c->pid, c->tid, c->cpu, c->comm, c->user_stack, c->kern_stack,
	       c->first_ns / 1000000000, c->first_ns % 1000000000,
	       c->last_ns / 1000000000, c->last_ns % 1000000000, c->event);
}

/* the counts a drain packed together, as if each were a COUNT record */
static void script_counts(struct bpf_bstack_rec_counts *rec)
{
	struct bpf_bstack_counts_iter it;
	struct bpf_bstack_rec_count c;

	printf("COUNTS %u\n", rec->nr);
	bpf_bstack__counts_begin(&it, rec);
	while (bpf_bstack__counts_next(&it, &c) > 0)
		script_count(&c);
}

static void script_host(struct bpf_bstack_rec_host *h)
{
	printf("HOST %u %s %s %s start %" PRIu64 ".%09" PRIu64 " samples %" PRIu64 "\n",
	       h->index, h->hostname, h->os_release, h->arch, h->start_ns / 1000000000,
	       h->start_ns % 1000000000, h->samples);
}

static void script_stats(struct bpf_bstack_rec_stats *st)
{
	u32 i;

	printf("STATS");
	for (i = 0; i < st->nr; i++)
		printf(" %u=%" PRIu64, i, st->stat[i]);
	printf("\n");
	for (i = 0; i < st->nr; i++)
		printf("  %-44s %" PRIu64 "\n", bpf_bstack__stat_name(i), st->stat[i]);
}

static int script_sample(const struct perf_tool *tool, union perf_event *event __maybe_unused,
			 struct perf_sample *sample, struct evsel *evsel,
			 struct machine *machine __maybe_unused)
{
	struct bstack_script *sc = container_of(tool, struct bstack_script, tool);
	struct bpf_bstack_rec_hdr *hdr;
	void *copy;

	hdr = bpf_bstack__sample_record(evsel, sample, &copy, &sc->nr_damaged);
	if (!hdr)
		return 0;
	sc->nr_records++;
	if (hdr->type == BPF_BSTACK_REC_STACK)
		script_stack((void *)hdr);
	else if (hdr->type == BPF_BSTACK_REC_COUNT)
		script_count((void *)hdr);
	else if (hdr->type == BPF_BSTACK_REC_COUNTS)
		script_counts((void *)hdr);
	else if (hdr->type == BPF_BSTACK_REC_EVENT)
		script_event((void *)hdr);
	else if (hdr->type == BPF_BSTACK_REC_HOST)
		script_host((void *)hdr);
	else
		script_stats((void *)hdr);
	free(copy);
	return 0;
}

/* perf bstack script: the decoded payload, record by record */
static int bstack_script(void)
{
	struct bstack_script sc = { .nr_records = 0, };
	struct perf_data data = {
		.path  = input_name,
		.mode  = PERF_DATA_MODE_READ,
		.force = force,
	};
	struct perf_session *session;
	int err;

	perf_tool__init(&sc.tool, /*ordered_events=*/false);
	sc.tool.sample = script_sample;
	session = perf_session__new(&data, &sc.tool);
	if (IS_ERR(session)) {
		pr_err("cannot read %s: not a perf.data file, or truncated\n", data.path);
		return PTR_ERR(session);
	}

	if (!evlist__find_evsel_by_str(session->evlist, BPF_BSTACK_EVENT)) {
		pr_err("%s has no bstack samples: record it with 'perf bstack record'\n",
		       data.path);
		err = -EINVAL;
		goto out;
	}
	err = perf_session__process_events(session);
	if (err)
		pr_err("%s could not be read (error %d): truncated or damaged\n", data.path, err);
	else if (sc.nr_damaged)
		pr_warning("%" PRIu64 " damaged records skipped\n", sc.nr_damaged);
out:
	perf_session__delete(session);
	return err;
}

/*
 * Convert into a file that is already unlinked: nothing is left behind,
 * whatever ends the report, and perf report opens it by /proc/self/fd.
 */
static int convert_to_temp(struct bpf_bstack_summary *sum, char *path, size_t size,
			   unsigned int flags)
{
	char tmpl[PATH_MAX];
	const char *dir = getenv("TMPDIR");
	int fd, err;

	snprintf(tmpl, sizeof(tmpl), "%s/perf-bstack-XXXXXX", dir && *dir ? dir : "/tmp");
	fd = mkstemp(tmpl);
	if (fd < 0) {
		pr_err("cannot create a temporary file in %s: %m\n",
		       dir && *dir ? dir : "/tmp");
		return -errno;
	}
	close(fd);
	err = bpf_bstack__convert(input_name ?: "perf.data", tmpl, force, report_events,
				  report_hosts, flags, sum);
	if (err) {
		unlink(tmpl);
		return err;
	}
	fd = open(tmpl, O_RDONLY | O_CLOEXEC);
	unlink(tmpl);
	if (fd < 0)
		return -errno;
	snprintf(path, size, "/proc/self/fd/%d", fd);
	return fd;
}

static bool has_arg(int argc, const char **argv, const char *a, const char *b)
{
	int i;

	for (i = 0; i < argc; i++)
		if (!strcmp(argv[i], a) || (b && !strcmp(argv[i], b)))
			return true;
	return false;
}

/*
 * The perf report options under which the tasks of one comm are one: no
 * sort key, filter or view of theirs sets one task apart (pid, tid, time,
 * the TUI's thread zoom and scripts), so their counts may be merged.
 * -s and -F are looked at key by key; any other option keeps every task.
 */
static const char * const task_blind_options[] = {
	"--stdio", "--stdio2", "-q", "--quiet", "-v", "--verbose", "-f", "--force",
	"-n", "--show-nr-samples", "--show-total-period", "--children", "--no-children",
	"-g", "--call-graph", "-G", "--inverted", "--max-stack", "--percent-limit",
	"--percentage", "--percent-type", "-x", "--exclude-other", "-U",
	"--hide-unresolved", "-c", "--comms", "-d", "--dsos", "-S", "--symbols",
	"-p", "--parent", "-k", "--vmlinux", "--kallsyms", "--symfs", "--no-demangle",
	"--demangle-kernel", "--full-source-path", "--header", "-I", "--show-info",
	"--stdio-color", "-t", "--field-separator", "-w", "--column-widths",
	"-s", "--sort", "-F", "--fields",
};

static const char * const task_blind_keys[] = {
	"comm", "dso", "sym", "parent", "cpu", "socket", "srcline", "srcfile", "dso_size",
	"overhead", "overhead_sys", "overhead_us", "overhead_children", "sample", "period",
};

static bool in_list(const char *s, size_t len, const char * const *list, size_t nr)
{
	size_t i;

	for (i = 0; i < nr; i++)
		if (strlen(list[i]) == len && !strncmp(s, list[i], len))
			return true;
	return false;
}

/* -s or -F keys, "+key" and "key1,key2" alike */
static bool keys_task_blind(const char *keys)
{
	while (*keys) {
		size_t len;

		keys += strspn(keys, "+, \t");
		len = strcspn(keys, ", \t");
		if (len && !in_list(keys, len, task_blind_keys, ARRAY_SIZE(task_blind_keys)))
			return false;
		keys += len;
	}
	return true;
}

static int sort_order_config(const char *var, const char *value, void *data)
{
	bool *blind = data;

	if (!strcmp(var, "report.sort_order") && value && !keys_task_blind(value))
		*blind = false;
	return 0;
}

/* the options whose value is a list of sort keys */
static const char * const key_options[] = { "-s", "--sort", "-F", "--fields", };

static bool report_task_blind(int argc, const char **argv)
{
	bool blind = true, keys_next = false;
	int i;

	perf_config(sort_order_config, &blind);
	for (i = 0; i < argc && blind; i++) {
		const char *a = argv[i];
		size_t len = strcspn(a, "=");

		if (a[0] != '-') {	/* the value of the option before */
			blind = !keys_next || keys_task_blind(a);
			keys_next = false;
			continue;
		}
		keys_next = false;
		/* a short option's value may follow it: -scomm,sym, -gcaller */
		if (a[1] && a[1] != '-' && a[2] && strchr("sFgkcdSptw", a[1]))
			len = 2;
		if (!in_list(a, len, task_blind_options, ARRAY_SIZE(task_blind_options)))
			return false;
		if (in_list(a, len, key_options, ARRAY_SIZE(key_options))) {
			if (a[len])
				blind = keys_task_blind(a + len + (a[len] == '='));
			else
				keys_next = true;
		}
	}
	return blind;
}

/* -k/--vmlinux or --kallsyms, passed on to perf report: the kernel's symbols */
static bool kernel_symbols_given(int argc, const char **argv)
{
	int i;

	for (i = 0; i < argc; i++)
		if (strstarts(argv[i], "-k") || strstarts(argv[i], "--vmlinux") ||
		    strstarts(argv[i], "--kallsyms"))
			return true;
	return false;
}

/*
 * --folded, --pprof and --flamegraph walk the converted samples
 * themselves: each one's callchain, resolved, goes to stack(), leaf first.
 */
struct bstack_walk {
	struct perf_tool	tool;
	int	(*begin)(struct bstack_walk *w, struct perf_session *session);
	int	(*stack)(struct bstack_walk *w, struct evsel *evsel, struct perf_sample *sample,
			 struct thread *thread, struct callchain_cursor_node **nodes, u64 nr);
	int	(*end)(struct bstack_walk *w, struct perf_session *session);
};

static int walk_sample(const struct perf_tool *tool, union perf_event *event __maybe_unused,
		       struct perf_sample *sample, struct evsel *evsel, struct machine *machine)
{
	struct bstack_walk *w = container_of(tool, struct bstack_walk, tool);
	struct callchain_cursor *cursor = get_tls_callchain_cursor();
	struct callchain_cursor_node *node, **nodes;
	struct addr_location al;
	int err = 0;
	u64 n = 0;

	addr_location__init(&al);
	if (!cursor || machine__resolve(machine, &al, sample) < 0 ||
	    thread__resolve_callchain(al.thread, cursor, evsel, sample, NULL, NULL,
				      PERF_MAX_STACK_DEPTH))
		goto out;

	nodes = calloc(cursor->nr + 1, sizeof(*nodes));
	if (!nodes) {
		err = -ENOMEM;
		goto out;
	}
	callchain_cursor_commit(cursor);
	while ((node = callchain_cursor_current(cursor)) != NULL) {
		nodes[n++] = node;
		callchain_cursor_advance(cursor);
	}
	err = w->stack(w, evsel, sample, al.thread, nodes, n);
	free(nodes);
out:
	addr_location__exit(&al);
	return err;
}

static int walk_stacks(const char *path, struct bstack_walk *w)
{
	struct perf_data data = { .path = path, .mode = PERF_DATA_MODE_READ, };
	struct perf_session *session;
	int err;

	perf_tool__init(&w->tool, /*ordered_events=*/true);
	w->tool.sample = walk_sample;
	w->tool.mmap2 = perf_event__process_mmap2;
	w->tool.mmap = perf_event__process_mmap;
	w->tool.comm = perf_event__process_comm;
	session = perf_session__new(&data, &w->tool);
	if (IS_ERR(session))
		return PTR_ERR(session);
	symbol__init(&session->header.env);
	err = w->begin ? w->begin(w, session) : 0;
	if (!err)
		err = perf_session__process_events(session);
	if (!err && w->end)
		err = w->end(w, session);
	perf_session__delete(session);
	return err;
}

/*
 * --folded: FlameGraph's collapsed stacks, "comm;outer;...;leaf count",
 * each line starting with its event ("event;comm;...") when there are
 * several.
 */
struct bstack_folded {
	struct bstack_walk	walk;
	struct hashmap		*stacks;	/* folded line -> u64 *count */
	struct strbuf		line;
};

static size_t folded_hash(long key, void *ctx __maybe_unused)
{
	return str_hash((const char *)key);
}

static bool folded_equal(long a, long b, void *ctx __maybe_unused)
{
	return !strcmp((const char *)a, (const char *)b);
}

static void folded_frame(struct strbuf *sb, struct callchain_cursor_node *node)
{
	if (node->ms.sym)
		strbuf_addstr(sb, node->ms.sym->name);
	else if (node->ms.map)
		strbuf_addf(sb, "[%s+0x%" PRIx64 "]", dso__short_name(map__dso(node->ms.map)),
			    map__map_ip(node->ms.map, node->ip));
	else
		strbuf_addstr(sb, "[unknown]");
}

static int folded_stack(struct bstack_walk *w, struct evsel *evsel, struct perf_sample *sample,
			struct thread *thread, struct callchain_cursor_node **nodes, u64 n)
{
	struct bstack_folded *f = container_of(w, struct bstack_folded, walk);
	u64 *count = NULL;
	char *key;
	u64 i;

	strbuf_setlen(&f->line, 0);
	/* several events: each stack under the event it was taken at */
	if (evsel->evlist && evsel->evlist->core.nr_entries > 1)
		strbuf_addf(&f->line, "%s;", evsel__name(evsel));
	strbuf_addstr(&f->line, thread__comm_str(thread) ?: "[unknown]");
	for (i = n; i > 0; i--) {	/* outermost first */
		strbuf_addch(&f->line, ';');
		folded_frame(&f->line, nodes[i - 1]);
	}

	if (hashmap__find(f->stacks, f->line.buf, &count)) {
		*count += sample->period;
		return 0;
	}
	key = strdup(f->line.buf);
	count = malloc(sizeof(*count));
	if (!key || !count || hashmap__add(f->stacks, key, count)) {
		free(key);
		free(count);
		return -ENOMEM;
	}
	*count = sample->period;
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char * const *)a, *(const char * const *)b);
}

static void print_folded(struct hashmap *stacks)
{
	struct hashmap_entry *cur;
	const char **keys;
	size_t bkt, n = 0, i;

	keys = calloc(hashmap__size(stacks) + 1, sizeof(*keys));
	if (!keys)
		return;
	hashmap__for_each_entry(stacks, cur, bkt)
		keys[n++] = cur->pkey;
	qsort(keys, n, sizeof(*keys), cmp_str);
	for (i = 0; i < n; i++) {
		u64 *count = NULL;

		hashmap__find(stacks, keys[i], &count);
		printf("%s %" PRIu64 "\n", keys[i], count ? *count : 0);
	}
	free(keys);
}

static int bstack_folded(const char *path)
{
	struct bstack_folded f = { .walk.stack = folded_stack, };
	struct hashmap_entry *cur;
	size_t bkt;
	int err;

	f.stacks = hashmap__new(folded_hash, folded_equal, NULL);
	if (IS_ERR(f.stacks))
		return -ENOMEM;
	strbuf_init(&f.line, 256);
	err = walk_stacks(path, &f.walk);
	if (!err)
		print_folded(f.stacks);
	hashmap__for_each_entry(f.stacks, cur, bkt) {
		free((void *)cur->pkey);
		free(cur->pvalue);
	}
	hashmap__free(f.stacks);
	strbuf_release(&f.line);
	return err;
}

/*
 * --pprof: a pprof profile, one sample type per recorded event, in the
 * unit of its counts.
 */
struct bstack_pprof_walk {
	struct bstack_walk		walk;
	struct bpf_bstack_pprof		*pprof;
	const struct bpf_bstack_summary	*sum;
	u64				first, last;	/* sample times */
	u64				nr_samples;
};

/* The recorded event of an evsel of the converted file (named for the TUI) */
static const struct bpf_bstack_summary_event *recorded_event(const struct bpf_bstack_summary *sum,
							     struct evsel *evsel)
{
	u32 i;

	for (i = 0; evsel->core.ids && i < sum->nr_events; i++) {
		if (sum->event[i].name[0] && sum->event[i].id == evsel->core.id[0])
			return &sum->event[i];
	}
	return NULL;
}

static const char *event_unit(const struct bpf_bstack_summary_event *ev)
{
	switch (ev ? ev->kind : 0) {
	case BPF_BSTACK_EVENT_OFFCPU:
		return "nanoseconds";
	default:
		return "count";	/* samples, or hits: as go tool pprof names counts */
	}
}

static const char *event_name(const struct bpf_bstack_summary_event *ev, struct evsel *evsel)
{
	return ev ? ev->name : evsel__name(evsel);
}

static int pprof_begin(struct bstack_walk *w, struct perf_session *session)
{
	struct bstack_pprof_walk *pw = container_of(w, struct bstack_pprof_walk, walk);
	struct evsel *evsel;

	/* the sample type of an event is its index */
	evlist__for_each_entry(session->evlist, evsel) {
		const struct bpf_bstack_summary_event *ev = recorded_event(pw->sum, evsel);
		int type = bpf_bstack_pprof__add_type(pw->pprof, event_name(ev, evsel),
						      event_unit(ev));

		if (type != evsel->core.idx)
			return type < 0 ? type : -EINVAL;
	}
	return 0;
}

static int pprof_stack(struct bstack_walk *w, struct evsel *evsel, struct perf_sample *sample,
		       struct thread *thread, struct callchain_cursor_node **nodes, u64 n)
{
	struct bstack_pprof_walk *pw = container_of(w, struct bstack_pprof_walk, walk);
	struct bpf_bstack_pprof_labels labels = {
		.comm	= thread__comm_str(thread),
		.event	= event_name(recorded_event(pw->sum, evsel), evsel),
		.pid	= sample->pid,
		.tid	= sample->tid,
		.cpu	= sample->cpu,
	};

	if (!pw->first || sample->time < pw->first)
		pw->first = sample->time;
	pw->last = max(pw->last, sample->time);
	pw->nr_samples += sample->period;
	return bpf_bstack_pprof__add_sample(pw->pprof, nodes, n, evsel->core.idx,
					    sample->period, &labels);
}

/* The wall-clock time of the first sample, where perf.data has the clocks */
static int pprof_end(struct bstack_walk *w, struct perf_session *session)
{
	struct bstack_pprof_walk *pw = container_of(w, struct bstack_pprof_walk, walk);
	struct perf_env *env = &session->header.env;
	u64 time = 0;

	if (env->clock.enabled && pw->first >= env->clock.clockid_ns)
		time = env->clock.tod_ns + (pw->first - env->clock.clockid_ns);
	bpf_bstack_pprof__set_time(pw->pprof, time, pw->last - pw->first);
	return 0;
}

static int bstack_pprof(const char *path, const struct bpf_bstack_summary *sum)
{
	struct bstack_pprof_walk pw = {
		.walk = { .begin = pprof_begin, .stack = pprof_stack, .end = pprof_end, },
		.sum = sum,
	};
	int err, missing;

	pw.pprof = bpf_bstack_pprof__new(report_pprof_raw);
	if (!pw.pprof)
		return -ENOMEM;
	err = walk_stacks(path, &pw.walk);
	if (!err)
		err = bpf_bstack_pprof__write(pw.pprof, report_pprof);
	if (!err && report_pprof_binaries) {
		missing = bpf_bstack_pprof__copy_binaries(pw.pprof, report_pprof_binaries);
		if (missing < 0)
			err = missing;
		else if (missing)
			pr_warning("%d binaries of the profile are not in %s\n", missing,
				   report_pprof_binaries);
	}
	if (!err)
		fprintf(stderr, "[ perf bstack: wrote %s: %" PRIu64 " samples%s ]\n",
			report_pprof, pw.nr_samples,
			report_pprof_raw ? ", user code unsymbolized" : "");
	bpf_bstack_pprof__delete(pw.pprof);
	return err;
}

/*
 * --flamegraph: an HTML page with a flame graph per recorded event, the
 * comm at the root of each stack.
 */
struct bstack_flamegraph_walk {
	struct bstack_walk		walk;
	struct bpf_bstack_flamegraph	*fg;
	const struct bpf_bstack_summary	*sum;
	struct strbuf			sb;		/* the names of a stack */
	size_t				*offset;	/* of each in sb */
	const char			**names;
	u64				alloc;
};

static int flamegraph_begin(struct bstack_walk *w, struct perf_session *session)
{
	struct bstack_flamegraph_walk *fw = container_of(w, struct bstack_flamegraph_walk, walk);
	struct evsel *evsel;

	/* the graph of an event is its index */
	evlist__for_each_entry(session->evlist, evsel) {
		const struct bpf_bstack_summary_event *ev = recorded_event(fw->sum, evsel);
		const char *unit = ev && ev->kind == BPF_BSTACK_EVENT_OFFCPU ? "ns" :
				   ev && ev->kind != BPF_BSTACK_EVENT_SAMPLE ? "hits" : "samples";
		int graph = bpf_bstack_flamegraph__add_graph(fw->fg, event_name(ev, evsel), unit);

		if (graph != evsel->core.idx)
			return graph < 0 ? graph : -EINVAL;
	}
	return 0;
}

static int flamegraph_stack(struct bstack_walk *w, struct evsel *evsel,
			    struct perf_sample *sample, struct thread *thread,
			    struct callchain_cursor_node **nodes, u64 n)
{
	struct bstack_flamegraph_walk *fw = container_of(w, struct bstack_flamegraph_walk, walk);
	u64 i;

	if (n + 1 > fw->alloc) {
		const char **p = realloc(fw->names, (n + 1) * sizeof(*p));
		size_t *q = realloc(fw->offset, (n + 1) * sizeof(*q));

		if (p)
			fw->names = p;
		if (q)
			fw->offset = q;
		if (!p || !q)
			return -ENOMEM;
		fw->alloc = n + 1;
	}
	/* comm, then the frames, outermost first: named as --folded names them */
	strbuf_setlen(&fw->sb, 0);
	for (i = 0; i < n; i++) {
		fw->offset[i] = fw->sb.len;
		folded_frame(&fw->sb, nodes[n - 1 - i]);
		if (strbuf_addch(&fw->sb, '\0'))
			return -ENOMEM;
	}
	fw->names[0] = thread__comm_str(thread) ?: "[unknown]";
	for (i = 0; i < n; i++)
		fw->names[i + 1] = fw->sb.buf + fw->offset[i];
	return bpf_bstack_flamegraph__add_stack(fw->fg, evsel->core.idx, fw->names, n + 1,
						sample->period);
}

/* Where perf's share files are: the exec path, as for perf script's scripts */
static char *flamegraph_assets(void)
{
	char *exec_path = get_argv_exec_path(), *dir = NULL;

	if (exec_path && asprintf(&dir, "%s/bstack/flamegraph", exec_path) < 0)
		dir = NULL;
	free(exec_path);
	return dir;
}

static int bstack_flamegraph(const char *path, const struct bpf_bstack_summary *sum)
{
	struct bstack_flamegraph_walk fw = {
		.walk = { .begin = flamegraph_begin, .stack = flamegraph_stack, },
		.sum = sum,
	};
	char title[512], *assets = flamegraph_assets();
	int err;

	strbuf_init(&fw.sb, 256);
	fw.fg = bpf_bstack_flamegraph__new();
	if (!fw.fg || !assets) {
		err = -ENOMEM;
		goto out;
	}
	err = walk_stacks(path, &fw.walk);
	snprintf(title, sizeof(title), "%s: %" PRIu64 " samples, %" PRIu64
		 " unique user and %" PRIu64 " kernel stacks", input_name ?: "perf.data",
		 sum->nr_samples, sum->nr_user_stacks, sum->nr_kern_stacks);
	if (!err)
		err = bpf_bstack_flamegraph__write(fw.fg, report_flamegraph, assets, title);
	if (!err)
		fprintf(stderr, "[ perf bstack: wrote %s ]\n", report_flamegraph);
out:
	bpf_bstack_flamegraph__delete(fw.fg);
	strbuf_release(&fw.sb);
	free(fw.offset);
	free(fw.names);
	free(assets);
	return err;
}

/*
 * The perf report options --folded, --pprof and --flamegraph honour: where
 * the symbols are.  Any other one is refused, not ignored.
 */
static int parse_folded_options(int argc, const char **argv)
{
	const struct option folded_options[] = {
	OPT_STRING('k', "vmlinux", &symbol_conf.vmlinux_name, "file", "vmlinux pathname"),
	OPT_STRING(0, "kallsyms", &symbol_conf.kallsyms_name, "file", "kallsyms pathname"),
	OPT_CALLBACK(0, "symfs", NULL, "directory",
		     "Look for files with symbols relative to this directory",
		     symbol__config_symfs),
	OPT_END()
	};
	const char * const folded_usage[] = {
		"perf bstack report --folded [-k <vmlinux>] [--kallsyms <file>] [--symfs <dir>]",
		"perf bstack report --pprof <file> [--pprof-raw] [--pprof-binaries <dir>] [-k ...]",
		"perf bstack report --flamegraph <file.html> [-k ...]",
		NULL
	};
	const char **args = calloc(argc + 2, sizeof(char *));
	int left;

	if (!args)
		return -ENOMEM;
	/* parse_options() skips argv[0], which bstack's own parsing took */
	args[0] = "report";
	memcpy(args + 1, argv, argc * sizeof(char *));
	left = parse_options(argc + 1, args, folded_options, folded_usage, 0);
	if (left) {
		pr_err("report %s: unexpected argument '%s'\n", report_folded ? "--folded" :
		       report_pprof ? "--pprof" : "--flamegraph", args[0]);
		usage_with_options(folded_usage, folded_options);
	}
	free(args);
	return 0;
}

/* perf report prints text: asked to, or not on a terminal */
static bool report_in_text(int argc, const char **argv)
{
	return has_arg(argc, argv, "--stdio", NULL) || !isatty(STDOUT_FILENO);
}

/*
 * Counts of tasks alike go into one sample where nothing shown tells the
 * tasks apart: --folded and --flamegraph, which go by comm, and perf
 * report in text with options that do not (report_task_blind()).  pprof
 * has a pid label, and the TUI zooms into threads.
 */
static bool report_merges_tasks(int argc, const char **argv)
{
	if (report_folded || report_flamegraph)
		return true;
	if (report_pprof)
		return false;
	return report_in_text(argc, argv) && report_task_blind(argc, argv);
}

/* perf bstack report: perf report over the converted stacks */
static int bstack_report(int argc, const char **argv)
{
	struct bpf_bstack_summary sum;
	char path[64];
	const char **rep_argv;
	int fd, i = 0, j, ret;

	if ((report_pprof_raw || report_pprof_binaries) && !report_pprof) {
		pr_err("report: --pprof-raw and --pprof-binaries go with --pprof\n");
		return -EINVAL;
	}
	if (!!report_folded + !!report_pprof + !!report_flamegraph > 1) {
		pr_err("report: one of --folded, --pprof and --flamegraph at a time\n");
		return -EINVAL;
	}
	if (report_folded || report_pprof || report_flamegraph) {
		ret = parse_folded_options(argc, argv);
		if (ret)
			return ret;
	}
	/*
	 * A sample per count, resolved and added to the hists once; its weight
	 * is the number of samples it stands for, as perf report counts them.
	 */
	fd = convert_to_temp(&sum, path, sizeof(path), report_merges_tasks(argc, argv) ?
			     BPF_BSTACK_CONVERT_MERGE_TASKS : 0);
	if (fd < 0) {
		/* what was read of a file that could not be converted */
		bpf_bstack__summary_exit(&sum);
		return fd;
	}

	if (report_folded) {
		ret = bstack_folded(path);
		goto out;
	}
	if (report_pprof) {
		ret = bstack_pprof(path, &sum);
		goto out;
	}
	if (report_flamegraph) {
		ret = bstack_flamegraph(path, &sum);
		goto out;
	}

	if (kernel_symbols_given(argc, argv))
		bpf_bstack__summary_kernel_given(&sum);
	if (report_in_text(argc, argv) && !has_arg(argc, argv, "-q", "--quiet")) {
		bpf_bstack__summary_fprintf(&sum, stdout);
		fflush(stdout);
	}

	rep_argv = calloc(argc + 4, sizeof(char *));
	if (!rep_argv) {
		ret = -ENOMEM;
		goto out;
	}
	rep_argv[i++] = "report";
	rep_argv[i++] = "-i";
	rep_argv[i++] = path;
	for (j = 0; j < argc; j++)
		rep_argv[i++] = argv[j];
	print_calling(rep_argv, i);
	symbol_conf.weight_is_nr_samples = true;
	ret = cmd_report(i, rep_argv);
	free(rep_argv);
out:
	bpf_bstack__summary_exit(&sum);
	close(fd);
	return ret;
}

/* perf bstack inject: the same conversion, into a file for any perf.data reader */
static int bstack_inject(const char *output)
{
	struct bpf_bstack_summary sum;
	int err;

	if (!output) {
		pr_err("inject: give the output file with -o\n");
		return -EINVAL;
	}
	err = bpf_bstack__convert(input_name ?: "perf.data", output, force, NULL, NULL,
				  inject_aggregate ? 0 : BPF_BSTACK_CONVERT_PER_SAMPLE, &sum);
	if (!err && verbose >= 0)
		bpf_bstack__summary_fprintf(&sum, stderr);
	bpf_bstack__summary_exit(&sum);
	return err;
}

/* The options of every subcommand, and of those that read a recording */
static const struct option bstack_options[] = {
	OPT_INCR('v', "verbose", &verbose, "be more verbose"),
	OPT_END()
};

static const struct option input_options[] = {
	OPT_STRING('i', "input", &input_name, "file", "input file name"),
	OPT_BOOLEAN('f', "force", &force, "don't complain, do it"),
	OPT_PARENT(bstack_options)
};

static int cmd_bstack_record(int argc, const char **argv)
{
	struct bstack_record_args rec_args = {};
	const struct option record_options[] = {
	OPT_CALLBACK('e', "event", &rec_args.opts.event, "event",
		     "event to take stacks at: sampling event, tracepoint or perf probe uprobe (default: cpu-clock)",
		     append_list),
	OPT_CALLBACK(0, "uprobe", &rec_args.opts.uprobes, "binary:function",
		     "take stacks at each call of a function", append_list),
	OPT_BOOLEAN(0, "off-cpu", &rec_args.opts.off_cpu,
		    "also take the stacks tasks block in, weighted by the time blocked"),
	OPT_U64('F', "freq", &rec_args.opts.freq,
		"sampling frequency in Hz (default: 99)"),
	OPT_U64('c', "count", &rec_args.opts.period,
		"sample once every this many events (instead of -F)"),
	OPT_BOOLEAN('a', "all-cpus", &rec_args.system_wide,
		    "system-wide collection from all CPUs (the default without a target)"),
	OPT_STRING('p', "pid", &rec_args.pid, "pid",
		   "record processes (and their children) with these pids"),
	OPT_STRING('t', "tid", &rec_args.tid, "tid",
		   "record threads with these tids"),
	OPT_STRING('C', "cpu", &rec_args.cpu_list, "cpu",
		   "list of cpus to sample"),
	OPT_STRING('u', "uid", &rec_args.uid, "user",
		   "record processes of this user"),
	OPT_STRING('o', "output", &rec_args.output, "file",
		   "output file name (default: perf.data)"),
	OPT_STRING('d', "duration", &rec_args.duration, "seconds",
		   "record the system for this long, instead of a command"),
	OPT_INTEGER(0, "max-stack", &rec_args.opts.max_stack,
		    "frames per stack (default: 127, capped by kernel.perf_event_max_stack)"),
	OPT_INTEGER(0, "map-entries", &rec_args.opts.map_entries,
		    "unique stacks of each kind the BPF maps hold (default: 16384)"),
	OPT_INTEGER(0, "count-entries", &rec_args.opts.count_entries,
		    "unique {task, stack} counts held between drains (default: 65536)"),
	OPT_BOOLEAN(0, "user-stack-only", &rec_args.opts.user_only,
		    "take user stacks only"),
	OPT_BOOLEAN(0, "kernel-stack-only", &rec_args.opts.kernel_only,
		    "take kernel stacks only"),
	OPT_UINTEGER(0, "interval", &rec_args.opts.interval_ms,
		     "drain the BPF maps into perf.data every this many ms"),
	OPT_BOOLEAN(0, "no-mmap-tracking", &rec_args.opts.no_mmap_tracking,
		    "record no mmap/comm/task events: learn paths from live processes"),
	OPT_BOOLEAN(0, "no-cfi", &rec_args.opts.no_cfi,
		    "walk user stacks by frame pointer only, not with the binaries' .eh_frame"),
	OPT_INTEGER(0, "cfi-rows", &rec_args.opts.cfi_rows,
		    "unwind table rows of all binaries, 8 bytes each (default: 4194304)"),
	OPT_BOOLEAN_FLAG(0, "ip-stacks", &rec_args.opts.ip_stacks,
			 "user stacks as raw IPs, no build-ids: the cost floor for benchmarks",
			 PARSE_OPT_HIDDEN),
	OPT_BOOLEAN_FLAG(0, "walk-cost", &rec_args.opts.walk_cost,
			 "time each part of a sample; with --no-cfi, the kernel's walks of user stacks as IPs and with build-ids",
			 PARSE_OPT_HIDDEN),
	OPT_BOOLEAN('N', "no-buildid-cache", &rec_args.no_buildid_cache,
		    "do not copy the binaries into the build-id cache"),
	OPT_BOOLEAN('q', "quiet", &rec_args.quiet, "don't print any message"),
	OPT_STRING_OPTARG('z', "compression-level", &rec_args.comp_level, "n",
			  "compress the records with zstd at this level (default: 1), as perf record -z",
			  "1"),
	OPT_STRING_OPTARG(0, "switch-output", &rec_args.switch_output, "signal|size|time",
			  "a new output file at SIGUSR2, past a size or every time, each one whole",
			  "signal"),
	OPT_STRING(0, "switch-max-files", &rec_args.switch_max_files, "n",
		   "keep the last n files of --switch-output"),
	OPT_PARENT(bstack_options)
	};
	int ret;

	bpf_bstack__opts_init(&rec_args.opts);
	argc = parse_options(argc, argv, record_options, bstack_record_usage,
			     PARSE_OPT_STOP_AT_NON_OPTION);
	ret = bstack_record(&rec_args, argc, argv);
	bpf_bstack__opts_exit(&rec_args.opts);
	return ret;
}

static int cmd_bstack_report(int argc, const char **argv)
{
	const struct option report_options[] = {
	OPT_BOOLEAN(0, "folded", &report_folded,
		    "print FlameGraph collapsed stacks: comm;outer;...;leaf count"),
	OPT_STRING(0, "pprof", &report_pprof, "file",
		   "write a pprof profile (gzipped profile.proto) for go tool pprof"),
	OPT_BOOLEAN(0, "pprof-raw", &report_pprof_raw,
		    "--pprof without symbols of user code: readers symbolize it by build-id"),
	OPT_STRING(0, "pprof-binaries", &report_pprof_binaries, "dir",
		   "copy the profile's binaries into dir/<build-id>/<name> (PPROF_BINARY_PATH)"),
	OPT_STRING(0, "flamegraph", &report_flamegraph, "file.html",
		   "write an HTML page with a flame graph per event (d3-flame-graph)"),
	OPT_CALLBACK(0, "event", &report_events, "event",
		     "report only these recorded events (comma-separated, or given many times)",
		     append_list),
	OPT_CALLBACK(0, "host", &report_hosts, "host",
		     "report only these machines of a merge (comma-separated, or given many times)",
		     append_list),
	OPT_PARENT(input_options)
	};
	int ret;

	/* our options; everything else is perf report's */
	argc = parse_options(argc, argv, report_options, bstack_report_usage,
			     PARSE_OPT_KEEP_UNKNOWN | PARSE_OPT_KEEP_DASHDASH);
	ret = bstack_report(argc, argv);
	zfree(&report_events);
	zfree(&report_hosts);
	return ret;
}

static int cmd_bstack_script(int argc, const char **argv)
{
	const struct option script_options[] = {
	OPT_PARENT(input_options)
	};

	argc = parse_options(argc, argv, script_options, bstack_script_usage, 0);
	if (argc)
		usage_with_options(bstack_script_usage, script_options);
	return bstack_script();
}

static int cmd_bstack_inject(int argc, const char **argv)
{
	const char *inject_output = NULL;
	const struct option inject_options[] = {
	OPT_STRING('o', "output", &inject_output, "file", "output file name"),
	OPT_BOOLEAN(0, "aggregate", &inject_aggregate,
		    "one sample per unique stack and task, its count as period"),
	OPT_PARENT(input_options)
	};

	argc = parse_options(argc, argv, inject_options, bstack_inject_usage, 0);
	if (argc)
		usage_with_options(bstack_inject_usage, inject_options);
	return bstack_inject(inject_output);
}

static int cmd_bstack_merge(int argc, const char **argv)
{
	const char *merge_output = NULL;
	const struct option merge_options[] = {
	OPT_STRING('o', "output", &merge_output, "file", "output file name"),
	OPT_BOOLEAN('f', "force", &force, "don't complain, do it"),
	OPT_PARENT(bstack_options)
	};

	argc = parse_options(argc, argv, merge_options, bstack_merge_usage, 0);
	if (!argc || !merge_output)
		usage_with_options(bstack_merge_usage, merge_options);
	return bpf_bstack__merge(argv, argc, merge_output, force);
}

static const struct {
	const char	*name;
	int		(*cmd)(int argc, const char **argv);
} bstack_subcommands[] = {
	{ "record",	cmd_bstack_record },
	{ "report",	cmd_bstack_report },
	{ "script",	cmd_bstack_script },
	{ "inject",	cmd_bstack_inject },
	{ "merge",	cmd_bstack_merge },
};

int cmd_bstack(int argc, const char **argv)
{
	const char *const subcommands[] = {
		"record", "report", "script", "inject", "merge", NULL
	};
	const char *bstack_usage[2] = { NULL, NULL };
	size_t i;
	int ret;

	argc = parse_options_subcommand(argc, argv, bstack_options, subcommands,
					bstack_usage, PARSE_OPT_STOP_AT_NON_OPTION);
	if (!argc)
		usage_with_options(bstack_usage, bstack_options);

	/* a subcommand by its name or a prefix of it, of three letters or more */
	for (i = 0; i < ARRAY_SIZE(bstack_subcommands); i++) {
		if (strlen(argv[0]) > 2 && strstarts(bstack_subcommands[i].name, argv[0]))
			break;
	}
	if (i == ARRAY_SIZE(bstack_subcommands))
		usage_with_options(bstack_usage, bstack_options);
	ret = bstack_subcommands[i].cmd(argc, argv);

	/* free usage string allocated by parse_options_subcommand */
	free((void *)bstack_usage[0]);
	return ret;
}
