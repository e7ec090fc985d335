// SPDX-License-Identifier: GPL-2.0
/*
 * Turn a perf bstack recording into a standard perf.data: one MMAP2 with a
 * build-id per (process, binary) at a synthetic address, and one SAMPLE
 * with a callchain per count, whose user addresses land at the recorded
 * file offsets inside those maps.  perf report, perf script and every tool
 * that reads perf.data then resolve the frames through the build-id cache
 * with their unchanged code.
 */
#define pr_fmt(fmt) "perf bstack: " fmt

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#ifdef HAVE_LIBELF_SUPPORT
#include <gelf.h>
#endif
#include <linux/bpf.h>
#include <linux/err.h>
#include <linux/kernel.h>
#include <linux/string.h>
#include <linux/zalloc.h>
#include <internal/evlist.h>
#include <internal/evsel.h>
#include <internal/lib.h>
#include <api/fs/fs.h>

#include "util/bstack-jit.h"
#include "util/bstack.h"
#include "util/bstack-convert.h"
#include "util/build-id.h"
#include "util/data.h"
#include "util/debug.h"
#include "util/dso.h"
#include "util/env.h"
#include "util/event.h"
#include "util/evlist.h"
#include "util/evsel.h"
#include "util/hashmap.h"
#include "util/header.h"
#include "util/machine.h"
#include "util/map.h"
#include "util/sample.h"
#include "util/session.h"
#include "util/strbuf.h"
#include "util/strlist.h"
#include "util/symbol.h"
#include "util/synthetic-events.h"
#include "util/util.h"
#include "util/tool.h"
#include "bpf_skel/bstack.h"

#ifdef HAVE_DEBUGINFOD_SUPPORT
#include <elfutils/debuginfod.h>
#endif

/*
 * Binaries are placed at synthetic addresses: 4 GiB per build-id from
 * 64 TiB, an area the kernel does not hand out to user space by default,
 * up to 2^62, below what perf takes for kernel addresses on x86_64 (2^63):
 * room for a billion binaries.  A non-PIE executable is placed where it
 * was linked, so that its frames show the addresses its tools know.
 */
#define SLOT_BASE	0x400000000000ULL
#define SLOT_SIZE	(1ULL << 32)
#define SLOT_END	(1ULL << 62)
#define MAX_SLOTS	((SLOT_END - SLOT_BASE) / SLOT_SIZE)
/* the index of the executable's own place in the key of c->mapped */
#define EXEC_SLOT	0xffffffffU
/* what the output buffer holds: much more than a record, PERF_SAMPLE_MAX_SIZE */
#define BSTACK_OUT_BUF		(1U << 20)
/* one_per_sample: the most samples written for a count, and in all */
#define BSTACK_EXPAND_MAX	(1ULL << 20)
#define BSTACK_EXPAND_TOTAL	(1ULL << 22)

#define OUT_SAMPLE_TYPES (PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID | \
			  PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD | \
			  PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_WEIGHT)
/* the id of the first output event; the others follow it in index order */
#define OUT_FIRST_ID	1

struct bstack_slot {
	u8		build_id[BUILD_ID_SIZE];
	struct dso	*dso;
	u64		base;
	u64		limit;		/* offsets at or above are bogus */
	u32		index;
	bool		available;	/* a file with this build-id was found */
	bool		linked;		/* at its link address: a non-PIE executable */
};



static bool kinds_match(u32 want, u32 kind)
{
	if (want == BPF_BSTACK_STACK_USER)
		return kind == BPF_BSTACK_STACK_USER || kind == BPF_BSTACK_STACK_USER_IP;
	if (want == BPF_BSTACK_STACK_KERNEL)
		return kind == BPF_BSTACK_STACK_KERNEL || kind == BPF_BSTACK_STACK_KERNEL_BID;
	return want == kind;
}

/*
 * The stack a count names by id, if the recording has it with a kind that
 * fits; find_stack() also counts the ids it has no stack for.
 */
static struct bpf_bstack_rec_stack *lookup_stack(struct bstack_conv *c, u64 id, u32 kind)
{
	struct bpf_bstack_rec_stack *stack;

	if (!hashmap__find(c->stacks, id, &stack) || !kinds_match(kind, stack->kind))
		return NULL;
	return stack;
}

/* A machine of a merged recording: the first name of an index wins */
static int add_host(struct bpf_bstack_summary *sum, const struct bpf_bstack_rec_host *h)
{
	struct bpf_bstack_summary_host *host;

	if (h->index >= sum->nr_hosts) {
		host = reallocarray(sum->hosts, h->index + 1, sizeof(*host));
		if (!host)
			return -ENOMEM;
		memset(host + sum->nr_hosts, 0, (h->index + 1 - sum->nr_hosts) * sizeof(*host));
		sum->hosts = host;
		sum->nr_hosts = h->index + 1;
	}
	host = &sum->hosts[h->index];
	if (host->declared)
		return 0;
	host->declared = true;
	host->start_ns = h->start_ns;
	host->samples = h->samples;
	memcpy(host->name, h->hostname, sizeof(host->name));
	return 0;
}

/* The machine a count was taken on, by name: NULL in a recording of one */
static const char *host_name(struct bstack_conv *c, u32 pid)
{
	u32 host = bpf_bstack__host_of(pid);

	if (c->sum->nr_hosts < 2)
		return NULL;
	if (host >= c->sum->nr_hosts || !c->sum->hosts[host].declared)
		return "?";
	return c->sum->hosts[host].name;
}

static int add_count(struct bstack_conv *c, const struct bpf_bstack_rec_count *cnt)
{
	if (c->nr_counts == c->alloc_counts) {
		size_t n = c->alloc_counts ? c->alloc_counts * 2 : 1024;
		void *p = realloc(c->counts, n * sizeof(*c->counts));

		if (!p)
			return -ENOMEM;
		c->counts = p;
		c->alloc_counts = n;
	}
	c->counts[c->nr_counts++] = *cnt;
	c->sum->nr_events = max(c->sum->nr_events, cnt->event + 1);
	return 0;
}

/* decoded, so every count in it unpacks */
static int add_packed_counts(struct bstack_conv *c, const struct bpf_bstack_rec_counts *rec)
{
	struct bpf_bstack_counts_iter it;
	struct bpf_bstack_rec_count cnt;
	int err = 0;

	bpf_bstack__counts_begin(&it, rec);
	while (!err && bpf_bstack__counts_next(&it, &cnt) > 0)
		err = add_count(c, &cnt);
	return err;
}

/* Input side: keep every bstack record, in host byte order */
static int add_record(struct bstack_conv *c, struct bpf_bstack_rec_hdr *hdr)
{
	struct bpf_bstack_summary *sum = c->sum;
	struct bpf_bstack_rec_stack *stack;
	struct bpf_bstack_rec_stats *st;
	struct bpf_bstack_rec_event *ev;
	u32 i;

	switch (hdr->type) {
	case BPF_BSTACK_REC_STACK:
		stack = memdup(hdr, hdr->size);
		if (!stack)
			return -ENOMEM;
		if (hashmap__add(c->stacks, stack->id, stack)) {
			free(stack);	/* a stack written twice: keep the first */
			return 0;
		}
		if (stack->kind == BPF_BSTACK_STACK_KERNEL_BID)
			c->has_kern_bid = true;
		if (kinds_match(BPF_BSTACK_STACK_KERNEL, stack->kind))
			sum->nr_kern_stacks++;
		else
			sum->nr_user_stacks++;
		return 0;
	case BPF_BSTACK_REC_COUNT:
		return add_count(c, (void *)hdr);
	case BPF_BSTACK_REC_COUNTS:
		return add_packed_counts(c, (void *)hdr);
	case BPF_BSTACK_REC_STATS:
		/* cumulative: the last drain has them all */
		st = (void *)hdr;
		memset(sum->stat, 0, sizeof(sum->stat));
		for (i = 0; i < st->nr && i < BPF_BSTACK_STAT_MAX; i++)
			sum->stat[i] = st->stat[i];
		sum->has_stats = true;
		return 0;
	case BPF_BSTACK_REC_HOST:
		return add_host(sum, (void *)hdr);
	case BPF_BSTACK_REC_EVENT:
		ev = (void *)hdr;
		/* the first name of an index wins, as for stacks */
		if (!sum->event[ev->index].declared) {
			sum->event[ev->index].declared = true;
			sum->event[ev->index].kind = ev->kind;
			memcpy(sum->event[ev->index].name, ev->name, sizeof(ev->name));
		}
		sum->nr_events = max(sum->nr_events, ev->index + 1);
		return 0;
	default:
		return 0;
	}
}

static int read_sample(const struct perf_tool *tool, union perf_event *event __maybe_unused,
		       struct perf_sample *sample, struct evsel *evsel,
		       struct machine *machine __maybe_unused)
{
	struct bstack_conv *c = container_of(tool, struct bstack_conv, tool);
	struct bpf_bstack_rec_hdr *hdr;
	void *copy;
	int err;

	hdr = bpf_bstack__sample_record(evsel, sample, &copy, &c->sum->nr_damaged);
	if (!hdr)
		return 0;
	err = add_record(c, hdr);
	free(copy);
	return err;
}

/* Output side */
static int flush_out(struct bstack_conv *c)
{
	if (c->err || !c->out_len)
		return c->err;
	if (writen(c->fd, c->out, c->out_len) != (ssize_t)c->out_len) {
		c->err = -errno;
		pr_err("cannot write the converted data: %m\n");
	}
	c->out_len = 0;
	return c->err;
}

/* Through a buffer: a record is a few hundred bytes, a write() each costs more */
static int write_out(struct bstack_conv *c, const void *buf, size_t size)
{
	if (c->err)
		return c->err;
	if (c->out_len + size > BSTACK_OUT_BUF && flush_out(c))
		return c->err;
	memcpy(c->out + c->out_len, buf, size);
	c->out_len += size;
	c->bytes += size;
	return 0;
}

/* non-sample events carry the sample_id_all trailer of the output event */
int bstack_conv__write_with_id(struct bstack_conv *c, union perf_event *event, size_t size,
			 u32 pid, u32 tid, u64 time)
{
	struct perf_sample id = { .pid = pid, .tid = tid, .time = time, .id = OUT_FIRST_ID, };
	int n;

	size = PERF_ALIGN(size, sizeof(u64));
	n = perf_event__synthesize_id_sample((void *)event + size, OUT_SAMPLE_TYPES, &id);
	event->header.size = size + n;	/* n is in bytes */
	return write_out(c, event, event->header.size);
}

int bstack_conv__synthesized(const struct perf_tool *tool, union perf_event *event,
		       struct perf_sample *sample __maybe_unused,
		       struct machine *machine __maybe_unused)
{
	struct bstack_conv *c = container_of(tool, struct bstack_conv, tool);

	return write_out(c, event, event->header.size);
}

/* A file with the build-id of dso, into path (PATH_MAX bytes), and its size if a binary */
static bool find_binary(struct dso *dso, char *path, u64 *size)
{
	struct build_id bid;
	struct stat st;

	if (dso__build_id_filename(dso, path, PATH_MAX, false) &&
	    !stat(path, &st) && S_ISREG(st.st_mode)) {
		*size = st.st_size;
		return true;
	}
	if (!stat(dso__long_name(dso), &st) && S_ISREG(st.st_mode) &&
	    filename__read_build_id(dso__long_name(dso), &bid) > 0 &&
	    dso__build_id_equal(dso, &bid)) {
		snprintf(path, PATH_MAX, "%s", dso__long_name(dso));
		*size = st.st_size;
		return true;
	}
	/* a debuginfo file has the symbols, but not the binary's size */
	if (dso__build_id_filename(dso, path, PATH_MAX, true) && !access(path, R_OK))
		return true;
	return !dso__read_binary_type_filename(dso, DSO_BINARY_TYPE__BUILDID_DEBUGINFO, NULL,
					       path, PATH_MAX) && !access(path, R_OK);
}

#ifdef HAVE_LIBELF_SUPPORT
/*
 * Where a non-PIE executable's file offset 0 lies in its address space,
 * the link address of its code less the code's file offset: placed there,
 * its unresolved frames show the addresses addr2line and objdump take.
 * A debuginfo file keeps the program headers of its binary.
 */
static bool exec_link_base(const char *path, u64 size, u64 *base)
{
	bool found = false;
	GElf_Ehdr ehdr;
	GElf_Phdr phdr;
	size_t i, nr;
	Elf *elf;
	int fd;

	fd = open(path, O_RDONLY);
	if (fd < 0)
		return false;
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf || !gelf_getehdr(elf, &ehdr) || ehdr.e_type != ET_EXEC ||
	    elf_getphdrnum(elf, &nr))
		goto out;
	for (i = 0; i < nr && !found; i++) {
		if (!gelf_getphdr(elf, i, &phdr) || phdr.p_type != PT_LOAD ||
		    !(phdr.p_flags & PF_X) || phdr.p_vaddr < phdr.p_offset)
			continue;
		*base = phdr.p_vaddr - phdr.p_offset;
		/* clear of the slots, and page aligned as the kernel maps it */
		found = !(*base & (page_size - 1)) && *base + (size ?: SLOT_SIZE) <= SLOT_BASE &&
			*base + (size ?: SLOT_SIZE) > *base;
	}
out:
	elf_end(elf);
	close(fd);
	return found;
}
#else
static bool exec_link_base(const char *path __maybe_unused, u64 size __maybe_unused,
			   u64 *base __maybe_unused)
{
	return false;
}
#endif

/*
 * A binary in no local cache, fetched by build-id from the debuginfod
 * servers of DEBUGINFOD_URLS into the build-id cache, where perf finds it.
 */
bool bstack_conv__fetch_from_debuginfod(struct dso *dso __maybe_unused,
				  bool debuginfo_too __maybe_unused)
{
#ifdef HAVE_DEBUGINFOD_SUPPORT
	char sbid[SBUILD_ID_SIZE], *path = NULL;
	debuginfod_client *client;
	int fd;

	if (!getenv("DEBUGINFOD_URLS") || !*getenv("DEBUGINFOD_URLS"))
		return false;
	build_id__sprintf(dso__bid(dso), sbid);
	client = debuginfod_begin();
	if (!client)
		return false;
	pr_debug("fetching %s from debuginfod\n", sbid);
	fd = debuginfod_find_executable(client, (const unsigned char *)sbid, 0, &path);
	/* a vmlinux with its symbols may be served as debuginfo only */
	if (fd < 0 && debuginfo_too)
		fd = debuginfod_find_debuginfo(client, (const unsigned char *)sbid, 0, &path);
	debuginfod_end(client);
	if (fd < 0)
		return false;
	close(fd);
	fd = build_id_cache__add_s(sbid, path, NULL, false, false);
	free(path);
	return fd == 0;
#else
	return false;
#endif
}

/* find_binary(), after a fetch from debuginfod when it is in no cache */
bool bstack_conv__find_or_fetch_binary(struct bstack_conv *c, struct dso *dso, bool debuginfo_too,
				 char *path, u64 *size)
{
	if (find_binary(dso, path, size))
		return true;
	if (!bstack_conv__fetch_from_debuginfod(dso, debuginfo_too))
		return false;
	c->sum->nr_fetched++;
	return find_binary(dso, path, size);
}

static struct dso *dso_for_build_id(struct bstack_conv *c, const u8 *build_id)
{
	struct machine *machine = &c->session->machines.host;
	char sbid[SBUILD_ID_SIZE], name[PATH_MAX];
	struct build_id bid;
	struct dso *dso;
	char *orig;

	dso = bpf_bstack__find_dso(machine, build_id);
	/* a user frame never lies in the kernel: a damaged or hostile file */
	if (dso && dso__kernel(dso) != DSO_SPACE__USER)
		return NULL;
	if (dso)
		return dso__get(dso);

	/* not in the header: name it from the cache's link, or by its build-id */
	build_id__init(&bid, build_id, BUILD_ID_SIZE);
	build_id__sprintf(&bid, sbid);
	orig = build_id_cache__origname(sbid);
	snprintf(name, sizeof(name), "%s", orig ?: "");
	free(orig);
	dso = name[0] ? machine__findnew_dso(machine, name) : NULL;
	if (dso && dso__has_build_id(dso) && !dso__build_id_equal(dso, &bid)) {
		dso__put(dso);
		dso = NULL;	/* that path is another build now */
	}
	if (!dso) {
		/* no brackets: perf takes any "[name]" for a kernel module */
		snprintf(name, sizeof(name), "buildid:%s", sbid);
		dso = machine__findnew_dso(machine, name);
	}
	if (dso && !dso__has_build_id(dso))
		dso__set_build_id(dso, &bid);
	return dso;
}

static struct bstack_slot *slot_for_build_id(struct bstack_conv *c, const u8 *build_id)
{
	struct bstack_slot *slot;
	char path[PATH_MAX];
	u64 size = 0;

	if (hashmap__find(c->slots, bpf_bstack__bid_key(build_id), &slot))
		return slot;
	if (c->nr_slots >= MAX_SLOTS)
		return NULL;

	slot = zalloc(sizeof(*slot));
	if (!slot)
		return NULL;
	memcpy(slot->build_id, build_id, BUILD_ID_SIZE);
	slot->dso = dso_for_build_id(c, build_id);
	slot->index = c->nr_slots;
	slot->base = SLOT_BASE + c->nr_slots * SLOT_SIZE;
	slot->limit = SLOT_SIZE;
	if (slot->dso) {
		/* a JIT image's file holds symbols, not the code they name */
		bool code = !strstarts(dso__long_name(slot->dso), BPF_BSTACK_JIT_PREFIX);

		slot->available = bstack_conv__find_or_fetch_binary(c, slot->dso, false, path,
								    &size);
		if (size && code)
			slot->limit = size;
		if (slot->available && code)
			slot->linked = exec_link_base(path, size, &slot->base);
		dso__set_hit(slot->dso);
	}
	if (!slot->available) {
		char sbid[SBUILD_ID_SIZE];
		struct build_id bid;

		build_id__init(&bid, build_id, BUILD_ID_SIZE);
		build_id__sprintf(&bid, sbid);
		bpf_bstack__summary_add_missing(c->sum, sbid,
						slot->dso ? dso__long_name(slot->dso) : NULL);
	}
	c->nr_slots++;
	if (hashmap__add(c->slots, bpf_bstack__bid_key(build_id), slot)) {
		dso__put(slot->dso);
		free(slot);
		return NULL;
	}
	return slot;
}

static int write_mmap(struct bstack_conv *c, struct bstack_slot *slot, u32 pid, u64 time)
{
	struct perf_record_mmap2 *mm = &c->event->mmap2;
	/*
	 * A process execs one non-PIE executable after another at the same
	 * address: the one its samples were in is mapped again over the other.
	 */
	long key = (long)((u64)pid << 32 | (slot->linked ? EXEC_SLOT : slot->index));
	struct bstack_slot *cur = NULL;
	const char *name;
	size_t len;

	if (hashmap__find(c->mapped, key, &cur) && cur == slot)
		return 0;
	if (hashmap__set(c->mapped, key, slot, NULL, NULL))
		return -ENOMEM;

	name = dso__long_name(slot->dso);
	memset(mm, 0, sizeof(*mm));
	mm->header.type = PERF_RECORD_MMAP2;
	mm->header.misc = PERF_RECORD_MISC_USER | PERF_RECORD_MISC_MMAP_BUILD_ID;
	mm->pid = pid;
	mm->tid = pid;
	mm->start = slot->base;
	mm->len = slot->limit;	/* the file's size, which --sort dso_size shows */
	mm->pgoff = 0;
	mm->build_id_size = BUILD_ID_SIZE;
	memcpy(mm->build_id, slot->build_id, BUILD_ID_SIZE);
	mm->prot = PROT_READ | PROT_EXEC;
	mm->flags = MAP_PRIVATE;
	len = strlen(name) + 1;
	if (len > sizeof(mm->filename))
		len = sizeof(mm->filename);
	memcpy(mm->filename, name, len);
	mm->filename[len - 1] = '\0';
	/*
	 * At the time of the first sample that needs it, just before it:
	 * perf delivers records of one time in the order of the file, and the
	 * stream stays in time order, which perf report needs to never see
	 * a record older than those it has flushed.
	 */
	return bstack_conv__write_with_id(c, c->event,
					  offsetof(struct perf_record_mmap2, filename) + len,
					  pid, pid, time);
}

static int write_comm(struct bstack_conv *c, const struct bpf_bstack_rec_count *cnt)
{
	struct perf_record_comm *comm = &c->event->comm;
	/* unsigned: the pid comes from the file and may have its top bit set */
	long key = (long)((u64)cnt->pid << 32 | cnt->tid);
	const char *host = host_name(c, cnt->pid);
	char *cur, *old = NULL;
	int len;

	if (hashmap__find(c->comms, key, &cur) && !strncmp(cur, cnt->comm, sizeof(cnt->comm)))
		return 0;
	cur = strndup(cnt->comm, sizeof(cnt->comm));
	if (!cur || hashmap__set(c->comms, key, cur, NULL, &old)) {
		free(cur);
		return -ENOMEM;
	}
	free(old);

	memset(comm, 0, sizeof(*comm));
	comm->header.type = PERF_RECORD_COMM;
	comm->header.misc = PERF_RECORD_MISC_USER;
	comm->pid = cnt->pid;
	comm->tid = cnt->tid;
	/* the tasks of a merge are told apart by their machine, in comm and pid sort keys */
	len = scnprintf(comm->comm, BPF_BSTACK_HOST_NAME_LEN + sizeof(cnt->comm) + 1,
			"%s%s%.*s", host ?: "", host ? ":" : "", (int)sizeof(cnt->comm),
			cnt->comm);
	/* just before the samples taken under this name, at their time (see write_mmap()) */
	return bstack_conv__write_with_id(c, c->event,
					  offsetof(struct perf_record_comm, comm) + len + 1,
					  cnt->pid, cnt->tid, cnt->last_ns);
}

/*
 * The slot of the binary an IP frame of cnt was in, and the frame's file
 * offset in it: through the map the process had at the time of the
 * samples, or, for maps not recorded before them (harvested at drain
 * time) and anonymous ones a JIT image was placed in at drain time, the
 * last map perf has at that address.  A frame at an address
 * that was mapped to another file between the first and the last sample
 * of cnt is not resolved, and counted: its samples may be in either.
 */
static struct bstack_slot *ip_frame_slot(struct bstack_conv *c,
					 const struct bpf_bstack_rec_count *cnt,
					 u64 ip, u64 *offset)
{
	const struct bstack_map_rec *rec, *latest;
	bool ambiguous;

	rec = bstack_conv__user_map_at(c, cnt->pid, ip, cnt->first_ns, cnt->last_ns, &ambiguous,
				       &latest);
	if (ambiguous) {
		c->sum->nr_ip_ambiguous += c->rec_counts;
		return NULL;
	}
	if (rec && rec->dso && dso__has_build_id(rec->dso)) {
		*offset = ip - rec->start + rec->pgoff;
		return slot_for_build_id(c, dso__bid(rec->dso)->data);
	}
	/* anonymous memory (JIT code): perf record may have placed an image there since */
	if (latest && latest->dso && dso__has_build_id(latest->dso) &&
	    (!rec || strstarts(dso__long_name(latest->dso), BPF_BSTACK_JIT_PREFIX))) {
		*offset = ip - latest->start + latest->pgoff;
		return slot_for_build_id(c, dso__bid(latest->dso)->data);
	}
	return NULL;
}

/* A user frame as an address in the synthetic map of its binary */
static u64 user_frame_ip(struct bstack_conv *c, const struct bpf_bstack_rec_count *cnt,
			 const struct bpf_bstack_frame *f)
{
	struct bpf_bstack_summary *sum = c->sum;
	struct bstack_slot *slot;
	u64 offset = f->offset;

	if (f->status == BPF_STACK_BUILD_ID_VALID) {
		sum->nr_valid_frames += c->rec_counts;
		slot = slot_for_build_id(c, f->build_id);
	} else {
		/* the kernel could not read the build-id: try the recorded maps */
		sum->nr_ip_frames += c->rec_counts;
		slot = ip_frame_slot(c, cnt, f->offset, &offset);
		if (!slot) {
			/* keep the address, unless it would land in a synthetic map */
			sum->nr_unknown_frames += c->rec_counts;
			if (f->offset >= SLOT_BASE && f->offset < SLOT_END)
				return UNKNOWN_IP;
			return f->offset;
		}
		sum->nr_ip_resolved += c->rec_counts;
	}
	if (!slot || !slot->dso) {
		sum->nr_unknown_frames += c->rec_counts;
		return UNKNOWN_IP;
	}
	/*
	 * Code lies within its file: a return address below the mapping comes
	 * back VALID with a huge offset, and the map written for the binary
	 * ends with the file (limit), where its size is known (not a JIT
	 * image's: its IP frames lie where the JIT placed code).
	 */
	if (offset >= slot->limit) {
		sum->nr_bogus_frames += c->rec_counts;
		return UNKNOWN_IP;
	}
	if (write_mmap(c, slot, cnt->pid, cnt->last_ns))
		return UNKNOWN_IP;
	return slot->base + offset;
}

static struct bpf_bstack_rec_stack *find_stack(struct bstack_conv *c, u64 id, u32 kind)
{
	struct bpf_bstack_rec_stack *stack;

	if (!id)
		return NULL;
	stack = lookup_stack(c, id, kind);
	if (!stack)
		c->sum->nr_missing_stacks += c->rec_counts;
	return stack;
}

/*
 * The recorder counts every sample and hit it takes: a count above its
 * total is damage (one flipped bit makes 1 into 2^19), and is written as
 * one weighted sample, not expanded into that many
 */
static bool count_plausible(struct bstack_conv *c, const struct bpf_bstack_rec_count *cnt)
{
	return !c->sum->has_stats || cnt->count <= c->sum->stat[BPF_BSTACK_STAT_SAMPLES];
}

/* Frame i of a kernel stack, at its address in the output's kernel maps */
static u64 kernel_frame(struct bstack_conv *c, struct bpf_bstack_rec_stack *kstack, u32 i)
{
	if (kstack->kind == BPF_BSTACK_STACK_KERNEL_BID)
		return bstack_conv__kernel_frame_ip(c, &bpf_bstack__user_frames(kstack)[i]);
	return bpf_bstack__kernel_ips(kstack)[i];
}

static int write_count(struct bstack_conv *c, const struct bpf_bstack_rec_count *cnt)
{
	struct bpf_bstack_summary_event *ev = &c->sum->event[cnt->event];
	struct bpf_bstack_rec_stack *kstack, *ustack;
	struct perf_sample sample = {
		.id	= ev->id,
		.pid	= cnt->pid,
		.tid	= cnt->tid,
		.cpu	= cnt->cpu,
		.time	= cnt->last_ns,
		.period	= cnt->count,
		.weight	= 1,
	};
	/* off-CPU counts are nanoseconds, not samples */
	bool hits = ev->kind != BPF_BSTACK_EVENT_OFFCPU;
	bool plausible = count_plausible(c, cnt);
	u64 n = 0, i, copies = 1;
	int err;

	if (!ev->id)
		return 0;	/* left out by --event */
	if (c->wanted_hosts && !strlist__has_entry(c->wanted_hosts, host_name(c, cnt->pid) ?: ""))
		return 0;	/* left out by --host */
	kstack = find_stack(c, cnt->kern_stack, BPF_BSTACK_STACK_KERNEL);
	ustack = find_stack(c, cnt->user_stack, BPF_BSTACK_STACK_USER);
	if (!kstack && !ustack) {
		if (hits)
			c->sum->nr_no_stack += cnt->count;
		return 0;
	}

	err = write_comm(c, cnt);
	if (err)
		return err;

	c->chain[n++] = 0;	/* nr, below */
	if (kstack) {
		c->chain[n++] = PERF_CONTEXT_KERNEL;
		for (i = 0; i < kstack->nr; i++)
			c->chain[n++] = kernel_frame(c, kstack, i);
	}
	if (ustack) {
		c->chain[n++] = PERF_CONTEXT_USER;
		for (i = 0; i < ustack->nr; i++) {
			struct bpf_bstack_frame ip_frame = { .status = BPF_STACK_BUILD_ID_IP, };
			const struct bpf_bstack_frame *f = &ip_frame;

			if (ustack->kind == BPF_BSTACK_STACK_USER)
				f = &bpf_bstack__user_frames(ustack)[i];
			else
				ip_frame.offset = bpf_bstack__kernel_ips(ustack)[i];
			c->chain[n++] = user_frame_ip(c, cnt, f);
		}
	}
	c->chain[0] = n - 1;
	sample.callchain = (struct ip_callchain *)c->chain;
	sample.ip = n > 2 ? c->chain[2] : 0;

	/*
	 * For readers that count records, not periods: each sample or hit on
	 * its own, within bounds a damaged or hostile count cannot stretch.
	 * Otherwise the weight says how many samples the record stands for
	 * (perf report counts them so with symbol_conf.weight_is_nr_samples).
	 */
	if (c->one_per_sample && hits && plausible &&
	    cnt->count <= BSTACK_EXPAND_MAX && c->expanded + cnt->count <= BSTACK_EXPAND_TOTAL) {
		copies = cnt->count;
		sample.period = 1;
		c->expanded += copies;
	} else if (hits && cnt->count > 1) {
		if (plausible)
			sample.weight = cnt->count;
		if (c->one_per_sample || !plausible)
			c->sum->nr_weighted += c->rec_counts;
	}
	c->event->header.type = PERF_RECORD_SAMPLE;
	c->event->header.misc = kstack ? PERF_RECORD_MISC_KERNEL : PERF_RECORD_MISC_USER;
	c->event->header.size = perf_event__sample_event_size(&sample, OUT_SAMPLE_TYPES, 0);
	perf_event__synthesize_sample(c->event, OUT_SAMPLE_TYPES, 0, &sample);
	if (hits)
		c->sum->nr_samples += cnt->count;
	c->sum->nr_counts += c->rec_counts;
	for (i = 0; i < copies && !err; i++)
		err = write_out(c, c->event, c->event->header.size);
	return err;
}

/*
 * Counts a report tells apart by nothing but their task: the same comm,
 * machine, CPU, event and stacks, each user frame a build-id one.  An IP
 * frame is not alike in two processes: the same address may be other code.
 */
static bool count_mergeable(struct bstack_conv *c, const struct bpf_bstack_rec_count *cnt)
{
	struct bpf_bstack_rec_stack *stack;
	const struct bpf_bstack_frame *f;
	u32 i;

	if (!count_plausible(c, cnt) || !c->sum->event[cnt->event].id)
		return false;
	/* a count missing a stack is written (and counted) on its own */
	if (cnt->kern_stack && !lookup_stack(c, cnt->kern_stack, BPF_BSTACK_STACK_KERNEL))
		return false;
	if (!cnt->user_stack)
		return true;
	stack = lookup_stack(c, cnt->user_stack, BPF_BSTACK_STACK_USER);
	if (!stack || stack->kind != BPF_BSTACK_STACK_USER)
		return false;
	f = bpf_bstack__user_frames(stack);
	for (i = 0; i < stack->nr; i++)
		if (f[i].status != BPF_STACK_BUILD_ID_VALID)
			return false;
	return true;
}

/* keys are indexes in c->counts */
static size_t count_alike_hash(long key, void *ctx)
{
	const struct bpf_bstack_rec_count *cnt = &((struct bstack_conv *)ctx)->counts[key];
	size_t h = cnt->user_stack * 31 + cnt->kern_stack;
	size_t i;

	h = h * 31 + ((u64)cnt->cpu << 32 | cnt->event);
	h = h * 31 + bpf_bstack__host_of(cnt->pid);
	for (i = 0; i < sizeof(cnt->comm) && cnt->comm[i]; i++)
		h = h * 31 + cnt->comm[i];
	return h;
}

static bool count_alike_equal(long a, long b, void *ctx)
{
	const struct bpf_bstack_rec_count *x = &((struct bstack_conv *)ctx)->counts[a];
	const struct bpf_bstack_rec_count *y = &((struct bstack_conv *)ctx)->counts[b];

	return x->user_stack == y->user_stack && x->kern_stack == y->kern_stack &&
	       x->cpu == y->cpu && x->event == y->event &&
	       bpf_bstack__host_of(x->pid) == bpf_bstack__host_of(y->pid) &&
	       !strncmp(x->comm, y->comm, sizeof(x->comm));
}

/*
 * With merge_tasks, the counts alike of many tasks go into the first one,
 * in time order: perf report puts them in one entry all the same, after
 * setting up each task and adding each one's call chain, which for the
 * thousands of short-lived processes of a busy machine is most of its
 * time.  rec_counts_of[] says how many counts each one stands for: 0 for
 * one merged into another.
 */
static int merge_tasks(struct bstack_conv *c)
{
	struct hashmap *first = hashmap__new(count_alike_hash, count_alike_equal, c);
	size_t i, merged = 0;

	c->rec_counts_of = calloc(c->nr_counts, sizeof(*c->rec_counts_of));
	if (IS_ERR(first) || !c->rec_counts_of) {
		if (!IS_ERR(first))
			hashmap__free(first);
		return -ENOMEM;
	}
	for (i = 0; i < c->nr_counts; i++) {
		struct bpf_bstack_rec_count *cnt = &c->counts[i];
		long to;

		c->rec_counts_of[i] = 1;
		if (!count_mergeable(c, cnt))
			continue;
		if (!hashmap__find(first, (long)i, &to)) {
			if (hashmap__add(first, (long)i, (long)i))
				break;
			continue;
		}
		c->counts[to].count += cnt->count;
		c->rec_counts_of[to] += c->rec_counts_of[i];
		c->rec_counts_of[i] = 0;
		merged++;
	}
	pr_debug("%zu counts of tasks alike merged, %zu samples written\n", merged,
		 c->nr_counts - merged);
	hashmap__free(first);
	return i < c->nr_counts ? -ENOMEM : 0;
}

/* In the order of their samples' time, last_ns */
static int cmp_last_ns(const void *a, const void *b)
{
	const struct bpf_bstack_rec_count *x = a, *y = b;

	if (x->last_ns != y->last_ns)
		return x->last_ns < y->last_ns ? -1 : 1;
	return 0;
}

static struct evsel *output_evsel(struct evsel *in, struct bpf_bstack_summary_event *ev)
{
	struct perf_event_attr attr = {
		.type		= PERF_TYPE_SOFTWARE,
		.config		= PERF_COUNT_SW_CPU_CLOCK,
		.size		= sizeof(attr),
		.sample_type	= OUT_SAMPLE_TYPES,
		.sample_period	= 1,
		.sample_id_all	= 1,
		.use_clockid	= in->core.attr.use_clockid,
		.clockid	= in->core.attr.clockid,
	};
	struct evsel *evsel = evsel__new(&attr);

	if (!evsel)
		return NULL;
	evsel->name = strdup(ev->name);
	if (!evsel->name || perf_evsel__alloc_id(&evsel->core, 1, 1)) {
		evsel__delete(evsel);
		return NULL;
	}
	return evsel;
}

/*
 * A recording without EVENT records (one sampling event) has all its
 * counts on event 0; an index no EVENT record names is shown by number.
 */
static void name_events(struct bpf_bstack_summary *sum)
{
	u32 i;

	if (!sum->nr_events)
		sum->nr_events = 1;
	for (i = 0; i < sum->nr_events; i++) {
		struct bpf_bstack_summary_event *ev = &sum->event[i];

		if (ev->declared)
			continue;
		ev->kind = BPF_BSTACK_EVENT_SAMPLE;
		if (sum->nr_events == 1)
			snprintf(ev->name, sizeof(ev->name), "%s", BPF_BSTACK_EVENT);
		else
			snprintf(ev->name, sizeof(ev->name), "event%u", i);
	}
}

/* One output event per recorded event that --event keeps, in index order */
static struct evlist *output_evlist(struct bstack_conv *c, struct evsel *in)
{
	struct bpf_bstack_summary *sum = c->sum;
	struct evlist *evlist = evlist__new();
	u64 id = OUT_FIRST_ID;
	u32 i;

	if (!evlist)
		return NULL;
	for (i = 0; i < sum->nr_events; i++) {
		struct bpf_bstack_summary_event *ev = &sum->event[i];
		struct evsel *evsel;

		if (c->wanted && !strlist__has_entry(c->wanted, ev->name))
			continue;
		evsel = output_evsel(in, ev);
		if (!evsel) {
			evlist__delete(evlist);
			return NULL;
		}
		evlist__add(evlist, evsel);
		perf_evlist__id_add(&evlist->core, &evsel->core, 0, 0, id);
		ev->id = id++;
	}
	return evlist;
}

/* Names asked for that are not among the nr names: say which ones are */
static int check_wanted(const char *input, const char *what, struct strlist *wanted,
			const char *const *names, u32 nr)
{
	struct str_node *pos;
	struct strbuf sb;
	int err = 0;
	u32 i;

	strbuf_init(&sb, 128);
	for (i = 0; i < nr; i++)
		strbuf_addf(&sb, "%s'%s'", i ? ", " : "", names[i]);
	strlist__for_each_entry(pos, wanted) {
		for (i = 0; i < nr; i++)
			if (!strcmp(pos->s, names[i]))
				break;
		if (i == nr) {
			pr_err("%s has no %s '%s'; it has %s\n", input, what, pos->s, sb.buf);
			err = -EINVAL;
		}
	}
	strbuf_release(&sb);
	return err;
}

/* --host names that are not in the merge */
static int check_wanted_hosts(struct bstack_conv *c, const char *input)
{
	struct bpf_bstack_summary *sum = c->sum;
	const char **names;
	int err;
	u32 i;

	if (!c->wanted_hosts)
		return 0;
	if (sum->nr_hosts < 2) {
		pr_err("%s is a recording of one machine: --host applies to merges\n", input);
		return -EINVAL;
	}
	names = calloc(sum->nr_hosts, sizeof(*names));
	if (!names)
		return -ENOMEM;
	for (i = 0; i < sum->nr_hosts; i++)
		names[i] = sum->hosts[i].name;
	err = check_wanted(input, "host", c->wanted_hosts, names, sum->nr_hosts);
	free(names);
	return err;
}

/* --event names that are not in the recording */
static int check_wanted_events(struct bstack_conv *c, const char *input)
{
	const char *names[BPF_BSTACK_MAX_EVENTS];
	u32 i;

	if (!c->wanted)
		return 0;
	for (i = 0; i < c->sum->nr_events; i++)
		names[i] = c->sum->event[i].name;
	return check_wanted(input, "event", c->wanted, names, c->sum->nr_events);
}

/* Keep the header sections that describe the recording machine, like perf inject */
static int copy_feat(struct feat_copier *fc, int feat, struct feat_writer *fw)
{
	struct bpf_bstack_sections *s = container_of(fc, struct bpf_bstack_sections, fc);

	switch (feat) {
	case HEADER_HOSTNAME: case HEADER_OSRELEASE: case HEADER_VERSION:
	case HEADER_ARCH: case HEADER_NRCPUS: case HEADER_CPUDESC:
	case HEADER_CPUID: case HEADER_TOTAL_MEM: case HEADER_CPU_TOPOLOGY:
	case HEADER_NUMA_TOPOLOGY: case HEADER_CMDLINE: case HEADER_CLOCKID:
	case HEADER_CLOCK_DATA: case HEADER_MEM_TOPOLOGY: case HEADER_CACHE:
		break;
	default:
		return 0;
	}
	return bpf_bstack__copy_section(s, feat, fw);
}

static void clear_features(struct perf_header *header)
{
	static const int keep[] = {
		HEADER_BUILD_ID, HEADER_HOSTNAME, HEADER_OSRELEASE, HEADER_VERSION,
		HEADER_ARCH, HEADER_NRCPUS, HEADER_CPUDESC, HEADER_CPUID,
		HEADER_TOTAL_MEM, HEADER_CPU_TOPOLOGY, HEADER_NUMA_TOPOLOGY,
		HEADER_CMDLINE, HEADER_EVENT_DESC, HEADER_CLOCKID, HEADER_CLOCK_DATA,
		HEADER_MEM_TOPOLOGY, HEADER_CACHE, HEADER_SAMPLE_TIME,
	};

	/* with the first and last sample times, for perf report --time 10%/2 */
	bpf_bstack__keep_features(header, keep, ARRAY_SIZE(keep));
}

/* A recording of one sampling event has the summary in its event's name */
static void set_event_name(struct bstack_conv *c)
{
	struct evsel *evsel = evlist__first(c->evlist);
	const struct bpf_bstack_summary *s = c->sum;
	u64 lost = bpf_bstack__summary_lost(s);
	char *name;

	if (s->nr_events != 1 || s->event[0].kind != BPF_BSTACK_EVENT_SAMPLE ||
	    c->evlist->core.nr_entries != 1)
		return;

	if (asprintf(&name, "bstack: %" PRIu64 " samples, %" PRIu64 " lost, %.1f%% IP frames",
		     s->has_stats ? s->stat[BPF_BSTACK_STAT_SAMPLES] : s->nr_samples, lost,
		     s->nr_valid_frames + s->nr_ip_frames ?
		     100.0 * s->nr_ip_frames / (s->nr_valid_frames + s->nr_ip_frames) : 0.0) > 0) {
		free(evsel->name);
		evsel->name = name;
	}
}

static int write_output(struct bstack_conv *c, const char *output)
{
	struct perf_session *session = c->session;
	struct machine *machine = &session->machines.host;
	struct bpf_bstack_sections secs = { .fc.copy = copy_feat, };
	u64 in_data_offset = session->header.data_offset;
	u64 in_data_size = session->header.data_size;
	struct evlist *in_evlist = session->evlist;
	u64 data_offset;
	size_t i;
	int err;

	bpf_bstack__read_sections(&secs, &session->header, perf_data__fd(session->data));

	/* like perf.data: private, and never through a planted symlink */
	c->fd = open(output, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (c->fd < 0) {
		pr_err("cannot create %s: %m%s\n", output,
		       errno == ELOOP ? " (a symbolic link)" : "");
		return -errno;
	}
	c->evlist = output_evlist(c, evlist__find_evsel_by_str(in_evlist, BPF_BSTACK_EVENT));
	c->chain = calloc(2 * BPF_BSTACK_MAX_FRAMES + 3, sizeof(u64));
	c->event = malloc(PERF_SAMPLE_MAX_SIZE);
	c->out = malloc(BSTACK_OUT_BUF);
	if (!c->evlist || !c->chain || !c->event || !c->out) {
		err = -ENOMEM;
		goto out;
	}

	/* room for the header and the attribute before the data, as perf inject does */
	data_offset = roundup(8192 + in_data_offset, 4096);
	if (lseek(c->fd, data_offset, SEEK_SET) < 0) {
		err = -errno;
		goto out;
	}

	machine->id_hdr_size = evlist__id_hdr_size(c->evlist);
	err = bstack_conv__kernel_maps(c, machine);
	if (err)
		goto out;

	if (c->nr_counts)	/* qsort() must not see the NULL of no counts */
		qsort(c->counts, c->nr_counts, sizeof(*c->counts), cmp_last_ns);
	if (c->merge_tasks && c->nr_counts) {
		err = merge_tasks(c);
		if (err)
			goto out;
	}
	for (i = 0; i < c->nr_counts && !c->err; i++) {
		const struct bpf_bstack_rec_count *cnt = &c->counts[i];

		c->rec_counts = c->rec_counts_of ? c->rec_counts_of[i] : 1;
		err = c->rec_counts ? write_count(c, cnt) : 0;
		if (err)
			goto out;
		if (!c->evlist->first_sample_time || cnt->last_ns < c->evlist->first_sample_time)
			c->evlist->first_sample_time = cnt->last_ns;
		if (cnt->last_ns > c->evlist->last_sample_time)
			c->evlist->last_sample_time = cnt->last_ns;
	}
	err = flush_out(c);
	if (err)
		goto out;

	if (c->sum->nr_kern_stacks) {
		struct map *kmap = machine__kernel_map(machine);

		if (kmap)
			dso__set_hit(map__dso(kmap));
	}
	set_event_name(c);
	clear_features(&session->header);
	disable_buildid_cache();	/* never copy files by path: they may be rebuilt */
	session->header.data_offset = data_offset;
	session->header.data_size = c->bytes;
	/* the sample ids are written from session->evlist, the attributes from ours */
	session->evlist = c->evlist;
	err = perf_session__inject_header(session, c->evlist, c->fd, &secs.fc, false);
	session->evlist = in_evlist;
	session->header.data_offset = in_data_offset;
	session->header.data_size = in_data_size;
out:
	if (close(c->fd) && !err)
		err = -errno;
	if (err)
		unlink(output);
	return err;
}

static void conv_free(struct bstack_conv *c)
{
	struct hashmap_entry *cur;
	size_t bkt;

	if (c->stacks) {
		hashmap__for_each_entry(c->stacks, cur, bkt)
			free(cur->pvalue);
		hashmap__free(c->stacks);
	}
	if (c->slots) {
		hashmap__for_each_entry(c->slots, cur, bkt) {
			struct bstack_slot *slot = cur->pvalue;

			dso__put(slot->dso);
			free(slot);
		}
		hashmap__free(c->slots);
	}
	if (c->comms) {
		hashmap__for_each_entry(c->comms, cur, bkt)
			free(cur->pvalue);
		hashmap__free(c->comms);
	}
	if (c->kmods) {
		hashmap__for_each_entry(c->kmods, cur, bkt)
			map__put(cur->pvalue);
		hashmap__free(c->kmods);
	}
	bstack_conv__free_map_history(c);
	hashmap__free(c->mapped);
	strlist__delete(c->wanted);
	strlist__delete(c->wanted_hosts);
	evlist__delete(c->evlist);
	free(c->counts);
	free(c->rec_counts_of);
	free(c->chain);
	free(c->event);
	free(c->out);
}

/* A file cut short (a killed perf, a full disk) is refused, not half read */
static int check_size(struct perf_session *session, const char *input)
{
	struct perf_header *h = &session->header;
	struct stat st;

	if (fstat(perf_data__fd(session->data), &st) || !S_ISREG(st.st_mode))
		return 0;
	if (!h->data_size) {
		/* perf record writes the data size last: it was killed, or the disk was full */
		pr_err("%s is truncated: perf record did not finish it (killed, or out of disk space)\n",
		       input);
		return -EINVAL;
	}
	if (h->data_size && (u64)st.st_size < h->data_offset + h->data_size) {
		pr_err("%s is truncated: %" PRIu64 " bytes, its header describes %"
		       PRIu64 "\n", input, (u64)st.st_size, h->data_offset + h->data_size);
		return -EINVAL;
	}
	return 0;
}

int bpf_bstack__convert(const char *input, const char *output, bool force,
			const char *events, const char *hosts, unsigned int flags,
			struct bpf_bstack_summary *sum)
{
	struct perf_data data = {
		.path	= input,
		.mode	= PERF_DATA_MODE_READ,
		.force	= force,
	};
	struct bstack_conv c = {
		.sum		= sum,
		.fd		= -1,
		.one_per_sample	= flags & BPF_BSTACK_CONVERT_PER_SAMPLE,
		.merge_tasks	= flags & BPF_BSTACK_CONVERT_MERGE_TASKS,
		.rec_counts	= 1,
	};
	int err;

	memset(sum, 0, sizeof(*sum));
	perf_tool__init(&c.tool, /*ordered_events=*/true);
	c.tool.sample	= read_sample;
	c.tool.mmap	= bstack_conv__mmap;
	c.tool.mmap2	= bstack_conv__mmap2;
	/* user maps are kept by process, without perf's threads: see note_map() */
	c.tool.fork	= bstack_conv__fork;
	c.tool.build_id	= perf_event__process_build_id;

	c.stacks = hashmap__new(bpf_bstack__id_hash, bpf_bstack__id_equal, NULL);
	c.slots = hashmap__new(bpf_bstack__id_hash, bpf_bstack__id_equal, NULL);
	c.mapped = hashmap__new(bpf_bstack__id_hash, bpf_bstack__id_equal, NULL);
	c.comms = hashmap__new(bpf_bstack__id_hash, bpf_bstack__id_equal, NULL);
	c.kmods = hashmap__new(bpf_bstack__id_hash, bpf_bstack__id_equal, NULL);
	c.map_history = hashmap__new(bpf_bstack__id_hash, bpf_bstack__id_equal, NULL);
	if (IS_ERR(c.stacks) || IS_ERR(c.slots) || IS_ERR(c.mapped) || IS_ERR(c.comms) ||
	    IS_ERR(c.kmods) || IS_ERR(c.map_history)) {
		c.stacks = c.slots = c.mapped = c.comms = c.kmods = c.map_history = NULL;
		conv_free(&c);
		return -ENOMEM;
	}
	if (events || hosts) {
		c.wanted = events ? strlist__new(events, NULL) : NULL;
		c.wanted_hosts = hosts ? strlist__new(hosts, NULL) : NULL;
		if ((events && !c.wanted) || (hosts && !c.wanted_hosts)) {
			conv_free(&c);
			return -ENOMEM;
		}
	}

	c.session = perf_session__new(&data, &c.tool);
	if (IS_ERR(c.session)) {
		err = PTR_ERR(c.session);
		c.session = NULL;
		pr_err("cannot read %s: not a perf.data file, or truncated\n", input);
		goto out;
	}
	err = check_size(c.session, input);
	if (err)
		goto out;
	if (data.is_pipe) {
		pr_err("%s: reading bstack data from a pipe is not supported\n", input);
		err = -EINVAL;
		goto out;
	}
	if (!evlist__find_evsel_by_str(c.session->evlist, BPF_BSTACK_EVENT)) {
		pr_err("%s has no bstack samples: record it with 'perf bstack record'\n", input);
		err = -EINVAL;
		goto out;
	}
	symbol__init(&c.session->header.env);

	err = perf_session__process_events(c.session);
	if (err) {
		pr_err("%s could not be read (error %d): truncated or damaged\n",
		       input, err);
		goto out;
	}
	if (!c.nr_counts && !sum->has_stats) {
		pr_err("%s has no bstack records: the record was cut short\n", input);
		err = -EINVAL;
		goto out;
	}
	name_events(sum);
	err = check_wanted_events(&c, input);
	if (!err)
		err = check_wanted_hosts(&c, input);
	if (!err)
		err = write_output(&c, output);
out:
	conv_free(&c);
	if (c.session)
		perf_session__delete(c.session);
	/* let the report that follows set up symbols with its own options */
	symbol__exit();
	return err;
}
