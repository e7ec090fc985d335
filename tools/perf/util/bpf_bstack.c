// SPDX-License-Identifier: GPL-2.0
/*
 * perf record --bstack: sample stacks as (build-id, file offset) with BPF
 * and drain them into perf.data, in the way --off-cpu does.
 */
#define pr_fmt(fmt) "perf bstack: " fmt

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <linux/capability.h>
#include <linux/err.h>
#include <linux/kernel.h>
#include <linux/string.h>
#include <linux/time64.h>
#include <linux/zalloc.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <internal/xyarray.h>
#include <api/fs/fs.h>
#include <api/fs/tracing_path.h>

#include "util/bpf-event.h"
#include "util/bpf_counter.h"
#include "util/bstack.h"
#include "util/bstack-cfi.h"
#include "util/bstack-jit.h"
#include "util/build-id.h"
#include "util/cap.h"
#include "util/cpumap.h"
#include "util/data.h"
#include "util/debug.h"
#include "util/dso.h"
#include "util/env.h"
#include "util/event.h"
#include "util/evlist.h"
#include "util/evsel.h"
#include "util/hashmap.h"
#include "util/machine.h"
#include "util/namespaces.h"
#include "util/parse-events.h"
#include "util/record.h"
#include "util/sample.h"
#include "util/session.h"
#include "util/strlist.h"
#include "util/symbol.h"
#include "util/symbol_conf.h"
#include "util/synthetic-events.h"
#include "util/target.h"
#include "util/thread_map.h"
#include "util/time-utils.h"

#include "bpf_skel/bstack.h"
#include "bpf_skel/bstack.skel.h"

#define FD(evsel, cpu_idx) (*(int *)xyarray__entry((evsel)->core.fd, cpu_idx, 0))

/* what can be in the bstack evsel's samples, see write_record() */
#define BSTACK_SAMPLE_TYPES (PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP |	\
			     PERF_SAMPLE_TID | PERF_SAMPLE_TIME |	\
			     PERF_SAMPLE_ID | PERF_SAMPLE_STREAM_ID |	\
			     PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD |	\
			     PERF_SAMPLE_RAW)

/*
 * The events stacks are taken at, in the order of their index: the BPF
 * attach cookie, the event of each count, and of the EVENT records that
 * name them in perf.data.
 */
struct bstack_source {
	char		name[BPF_BSTACK_EVENT_NAME_LEN];
	u32		kind;		/* enum bpf_bstack_event_kind */
	struct evsel	*evsel;		/* sampling events and tracepoints */
	char		*binary;	/* --uprobe BINARY:FUNCTION */
	char		*function;
};

/*
 * A written stack id is remembered for BSTACK_WRITTEN_AGE drains after a
 * count last named it.  One that comes back later is written again (report
 * keeps the first copy), so in --interval mode memory follows the rate of
 * new stacks, not the length of the run: the stacks of short-lived
 * processes are all new.
 */
#define BSTACK_WRITTEN_AGE	16

/*
 * perf record's poll loop is woken for a drain when the --interval is due,
 * or when the BPF program saw new counts or stacks take half of their map
 * since the last drain (the other half takes the new ones until the
 * drain).  Without --interval, a timer checks the maps this often too, in
 * case a wake-up was lost: an idle recording must not wake perf ten times
 * a second, every wake-up costs CPU time of its own.
 */
#define BSTACK_CHECK_MS		1000

/* One perf record --bstack, from bpf_bstack__prepare() to bpf_bstack__finish() */
struct bpf_bstack {
	struct bpf_bstack_opts	opts;
	struct bstack_bpf	*skel;
	struct evlist		*sampling;	/* our events, not in perf.data */
	struct bpf_link		**links;
	int			nr_links, max_links;
	struct bstack_source	events[BPF_BSTACK_MAX_EVENTS];
	int			nr_events;
	bool			events_written;
	bool			drained_final;
	/* a command given to record, not the 'sleep' of -d beside -p or -t */
	bool			profile_workload;
	int			timer_fd;	/* wakes the poll loop: drain_due() */
	struct ring_buffer	*wake;		/* the BPF program's: maps half full */
	u64			nr_drains, nr_early_drains;	/* ... of these, maps filling */
	/* user space state across drains */
	struct hashmap		*written;	/* stack id -> drain that last named it */
	struct hashmap		*known_bids;	/* build-ids with a DSO (no tracking mode) */
	unsigned long		drain_gen;
	struct bpf_bstack_stats	last_stats;
	struct bpf_bstack_stats	file_base;	/* last_stats when the output switched */
	bool			switching;	/* the next drain is the last of a file */
	u64			nr_user_stacks, nr_kern_stacks;
	u64			nr_missing_stacks, nr_aged_out;
	struct bpf_bstack_marks	marks;		/* the DSOs of the stacks, for perf.data */
	struct bpf_bstack_cfi	*cfi;		/* unwind tables, NULL: frame pointers only */
	struct hashmap		*jit_maps;	/* pid with IP frames -> struct bstack_jit_map */
	u32			nr_jit_pids, nr_jit_images, nr_jit_failed;
};

/* A JIT's perf map as last made into images: made again when it changes */
struct bstack_jit_map {
	off_t		size;
	struct timespec	mtime;
};

union bstack_event {
	struct perf_event_header hdr;
	u64 array[(PERF_SAMPLE_MAX_SIZE) / sizeof(u64)];
};

static int check_privileges(void)
{
	bool used_root;
	int paranoid = 2, unpriv_bpf = 2;

	if (perf_cap__capable(CAP_BPF, &used_root) &&
	    perf_cap__capable(CAP_PERFMON, &used_root))
		return 0;

	sysctl__read_int("kernel/perf_event_paranoid", &paranoid);
	sysctl__read_int("kernel/unprivileged_bpf_disabled", &unpriv_bpf);
	pr_err("root, or CAP_BPF and CAP_PERFMON, is needed to load the BPF program (kernel.unprivileged_bpf_disabled=%d, kernel.perf_event_paranoid=%d)\n",
	       unpriv_bpf, paranoid);
	return -EPERM;
}

/* The placeholder event whose samples carry the drained records */
static int add_bstack_evsel(struct evlist *evlist)
{
	struct perf_event_attr attr = {
		.type		= PERF_TYPE_SOFTWARE,
		.config		= PERF_COUNT_SW_BPF_OUTPUT,
		.size		= sizeof(attr),
		.sample_period	= 1,
		.sample_type	= PERF_SAMPLE_RAW | PERF_SAMPLE_TID |
				  PERF_SAMPLE_TIME | PERF_SAMPLE_CPU |
				  PERF_SAMPLE_PERIOD,
	};
	struct evsel *evsel = evsel__new(&attr);

	if (!evsel)
		return -ENOMEM;
	free(evsel->name);
	evsel->name = strdup(BPF_BSTACK_EVENT);
	if (!evsel->name) {
		evsel__delete(evsel);
		return -ENOMEM;
	}
	evsel->no_aux_samples = true;
	evlist__add(evlist, evsel);
	return 0;
}

static struct bstack_source *add_event(struct bpf_bstack *b, u32 kind, const char *name)
{
	struct bstack_source *ev;

	if (b->nr_events == BPF_BSTACK_MAX_EVENTS) {
		pr_err("at most %d events at once\n", BPF_BSTACK_MAX_EVENTS);
		return NULL;
	}
	ev = &b->events[b->nr_events++];
	ev->kind = kind;
	snprintf(ev->name, sizeof(ev->name), "%s", name);
	return ev;
}

/* An event of perf probe (a uprobe or kprobe) has the probed address as a field */
static bool is_probe_event(struct evsel *evsel)
{
#ifdef HAVE_LIBTRACEEVENT
	return evsel__field(evsel, "__probe_ip") != NULL;
#else
	return false;
#endif
}

static int add_tracepoint(struct bpf_bstack *b, struct evsel *evsel)
{
	struct perf_event_attr *attr = &evsel->core.attr;
	struct bstack_source *ev;

	ev = add_event(b, is_probe_event(evsel) ? BPF_BSTACK_EVENT_UPROBE :
		       BPF_BSTACK_EVENT_TRACEPOINT, evsel__name(evsel));
	if (!ev)
		return -E2BIG;
	ev->evsel = evsel;
	/* every hit runs the program, which keeps the perf event itself empty */
	attr->freq = 0;
	attr->sample_period = 1;
	attr->sample_type = PERF_SAMPLE_RAW;
	attr->inherit = 0;
	attr->disabled = 0;
	return 0;
}

static int add_sampling_event(struct bpf_bstack *b, struct evsel *evsel)
{
	struct bpf_bstack_opts *o = &b->opts;
	struct perf_event_attr *attr = &evsel->core.attr;
	struct bstack_source *ev = add_event(b, BPF_BSTACK_EVENT_SAMPLE, evsel__name(evsel));

	if (!ev)
		return -E2BIG;
	ev->evsel = evsel;
	if (o->period) {
		attr->freq = 0;
		attr->sample_period = o->period;
	} else {
		attr->freq = 1;
		attr->sample_freq = o->freq;
	}
	attr->sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID;
	attr->inherit = 0;
	attr->disabled = 0;
	return 0;
}

/* --uprobe BINARY:FUNCTION[,...] */
static int add_uprobes(struct bpf_bstack *b, const char *list)
{
	struct strlist *slist = strlist__new(list, NULL);
	struct str_node *pos;
	int err = 0;

	if (!slist)
		return -ENOMEM;
	strlist__for_each_entry(pos, slist) {
		const char *colon = strrchr(pos->s, ':'), *base;
		struct bstack_source *ev;
		char name[BPF_BSTACK_EVENT_NAME_LEN];

		if (!colon || colon == pos->s || !colon[1]) {
			pr_err("--uprobe '%s': give it as BINARY:FUNCTION\n", pos->s);
			err = -EINVAL;
			break;
		}
		base = memrchr(pos->s, '/', colon - pos->s);
		base = base ? base + 1 : pos->s;
		/* named like the events of perf probe: the binary's base name */
		snprintf(name, sizeof(name), "uprobe:%s", base);
		ev = add_event(b, BPF_BSTACK_EVENT_UPROBE, name);
		if (!ev) {
			err = -E2BIG;
			break;
		}
		ev->binary = strndup(pos->s, colon - pos->s);
		ev->function = strdup(colon + 1);
		if (!ev->binary || !ev->function) {
			err = -ENOMEM;
			break;
		}
	}
	strlist__delete(slist);
	return err;
}

/* -e (sampling events, tracepoints, perf probe uprobes), --uprobe and --off-cpu */
static int parse_bstack_events(struct bpf_bstack *b)
{
	struct bpf_bstack_opts *o = &b->opts;
	struct parse_events_error perr;
	const char *list = o->event;
	struct evsel *evsel;
	int err;

	b->sampling = evlist__new();
	if (!b->sampling)
		return -ENOMEM;
	/* cpu-clock unless other events are given, and beside --off-cpu as perf record does */
	if (!list && !o->uprobes)
		list = "cpu-clock";
	if (list) {
		parse_events_error__init(&perr);
		err = parse_events(b->sampling, list, &perr);
		if (err) {
			parse_events_error__print(&perr, list);
			pr_err("cannot use event '%s'\n", list);
		}
		parse_events_error__exit(&perr);
		if (err)
			return -EINVAL;
	}

	evlist__for_each_entry(b->sampling, evsel) {
		if (evsel->core.attr.type == PERF_TYPE_TRACEPOINT)
			err = add_tracepoint(b, evsel);
		else
			err = add_sampling_event(b, evsel);
		if (err)
			return err;
	}
	if (o->uprobes) {
		err = add_uprobes(b, o->uprobes);
		if (err)
			return err;
	}
	if (o->off_cpu && !add_event(b, BPF_BSTACK_EVENT_OFFCPU, BPF_BSTACK_OFFCPU_EVENT))
		return -E2BIG;
	return 0;
}

static int add_link(struct bpf_bstack *b, struct bpf_link *link)
{
	if (b->nr_links == b->max_links) {
		int n = b->max_links ? b->max_links * 2 : 16;
		void *p = realloc(b->links, n * sizeof(*b->links));

		if (!p) {
			bpf_link__destroy(link);
			return -ENOMEM;
		}
		b->links = p;
		b->max_links = n;
	}
	b->links[b->nr_links++] = link;
	return 0;
}

static int link_error(struct bpf_link *link)
{
	return link ? PTR_ERR(link) : (errno ? -errno : -EINVAL);
}

static int attach_perf_event(struct bpf_bstack *b, struct bpf_program *prog, int fd, u64 cookie)
{
	LIBBPF_OPTS(bpf_perf_event_opts, opts, .bpf_cookie = cookie);
	struct bpf_link *link = bpf_program__attach_perf_event_opts(prog, fd, &opts);

	if (IS_ERR_OR_NULL(link))
		return link_error(link);
	return add_link(b, link);
}

static int open_evsel(struct bstack_source *ev, struct perf_cpu_map *cpus,
		      struct target *target)
{
	char msg[BUFSIZ];
	int err = evsel__open_per_cpu(ev->evsel, cpus, -1);

	if (err) {
		evsel__open_strerror(ev->evsel, target, -err, msg, sizeof(msg));
		pr_err("cannot open '%s': %s\n", ev->name, msg);
	}
	return err;
}

/* A sampling event: one perf event per CPU, each running the program */
static int open_sampling_event(struct bpf_bstack *b, struct bstack_source *ev, int idx,
			       struct perf_cpu_map *cpus, struct target *target)
{
	struct perf_cpu cpu;
	int i, err;

	err = open_evsel(ev, cpus, target);
	if (err)
		return err;
	perf_cpu_map__for_each_cpu(cpu, i, cpus) {
		err = attach_perf_event(b, b->skel->progs.on_sample, FD(ev->evsel, i), idx);
		if (err) {
			pr_err("cannot attach to '%s' on CPU %d: %s\n",
			       ev->name, cpu.cpu, strerror(-err));
			return err;
		}
	}
	return 0;
}

/* The tracepoints hit on the way into a system call, from its instruction */
static bool is_syscall_entry(const struct bstack_source *ev)
{
	return ev->kind == BPF_BSTACK_EVENT_TRACEPOINT &&
	       (strstarts(ev->name, "syscalls:sys_enter_") ||
		!strcmp(ev->name, "raw_syscalls:sys_enter"));
}

/*
 * A tracepoint runs the programs of any of its perf events on every CPU:
 * one event, on the first CPU, is enough (and more would count each hit
 * more than once).
 */
static int open_tracepoint(struct bpf_bstack *b, struct bstack_source *ev, int idx,
			   struct perf_cpu_map *cpus, struct target *target)
{
	struct bpf_program *prog = ev->kind == BPF_BSTACK_EVENT_UPROBE ?
				   b->skel->progs.on_uprobe : b->skel->progs.on_tracepoint;
	struct perf_cpu_map *one;
	char cpu[16];
	int err;

	snprintf(cpu, sizeof(cpu), "%d", perf_cpu_map__cpu(cpus, 0).cpu);
	one = perf_cpu_map__new(cpu);
	if (!one)
		return -ENOMEM;
	err = open_evsel(ev, one, target);
	perf_cpu_map__put(one);
	if (err)
		return err;
	err = attach_perf_event(b, prog, FD(ev->evsel, 0),
				idx | (is_syscall_entry(ev) ? BPF_BSTACK_COOKIE_SYSCALL_ENTRY : 0));
	if (err)
		pr_err("cannot attach to '%s': %s\n", ev->name, strerror(-err));
	return err;
}

static int attach_uprobe(struct bpf_bstack *b, struct bstack_source *ev, int idx)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .func_name = ev->function, .bpf_cookie = idx);
	struct bpf_link *link;
	int err;

	if (access(ev->binary, R_OK)) {
		pr_err("--uprobe %s:%s: cannot read %s: %m\n",
		       ev->binary, ev->function, ev->binary);
		return -errno;
	}
	errno = 0;
	link = bpf_program__attach_uprobe_opts(b->skel->progs.on_uprobe, -1, ev->binary, 0, &opts);
	if (IS_ERR_OR_NULL(link)) {
		err = link_error(link);
		if (err == -ENOENT || err == -ESRCH)
			pr_err("--uprobe %s:%s: no function '%s' in %s\n",
			       ev->binary, ev->function, ev->function, ev->binary);
		else
			pr_err("--uprobe %s:%s: cannot attach: %s\n",
			       ev->binary, ev->function, strerror(-err));
		return err;
	}
	return add_link(b, link);
}

static int open_bstack_events(struct bpf_bstack *b, struct target *target)
{
	struct perf_cpu_map *cpus;
	int i, err = 0;

	cpus = target->cpu_list ? perf_cpu_map__new(target->cpu_list) :
				  perf_cpu_map__new_online_cpus();
	if (!cpus) {
		pr_err("invalid cpu list '%s'\n", target->cpu_list);
		return -EINVAL;
	}
	for (i = 0; i < b->nr_events && !err; i++) {
		struct bstack_source *ev = &b->events[i];

		if (ev->kind == BPF_BSTACK_EVENT_SAMPLE)
			err = open_sampling_event(b, ev, i, cpus, target);
		else if (ev->evsel)
			err = open_tracepoint(b, ev, i, cpus, target);
		else if (ev->kind == BPF_BSTACK_EVENT_UPROBE)
			err = attach_uprobe(b, ev, i);
	}
	perf_cpu_map__put(cpus);
	return err;
}

/* The value of a stack map of max frames: its depth, then the frames */
static size_t bid_stack_size(u32 max)
{
	return offsetof(struct bpf_bstack_user_stack, frame) +
	       max * sizeof(struct bpf_stack_build_id);
}

static size_t ip_stack_size(u32 max)
{
	return offsetof(struct bpf_bstack_kern_stack, ip) + max * sizeof(u64);
}

static int set_max_stack(struct bpf_bstack *b)
{
	int sysctl_max = PERF_MAX_STACK_DEPTH;
	int max = b->opts.max_stack;

	sysctl__read_int("kernel/perf_event_max_stack", &sysctl_max);
	if (max <= 0 || max > BPF_BSTACK_MAX_STACK) {
		pr_err("--max-stack must be between 1 and %d\n",
		       BPF_BSTACK_MAX_STACK);
		return -EINVAL;
	}
	if (max > sysctl_max) {
		pr_debug("--max-stack capped to kernel.perf_event_max_stack=%d\n",
			 sysctl_max);
		max = sysctl_max;
	}
	b->skel->rodata->max_frames = max;
	b->skel->rodata->short_frames = min(max, BPF_BSTACK_SHORT_STACK);
	bpf_map__set_value_size(b->skel->maps.bstack_user_stacks, bid_stack_size(max));
	bpf_map__set_value_size(b->skel->maps.bstack_user_short_stacks,
				bid_stack_size(b->skel->rodata->short_frames));
	bpf_map__set_value_size(b->skel->maps.bstack_kern_stacks, ip_stack_size(max));
	bpf_map__set_value_size(b->skel->maps.bstack_kern_bid_stacks, bid_stack_size(max));
	bpf_map__set_value_size(b->skel->maps.bstack_user_ip_stacks, ip_stack_size(max));
	return 0;
}

static int count_pids(const char *list)
{
	struct strlist *slist = strlist__new(list, NULL);
	int n;

	if (!slist)
		return -ENOMEM;
	n = strlist__nr_entries(slist);
	strlist__delete(slist);
	return n;
}

static int add_to_task_filter(struct bpf_bstack *b, const char *list)
{
	struct strlist *slist = strlist__new(list, NULL);
	int fd = bpf_map__fd(b->skel->maps.bstack_task_filter);
	struct str_node *pos;
	u8 val = 1;

	if (!slist)
		return -ENOMEM;
	strlist__for_each_entry(pos, slist) {
		char *end;
		u32 id = strtoul(pos->s, &end, 10);

		if (*end != '\0' || bpf_map_update_elem(fd, &id, &val, BPF_ANY)) {
			pr_err("cannot filter on '%s'\n", pos->s);
			strlist__delete(slist);
			return -EINVAL;
		}
	}
	strlist__delete(slist);
	return 0;
}

/* -p and a forked workload follow the process tree; -t selects threads */
static int config_task_filter(struct bpf_bstack *b, struct target *target)
{
	int n = 4096;

	if (target->pid) {
		n = max(n, count_pids(target->pid) * 4);
		b->skel->rodata->uses_tgid = 1;
	} else if (target->tid) {
		n = max(n, count_pids(target->tid));
	} else if (target__none(target)) {
		b->skel->rodata->uses_tgid = 1;	/* the workload, added at start */
		b->profile_workload = true;
	} else {
		return 0;
	}
	b->skel->rodata->has_task = 1;
	bpf_map__set_max_entries(b->skel->maps.bstack_task_filter, n);
	return 0;
}

/*
 * Walk user stacks with the binaries' unwind tables, unless asked not to:
 * the maps of the tables take no memory then.
 */
static int config_cfi(struct bpf_bstack *b)
{
	struct bpf_bstack_opts *o = &b->opts;
	bool cfi = !o->no_cfi && !o->ip_stacks && !o->kernel_only;

	if (cfi && o->cfi_rows <= 0) {
		pr_err("cfi-rows must be positive\n");
		return -EINVAL;
	}
	b->skel->rodata->cfi = cfi;
	bpf_program__set_autoload(b->skel->progs.on_newtask_cfi, cfi);
	bpf_program__set_autoload(b->skel->progs.on_exec, cfi);
	bpf_program__set_autoload(b->skel->progs.on_dl_change, cfi);
	bpf_map__set_max_entries(b->skel->maps.bstack_cfi_rows, cfi ? o->cfi_rows : 1);
	bpf_map__set_max_entries(b->skel->maps.bstack_cfi_files, cfi ? 4096 : 1);
	/* a 4 KiB page of code holds tens of rows or more: this many pages is plenty */
	bpf_map__set_max_entries(b->skel->maps.bstack_cfi_pages,
				 cfi ? max(o->cfi_rows / 8, 65536) : 1);
	bpf_map__set_max_entries(b->skel->maps.bstack_cfi_file_ids, cfi ? 4096 : 1);
	bpf_map__set_max_entries(b->skel->maps.bstack_cfi_procs, cfi ? 1024 : 1);
	bpf_map__set_max_entries(b->skel->maps.bstack_cfi_asked, cfi ? 1024 : 1);
	bpf_map__set_max_entries(b->skel->maps.bstack_cfi_changed, cfi ? 1024 : 1);
	return 0;
}

static bool has_event_kind(struct bpf_bstack *b, u32 kind)
{
	int i;

	for (i = 0; i < b->nr_events; i++)
		if (b->events[i].kind == kind)
			return true;
	return false;
}

/*
 * Each program has its own copy of the stack walk, which the verifier
 * checks at every load: load only those that have events to run for.
 * sched_switch runs for every task switch: only with --off-cpu.
 */
static void config_programs(struct bpf_bstack *b)
{
	struct {
		struct bpf_program *prog;
		u32 kind;
	} progs[] = {
		{ b->skel->progs.on_sample, BPF_BSTACK_EVENT_SAMPLE },
		{ b->skel->progs.on_tracepoint, BPF_BSTACK_EVENT_TRACEPOINT },
		{ b->skel->progs.on_uprobe, BPF_BSTACK_EVENT_UPROBE },
		{ b->skel->progs.on_switch, BPF_BSTACK_EVENT_OFFCPU },
	};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(progs); i++)
		bpf_program__set_autoload(progs[i].prog, has_event_kind(b, progs[i].kind));
}

static int config_skel(struct bpf_bstack *b, struct target *target)
{
	struct bpf_bstack_opts *o = &b->opts;
	int i, err;

	if (o->user_only && o->kernel_only) {
		pr_err("--user-stack-only and --kernel-stack-only exclude each other\n");
		return -EINVAL;
	}
	if (o->map_entries <= 0 || o->count_entries <= 0) {
		pr_err("map sizes must be positive\n");
		return -EINVAL;
	}
	if (o->walk_cost && (o->ip_stacks || o->kernel_only)) {
		pr_err("--walk-cost times the walks of user stacks: not with --ip-stacks or --kernel-stack-only\n");
		return -EINVAL;
	}
	err = set_max_stack(b);
	if (err)
		return err;

	for (i = 0; i < b->nr_events; i++)
		if (b->events[i].kind == BPF_BSTACK_EVENT_OFFCPU)
			b->skel->rodata->offcpu_event = i;
	config_programs(b);

	b->skel->rodata->user_stack = !o->kernel_only;
	b->skel->rodata->user_build_id = !o->ip_stacks;
	b->skel->rodata->walk_cost = o->walk_cost;
	/* kernel frames as build-id + offset where the kernel can: it says at once */
	b->skel->rodata->kern_build_id = !o->ip_stacks;
	b->skel->rodata->kern_stack = !o->user_only;
	bpf_map__set_max_entries(b->skel->maps.bstack_user_stacks, o->map_entries);
	bpf_map__set_max_entries(b->skel->maps.bstack_user_short_stacks, o->map_entries);
	bpf_map__set_max_entries(b->skel->maps.bstack_kern_stacks, o->map_entries);
	bpf_map__set_max_entries(b->skel->maps.bstack_kern_bid_stacks, o->map_entries);
	bpf_map__set_max_entries(b->skel->maps.bstack_user_ip_stacks, o->map_entries);
	bpf_map__set_max_entries(b->skel->maps.bstack_counts0, o->count_entries);
	bpf_map__set_max_entries(b->skel->maps.bstack_counts1, o->count_entries);
	b->skel->rodata->counts_half = o->count_entries / 2;
	b->skel->rodata->stacks_half = o->map_entries / 2;
	err = config_cfi(b);
	if (err)
		return err;

	if (target->uid != UINT_MAX) {
		b->skel->rodata->has_uid = 1;
		b->skel->rodata->filter_uid = target->uid;
	}
	return config_task_filter(b, target);
}

static int load_skel(struct bpf_bstack *b, struct target *target)
{
	int err;

	b->skel = bstack_bpf__open();
	if (!b->skel) {
		pr_err("failed to open the BPF skeleton\n");
		return -EINVAL;
	}
	err = config_skel(b, target);
	if (err)
		return err;

	set_max_rlimit();
	err = bstack_bpf__load(b->skel);
	if (err) {
		pr_err("failed to load the BPF program: %s\n", strerror(-err));
		return err;
	}
	if (b->skel->rodata->cfi) {
		b->cfi = bpf_bstack_cfi__new(b->skel, !b->opts.no_buildid_cache);
		if (!b->cfi)
			return -ENOMEM;
	}
	if (target->pid)
		err = add_to_task_filter(b, target->pid);
	else if (target->tid)
		err = add_to_task_filter(b, target->tid);
	if (err)
		return err;

	err = bstack_bpf__attach(b->skel);
	if (err)
		pr_err("failed to attach the BPF programs: %s\n", strerror(-err));
	return err;
}

static int on_wake(void *ctx __maybe_unused, void *data __maybe_unused,
		   size_t size __maybe_unused)
{
	return 0;	/* bpf_bstack__drain_due() looks at the maps */
}

static int setup_drain_timer(struct bpf_bstack *b, struct evlist *evlist)
{
	unsigned int ms = b->opts.interval_ms ?: BSTACK_CHECK_MS;
	struct itimerspec its = {
		.it_interval = { ms / 1000, (ms % 1000) * 1000000L },
		.it_value    = { ms / 1000, (ms % 1000) * 1000000L },
	};
	int wake_fd = bpf_map__fd(b->skel->maps.bstack_wake);

	b->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (b->timer_fd < 0 || timerfd_settime(b->timer_fd, 0, &its, NULL) < 0) {
		pr_err("cannot create the drain timer: %m\n");
		return -errno;
	}
	b->wake = ring_buffer__new(wake_fd, on_wake, b, NULL);
	if (!b->wake) {
		pr_err("cannot read the BPF program's wake-ups: %m\n");
		return -errno;
	}
	/* wake perf record's poll loop, which then calls bpf_bstack__drain_due() */
	if (evlist__add_wakeup_eventfd(evlist, b->timer_fd) < 0 ||
	    evlist__add_wakeup_eventfd(evlist, wake_fd) < 0) {
		pr_err("cannot poll the drain timer\n");
		return -EINVAL;
	}
	return 0;
}

void bpf_bstack__delete(struct bpf_bstack *b)
{
	int i;

	if (IS_ERR_OR_NULL(b))
		return;
	bpf_bstack_cfi__delete(b->cfi);
	for (i = 0; i < b->nr_links; i++)
		bpf_link__destroy(b->links[i]);
	free(b->links);
	for (i = 0; i < b->nr_events; i++) {
		free(b->events[i].binary);
		free(b->events[i].function);
	}
	if (b->sampling) {
		evlist__close(b->sampling);
		evlist__delete(b->sampling);
	}
	ring_buffer__free(b->wake);
	bstack_bpf__destroy(b->skel);
	if (b->timer_fd >= 0)
		close(b->timer_fd);
	hashmap__free(b->written);
	hashmap__free(b->known_bids);
	if (b->jit_maps) {
		struct hashmap_entry *cur;
		size_t bkt;

		hashmap__for_each_entry(b->jit_maps, cur, bkt)
			free(cur->pvalue);
		hashmap__free(b->jit_maps);
	}
	bpf_bstack__marks_exit(&b->marks);
	bpf_bstack__opts_exit(&b->opts);
	free(b);
}

static struct bpf_bstack *bpf_bstack__new(const struct bpf_bstack_opts *opts)
{
	struct bpf_bstack *b = zalloc(sizeof(*b));

	if (!b)
		return NULL;
	b->timer_fd = -1;
	b->written = hashmap__new(bpf_bstack__id_hash, bpf_bstack__id_equal, NULL);
	b->known_bids = hashmap__new(bpf_bstack__id_hash, bpf_bstack__id_equal, NULL);
	b->jit_maps = hashmap__new(bpf_bstack__id_hash, bpf_bstack__id_equal, NULL);
	if (IS_ERR(b->written) || IS_ERR(b->known_bids) || IS_ERR(b->jit_maps) ||
	    bpf_bstack__opts_copy(&b->opts, opts) || bpf_bstack__marks_init(&b->marks)) {
		if (IS_ERR(b->written))
			b->written = NULL;
		if (IS_ERR(b->known_bids))
			b->known_bids = NULL;
		if (IS_ERR(b->jit_maps))
			b->jit_maps = NULL;
		bpf_bstack__delete(b);
		return NULL;
	}
	return b;
}

/*
 * Load and attach the BPF program for the events of opts, and add the
 * bstack event, whose samples will carry the drained records, to evlist.
 */
struct bpf_bstack *bpf_bstack__prepare(struct evlist *evlist, struct target *target,
				       const struct bpf_bstack_opts *opts)
{
	struct bpf_bstack *b;
	int err;

	err = check_privileges();
	if (err)
		return ERR_PTR(err);

	b = bpf_bstack__new(opts);
	if (!b)
		return ERR_PTR(-ENOMEM);

	err = add_bstack_evsel(evlist);
	if (!err)
		err = parse_bstack_events(b);
	if (!err)
		err = load_skel(b, target);
	if (!err)
		err = open_bstack_events(b, target);
	if (!err)
		err = setup_drain_timer(b, evlist);
	if (!err)
		return b;
	bpf_bstack__delete(b);
	return ERR_PTR(err);
}

/* workload: the command perf starts, if it does */
void bpf_bstack__start(struct bpf_bstack *b, struct evlist *evlist, const char *workload)
{
	/* the forked workload: its children are followed by on_newtask */
	if (b->profile_workload && evlist->workload.pid > 0) {
		u32 pid = evlist->workload.pid;
		u8 val = 1;

		bpf_map_update_elem(bpf_map__fd(b->skel->maps.bstack_task_filter),
				    &pid, &val, BPF_ANY);
	}
	if (b->cfi && workload)
		bpf_bstack_cfi__preload(b->cfi, workload);
	/* without the thread, stacks are walked by frame pointer, as with no-cfi */
	if (b->cfi && bpf_bstack_cfi__start(b->cfi)) {
		bpf_bstack_cfi__delete(b->cfi);
		b->cfi = NULL;
	}
	b->skel->bss->enabled = 1;
}

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
	struct bpf_program *progs[] = {
		b->skel->progs.on_sample, b->skel->progs.on_tracepoint,
		b->skel->progs.on_uprobe, b->skel->progs.on_switch,
	};
	u64 misses = 0;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(progs); i++) {
		struct bpf_prog_info info = {};
		__u32 len = sizeof(info);
		int fd = bpf_program__fd(progs[i]);

		if (fd >= 0 && !bpf_prog_get_info_by_fd(fd, &info, &len))
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
		for (map = 1; map <= BSTACK_STACK_MAPS; map++)
			forget_written_stacks(w, map);
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

/*
 * --walk-cost: the kernel walked every user stack twice, as IPs and with
 * build-ids, each between two clock reads, and a third time nothing.  The
 * programs that take stacks, less one walk or the other and the six clock
 * reads, are what they would have cost with that walk alone, on the same
 * samples.
 */
/* --walk-cost with the unwind tables: where the time of a sample went */
static void print_part_cost(struct bpf_bstack *b, u64 taken)
{
	static const char * const names[BPF_BSTACK_PARTS] = {
		[BPF_BSTACK_PART_TASK]		= "task and filter",
		[BPF_BSTACK_PART_MAPPINGS]	= "mappings",
		[BPF_BSTACK_PART_WALK]		= "walk",
		[BPF_BSTACK_PART_USER_STORE]	= "user stack's store",
		[BPF_BSTACK_PART_KERNEL]	= "kernel stack",
		[BPF_BSTACK_PART_COUNT]		= "count",
	};
	const __u64 *ns = b->skel->bss->part_ns;
	u64 frames = b->last_stats.stat[BPF_BSTACK_STAT_USER_FRAMES];
	int i;

	fprintf(stderr, "[ perf bstack: ns per sample by part:");
	for (i = 0; i < BPF_BSTACK_PARTS; i++)
		fprintf(stderr, "%s %s %" PRIu64, i ? "," : "", names[i], (u64)ns[i] / taken);
	fprintf(stderr, "; %.1f user frames a sample, the walk %" PRIu64 " ns a frame ]\n",
		(double)frames / taken, frames ? (u64)ns[BPF_BSTACK_PART_WALK] / frames : 0);
}

static void print_walk_cost(struct bpf_bstack *b, u64 stack_progs_ns, u64 taken)
{
	const __u64 *ns = b->skel->bss->walk_cost_ns;
	u64 clock = ns[BPF_BSTACK_WALK_NONE];
	u64 ip = ns[BPF_BSTACK_WALK_IP], bid = ns[BPF_BSTACK_WALK_BUILD_ID];

	if (!b->opts.walk_cost)
		return;
	if (b->cfi) {
		print_part_cost(b, taken);
		return;
	}
	/* each walk's time holds a clock read too */
	ip -= min(ip, clock);
	bid -= min(bid, clock);
	fprintf(stderr, "[ perf bstack: user stacks of %" PRIu64 " samples", taken);
	fprintf(stderr, " each walked twice by the kernel: %" PRIu64 " ns per sample as IPs,",
		ip / taken);
	fprintf(stderr, " %" PRIu64 " ns with build-ids ]\n", bid / taken);
	/* with kernel.bpf_stats_enabled=1 */
	if (stack_progs_ns < ip + bid + 6 * clock)
		return;
	stack_progs_ns -= 6 * clock;
	fprintf(stderr, "[ perf bstack: BPF programs taking stacks, one walk each:");
	fprintf(stderr, " %" PRIu64 " ns per sample with build-ids, %" PRIu64 " ns with IPs ]\n",
		(stack_progs_ns - ip) / taken, (stack_progs_ns - bid) / taken);
}

/* with kernel.bpf_stats_enabled=1, what each program that ran cost */
static void print_prog_stats(struct bpf_bstack *b)
{
	struct bpf_program *progs[] = {
		b->skel->progs.on_sample, b->skel->progs.on_tracepoint,
		b->skel->progs.on_uprobe, b->skel->progs.on_switch,
		b->skel->progs.on_exec, b->skel->progs.on_dl_change,
	};
	/* the first four take stacks */
	const size_t nr_stack_progs = 4;
	u64 taken = max(b->last_stats.stat[BPF_BSTACK_STAT_SAMPLES], 1ULL);
	u64 stack_progs_ns = 0;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(progs); i++) {
		struct bpf_prog_info info = {};
		__u32 len = sizeof(info);
		int fd = bpf_program__fd(progs[i]);

		if (fd < 0 || bpf_prog_get_info_by_fd(fd, &info, &len) || !info.run_cnt)
			continue;
		if (i < nr_stack_progs)
			stack_progs_ns += info.run_time_ns;
		/* runs include hits of tasks the filter rejected */
		fprintf(stderr,
			"[ perf bstack: BPF program %s ran %llu times, %llu ns per run, %llu ns per sample taken ]\n",
			bpf_program__name(progs[i]), (unsigned long long)info.run_cnt,
			(unsigned long long)(info.run_time_ns / info.run_cnt),
			(unsigned long long)(info.run_time_ns / taken));
	}
	print_walk_cost(b, stack_progs_ns, taken);
}

/* How the user stacks were walked, and why the table walks that ended early did */
static void print_unwind_summary(struct bpf_bstack *b, const u64 *s)
{
	u64 cfi = s[BPF_BSTACK_STAT_CFI_STACKS];

	if (!b->cfi)
		return;
	fprintf(stderr, "[ perf bstack: user stacks: %" PRIu64 " walked with unwind tables", cfi);
	fprintf(stderr, " (%.1f%% to the bottom), %" PRIu64 " by frame pointer",
		bpf_bstack__pct(s[BPF_BSTACK_STAT_CFI_COMPLETE], cfi),
		s[BPF_BSTACK_STAT_FP_STACKS]);
	fprintf(stderr, " (tables not loaded yet: %" PRIu64 " of them after new code was mapped,",
		s[BPF_BSTACK_STAT_CFI_NO_MAP]);
	fprintf(stderr, " %" PRIu64 " inside execve()", s[BPF_BSTACK_STAT_CFI_IN_EXEC]);
	fprintf(stderr, ") ]\n");
	fprintf(stderr, "[ perf bstack: table walks took %" PRIu64 " frames by frame pointer: ",
		s[BPF_BSTACK_STAT_CFI_FP_FRAMES]);
	fprintf(stderr, "%" PRIu64 " in code without a file (JIT, vDSO), %" PRIu64
		" where a file had no unwind rule; %" PRIu64
		" frames through CPython's perf trampolines ]\n",
		s[BPF_BSTACK_STAT_CFI_FP_FRAMES] - s[BPF_BSTACK_STAT_CFI_FP_GUESSED],
		s[BPF_BSTACK_STAT_CFI_FP_GUESSED], s[BPF_BSTACK_STAT_CFI_TRAMPOLINES]);
	if (cfi > s[BPF_BSTACK_STAT_CFI_COMPLETE]) {
		fprintf(stderr, "[ perf bstack: table walks ended early at: %" PRIu64
			" code without unwind rule, %" PRIu64 " unreadable stack,",
			s[BPF_BSTACK_STAT_CFI_NO_ROW], s[BPF_BSTACK_STAT_CFI_UNREADABLE]);
		fprintf(stderr, " %" PRIu64 " rules not followed, %" PRIu64
			" CFA from a register a callee saved, %" PRIu64 " max-stack ]\n",
			s[BPF_BSTACK_STAT_CFI_BAD_RULE], s[BPF_BSTACK_STAT_CFI_REG_UNKNOWN],
			s[BPF_BSTACK_STAT_CFI_DEPTH]);
	}
	bpf_bstack_cfi__summary(b->cfi, stderr);
}

/* Samples, stacks or hits lost */
static bool lost_any(struct bpf_bstack *b, const u64 *s)
{
	return s[BPF_BSTACK_STAT_COUNTS_FULL] || bpf_bstack__lost_stacks(s, true) ||
	       bpf_bstack__lost_stacks(s, false) || s[BPF_BSTACK_STAT_RECURSION_MISSES] ||
	       s[BPF_BSTACK_STAT_NESTED_LOST] || b->nr_missing_stacks || b->nr_jit_failed;
}

/*
 * The share of user stacks the tables walked to the bottom, of all user
 * stacks, below which the summary tells why the others ended early: those
 * walked by frame pointer before their tables were loaded are whole only
 * in code built with frame pointers
 */
#define BSTACK_WHOLE_ENOUGH	90.0

static double whole_pct(const u64 *s)
{
	return bpf_bstack__pct(s[BPF_BSTACK_STAT_CFI_COMPLETE],
			       s[BPF_BSTACK_STAT_CFI_STACKS] + s[BPF_BSTACK_STAT_FP_STACKS]);
}

/*
 * The details of a recording, after its one line: with -v, or when they
 * tell of trouble, something lost or stacks that ended early
 */
static bool summary_details(struct bpf_bstack *b, const u64 *s)
{
	if (verbose > 0 || b->opts.walk_cost || lost_any(b, s))
		return true;
	return b->cfi && (whole_pct(s) < BSTACK_WHOLE_ENOUGH ||
			  bpf_bstack_cfi__troubled(b->cfi));
}

static void print_summary(struct bpf_bstack *b)
{
	u64 s[BPF_BSTACK_STAT_MAX];
	char lost[256];
	int i;

	for (i = 0; i < BPF_BSTACK_STAT_MAX; i++)
		s[i] = b->last_stats.stat[i];

	fprintf(stderr,
		"[ perf bstack: %" PRIu64 " samples, %" PRIu64 " unique user and %" PRIu64
		" kernel stacks, %.1f%% of %" PRIu64 " user frames without build-id",
		s[BPF_BSTACK_STAT_SAMPLES], b->nr_user_stacks, b->nr_kern_stacks,
		bpf_bstack__pct(s[BPF_BSTACK_STAT_USER_IP_FRAMES], s[BPF_BSTACK_STAT_USER_FRAMES]),
		s[BPF_BSTACK_STAT_USER_FRAMES]);
	if (b->cfi)
		fprintf(stderr, ", %.1f%% of user stacks to the bottom", whole_pct(s));
	if (!summary_details(b, s)) {
		fprintf(stderr, ", nothing lost ]\n");
		return;
	}
	fprintf(stderr, " ]\n");
	bpf_bstack__scnprintf_lost(lost, sizeof(lost), s);
	fprintf(stderr, "[ perf bstack: %s ]\n", lost);
	if (b->nr_missing_stacks)
		fprintf(stderr,
			"[ perf bstack: %" PRIu64
			" stacks vanished from the map before they were written ]\n",
			b->nr_missing_stacks);
	if (b->nr_early_drains)
		fprintf(stderr, "[ perf bstack: %" PRIu64 " of %" PRIu64
			" drains before the maps filled (half of --count-entries %d or --map-entries %d new) ]\n",
			b->nr_early_drains, b->nr_drains, b->opts.count_entries,
			b->opts.map_entries);
	/* not a loss: a stack that comes back after aging out is written again */
	pr_debug("%" PRIu64 " stack ids unused for %d drains were forgotten\n",
		 b->nr_aged_out, BSTACK_WRITTEN_AGE);
	print_unwind_summary(b, s);
	if (b->nr_jit_pids || b->nr_jit_failed) {
		fprintf(stderr,
			"[ perf bstack: JIT symbols (perf-PID.map, jit-PID.dump) of %u processes ",
			b->nr_jit_pids);
		fprintf(stderr, "kept in %u images, %u failed ]\n", b->nr_jit_images,
			b->nr_jit_failed);
	}
	if (s[BPF_BSTACK_STAT_KERN_RECALLED])
		fprintf(stderr, "[ perf bstack: %" PRIu64
			" kernel stacks at system call entries known from their user stacks, not walked ]\n",
			s[BPF_BSTACK_STAT_KERN_RECALLED]);
	print_prog_stats(b);
	if (b->nr_kern_stacks && b->skel->rodata->kern_build_id)
		fprintf(stderr, "[ perf bstack: kernel frames %s ]\n",
			b->skel->bss->kern_build_id_failed ?
			"as IPs: this kernel has no BPF_F_KERNEL_BUILD_ID" :
			"as build-id + offset");
	if (b->opts.no_mmap_tracking)
		fprintf(stderr,
			"[ perf bstack: no mmap tracking: binaries of processes that exited before a drain are left to the build-id cache and debuginfod ]\n");
}

/* Mark the DSOs a bstack sample of perf.data names, for HEADER_BUILD_ID */
int bpf_bstack__mark_sample(struct bpf_bstack *b, struct machine *machine,
			    struct evsel *evsel, struct perf_sample *sample)
{
	return bpf_bstack__mark_dsos(&b->marks, machine, evsel, sample);
}

/* Print what was recorded and lost, and free b */
void bpf_bstack__finish(struct bpf_bstack *b, bool silent)
{
	b->skel->bss->enabled = 0;
	if (!silent && b->drained_final)
		print_summary(b);
	bpf_bstack__marks_summary(&b->marks);
	bpf_bstack__delete(b);
}
