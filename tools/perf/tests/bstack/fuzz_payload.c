// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer harness for the perf bstack payload decoder: any bytes, in
 * either byte order, must be rejected or decoded into a record whose sizes
 * hold, without reading outside the input.
 *
 *   clang -fsanitize=fuzzer,address,undefined ... util/bstack-payload.c
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <linux/types.h>

#include "util/bstack-payload.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static u64 sink;

/* read every frame and counter the record says it has */
static void touch_record(const struct bpf_bstack_rec_hdr *hdr)
{
	const struct bpf_bstack_rec_stack *stack = (const void *)hdr;
	const struct bpf_bstack_rec_stats *stats = (const void *)hdr;
	struct bpf_bstack_counts_iter it;
	struct bpf_bstack_rec_count c;
	u64 sum = 0;
	u32 i;

	switch (hdr->type) {
	case BPF_BSTACK_REC_STACK:
		for (i = 0; i < stack->nr; i++) {
			if (stack->kind == BPF_BSTACK_STACK_USER)
				sum += bpf_bstack__user_frames((void *)stack)[i].offset;
			else
				sum += bpf_bstack__kernel_ips((void *)stack)[i];
		}
		break;
	case BPF_BSTACK_REC_STATS:
		for (i = 0; i < stats->nr; i++)
			sum += stats->stat[i];
		break;
	case BPF_BSTACK_REC_COUNTS:
		/* decoded: every count comes out */
		bpf_bstack__counts_begin(&it, (const void *)hdr);
		while (bpf_bstack__counts_next(&it, &c) > 0)
			sum += c.count + c.user_stack;
		if (it.i != ((const struct bpf_bstack_rec_counts *)hdr)->nr)
			abort();
		break;
	default:
		break;
	}
	sink += sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct bpf_bstack_rec_hdr *hdr;
	void *raw, *copy;
	int swap;

	if (size > 1 << 20)
		return 0;
	/* an exact-size heap copy, so that ASan sees any read past the end */
	raw = malloc(size ? size : 1);
	if (!raw)
		return 0;
	memcpy(raw, data, size);
	for (swap = 0; swap < 2; swap++) {
		if (!bpf_bstack__decode(raw, size, swap, &hdr, &copy)) {
			touch_record(hdr);
			free(copy);
		}
	}
	free(raw);
	return 0;
}
