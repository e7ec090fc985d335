// SPDX-License-Identifier: GPL-2.0
/*
 * perf record --bstack: sample stacks as (build-id, file offset) with BPF
 * and drain them into perf.data, in the way --off-cpu does.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/timerfd.h>
#include <linux/capability.h>
#include <linux/err.h>
#include <linux/kernel.h>
#include <linux/zalloc.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <internal/xyarray.h>
#include <api/fs/fs.h>
#include <api/fs/tracing_path.h>

#include "util/bpf_counter.h"
#include "util/bstack.h"
#include "util/build-id.h"
#include "util/cap.h"
#include "util/cpumap.h"
#include "util/data.h"
#include "util/debug.h"
#include "util/dso.h"
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

#include "bpf_skel/bstack.h"
#include "bpf_skel/bstack.skel.h"

#define FD(evsel, cpu_idx) (*(int *)xyarray__entry((evsel)->core.fd, cpu_idx, 0))

/* what can be in the bstack evsel's samples, see write_record() */
#define BSTACK_SAMPLE_TYPES (PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP |	\
			     PERF_SAMPLE_TID | PERF_SAMPLE_TIME |	\
			     PERF_SAMPLE_ID | PERF_SAMPLE_STREAM_ID |	\
			     PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD |	\
			     PERF_SAMPLE_RAW)

static struct bstack_bpf *skel;
static struct evlist *sampling;		/* our events, not in perf.data */
static struct bpf_link **links;
static int nr_links, max_links;

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

static struct bstack_source events[BPF_BSTACK_MAX_EVENTS];
static int nr_events;
static bool events_written;
static int timer_fd = -1;
static bool drained_final;

/* user space state across drains */
static struct hashmap *written;		/* stack id -> drain that last named it */
static struct hashmap *known_bids;	/* build-ids with a DSO (no tracking mode) */
static struct bpf_bstack_stats last_stats;
static u64 nr_user_stacks, nr_kern_stacks, nr_missing_stacks, nr_aged_out;

/*
 * A written stack id is remembered for BSTACK_WRITTEN_AGE drains after a
 * count last named it.  One that comes back later is written again (report
 * keeps the first copy), so in --interval mode memory follows the rate of
 * new stacks, not the length of the run: the stacks of short-lived
 * processes are all new.
 */
#define BSTACK_WRITTEN_AGE	16
static unsigned long drain_gen;
/* a command given to record, not the 'sleep' of -d beside -p or -t */
static bool profile_workload;

union bstack_event {
	struct perf_event_header hdr;
	u64 array[(PERF_SAMPLE_MAX_SIZE) / sizeof(u64)];
};

static u64 now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static int check_privileges(void)
{
	bool used_root;
	int paranoid = 2, unpriv_bpf = 2;

	if (perf_cap__capable(CAP_BPF, &used_root) &&
	    perf_cap__capable(CAP_PERFMON, &used_root))
		return 0;

	sysctl__read_int("kernel/perf_event_paranoid", &paranoid);
	sysctl__read_int("kernel/unprivileged_bpf_disabled", &unpriv_bpf);
	pr_err("perf bstack needs root, or CAP_BPF and CAP_PERFMON, to load its BPF program (kernel.unprivileged_bpf_disabled=%d, kernel.perf_event_paranoid=%d)\n",
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

static struct bstack_source *add_event(u32 kind, const char *name)
{
	struct bstack_source *ev;

	if (nr_events == BPF_BSTACK_MAX_EVENTS) {
		pr_err("perf bstack: at most %d events at once\n", BPF_BSTACK_MAX_EVENTS);
		return NULL;
	}
	ev = &events[nr_events++];
	ev->kind = kind;
	snprintf(ev->name, sizeof(ev->name), "%s", name);
	return ev;
}

/* Is the tracepoint SYS:NAME a uprobe (or kprobe) event, as perf probe makes them? */
static bool is_probe_event(const char *sys, const char *name)
{
	static const char * const files[] = { "uprobe_events", "kprobe_events" };
	char want[256], line[BUFSIZ];
	size_t i;
	bool found = false;

	snprintf(want, sizeof(want), "%s/%s ", sys, name);
	for (i = 0; i < ARRAY_SIZE(files) && !found; i++) {
		char *path = get_tracing_file(files[i]);
		FILE *fp = path ? fopen(path, "r") : NULL;

		/* lines like "p:probe_ls/main /usr/bin/ls:0x4b80" */
		while (fp && !found && fgets(line, sizeof(line), fp))
			found = strlen(line) > 2 && !strncmp(line + 2, want, strlen(want));
		if (fp)
			fclose(fp);
		put_tracing_file(path);
	}
	return found;
}

static int add_tracepoint(struct evsel *evsel)
{
	struct perf_event_attr *attr = &evsel->core.attr;
	const char *full = evsel__name(evsel), *colon = strchr(full, ':');
	char sys[128];
	struct bstack_source *ev;

	snprintf(sys, sizeof(sys), "%.*s", colon ? (int)(colon - full) : 0, full);
	ev = add_event(colon && is_probe_event(sys, colon + 1) ? BPF_BSTACK_EVENT_UPROBE :
		       BPF_BSTACK_EVENT_TRACEPOINT, full);
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

static int add_sampling_event(struct evsel *evsel)
{
	struct bpf_bstack_opts *o = &bpf_bstack__opts;
	struct perf_event_attr *attr = &evsel->core.attr;
	struct bstack_source *ev = add_event(BPF_BSTACK_EVENT_SAMPLE, evsel__name(evsel));

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
static int add_uprobes(const char *list)
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
			pr_err("perf bstack: --uprobe '%s': give it as BINARY:FUNCTION\n", pos->s);
			err = -EINVAL;
			break;
		}
		base = memrchr(pos->s, '/', colon - pos->s);
		base = base ? base + 1 : pos->s;
		/* named like the events of perf probe: the binary's base name */
		snprintf(name, sizeof(name), "uprobe:%s", base);
		ev = add_event(BPF_BSTACK_EVENT_UPROBE, name);
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
static int parse_bstack_events(void)
{
	struct bpf_bstack_opts *o = &bpf_bstack__opts;
	struct parse_events_error perr;
	const char *list = o->event;
	struct evsel *evsel;
	int err;

	sampling = evlist__new();
	if (!sampling)
		return -ENOMEM;
	/* cpu-clock unless other events are given, and beside --off-cpu as perf record does */
	if (!list && !o->uprobes)
		list = "cpu-clock";
	if (list) {
		parse_events_error__init(&perr);
		err = parse_events(sampling, list, &perr);
		if (err) {
			parse_events_error__print(&perr, list);
			pr_err("perf bstack: cannot use event '%s'\n", list);
		}
		parse_events_error__exit(&perr);
		if (err)
			return -EINVAL;
	}

	evlist__for_each_entry(sampling, evsel) {
		if (evsel->core.attr.type == PERF_TYPE_TRACEPOINT)
			err = add_tracepoint(evsel);
		else
			err = add_sampling_event(evsel);
		if (err)
			return err;
	}
	if (o->uprobes) {
		err = add_uprobes(o->uprobes);
		if (err)
			return err;
	}
	if (o->off_cpu && !add_event(BPF_BSTACK_EVENT_OFFCPU, BPF_BSTACK_OFFCPU_EVENT))
		return -E2BIG;
	return 0;
}

static int add_link(struct bpf_link *link)
{
	if (nr_links == max_links) {
		int n = max_links ? max_links * 2 : 16;
		void *p = realloc(links, n * sizeof(*links));

		if (!p) {
			bpf_link__destroy(link);
			return -ENOMEM;
		}
		links = p;
		max_links = n;
	}
	links[nr_links++] = link;
	return 0;
}

static int link_error(struct bpf_link *link)
{
	return link ? PTR_ERR(link) : (errno ? -errno : -EINVAL);
}

static int attach_perf_event(struct bpf_program *prog, int fd, int idx)
{
	LIBBPF_OPTS(bpf_perf_event_opts, opts, .bpf_cookie = idx);
	struct bpf_link *link = bpf_program__attach_perf_event_opts(prog, fd, &opts);

	if (IS_ERR_OR_NULL(link))
		return link_error(link);
	return add_link(link);
}

static int open_evsel(struct bstack_source *ev, struct perf_cpu_map *cpus,
		      struct target *target)
{
	char msg[BUFSIZ];
	int err = evsel__open_per_cpu(ev->evsel, cpus, -1);

	if (err) {
		evsel__open_strerror(ev->evsel, target, -err, msg, sizeof(msg));
		pr_err("perf bstack: cannot open '%s': %s\n", ev->name, msg);
	}
	return err;
}

/* A sampling event: one perf event per CPU, each running the program */
static int open_sampling_event(struct bstack_source *ev, int idx, struct perf_cpu_map *cpus,
			       struct target *target)
{
	struct perf_cpu cpu;
	int i, err;

	err = open_evsel(ev, cpus, target);
	if (err)
		return err;
	perf_cpu_map__for_each_cpu(cpu, i, cpus) {
		err = attach_perf_event(skel->progs.on_sample, FD(ev->evsel, i), idx);
		if (err) {
			pr_err("perf bstack: cannot attach to '%s' on CPU %d: %s\n",
			       ev->name, cpu.cpu, strerror(-err));
			return err;
		}
	}
	return 0;
}

/*
 * A tracepoint runs the programs of any of its perf events on every CPU:
 * one event, on the first CPU, is enough (and more would count each hit
 * more than once).
 */
static int open_tracepoint(struct bstack_source *ev, int idx, struct perf_cpu_map *cpus,
			   struct target *target)
{
	struct bpf_program *prog = ev->kind == BPF_BSTACK_EVENT_UPROBE ?
				   skel->progs.on_uprobe : skel->progs.on_tracepoint;
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
	err = attach_perf_event(prog, FD(ev->evsel, 0), idx);
	if (err)
		pr_err("perf bstack: cannot attach to '%s': %s\n", ev->name, strerror(-err));
	return err;
}

static int attach_uprobe(struct bstack_source *ev, int idx)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .func_name = ev->function, .bpf_cookie = idx);
	struct bpf_link *link;
	int err;

	if (access(ev->binary, R_OK)) {
		pr_err("perf bstack: --uprobe %s:%s: cannot read %s: %m\n",
		       ev->binary, ev->function, ev->binary);
		return -errno;
	}
	errno = 0;
	link = bpf_program__attach_uprobe_opts(skel->progs.on_uprobe, -1, ev->binary, 0, &opts);
	if (IS_ERR_OR_NULL(link)) {
		err = link_error(link);
		if (err == -ENOENT || err == -ESRCH)
			pr_err("perf bstack: --uprobe %s:%s: no function '%s' in %s\n",
			       ev->binary, ev->function, ev->function, ev->binary);
		else
			pr_err("perf bstack: --uprobe %s:%s: cannot attach: %s\n",
			       ev->binary, ev->function, strerror(-err));
		return err;
	}
	return add_link(link);
}

static int open_bstack_events(struct target *target)
{
	struct perf_cpu_map *cpus;
	int i, err = 0;

	cpus = target->cpu_list ? perf_cpu_map__new(target->cpu_list) :
				  perf_cpu_map__new_online_cpus();
	if (!cpus) {
		pr_err("perf bstack: invalid cpu list '%s'\n", target->cpu_list);
		return -EINVAL;
	}
	for (i = 0; i < nr_events && !err; i++) {
		struct bstack_source *ev = &events[i];

		if (ev->kind == BPF_BSTACK_EVENT_SAMPLE)
			err = open_sampling_event(ev, i, cpus, target);
		else if (ev->evsel)
			err = open_tracepoint(ev, i, cpus, target);
		else if (ev->kind == BPF_BSTACK_EVENT_UPROBE)
			err = attach_uprobe(ev, i);
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

static int set_max_stack(void)
{
	int sysctl_max = PERF_MAX_STACK_DEPTH;
	int max = bpf_bstack__opts.max_stack;

	sysctl__read_int("kernel/perf_event_max_stack", &sysctl_max);
	if (max <= 0 || max > BPF_BSTACK_MAX_STACK) {
		pr_err("perf bstack: --max-stack must be between 1 and %d\n",
		       BPF_BSTACK_MAX_STACK);
		return -EINVAL;
	}
	if (max > sysctl_max) {
		pr_debug("bstack: --max-stack capped to kernel.perf_event_max_stack=%d\n",
			 sysctl_max);
		max = sysctl_max;
	}
	skel->data->max_frames = max;
	bpf_map__set_value_size(skel->maps.bstack_user_stacks, bid_stack_size(max));
	bpf_map__set_value_size(skel->maps.bstack_kern_stacks, ip_stack_size(max));
	bpf_map__set_value_size(skel->maps.bstack_kern_bid_stacks, bid_stack_size(max));
	bpf_map__set_value_size(skel->maps.bstack_user_ip_stacks, ip_stack_size(max));
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

static int add_to_task_filter(const char *list)
{
	struct strlist *slist = strlist__new(list, NULL);
	int fd = bpf_map__fd(skel->maps.bstack_task_filter);
	struct str_node *pos;
	u8 val = 1;

	if (!slist)
		return -ENOMEM;
	strlist__for_each_entry(pos, slist) {
		char *end;
		u32 id = strtoul(pos->s, &end, 10);

		if (*end != '\0' || bpf_map_update_elem(fd, &id, &val, BPF_ANY)) {
			pr_err("perf bstack: cannot filter on '%s'\n", pos->s);
			strlist__delete(slist);
			return -EINVAL;
		}
	}
	strlist__delete(slist);
	return 0;
}

/* -p and a forked workload follow the process tree; -t selects threads */
static int config_task_filter(struct target *target)
{
	int n = 4096;

	if (target->pid) {
		n = max(n, count_pids(target->pid) * 4);
		skel->bss->uses_tgid = 1;
	} else if (target->tid) {
		n = max(n, count_pids(target->tid));
	} else if (target__none(target)) {
		skel->bss->uses_tgid = 1;	/* the workload, added at start */
		profile_workload = true;
	} else {
		return 0;
	}
	skel->bss->has_task = 1;
	bpf_map__set_max_entries(skel->maps.bstack_task_filter, n);
	return 0;
}

static int config_skel(struct target *target)
{
	struct bpf_bstack_opts *o = &bpf_bstack__opts;
	int i, err;

	if (o->user_only && o->kernel_only) {
		pr_err("perf bstack: --user-stack-only and --kernel-stack-only exclude each other\n");
		return -EINVAL;
	}
	if (o->map_entries <= 0 || o->count_entries <= 0) {
		pr_err("perf bstack: map sizes must be positive\n");
		return -EINVAL;
	}
	err = set_max_stack();
	if (err)
		return err;

	for (i = 0; i < nr_events; i++)
		if (events[i].kind == BPF_BSTACK_EVENT_OFFCPU)
			skel->bss->offcpu_event = i;
	/* sched_switch runs for every task switch: only when asked for */
	bpf_program__set_autoload(skel->progs.on_switch, o->off_cpu);

	skel->data->user_stack = !o->kernel_only;
	skel->data->user_build_id = !o->ip_stacks;
	/* kernel frames as build-id + offset where the kernel can: it says at once */
	skel->data->kern_build_id = !o->ip_stacks;
	skel->data->kern_stack = !o->user_only;
	bpf_map__set_max_entries(skel->maps.bstack_user_stacks, o->map_entries);
	bpf_map__set_max_entries(skel->maps.bstack_kern_stacks, o->map_entries);
	bpf_map__set_max_entries(skel->maps.bstack_kern_bid_stacks, o->map_entries);
	bpf_map__set_max_entries(skel->maps.bstack_user_ip_stacks, o->map_entries);
	bpf_map__set_max_entries(skel->maps.bstack_counts0, o->count_entries);
	bpf_map__set_max_entries(skel->maps.bstack_counts1, o->count_entries);

	if (target->uid != UINT_MAX) {
		skel->bss->has_uid = 1;
		skel->bss->filter_uid = target->uid;
	}
	return config_task_filter(target);
}

static int load_skel(struct target *target)
{
	int err;

	skel = bstack_bpf__open();
	if (!skel) {
		pr_err("perf bstack: failed to open the BPF skeleton\n");
		return -EINVAL;
	}
	err = config_skel(target);
	if (err)
		return err;

	set_max_rlimit();
	err = bstack_bpf__load(skel);
	if (err) {
		pr_err("perf bstack: failed to load the BPF program: %s\n", strerror(-err));
		return err;
	}
	if (target->pid)
		err = add_to_task_filter(target->pid);
	else if (target->tid)
		err = add_to_task_filter(target->tid);
	if (err)
		return err;

	err = bstack_bpf__attach(skel);
	if (err)
		pr_err("perf bstack: failed to attach the BPF programs: %s\n", strerror(-err));
	return err;
}

static int setup_interval(struct evlist *evlist)
{
	unsigned int ms = bpf_bstack__opts.interval_ms;
	struct itimerspec its = {
		.it_interval = { ms / 1000, (ms % 1000) * 1000000L },
		.it_value    = { ms / 1000, (ms % 1000) * 1000000L },
	};

	if (!ms)
		return 0;
	timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (timer_fd < 0 || timerfd_settime(timer_fd, 0, &its, NULL) < 0) {
		pr_err("perf bstack: cannot create the interval timer: %m\n");
		return -errno;
	}
	/* wakes perf record's poll loop, which then calls bpf_bstack__drain_due() */
	if (evlist__add_wakeup_eventfd(evlist, timer_fd) < 0) {
		pr_err("perf bstack: cannot poll the interval timer\n");
		return -EINVAL;
	}
	return 0;
}

static void bstack_cleanup(void)
{
	int i;

	for (i = 0; i < nr_links; i++)
		bpf_link__destroy(links[i]);
	zfree(&links);
	nr_links = max_links = 0;
	for (i = 0; i < nr_events; i++) {
		zfree(&events[i].binary);
		zfree(&events[i].function);
	}
	nr_events = 0;
	events_written = false;
	profile_workload = false;
	if (sampling) {
		evlist__close(sampling);
		evlist__delete(sampling);
		sampling = NULL;
	}
	bstack_bpf__destroy(skel);
	skel = NULL;
	if (timer_fd >= 0)
		close(timer_fd);
	timer_fd = -1;
	hashmap__free(written);
	written = NULL;
	hashmap__free(known_bids);
	known_bids = NULL;
}

int bpf_bstack__prepare(struct evlist *evlist, struct target *target,
			struct record_opts *opts)
{
	int err;

	err = check_privileges();
	if (err)
		return err;

	err = add_bstack_evsel(evlist);
	if (err)
		return err;

	/* sample times come from bpf_ktime_get_ns(): keep perf's on the same clock */
	if (!opts->use_clockid) {
		opts->use_clockid = true;
		opts->clockid = CLOCK_MONOTONIC;
	} else if (opts->clockid != CLOCK_MONOTONIC) {
		pr_warning("perf bstack: bstack samples are timed with CLOCK_MONOTONIC\n");
	}

	if (bpf_bstack__opts.no_mmap_tracking) {
		struct evsel *evsel;

		evlist__for_each_entry(evlist, evsel)
			evsel->tracking = false;
	} else {
		/* MMAP2 records carry build-ids: no need to read them back from the files */
		opts->build_id = true;
		symbol_conf.buildid_mmap2 = true;
	}

	written = hashmap__new(bpf_bstack__id_hash, bpf_bstack__id_equal, NULL);
	known_bids = hashmap__new(bpf_bstack__id_hash, bpf_bstack__id_equal, NULL);
	if (IS_ERR(written) || IS_ERR(known_bids)) {
		written = known_bids = NULL;
		err = -ENOMEM;
		goto out;
	}

	err = parse_bstack_events();
	if (!err)
		err = load_skel(target);
	if (!err)
		err = open_bstack_events(target);
	if (!err)
		err = setup_interval(evlist);
	if (!err)
		return 0;
out:
	bstack_cleanup();
	return err;
}

bool bpf_bstack__wants_tracking(void)
{
	return !bpf_bstack__opts.no_mmap_tracking;
}

void bpf_bstack__start(struct evlist *evlist)
{
	/* the forked workload: its children are followed by on_newtask */
	if (profile_workload && evlist->workload.pid > 0) {
		u32 pid = evlist->workload.pid;
		u8 val = 1;

		bpf_map_update_elem(bpf_map__fd(skel->maps.bstack_task_filter),
				    &pid, &val, BPF_ANY);
	}
	skel->bss->enabled = 1;
}

bool bpf_bstack__drain_due(void)
{
	u64 expirations;

	if (timer_fd < 0 || !skel)
		return false;
	return read(timer_fd, &expirations, sizeof(expirations)) == sizeof(expirations);
}

struct bstack_writer {
	struct perf_session	*session;
	u64			sample_type;
	u64			sid;
	u64			now;
	int			bytes;
	union bstack_event	event;
	u64			payload[(sizeof(struct bpf_bstack_rec_stack) +
				 sizeof(struct bpf_bstack_user_stack)) / sizeof(u64) + 1];
	struct bpf_bstack_user_stack	value;	/* of a stack map (any: nr first) */
};

static int write_record(struct bstack_writer *w, u32 pid, u32 tid, u32 cpu,
			u64 time, u64 period)
{
	struct bpf_bstack_rec_hdr *hdr = (void *)w->payload;
	struct perf_sample sample = {
		.pid		= pid,
		.tid		= tid,
		.cpu		= cpu,
		.time		= time,
		.period		= period,
		.id		= w->sid,
		.stream_id	= w->sid,
		.raw_data	= w->payload,
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
	if (perf_data_file__write(&w->session->data->file, &w->event, size) < 0) {
		pr_err("perf bstack: failed to write perf.data: %m\n");
		return -errno;
	}
	w->bytes += size;
	return 0;
}

static_assert(offsetof(struct bpf_bstack_user_stack, frame) ==
	      offsetof(struct bpf_bstack_kern_stack, ip), "frames after nr in both");

/* Write a stack the first time a count refers to it: 1 when it did */
static int write_stack(struct bstack_writer *w, u64 id, u32 kind)
{
	struct bpf_bstack_rec_stack *rec = (void *)w->payload;
	struct bpf_map *map = kind == BPF_BSTACK_STACK_USER ? skel->maps.bstack_user_stacks :
			      kind == BPF_BSTACK_STACK_USER_IP ? skel->maps.bstack_user_ip_stacks :
			      skel->maps.bstack_kern_stacks;
	u32 max = skel->data->max_frames, nr;
	int err;

	if (!id)
		return 0;
	/* written already: note the drain, in the same lookup */
	err = hashmap__update(written, id, drain_gen, NULL, NULL);
	if (err != -ENOENT)
		return err;

	/* a kernel stack has build-ids unless the kernel refused them */
	if (kind == BPF_BSTACK_STACK_KERNEL && skel->data->kern_build_id &&
	    !bpf_map_lookup_elem(bpf_map__fd(skel->maps.bstack_kern_bid_stacks), &id, &w->value)) {
		kind = BPF_BSTACK_STACK_KERNEL_BID;
	} else if (bpf_map_lookup_elem(bpf_map__fd(map), &id, &w->value)) {
		nr_missing_stacks++;
		return 0;
	}
	if (kind == BPF_BSTACK_STACK_USER || kind == BPF_BSTACK_STACK_USER_IP)
		nr_user_stacks++;
	else
		nr_kern_stacks++;
	/* both kinds of value have nr, then the frames: the stale ones stay behind */
	nr = min_t(u64, w->value.nr, max);
	memcpy(rec + 1, w->value.frame, bpf_bstack__stack_size(kind, nr) - sizeof(*rec));
	rec->id = id;
	rec->kind = kind;
	rec->nr = nr;
	bpf_bstack__init_hdr(&rec->hdr, BPF_BSTACK_REC_STACK,
			     bpf_bstack__stack_size(kind, nr));

	err = write_record(w, -1, -1, 0, w->now, 0);
	if (!err)
		err = hashmap__add(written, id, drain_gen);
	return err ?: 1;
}

/*
 * --no-mmap-tracking: learn the paths of the build-ids a stack names from
 * the maps of the (live) process, through /proc/PID/root for processes in
 * other mount namespaces.  Binaries of processes that already exited are
 * left to the build-id cache and debuginfod at report time.
 */
static void harvest_maps(struct machine *machine, pid_t pid)
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
		if (hashmap__find(known_bids, key, NULL))
			continue;

		dso = machine__findnew_dso(machine, file);
		if (!dso)
			continue;
		if (!dso__has_build_id(dso))
			dso__set_build_id(dso, &bid);
		if (nsi && nsinfo__need_setns(nsi) && !dso__nsinfo(dso))
			dso__set_nsinfo(dso, nsinfo__get(nsi));
		dso__put(dso);
		hashmap__add(known_bids, key, 1);
	}
	fclose(fp);
out:
	nsinfo__put(nsi);
}

/* Does a user stack just written name a binary no harvest has found yet? */
static bool names_unknown_binary(const struct bpf_bstack_rec_stack *rec)
{
	const struct bpf_bstack_frame *f = bpf_bstack__user_frames((void *)rec);
	u32 i;

	for (i = 0; i < rec->nr; i++) {
		if (f[i].status == BPF_STACK_BUILD_ID_VALID &&
		    !hashmap__find(known_bids, bpf_bstack__bid_key(f[i].build_id), NULL))
			return true;
	}
	return false;
}

static int write_count(struct bstack_writer *w, const struct bpf_bstack_key *key,
		       const struct bpf_bstack_count *val)
{
	struct bpf_bstack_rec_count *rec = (void *)w->payload;
	int err;

	err = write_stack(w, key->user_stack, bpf_bstack__opts.ip_stacks ?
			  BPF_BSTACK_STACK_USER_IP : BPF_BSTACK_STACK_USER);
	/* a new build-id stack is still in the payload buffer */
	if (err > 0 && bpf_bstack__opts.no_mmap_tracking && !bpf_bstack__opts.ip_stacks &&
	    names_unknown_binary((void *)w->payload))
		harvest_maps(&w->session->machines.host, key->pid);
	if (err >= 0)
		err = write_stack(w, key->kern_stack, BPF_BSTACK_STACK_KERNEL);
	if (err < 0)
		return err;

	memset(rec, 0, sizeof(*rec));
	bpf_bstack__init_hdr(&rec->hdr, BPF_BSTACK_REC_COUNT, sizeof(*rec));
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
	return write_record(w, key->pid, key->tid, key->cpu, val->last_ns, val->count);
}

/*
 * Take every count out of one map.  Keys are collected first, then each
 * entry is taken with an atomic lookup-and-delete, so a sample that the
 * BPF program adds meanwhile is either in what we read or left for the
 * next drain, never lost.
 */
static int drain_counts(struct bstack_writer *w, struct bpf_map *map)
{
	int fd = bpf_map__fd(map), n = 0, i, err = 0;
	int max = bpf_map__max_entries(map);
	struct bpf_bstack_key *keys, *prev = NULL;
	struct bpf_bstack_count val;

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

static void read_stats(struct bpf_bstack_stats *sum)
{
	int ncpus = libbpf_num_possible_cpus();
	struct bpf_bstack_stats *percpu;
	u32 zero = 0;
	int cpu, i;

	memset(sum, 0, sizeof(*sum));
	percpu = calloc(ncpus, sizeof(*percpu));
	if (!percpu)
		return;
	if (!bpf_map_lookup_elem(bpf_map__fd(skel->maps.bstack_stats), &zero, percpu)) {
		for (cpu = 0; cpu < ncpus; cpu++)
			for (i = 0; i < BPF_BSTACK_STAT_MAX; i++)
				sum->stat[i] += percpu[cpu].stat[i];
	}
	free(percpu);
}

static int write_stats(struct bstack_writer *w)
{
	struct bpf_bstack_rec_stats *rec = (void *)w->payload;

	read_stats(&last_stats);
	bpf_bstack__init_hdr(&rec->hdr, BPF_BSTACK_REC_STATS,
			     bpf_bstack__stats_size(BPF_BSTACK_STAT_MAX));
	rec->nr = BPF_BSTACK_STAT_MAX;
	rec->reserved = 0;
	memcpy(rec->stat, last_stats.stat, sizeof(last_stats.stat));
	return write_record(w, -1, -1, 0, w->now, 0);
}

/* Name the events, once, before the first count that refers to them */
static int write_events(struct bstack_writer *w)
{
	struct bpf_bstack_rec_event *rec = (void *)w->payload;
	int i, err;

	for (i = 0; i < nr_events; i++) {
		memset(rec, 0, sizeof(*rec));
		bpf_bstack__init_hdr(&rec->hdr, BPF_BSTACK_REC_EVENT, sizeof(*rec));
		rec->index = i;
		rec->kind = events[i].kind;
		memcpy(rec->name, events[i].name, sizeof(rec->name));
		rec->name[sizeof(rec->name) - 1] = '\0';
		err = write_record(w, -1, -1, 0, w->now, 0);
		if (err)
			return err;
	}
	events_written = true;
	return 0;
}

/* Stacks already in perf.data are dropped from the kernel maps between drains */
static void forget_written_stacks(struct bpf_map *map)
{
	int fd = bpf_map__fd(map);
	u64 key, next, *prev = NULL;

	while (!bpf_map_get_next_key(fd, prev, &next)) {
		if (prev && hashmap__find(written, key, NULL))
			bpf_map_delete_elem(fd, &key);
		key = next;
		prev = &key;
	}
	if (prev && hashmap__find(written, key, NULL))
		bpf_map_delete_elem(fd, &key);
}

static void age_written_stacks(void)
{
	struct hashmap_entry *cur, *tmp;
	size_t bkt;

	if (++drain_gen < BSTACK_WRITTEN_AGE)
		return;
	hashmap__for_each_entry_safe(written, cur, tmp, bkt) {
		if ((unsigned long)cur->value + BSTACK_WRITTEN_AGE > drain_gen)
			continue;
		hashmap__delete(written, cur->key, NULL, NULL);
		nr_aged_out++;
	}
}

int bpf_bstack__write(struct perf_session *session, bool final)
{
	struct bstack_writer *w;
	struct evsel *evsel;
	int active, err, bytes;

	/* perf record failed to open its events: nothing was recorded */
	if (!skel || drained_final || !session->evlist)
		return 0;

	evsel = evlist__find_evsel_by_str(session->evlist, BPF_BSTACK_EVENT);
	if (!evsel) {
		pr_err("perf bstack: %s event not found\n", BPF_BSTACK_EVENT);
		return 0;
	}
	if (evsel->core.attr.sample_type & ~BSTACK_SAMPLE_TYPES) {
		pr_err("perf bstack: unsupported sample type %#" PRIx64 "\n",
		       (u64)evsel->core.attr.sample_type);
		return 0;
	}

	w = zalloc(sizeof(*w));
	if (!w)
		return 0;
	w->session = session;
	w->sample_type = evsel->core.attr.sample_type;
	if (evsel->core.id)
		w->sid = evsel->core.id[0];
	w->now = now_ns();

	if (final)
		skel->bss->enabled = 0;

	/* BPF fills the other count map while this one is read */
	active = skel->bss->active_counts;
	skel->bss->active_counts = !active;
	err = events_written ? 0 : write_events(w);
	if (!err)
		err = drain_counts(w, active ? skel->maps.bstack_counts1 :
					       skel->maps.bstack_counts0);
	if (!err && final)
		err = drain_counts(w, active ? skel->maps.bstack_counts0 :
					       skel->maps.bstack_counts1);
	if (!err)
		err = write_stats(w);
	if (!err && !final) {
		forget_written_stacks(skel->maps.bstack_user_stacks);
		forget_written_stacks(skel->maps.bstack_kern_stacks);
		forget_written_stacks(skel->maps.bstack_kern_bid_stacks);
		forget_written_stacks(skel->maps.bstack_user_ip_stacks);
		age_written_stacks();
	}
	if (err)
		pr_err("perf bstack: draining the BPF maps failed: %s\n", strerror(-err));

	drained_final = final;
	bytes = w->bytes;
	free(w);
	return bytes;
}

static double percent(u64 part, u64 total)
{
	return total ? 100.0 * part / total : 0.0;
}

/* with kernel.bpf_stats_enabled=1, what each program that ran cost */
static void print_prog_stats(void)
{
	struct bpf_program *progs[] = {
		skel->progs.on_sample, skel->progs.on_tracepoint,
		skel->progs.on_uprobe, skel->progs.on_switch,
	};
	u64 taken = max(last_stats.stat[BPF_BSTACK_STAT_SAMPLES], 1ULL);
	size_t i;

	for (i = 0; i < ARRAY_SIZE(progs); i++) {
		struct bpf_prog_info info = {};
		__u32 len = sizeof(info);
		int fd = bpf_program__fd(progs[i]);

		if (fd < 0 || bpf_prog_get_info_by_fd(fd, &info, &len) || !info.run_cnt)
			continue;
		/* runs include hits of tasks the filter rejected */
		fprintf(stderr,
			"[ perf bstack: BPF program %s ran %llu times, %llu ns per run, %llu ns per sample taken ]\n",
			bpf_program__name(progs[i]), (unsigned long long)info.run_cnt,
			(unsigned long long)(info.run_time_ns / info.run_cnt),
			(unsigned long long)(info.run_time_ns / taken));
	}
}

static void print_summary(void)
{
	u64 s[BPF_BSTACK_STAT_MAX], lost_samples, lost_user;
	u64 lost_kern;
	int i;

	for (i = 0; i < BPF_BSTACK_STAT_MAX; i++)
		s[i] = last_stats.stat[i];
	lost_samples = s[BPF_BSTACK_STAT_COUNTS_FULL];
	lost_user = bpf_bstack__lost_stacks(s, true);
	lost_kern = bpf_bstack__lost_stacks(s, false);

	fprintf(stderr,
		"[ perf bstack: %" PRIu64 " samples, %" PRIu64 " unique user and %" PRIu64
		" kernel stacks, %.1f%% of %" PRIu64 " user frames without build-id ]\n",
		s[BPF_BSTACK_STAT_SAMPLES], nr_user_stacks, nr_kern_stacks,
		percent(s[BPF_BSTACK_STAT_USER_IP_FRAMES], s[BPF_BSTACK_STAT_USER_FRAMES]),
		s[BPF_BSTACK_STAT_USER_FRAMES]);
	fprintf(stderr,
		"[ perf bstack: lost %" PRIu64 " samples (counts map full), %" PRIu64
		" user stacks (%" PRIu64 " map full), %" PRIu64 " kernel stacks (%" PRIu64
		" map full) ]\n",
		lost_samples, lost_user, s[BPF_BSTACK_STAT_USER_FULL],
		lost_kern, s[BPF_BSTACK_STAT_KERN_FULL]);
	if (nr_missing_stacks)
		fprintf(stderr,
			"[ perf bstack: %" PRIu64
			" stacks vanished from the map before they were written ]\n",
			nr_missing_stacks);
	/* not a loss: a stack that comes back after aging out is written again */
	pr_debug("perf bstack: %" PRIu64 " stack ids unused for %d drains were forgotten\n",
		 nr_aged_out, BSTACK_WRITTEN_AGE);
	print_prog_stats();
	if (nr_kern_stacks && skel->data->kern_build_id)
		fprintf(stderr, "[ perf bstack: kernel frames %s ]\n",
			skel->bss->kern_build_id_failed ?
			"as IPs: this kernel has no BPF_F_KERNEL_BUILD_ID" :
			"as build-id + offset");
	if (bpf_bstack__opts.no_mmap_tracking)
		fprintf(stderr,
			"[ perf bstack: no mmap tracking: binaries of processes that exited before a drain are left to the build-id cache and debuginfod ]\n");
}

void bpf_bstack__finish(bool silent)
{
	if (!skel)
		return;
	skel->bss->enabled = 0;
	if (!silent && drained_final)
		print_summary();
	bpf_bstack__mark_summary();
	bstack_cleanup();
}
