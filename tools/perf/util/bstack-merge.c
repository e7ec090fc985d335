// SPDX-License-Identifier: GPL-2.0
/*
 * perf bstack merge: recordings of many machines in one file.
 *
 * Build-id frames mean the same on every machine, so the records of the
 * inputs are written out as they are, without symbols: each unique stack
 * once, every COUNT (so every sample), the recorders' counters summed,
 * the events united by name, and the build-id tables of the headers
 * united, for perf bstack report to resolve them all once through the
 * build-id cache and debuginfod.  Each input's machine gets a HOST record
 * and an index, carried in the pid and tid of its COUNT and side-band
 * records (see bstack-payload.h), so that report can tell the machines
 * apart and resolve IP frames with each one's own mmap records.  Kernel
 * stacks of IPs belong to one boot of one machine: those of the first
 * input are kept, those of the others are left out and counted (kernel
 * stacks as build-id + offset are kept from all).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <linux/bpf.h>
#include <linux/kernel.h>
#include <linux/time64.h>
#include <linux/zalloc.h>
#include <internal/lib.h>

#include "util/bstack.h"
#include "bpf_skel/bstack.h"
#include "util/build-id.h"
#include "util/data.h"
#include "util/debug.h"
#include "util/dso.h"
#include "util/dsos.h"
#include "util/map.h"
#include "util/env.h"
#include "util/event.h"
#include "util/evlist.h"
#include "util/evsel.h"
#include "util/hashmap.h"
#include "util/header.h"
#include "util/machine.h"
#include "util/sample.h"
#include "util/session.h"
#include "util/strlist.h"
#include "util/synthetic-events.h"
#include "util/tool.h"

#define HOST_PID_MASK	((1U << BPF_BSTACK_HOST_SHIFT) - 1)

struct bstack_merge {
	struct perf_tool		tool;
	int				fd;
	u64				bytes;
	int				err;
	struct perf_session		*first;		/* its header is the output's */
	struct perf_data		first_data;	/* first's, until it is deleted */
	struct evsel			*out_evsel;	/* its bstack event */
	u64				out_id;
	union perf_event		*event;		/* scratch for a record */
	void				*payload;	/* scratch for a bstack record */
	struct hashmap			*stacks;	/* ids of the stacks written */
	struct bpf_bstack_rec_event	events[BPF_BSTACK_MAX_EVENTS];
	u32				nr_events;
	u64				stats[BPF_BSTACK_MAX_STATS];
	u32				nr_stats;
	u32				nr_hosts;
	char				(*host_names)[BPF_BSTACK_HOST_NAME_LEN];
	struct strlist			*build_ids;	/* "<build-id> <misc> <name>" */
	u64				first_time, last_time;
	u64				nr_counts, nr_samples;
	u64				nr_kern_dropped;	/* samples without kernel stacks */
	u64				nr_damaged;
	/* the input being read */
	struct perf_session		*in;
	u32				in_hosts[BPF_BSTACK_MAX_HOSTS];	/* + 1, 0: none yet */
	u32				in_events[BPF_BSTACK_MAX_EVENTS];	/* + 1 */
	bool				in_declared_host;
	u64				in_stats[BPF_BSTACK_MAX_STATS];
	u32				in_nr_stats;
	u64				in_first_ns;
	u64				in_kernel_text;	/* where its kernel map starts */
	u64				in_records;
	u64				first_kernel_text;
	struct hashmap			*in_kern_ips;	/* kernel IP stacks left out */
};

static int write_out(struct bstack_merge *m, const void *buf, size_t size)
{
	if (m->err)
		return m->err;
	if (writen(m->fd, buf, size) != (ssize_t)size) {
		pr_err("failed to write the merge: %m\n");
		m->err = -errno;
		return m->err;
	}
	m->bytes += size;
	return 0;
}

/* The index in the merge of the input's machine 'local' */
static int merged_host(struct bstack_merge *m, u32 local, u32 *host)
{
	if (local >= BPF_BSTACK_MAX_HOSTS)
		return -E2BIG;
	if (!m->in_hosts[local]) {
		if (m->nr_hosts == BPF_BSTACK_MAX_HOSTS) {
			pr_err("more than %d machines to merge\n", BPF_BSTACK_MAX_HOSTS);
			return -E2BIG;
		}
		m->in_hosts[local] = ++m->nr_hosts;
	}
	*host = m->in_hosts[local] - 1;
	return 0;
}

/* A pid or tid of the input as the merge has it; -1 (no task) stays */
static int merged_pid(struct bstack_merge *m, u32 *pid)
{
	u32 host;
	int err;

	if (*pid == (u32)-1)
		return 0;
	err = merged_host(m, bpf_bstack__host_of(*pid), &host);
	if (!err)
		*pid = (*pid & HOST_PID_MASK) | host << BPF_BSTACK_HOST_SHIFT;
	return err;
}

/* A bstack record as a sample of the output's bstack event */
static int write_record(struct bstack_merge *m, struct perf_sample *in, void *payload)
{
	struct bpf_bstack_rec_hdr *hdr = payload;
	struct perf_sample sample = {
		.pid		= in->pid,
		.tid		= in->tid,
		.cpu		= in->cpu,
		.time		= in->time,
		.period		= 1,
		.id		= m->out_id,
		.stream_id	= m->out_id,
		.raw_data	= payload,
		.raw_size	= hdr->size + sizeof(u32),	/* as the kernel aligns it */
	};
	u64 type = m->out_evsel->core.attr.sample_type;
	size_t size = perf_event__sample_event_size(&sample, type, 0);

	if (size > PERF_SAMPLE_MAX_SIZE)
		return -E2BIG;
	m->event->header.type = PERF_RECORD_SAMPLE;
	m->event->header.misc = PERF_RECORD_MISC_USER;
	m->event->header.size = size;
	perf_event__synthesize_sample(m->event, type, 0, &sample);
	if (in->time && (!m->first_time || in->time < m->first_time))
		m->first_time = in->time;
	m->last_time = max(m->last_time, in->time);
	return write_out(m, m->event, size);
}

static bool env_str_equal(const char *a, const char *b)
{
	return a && b && !strcmp(a, b);
}

/*
 * Do the kernel IPs of the input mean what the first input's do?  Yes
 * for the same machine, kernel release and kernel text address: the same
 * boot, or one without KASLR.
 */
static bool same_kernel(struct bstack_merge *m)
{
	struct perf_env *a = &m->in->header.env, *b = &m->first->header.env;

	return m->in == m->first ||
	       (m->in_kernel_text && m->in_kernel_text == m->first_kernel_text &&
		env_str_equal(a->hostname, b->hostname) &&
		env_str_equal(a->os_release, b->os_release));
}

static int merge_stack(struct bstack_merge *m, struct bpf_bstack_rec_stack *stack,
		       struct perf_sample *sample)
{
	/* an IP kernel stack of another boot than the first input's */
	if (stack->kind == BPF_BSTACK_STACK_KERNEL && !same_kernel(m))
		return hashmap__set(m->in_kern_ips, stack->id, 1, NULL, NULL);
	/* the id is a hash of the frames: the same id is the same stack, whoever took it */
	if (hashmap__find(m->stacks, stack->id, NULL))
		return 0;
	memcpy(m->payload, stack, stack->hdr.size);
	return hashmap__add(m->stacks, stack->id, 1) ?: write_record(m, sample, m->payload);
}

/*
 * Events are the same event in two recordings when their kind and name
 * are.  A new one is written at once, before the counts of it: a merge
 * read as an input needs them there.
 */
static int merge_event(struct bstack_merge *m, const struct bpf_bstack_rec_event *ev,
		       struct perf_sample *sample)
{
	struct {
		struct bpf_bstack_rec_event ev;
		u32 pad;		/* for the raw size field */
	} out;
	u32 i;

	for (i = 0; i < m->nr_events; i++)
		if (m->events[i].kind == ev->kind && !strcmp(m->events[i].name, ev->name))
			break;
	if (i == m->nr_events) {
		if (m->nr_events == BPF_BSTACK_MAX_EVENTS) {
			pr_err("more than %d events to merge\n", BPF_BSTACK_MAX_EVENTS);
			return -E2BIG;
		}
		m->events[m->nr_events++] = *ev;
		m->events[i].index = i;
		out.ev = m->events[i];
		bpf_bstack__init_hdr(&out.ev.hdr, BPF_BSTACK_REC_EVENT, sizeof(out.ev));
		m->in_events[ev->index] = i + 1;
		return write_record(m, sample, &out);
	}
	m->in_events[ev->index] = i + 1;
	return 0;
}

/* A count of the input as the merge's: its host's pids, the merge's events */
static int merged_count(struct bstack_merge *m, const struct bpf_bstack_rec_count *cnt,
			struct perf_sample *sample, struct bpf_bstack_rec_count *out)
{
	int err;

	*out = *cnt;
	err = merged_pid(m, &out->pid) ?: merged_pid(m, &out->tid);
	if (err)
		return err;
	if (!m->in_events[cnt->event]) {
		/* a recording without EVENT records has one sampling event, index 0 */
		struct bpf_bstack_rec_event ev = {
			.index = cnt->event, .kind = BPF_BSTACK_EVENT_SAMPLE,
			.name = BPF_BSTACK_EVENT,
		};

		if (cnt->event)
			snprintf(ev.name, sizeof(ev.name), "event%u", cnt->event);
		err = merge_event(m, &ev, sample);
		if (err)
			return err;
	}
	out->event = m->in_events[cnt->event] - 1;
	if (out->kern_stack && hashmap__find(m->in_kern_ips, out->kern_stack, NULL)) {
		out->kern_stack = 0;
		m->nr_kern_dropped += out->count;
	}
	if (cnt->first_ns && (!m->in_first_ns || cnt->first_ns < m->in_first_ns))
		m->in_first_ns = cnt->first_ns;
	m->nr_counts++;
	return 0;
}

static int merge_count(struct bstack_merge *m, const struct bpf_bstack_rec_count *cnt,
		       struct perf_sample *sample)
{
	return merged_count(m, cnt, sample, m->payload) ?: write_record(m, sample, m->payload);
}

/* Packed counts stay packed, as many to a record as the input had */
static int merge_packed_counts(struct bstack_merge *m, const struct bpf_bstack_rec_counts *rec,
			       struct perf_sample *sample)
{
	struct bpf_bstack_rec_count *out;
	struct bpf_bstack_counts_iter it;
	struct bpf_bstack_rec_count cnt;
	u32 nr = 0, i;
	int err = 0;

	out = calloc(rec->nr ?: 1, sizeof(*out));
	if (!out)
		return -ENOMEM;
	bpf_bstack__counts_begin(&it, rec);
	while (!err && bpf_bstack__counts_next(&it, &cnt) > 0)
		err = merged_count(m, &cnt, sample, &out[nr++]);
	/* a hostile input may pack more than one record of ours holds */
	for (i = 0; i < nr && !err; i += BPF_BSTACK_COUNTS_PER_RECORD) {
		u32 n = min_t(u32, nr - i, BPF_BSTACK_COUNTS_PER_RECORD);

		if (!bpf_bstack__pack_counts(m->payload, BPF_BSTACK_COUNTS_MAX_SIZE, &out[i], n))
			err = -EINVAL;
		else
			err = write_record(m, sample, m->payload);
	}
	free(out);
	return err;
}

/*
 * Hosts are told apart by name: a name taken by another recording (two of
 * one machine, or machines of one name) gets the merge's index of it
 */
static void name_host(struct bstack_merge *m, struct bpf_bstack_rec_host *h)
{
	u32 i;

	for (i = 0; i < m->nr_hosts; i++) {
		if (i != h->index && !strcmp(m->host_names[i], h->hostname)) {
			size_t len = strnlen(h->hostname, sizeof(h->hostname) - 5);

			snprintf(h->hostname + len, sizeof(h->hostname) - len, "#%u", h->index);
			break;
		}
	}
	memcpy(m->host_names[h->index], h->hostname, sizeof(h->hostname));
}

static int merge_host(struct bstack_merge *m, const struct bpf_bstack_rec_host *h,
		      struct perf_sample *sample)
{
	struct bpf_bstack_rec_host *out = m->payload;
	int err;

	memcpy(out, h, sizeof(*out));
	err = merged_host(m, h->index, &out->index);
	if (err)
		return err;
	name_host(m, out);
	m->in_declared_host = true;
	return write_record(m, sample, m->payload);
}

static int merge_sample(const struct perf_tool *tool, union perf_event *event __maybe_unused,
			struct perf_sample *sample, struct evsel *evsel,
			struct machine *machine __maybe_unused)
{
	struct bstack_merge *m = container_of(tool, struct bstack_merge, tool);
	struct bpf_bstack_rec_hdr *hdr;
	struct bpf_bstack_rec_stats *st;
	void *copy;
	int err = 0;

	if (!bpf_bstack__is_event(evsel))
		return 0;
	hdr = bpf_bstack__sample_record(evsel, sample, &copy, &m->nr_damaged);
	if (!hdr)
		return 0;
	m->in_records++;
	switch (hdr->type) {
	case BPF_BSTACK_REC_STACK:
		err = merge_stack(m, (void *)hdr, sample);
		break;
	case BPF_BSTACK_REC_COUNT:
		err = merge_count(m, (void *)hdr, sample);
		break;
	case BPF_BSTACK_REC_COUNTS:
		err = merge_packed_counts(m, (void *)hdr, sample);
		break;
	case BPF_BSTACK_REC_STATS:
		/* cumulative: the input's last has them all */
		st = (void *)hdr;
		m->in_nr_stats = st->nr;
		memcpy(m->in_stats, st->stat, st->nr * sizeof(u64));
		break;
	case BPF_BSTACK_REC_EVENT:
		err = merge_event(m, (void *)hdr, sample);
		break;
	case BPF_BSTACK_REC_HOST:
		err = merge_host(m, (void *)hdr, sample);
		break;
	default:
		break;
	}
	free(copy);
	return err;
}

/*
 * The side-band records IP frames are resolved with, their tasks moved to
 * the input's machine.  The kernel's maps stay the first input's: they
 * are of one boot.  Other records are not needed by bstack reports.
 */
static int merge_side_band(const struct perf_tool *tool, union perf_event *event,
			   struct perf_sample *sample, struct machine *machine __maybe_unused)
{
	struct bstack_merge *m = container_of(tool, struct bstack_merge, tool);
	bool id_all = evlist__first(m->in->evlist)->core.attr.sample_id_all;
	size_t id_size = id_all ? evlist__id_hdr_size(m->in->evlist) : 0;
	union perf_event *out = m->event;
	struct perf_sample id = {
		.time = sample->time, .cpu = sample->cpu, .id = m->out_id,
		.stream_id = m->out_id,
	};
	u32 *pids[4] = { NULL, };
	size_t size, i;
	int err;

	if (event->header.size < id_size || event->header.size > PERF_SAMPLE_MAX_SIZE / 2)
		return 0;
	size = event->header.size - id_size;
	memcpy(out, event, size);
	switch (event->header.type) {
	case PERF_RECORD_MMAP:
	case PERF_RECORD_MMAP2:
		if ((event->header.misc & PERF_RECORD_MISC_CPUMODE_MASK) ==
		    PERF_RECORD_MISC_KERNEL) {
			/* the first map is the kernel's: modules follow */
			if (!m->in_kernel_text)
				m->in_kernel_text = event->header.type == PERF_RECORD_MMAP ?
						    event->mmap.start : event->mmap2.start;
			if (m->in != m->first)
				return 0;
			m->first_kernel_text = m->in_kernel_text;
		}
		/* pid and tid lead both layouts */
		pids[0] = &out->mmap.pid;
		pids[1] = &out->mmap.tid;
		break;
	case PERF_RECORD_COMM:
		pids[0] = &out->comm.pid;
		pids[1] = &out->comm.tid;
		break;
	case PERF_RECORD_FORK:
	case PERF_RECORD_EXIT:
		pids[0] = &out->fork.pid;
		pids[1] = &out->fork.ppid;
		pids[2] = &out->fork.tid;
		pids[3] = &out->fork.ptid;
		break;
	default:
		return 0;
	}
	for (i = 0; i < ARRAY_SIZE(pids) && pids[i]; i++) {
		err = merged_pid(m, pids[i]);
		if (err)
			return err;
	}
	id.pid = *pids[0];
	id.tid = *pids[1];
	size = PERF_ALIGN(size, sizeof(u64));
	if (evlist__first(m->first->evlist)->core.attr.sample_id_all)
		size += perf_event__synthesize_id_sample((void *)out + size,
							 m->out_evsel->core.attr.sample_type, &id);
	out->header.size = size;
	return write_out(m, out, size);
}

/* The samples the input's recorder took, by its last STATS record */
static u64 input_samples(const struct bstack_merge *m)
{
	return m->in_nr_stats > BPF_BSTACK_STAT_SAMPLES ? m->in_stats[BPF_BSTACK_STAT_SAMPLES] : 0;
}

/* The machine of an input that has no HOST record, from its header */
static int write_input_host(struct bstack_merge *m, struct perf_session *in)
{
	struct bpf_bstack_rec_host *h = m->payload;
	struct perf_env *env = &in->header.env;
	struct perf_sample sample = { .time = m->in_first_ns, };
	int err;

	memset(h, 0, sizeof(*h));
	bpf_bstack__init_hdr(&h->hdr, BPF_BSTACK_REC_HOST, sizeof(*h));
	err = merged_host(m, 0, &h->index);
	if (err)
		return err;
	snprintf(h->hostname, sizeof(h->hostname), "%s", env->hostname ?: "?");
	snprintf(h->os_release, sizeof(h->os_release), "%s", env->os_release ?: "");
	snprintf(h->arch, sizeof(h->arch), "%s", env->arch ?: "");
	name_host(m, h);
	h->samples = input_samples(m);
	/* the wall-clock time of the first sample, where the header relates the clocks */
	if (env->clock.enabled && m->in_first_ns >= env->clock.clockid_ns)
		h->start_ns = env->clock.tod_ns + (m->in_first_ns - env->clock.clockid_ns);
	return write_record(m, &sample, m->payload);
}

static int note_build_id(struct dso *dso, void *data)
{
	struct bstack_merge *m = data;
	char sbid[SBUILD_ID_SIZE], *entry;
	int err;

	/* the first input's kernel is the merge's; the others' are of no frame */
	if (!dso__has_build_id(dso) || (dso__kernel(dso) && m->in != m->first))
		return 0;
	build_id__sprintf(dso__bid(dso), sbid);
	if (asprintf(&entry, "%s %d %s", sbid,
		     dso__kernel(dso) ? PERF_RECORD_MISC_KERNEL : PERF_RECORD_MISC_USER,
		     dso__long_name(dso)) < 0)
		return -ENOMEM;
	err = strlist__add(m->build_ids, entry);
	free(entry);
	return err == -EEXIST ? 0 : err;
}

/* Every binary of the input's build-id table goes into the merge's */
static int note_build_ids(struct bstack_merge *m, struct perf_session *in)
{
	return dsos__for_each_dso(&in->machines.host.dsos, note_build_id, m);
}

static int open_input(struct bstack_merge *m, const char *path, bool force,
		      struct perf_data *data, struct perf_session **session)
{
	data->path = path;
	data->mode = PERF_DATA_MODE_READ;
	data->force = force;
	*session = perf_session__new(data, &m->tool);
	if (IS_ERR(*session)) {
		/* perf said why it could not open it */
		if (!access(path, R_OK))
			pr_err("cannot read %s: not a perf.data file, or truncated\n", path);
		return PTR_ERR(*session);
	}
	if (data->is_pipe) {
		pr_err("%s: merging from a pipe is not supported\n", path);
		return -EINVAL;
	}
	if (!evlist__find_evsel_by_str((*session)->evlist, BPF_BSTACK_EVENT)) {
		pr_err("%s has no bstack samples: record it with 'perf bstack record'\n", path);
		return -EINVAL;
	}
	return 0;
}

static int merge_input(struct bstack_merge *m, struct perf_session *in, const char *path)
{
	u64 damaged;
	u32 i;
	int err;

	m->in = in;
	memset(m->in_hosts, 0, sizeof(m->in_hosts));
	memset(m->in_events, 0, sizeof(m->in_events));
	m->in_declared_host = false;
	m->in_nr_stats = 0;
	m->in_first_ns = 0;
	m->in_kernel_text = 0;
	m->in_records = 0;
	damaged = m->nr_damaged;
	hashmap__clear(m->in_kern_ips);

	err = perf_session__process_events(in);
	if (err || m->err) {
		pr_err("%s could not be merged (error %d): truncated or damaged\n",
		       path, err ?: m->err);
		return err ?: m->err;
	}
	if (!m->in_records) {
		pr_err("%s: none of its %" PRIu64
		       " bstack records could be read: damaged, or of a newer perf\n",
		       path, m->nr_damaged - damaged);
		return -EINVAL;
	}
	if (!m->in_declared_host) {
		err = write_input_host(m, in);
		if (err)
			return err;
	}
	for (i = 0; i < m->in_nr_stats && i < BPF_BSTACK_MAX_STATS; i++)
		m->stats[i] += m->in_stats[i];
	m->nr_stats = max(m->nr_stats, m->in_nr_stats);
	m->nr_samples += input_samples(m);
	return note_build_ids(m, in);
}

/* The recorders' counters, summed, after all the counts */
static int write_stats(struct bstack_merge *m)
{
	struct bpf_bstack_rec_stats *st = m->payload;
	struct perf_sample sample = { .time = m->last_time, };

	if (!m->nr_stats)
		return 0;
	bpf_bstack__init_hdr(&st->hdr, BPF_BSTACK_REC_STATS, bpf_bstack__stats_size(m->nr_stats));
	st->nr = m->nr_stats;
	st->reserved = 0;
	memcpy(st->stat, m->stats, m->nr_stats * sizeof(u64));
	return write_record(m, &sample, m->payload);
}

struct merge_fc {
	struct bpf_bstack_sections	secs;
	struct bstack_merge		*m;
	bool				copy;		/* the first input is in our byte order */
};

/* The build-id table of every input, as perf record writes one */
static int write_build_ids(struct bstack_merge *m, struct feat_writer *fw)
{
	struct perf_record_header_build_id *b;
	struct str_node *pos;
	int err = 0;

	b = zalloc(sizeof(*b) + PATH_MAX + NAME_ALIGN);
	if (!b)
		return -ENOMEM;
	strlist__for_each_entry(pos, m->build_ids) {
		int misc, len, n = 0;

		memset(b, 0, sizeof(*b));
		while (n < BUILD_ID_SIZE && sscanf(pos->s + 2 * n, "%2hhx", &b->data[n]) == 1 &&
		       pos->s[2 * n + 1] != ' ')
			n++;
		if (sscanf(pos->s + 2 * n, " %d %n", &misc, &len) != 1)
			continue;
		len += 2 * n;
		b->size = n;
		b->header.type = PERF_RECORD_HEADER_BUILD_ID;
		b->header.misc = misc | PERF_RECORD_MISC_BUILD_ID_SIZE;
		b->pid = misc == PERF_RECORD_MISC_KERNEL ? HOST_KERNEL_ID : 0;
		snprintf(b->filename, PATH_MAX, "%s", pos->s + len);
		b->header.size = sizeof(*b) + PERF_ALIGN(strlen(b->filename) + 1, NAME_ALIGN);
		err = fw->write(fw, b, b->header.size);
		if (err < 0)
			break;
	}
	free(b);
	return err < 0 ? err : 1;
}

/* The first input's description of the machine, and the build-ids of all */
static int copy_feat(struct feat_copier *fc, int feat, struct feat_writer *fw)
{
	struct merge_fc *mfc = container_of(fc, struct merge_fc, secs.fc);

	if (feat == HEADER_BUILD_ID)
		return write_build_ids(mfc->m, fw);
	if (feat == HEADER_SAMPLE_TIME || feat == HEADER_EVENT_DESC)
		return 0;	/* perf's own writers, from the merge */
	return mfc->copy ? bpf_bstack__copy_section(&mfc->secs, feat, fw) : 0;
}

/* What the merge keeps of the first input's header */
static void keep_features(struct perf_header *header, bool copy)
{
	static const int keep[] = {
		HEADER_HOSTNAME, HEADER_OSRELEASE, HEADER_VERSION, HEADER_ARCH,
		HEADER_NRCPUS, HEADER_CPUDESC, HEADER_CPUID, HEADER_TOTAL_MEM,
		HEADER_CMDLINE, HEADER_CLOCKID, HEADER_CLOCK_DATA, HEADER_EVENT_DESC,
	};

	bpf_bstack__keep_features(header, keep, copy ? ARRAY_SIZE(keep) : 0);
}

static int write_header(struct bstack_merge *m, u64 data_offset)
{
	struct perf_session *first = m->first;
	struct merge_fc mfc = {
		.secs.fc.copy = copy_feat, .m = m, .copy = !first->header.needs_swap,
	};

	bpf_bstack__read_sections(&mfc.secs, &first->header, perf_data__fd(first->data));
	keep_features(&first->header, mfc.copy);
	first->evlist->first_sample_time = m->first_time;
	first->evlist->last_sample_time = m->last_time;
	first->header.data_offset = data_offset;
	first->header.data_size = m->bytes;
	return perf_session__inject_header(first, first->evlist, m->fd, &mfc.secs.fc, false);
}

static void merge_exit(struct bstack_merge *m)
{
	hashmap__free(m->stacks);
	hashmap__free(m->in_kern_ips);
	strlist__delete(m->build_ids);
	free(m->host_names);
	free(m->event);
	free(m->payload);
}

static int merge_init(struct bstack_merge *m)
{
	perf_tool__init(&m->tool, /*ordered_events=*/false);
	m->tool.sample	= merge_sample;
	m->tool.mmap	= merge_side_band;
	m->tool.mmap2	= merge_side_band;
	m->tool.comm	= merge_side_band;
	m->tool.fork	= merge_side_band;
	m->tool.exit	= merge_side_band;
	m->stacks = hashmap__new(bpf_bstack__id_hash, bpf_bstack__id_equal, NULL);
	m->in_kern_ips = hashmap__new(bpf_bstack__id_hash, bpf_bstack__id_equal, NULL);
	m->build_ids = strlist__new(NULL, NULL);
	m->event = malloc(PERF_SAMPLE_MAX_SIZE);
	m->payload = malloc(PERF_SAMPLE_MAX_SIZE);
	m->host_names = calloc(BPF_BSTACK_MAX_HOSTS, sizeof(*m->host_names));
	if (IS_ERR(m->stacks) || IS_ERR(m->in_kern_ips)) {
		m->stacks = m->in_kern_ips = NULL;
		return -ENOMEM;
	}
	return m->build_ids && m->event && m->payload && m->host_names ? 0 : -ENOMEM;
}

static int merge_inputs(struct bstack_merge *m, const char **inputs, int nr, bool force)
{
	struct perf_data data = {};
	struct perf_session *in;
	u64 data_offset;
	int i, err;

	err = open_input(m, inputs[0], force, &m->first_data, &m->first);
	if (err) {
		if (IS_ERR(m->first))
			m->first = NULL;
		return err;
	}
	m->out_evsel = evlist__find_evsel_by_str(m->first->evlist, BPF_BSTACK_EVENT);
	if (!m->out_evsel->core.id || !m->out_evsel->core.ids) {
		pr_err("%s: its bstack event has no id\n", inputs[0]);
		return -EINVAL;
	}
	m->out_id = m->out_evsel->core.id[0];
	/* room for the header, the attributes and their ids before the data */
	data_offset = roundup(8192 + m->first->header.data_offset, 4096);
	if (lseek(m->fd, data_offset, SEEK_SET) < 0)
		return -errno;

	for (i = 0; i < nr; i++) {
		in = m->first;
		if (i) {
			memset(&data, 0, sizeof(data));
			err = open_input(m, inputs[i], force, &data, &in);
			if (err) {
				if (!IS_ERR(in))
					perf_session__delete(in);
				return err;
			}
		}
		err = merge_input(m, in, inputs[i]);
		if (i)
			perf_session__delete(in);
		if (err)
			return err;
	}
	return write_stats(m) ?: write_header(m, data_offset);
}

/* Writing the output must not truncate an input before it is read */
static int check_output(const char **inputs, int nr, const char *output)
{
	struct stat out, in;
	int i;

	if (stat(output, &out))
		return 0;
	for (i = 0; i < nr; i++) {
		if (!stat(inputs[i], &in) && in.st_dev == out.st_dev && in.st_ino == out.st_ino) {
			pr_err("the output %s is the input %s\n", output, inputs[i]);
			return -EINVAL;
		}
	}
	return 0;
}

int bpf_bstack__merge(const char **inputs, int nr, const char *output, bool force)
{
	struct bstack_merge m = { .fd = -1, };
	int err;

	err = check_output(inputs, nr, output) ?: merge_init(&m);
	if (err)
		goto out;
	/* like perf.data: private, and never through a planted symlink */
	m.fd = open(output, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (m.fd < 0) {
		err = -errno;
		pr_err("cannot create %s: %m\n", output);
		goto out;
	}
	err = merge_inputs(&m, inputs, nr, force);
	if (!err)
		fprintf(stderr, "[ perf bstack merge: %d recordings of %u machines into %s: %"
			PRIu64 " samples in %" PRIu64 " counts, %zu unique stacks ]\n", nr,
			m.nr_hosts, output, m.nr_samples, m.nr_counts, hashmap__size(m.stacks));
	if (!err && m.nr_kern_dropped)
		fprintf(stderr, "[ perf bstack merge: %" PRIu64
			" samples of machines after the first without their kernel stacks: IPs of another boot ]\n",
			m.nr_kern_dropped);
	if (!err && m.nr_damaged)
		fprintf(stderr, "[ perf bstack merge: %" PRIu64 " damaged records skipped ]\n",
			m.nr_damaged);
out:
	if (m.fd >= 0 && close(m.fd) && !err)
		err = -errno;
	if (err && m.fd >= 0)
		unlink(output);
	if (m.first)
		perf_session__delete(m.first);
	merge_exit(&m);
	return err;
}
