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

static int check_record(const struct bpf_bstack_rec_hdr *hdr)
{
	const struct bpf_bstack_rec_stats *stats;

	switch (hdr->type) {
	case BPF_BSTACK_REC_STACK:
		return check_stack((const void *)hdr);
	case BPF_BSTACK_REC_COUNT:
		if (hdr->size != sizeof(struct bpf_bstack_rec_count))
			return -EBADMSG;
		return ((const struct bpf_bstack_rec_count *)hdr)->event < BPF_BSTACK_MAX_EVENTS ?
		       0 : -E2BIG;
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
