// SPDX-License-Identifier: GPL-2.0
/*
 * perf record --bstack: sample stacks as (build-id, file offset) with BPF
 * and drain them into perf.data, in the way --off-cpu does.  Here: the
 * events stacks are taken at, the BPF skeleton's configuration and load,
 * the start and the end of a recording; its drains are in
 * bpf_bstack_drain.c, its summary in bpf_bstack_summary.c.
 */
#define pr_fmt(fmt) "perf bstack: " fmt

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/timerfd.h>
#include <linux/capability.h>
#include <linux/err.h>
#include <linux/kernel.h>
#include <linux/log2.h>
#include <linux/string.h>
#include <linux/zalloc.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <internal/xyarray.h>
#include <api/fs/fs.h>
#include <api/fs/tracing_path.h>

#include "util/bpf_counter.h"
#include "util/bstack.h"
#include "util/bstack-cfi.h"
#include "util/cap.h"
#include "util/cpumap.h"
#include "util/debug.h"
#include "util/evlist.h"
#include "util/evsel.h"
#include "util/hashmap.h"
#include "util/parse-events.h"
#include "util/strlist.h"
#include "util/target.h"
#include "util/thread_map.h"

#include "bpf_skel/bstack.h"
#include "bpf_skel/bstack.skel.h"
#include "util/bpf_bstack_record.h"

#define FD(evsel, cpu_idx) (*(int *)xyarray__entry((evsel)->core.fd, cpu_idx, 0))

/*
 * perf record's poll loop is woken for a drain when the --interval is due,
 * or when the BPF program saw new counts or stacks take half of their map
 * since the last drain (the other half takes the new ones until the
 * drain).  Without --interval, a timer checks the maps this often too, in
 * case a wake-up was lost: an idle recording must not wake perf ten times
 * a second, every wake-up costs CPU time of its own.
 */
#define BSTACK_CHECK_MS		1000

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
	struct perf_event_attr *attr = &ev->evsel->core.attr;
	struct perf_cpu cpu;
	int i, err;

	/*
	 * The program never selects the idle task of a task filter: do not
	 * run it there.  A waking idle CPU's caches are cold, and a command's
	 * samples of the CPUs it does not run on were half the program's runs
	 * and a quarter of its time.  Software events alone honour it.
	 */
	if (b->skel->rodata->has_task && attr->type == PERF_TYPE_SOFTWARE)
		attr->exclude_idle = 1;
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
 * The rules walked lately, shared by the CPUs: 4,096 entries (64 KiB) for
 * each online CPU up to four: a hit costs more the more pages the memo
 * spans (on two CPUs, 90-115 ns at 128 KiB, 100-145 at 256 KiB).
 */
#define CFI_MEMO_PER_CPU	4096
#define CFI_MEMO_CPUS		4L

static void config_cfi_memo(struct bpf_bstack *b, bool cfi)
{
	long ncpus = clamp(sysconf(_SC_NPROCESSORS_ONLN), 1L, CFI_MEMO_CPUS);
	u32 n = roundup_pow_of_two(ncpus * CFI_MEMO_PER_CPU);

	b->skel->rodata->memo_shift = ilog2(n);
	bpf_map__set_max_entries(b->skel->maps.bstack_cfi_memo, cfi ? n : 1);
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
	config_cfi_memo(b, cfi);
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

/*
 * --walk-cost: the programs' run time, whatever kernel.bpf_stats_enabled
 * says, while the recording holds the fd; the summary compares the parts
 * of a sample with it.
 */
static void enable_run_time_stats(struct bpf_bstack *b)
{
	b->stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	if (b->stats_fd < 0)
		pr_warning("--walk-cost: no BPF run time stats: %s\n", strerror(errno));
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
	else if (b->opts.walk_cost)
		enable_run_time_stats(b);
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
	if (b->stats_fd >= 0)
		close(b->stats_fd);
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
	b->stats_fd = -1;
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

struct bpf_program *bpf_bstack__prog(struct bpf_bstack *b, int i)
{
	struct bpf_program *progs[BPF_BSTACK_PROGS] = {
		b->skel->progs.on_sample, b->skel->progs.on_tracepoint,
		b->skel->progs.on_uprobe, b->skel->progs.on_switch,
		b->skel->progs.on_exec, b->skel->progs.on_dl_change,
	};

	return progs[i];
}

int bpf_bstack__prog_info(struct bpf_program *prog, struct bpf_prog_info *info)
{
	__u32 len = sizeof(*info);
	int fd = bpf_program__fd(prog);

	memset(info, 0, sizeof(*info));
	return fd < 0 ? fd : bpf_prog_get_info_by_fd(fd, info, &len);
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
		bpf_bstack__print_summary(b);
	bpf_bstack__marks_summary(&b->marks);
	bpf_bstack__delete(b);
}
