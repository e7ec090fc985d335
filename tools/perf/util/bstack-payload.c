// SPDX-License-Identifier: GPL-2.0
/*
 * The perf bstack payload: sizes, byte swapping and validation of the
 * records in the raw data of bstack samples.  Nothing here uses the rest
 * of perf, so the decoder can be fuzzed on its own.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <byteswap.h>
#include <linux/bpf.h>
#include <linux/zalloc.h>

#include "util/bstack-payload.h"
#include "bpf_skel/bstack.h"

static_assert(sizeof(struct bpf_bstack_frame) == sizeof(struct bpf_stack_build_id),
	      "bstack frames must have the kernel's layout");
static_assert(sizeof(struct bpf_bstack_rec_stack) % sizeof(u64) == 0, "aligned");
static_assert(sizeof(struct bpf_bstack_rec_count) % sizeof(u64) == 0, "aligned");
static_assert(sizeof(struct bpf_bstack_rec_counts) % sizeof(u64) == 0, "aligned");

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
	[BPF_BSTACK_STAT_OFFCPU_LOST]	 = "off-CPU intervals lost (no task storage)",
	[BPF_BSTACK_STAT_USER_UNSTORED]	 = "user stacks lost (map update failed, not full)",
	[BPF_BSTACK_STAT_KERN_UNSTORED]	 = "kernel stacks lost (map update failed, not full)",
	[BPF_BSTACK_STAT_FP_STACKS]	 = "user stacks walked by frame pointer",
	[BPF_BSTACK_STAT_CFI_STACKS]	 = "user stacks walked with unwind tables",
	[BPF_BSTACK_STAT_CFI_COMPLETE]	 = "table walks to the bottom of the stack",
	[BPF_BSTACK_STAT_CFI_NO_MAP]	 = "stacks left to the kernel: code in no known mapping",
	[BPF_BSTACK_STAT_CFI_NO_ROW]	 = "table walks ended at code without unwind rule",
	[BPF_BSTACK_STAT_CFI_UNREADABLE] = "table walks ended at unreadable stack",
	[BPF_BSTACK_STAT_CFI_BAD_RULE]	 = "table walks ended at a rule not followed",
	[BPF_BSTACK_STAT_CFI_DEPTH]	 = "table walks cut at max-stack",
	[BPF_BSTACK_STAT_CFI_FP_FRAMES]	 = "frames walked by frame pointer in table walks",
	[BPF_BSTACK_STAT_NESTED]	 = "hits in a program of ours interrupting another",
	[BPF_BSTACK_STAT_NESTED_LOST]	 = "hits lost: programs of ours nested too deep",
	[BPF_BSTACK_STAT_RECURSION_MISSES] = "hits the kernel skipped: a BPF program running",
	[BPF_BSTACK_STAT_CFI_FP_GUESSED] = "frames stepped by frame pointer where no rule was",
	[BPF_BSTACK_STAT_KERN_RECALLED]	 = "kernel stacks of system call entries not walked again",
	[BPF_BSTACK_STAT_CFI_IN_EXEC]	 = "stacks left to the kernel: inside execve()",
	[BPF_BSTACK_STAT_CFI_FP_UNLOADED] = "frames stepped by frame pointer: table not loaded",
	[BPF_BSTACK_STAT_TABLES_LOADED]	 = "unwind tables loaded",
	[BPF_BSTACK_STAT_TABLES_RELOADED] = "unwind tables loaded again after they left",
	[BPF_BSTACK_STAT_TABLES_RECLAIMED] = "unwind tables of files no longer mapped, freed",
	[BPF_BSTACK_STAT_TABLES_EVICTED] = "unwind tables not used for a while, evicted",
	[BPF_BSTACK_STAT_TABLES_NO_ROOM] = "unwind tables that found no room",
	[BPF_BSTACK_STAT_TABLES_TOO_LARGE] = "unwind tables larger than all the rows",
	[BPF_BSTACK_STAT_TABLE_ROWS]	 = "unwind table rows in use",
	[BPF_BSTACK_STAT_TABLE_ROWS_MAX] = "unwind table rows in all",
	[BPF_BSTACK_STAT_CFI_REG_UNKNOWN] = "table walks ended: CFA from a saved register",
	[BPF_BSTACK_STAT_CFI_TRAMPOLINES] = "frames stepped through CPython's perf trampolines",
	[BPF_BSTACK_STAT_CFI_ROWS_RECALLED] = "frames whose unwind rule was recalled, not searched",
	[BPF_BSTACK_STAT_CFI_WALKS_RECALLED] = "user stacks recalled from the CPU's last walk",
};

/* User (or kernel) stacks lost, for whatever reason, by the counters */
u64 bpf_bstack__lost_stacks(const u64 *stat, bool user)
{
	if (user)
		return stat[BPF_BSTACK_STAT_USER_ERR] + stat[BPF_BSTACK_STAT_USER_FULL] +
		       stat[BPF_BSTACK_STAT_USER_UNSTORED];
	return stat[BPF_BSTACK_STAT_KERN_ERR] + stat[BPF_BSTACK_STAT_KERN_FULL] +
	       stat[BPF_BSTACK_STAT_KERN_UNSTORED];
}

const char *bpf_bstack__event_kind_name(u32 kind)
{
	switch (kind) {
	case BPF_BSTACK_EVENT_SAMPLE:
		return "sample";
	case BPF_BSTACK_EVENT_TRACEPOINT:
		return "tracepoint";
	case BPF_BSTACK_EVENT_UPROBE:
		return "uprobe";
	case BPF_BSTACK_EVENT_OFFCPU:
		return "off-cpu";
	default:
		return "unknown";
	}
}

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
	case BPF_BSTACK_STACK_KERNEL_BID:
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
	} else if (kind == BPF_BSTACK_STACK_USER || kind == BPF_BSTACK_STACK_KERNEL_BID) {
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
	c->event = bswap_32(c->event);
}

/* only the header and the stack ids: the varints are bytes */
static void swap_counts(struct bpf_bstack_rec_counts *c, bool to_host)
{
	u32 nr = c->nr;

	c->nr = bswap_32(c->nr);
	c->reserved = bswap_32(c->reserved);
	c->base_ns = bswap_64(c->base_ns);
	if (to_host)
		nr = c->nr;
	if (nr <= (c->hdr.size - sizeof(*c)) / (2 * sizeof(u64)))
		swap_u64s(c->stack, 2 * (size_t)nr);
}

static void swap_event(struct bpf_bstack_rec_event *e)
{
	e->index = bswap_32(e->index);
	e->kind = bswap_32(e->kind);
}

static void swap_host(struct bpf_bstack_rec_host *h)
{
	h->index = bswap_32(h->index);
	h->reserved = bswap_32(h->reserved);
	h->start_ns = bswap_64(h->start_ns);
	h->samples = bswap_64(h->samples);
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
	else if (type == BPF_BSTACK_REC_EVENT && size >= sizeof(struct bpf_bstack_rec_event))
		swap_event(rec);
	else if (type == BPF_BSTACK_REC_HOST && size >= sizeof(struct bpf_bstack_rec_host))
		swap_host(rec);
	else if (type == BPF_BSTACK_REC_COUNTS && size >= sizeof(struct bpf_bstack_rec_counts))
		swap_counts(rec, to_host);

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

static int check_event(const struct bpf_bstack_rec_event *ev)
{
	if (ev->hdr.size != sizeof(*ev) ||
	    strnlen(ev->name, sizeof(ev->name)) == sizeof(ev->name))
		return -EBADMSG;
	if (ev->kind < BPF_BSTACK_EVENT_SAMPLE || ev->kind > BPF_BSTACK_EVENT_OFFCPU)
		return -ENOTSUP;
	if (ev->index >= BPF_BSTACK_MAX_EVENTS)
		return -E2BIG;
	return 0;
}

static bool is_string(const char *s, size_t size)
{
	return strnlen(s, size) < size;
}

static int check_host(const struct bpf_bstack_rec_host *h)
{
	if (h->hdr.size != sizeof(*h) || !is_string(h->hostname, sizeof(h->hostname)) ||
	    !is_string(h->os_release, sizeof(h->os_release)) ||
	    !is_string(h->arch, sizeof(h->arch)))
		return -EBADMSG;
	return h->index < BPF_BSTACK_MAX_HOSTS ? 0 : -E2BIG;
}

static int check_count(const struct bpf_bstack_rec_count *c)
{
	if (c->hdr.size != sizeof(*c))
		return -EBADMSG;
	return c->event < BPF_BSTACK_MAX_EVENTS ? 0 : -E2BIG;
}

enum counts_column {
	COL_COUNT, COL_FIRST, COL_SPAN, COL_PID, COL_TID, COL_CPU, COL_EVENT, COL_COMM,
};

/* every packed count decodes, and nothing but padding follows them */
static int check_counts(const struct bpf_bstack_rec_counts *rec)
{
	struct bpf_bstack_counts_iter it;
	struct bpf_bstack_rec_count c;
	bool big = false;
	const u8 *p;
	int err;

	if (rec->hdr.size < sizeof(*rec) || rec->reserved)
		return -EBADMSG;
	bpf_bstack__counts_begin(&it, rec);
	/* a size that lies is told before the values it made up */
	while ((err = bpf_bstack__counts_next(&it, &c)) > 0)
		big |= c.event >= BPF_BSTACK_MAX_EVENTS;
	if (err)
		return err;
	for (p = it.col[COL_COMM]; p < it.end; p++) {
		if (*p || it.end - it.col[COL_COMM] >= (long)sizeof(u64))
			return -EBADMSG;
	}
	return big ? -E2BIG : 0;
}

static int check_record(const struct bpf_bstack_rec_hdr *hdr)
{
	const struct bpf_bstack_rec_stats *stats;

	switch (hdr->type) {
	case BPF_BSTACK_REC_STACK:
		return check_stack((const void *)hdr);
	case BPF_BSTACK_REC_COUNT:
		return check_count((const void *)hdr);
	case BPF_BSTACK_REC_COUNTS:
		return check_counts((const void *)hdr);
	case BPF_BSTACK_REC_STATS:
		stats = (const void *)hdr;
		if (hdr->size < sizeof(*stats))
			return -EBADMSG;
		if (stats->nr > BPF_BSTACK_MAX_STATS)
			return -E2BIG;
		return bpf_bstack__stats_size(stats->nr) == hdr->size ? 0 : -EBADMSG;
	case BPF_BSTACK_REC_EVENT:
		return check_event((const void *)hdr);
	case BPF_BSTACK_REC_HOST:
		return check_host((const void *)hdr);
	default:
		return -ENOTSUP;
	}
}

static size_t varint_size(u64 v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

static u8 *put_varint(u8 *p, u64 v)
{
	while (v >= 0x80) {
		*p++ = (v & 0x7f) | 0x80;
		v >>= 7;
	}
	*p++ = v;
	return p;
}

/* tid - pid, small either way, as a small unsigned number */
static u64 zigzag(u32 pid, u32 tid)
{
	s64 d = (s64)tid - pid;

	return d < 0 ? (u64)(-d) * 2 - 1 : (u64)d * 2;
}

static u32 unzigzag(u32 pid, u64 z)
{
	return z & 1 ? pid - (u32)((z + 1) / 2) : pid + (u32)(z / 2);
}

static u64 count_field(const struct bpf_bstack_rec_count *c, enum counts_column col,
		       u64 prev_first)
{
	switch (col) {
	case COL_COUNT:
		return c->count;
	case COL_FIRST:
		return c->first_ns - prev_first;
	case COL_SPAN:
		return c->last_ns - c->first_ns;
	case COL_PID:
		return c->pid;
	case COL_TID:
		return zigzag(c->pid, c->tid);
	case COL_CPU:
		return c->cpu;
	case COL_EVENT:
		return c->event;
	case COL_COMM:
	default:
		return 0;	/* not a number */
	}
}

/*
 * Pack nr COUNTs, sorted by first_ns, into a COUNTS record of at most size
 * bytes (BPF_BSTACK_PACKED_COUNT_MAX a count is always enough).  Returns
 * the record's size, or 0 when they do not fit or are not in order.
 */
size_t bpf_bstack__pack_counts(struct bpf_bstack_rec_counts *rec, size_t size,
			       const struct bpf_bstack_rec_count *count, u32 nr)
{
	size_t fixed = sizeof(*rec) + 2 * sizeof(u64) * (size_t)nr;
	u8 *p = (u8 *)rec + fixed, *end = (u8 *)rec + size;
	enum counts_column col;
	u32 i;

	if (fixed > size)
		return 0;
	memset(rec, 0, sizeof(*rec));
	rec->nr = nr;
	rec->base_ns = nr ? count[0].first_ns : 0;
	for (i = 0; i < nr; i++) {
		if (i && count[i].first_ns < count[i - 1].first_ns)
			return 0;
		rec->stack[i] = count[i].user_stack;
		rec->stack[nr + i] = count[i].kern_stack;
	}
	for (col = COL_COUNT; col < COL_COMM; col++) {
		u64 prev = rec->base_ns;

		for (i = 0; i < nr; i++) {
			u64 v = count_field(&count[i], col, prev);

			if ((size_t)(end - p) < varint_size(v))
				return 0;
			p = put_varint(p, v);
			prev = count[i].first_ns;
		}
	}
	for (i = 0; i < nr; i++) {
		size_t len = strnlen(count[i].comm, sizeof(count[i].comm) - 1);

		if ((size_t)(end - p) < len + 1)
			return 0;
		memcpy(p, count[i].comm, len);
		p[len] = '\0';
		p += len + 1;
	}
	while ((p - (u8 *)rec) % sizeof(u64)) {
		if (p == end)
			return 0;
		*p++ = 0;
	}
	bpf_bstack__init_hdr(&rec->hdr, BPF_BSTACK_REC_COUNTS, p - (u8 *)rec);
	return rec->hdr.size;
}

static int get_varint(const u8 **p, const u8 *end, u64 *v)
{
	unsigned int shift;

	*v = 0;
	for (shift = 0; *p < end && shift < 64; shift += 7) {
		u8 b = *(*p)++;

		if (shift == 63 && b > 1)
			return -EBADMSG;	/* past 64 bits */
		*v |= (u64)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return 0;
	}
	return -EBADMSG;
}

/*
 * Find where each column of a COUNTS record begins.  A column that runs
 * past the record leaves its cursor, and those after it, at the end: the
 * first bpf_bstack__counts_next() then fails.
 */
void bpf_bstack__counts_begin(struct bpf_bstack_counts_iter *it,
			      const struct bpf_bstack_rec_counts *rec)
{
	size_t ids = 0;
	const u8 *p;
	int col;
	u32 i;
	u64 v;

	memset(it, 0, sizeof(*it));
	if (rec->hdr.size >= sizeof(*rec))
		ids = (rec->hdr.size - sizeof(*rec)) / (2 * sizeof(u64));
	it->rec = rec;
	it->end = (const u8 *)rec + rec->hdr.size;
	it->first_ns = rec->base_ns;
	p = rec->nr <= ids ? (const u8 *)&rec->stack[2 * (size_t)rec->nr] : it->end;
	for (col = COL_COUNT; col <= COL_COMM; col++) {
		it->col[col] = p;
		for (i = 0; i < rec->nr && p < it->end; i++) {
			if (col == COL_COMM)
				p += strnlen((const char *)p, it->end - p) + 1;
			else if (get_varint(&p, it->end, &v))
				p = it->end;
		}
		if (p > it->end)
			p = it->end;
	}
}

static int next_u32(struct bpf_bstack_counts_iter *it, int col, u32 *v)
{
	u64 v64;

	if (get_varint(&it->col[col], it->end, &v64) || v64 > UINT32_MAX)
		return -EBADMSG;
	*v = v64;
	return 0;
}

/*
 * The next count of a COUNTS record as a COUNT record: 1, or 0 after the
 * last, or -EBADMSG where the record does not hold what nr says.  Counts
 * come out in the order of their first_ns.
 */
int bpf_bstack__counts_next(struct bpf_bstack_counts_iter *it, struct bpf_bstack_rec_count *out)
{
	const struct bpf_bstack_rec_counts *rec = it->rec;
	const u8 **comm = &it->col[COL_COMM];
	u64 delta, span, tid;
	size_t len;

	if (it->i >= rec->nr)
		return 0;
	memset(out, 0, sizeof(*out));
	if (it->end < (const u8 *)rec->stack ||
	    (size_t)(it->end - (const u8 *)rec->stack) / (2 * sizeof(u64)) < rec->nr ||
	    get_varint(&it->col[COL_COUNT], it->end, &out->count) ||
	    get_varint(&it->col[COL_FIRST], it->end, &delta) ||
	    get_varint(&it->col[COL_SPAN], it->end, &span) ||
	    next_u32(it, COL_PID, &out->pid) ||
	    get_varint(&it->col[COL_TID], it->end, &tid) || tid > 2ULL * UINT32_MAX ||
	    next_u32(it, COL_CPU, &out->cpu) || next_u32(it, COL_EVENT, &out->event))
		return -EBADMSG;
	/* times that wrap would not be in order */
	if (it->first_ns + delta < it->first_ns || it->first_ns + delta + span < span)
		return -EBADMSG;
	len = strnlen((const char *)*comm, it->end - *comm);
	if (len >= sizeof(out->comm) || len == (size_t)(it->end - *comm))
		return -EBADMSG;
	memcpy(out->comm, *comm, len);
	*comm += len + 1;

	bpf_bstack__init_hdr(&out->hdr, BPF_BSTACK_REC_COUNT, sizeof(*out));
	out->user_stack = rec->stack[it->i];
	out->kern_stack = rec->stack[rec->nr + it->i];
	it->first_ns += delta;
	out->first_ns = it->first_ns;
	out->last_ns = out->first_ns + span;
	out->tid = unzigzag(out->pid, tid);
	it->i++;
	return 1;
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
		return "too many frames, counters or events";
	case -EINVAL:
		return "stack without id";
	case -ENOMEM:
		return "out of memory";
	default:
		return "invalid record";
	}
}
