// SPDX-License-Identifier: GPL-2.0
/*
 * Tests of the perf bstack payload: records round-trip through
 * bpf_bstack__decode() in both byte orders, and damaged records are
 * rejected with the error that names what is wrong.  And the unwind
 * table built from the .eh_frame of the C library perf runs with.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/bpf.h>
#include <linux/compiler.h>
#include <linux/kernel.h>

#include "debug.h"
#include "tests.h"
#include "util/bstack-cfi.h"
#include "util/bstack-payload.h"
#include "bpf_skel/bstack.h"

static u64 buf[1024];

static struct bpf_bstack_rec_stack *make_user_stack(void)
{
	struct bpf_bstack_rec_stack *s = (void *)buf;
	struct bpf_bstack_frame *f = bpf_bstack__user_frames(s);
	int i;

	memset(buf, 0, sizeof(buf));
	s->id = 0x1122334455667788ULL;
	s->kind = BPF_BSTACK_STACK_USER;
	s->nr = 3;
	for (i = 0; i < 3; i++) {
		f[i].status = i == 2 ? BPF_STACK_BUILD_ID_IP : BPF_STACK_BUILD_ID_VALID;
		memset(f[i].build_id, 0xa0 + i, sizeof(f[i].build_id));
		f[i].offset = 0x1000 + i;
	}
	bpf_bstack__init_hdr(&s->hdr, BPF_BSTACK_REC_STACK,
			     bpf_bstack__stack_size(BPF_BSTACK_STACK_USER, 3));
	return s;
}

static struct bpf_bstack_rec_count *make_count(void)
{
	struct bpf_bstack_rec_count *c = (void *)buf;

	memset(buf, 0, sizeof(buf));
	bpf_bstack__init_hdr(&c->hdr, BPF_BSTACK_REC_COUNT, sizeof(*c));
	c->user_stack = 0x1122334455667788ULL;
	c->kern_stack = 0x99;
	c->count = 42;
	c->first_ns = 1000;
	c->last_ns = 2000;
	c->pid = 1234;
	c->tid = 1235;
	c->cpu = 1;
	c->event = 3;
	memcpy(c->comm, "bstack_child", sizeof("bstack_child"));
	return c;
}

/* three counts unlike each other, in the order of their first samples */
static const struct bpf_bstack_rec_count packed_counts[] = {
	{ .user_stack = 0x1122334455667788ULL, .kern_stack = 0x99, .count = 42,
	  .first_ns = 1796415115636501244ULL, .last_ns = 1796415115636501244ULL + 5000,
	  .pid = 1234, .tid = 1235, .cpu = 1, .event = 3, .comm = "bstack_child" },
	{ .user_stack = 0xfedcba9876543210ULL, .kern_stack = 0, .count = 1ULL << 40,
	  .first_ns = 1796415115636501244ULL, .last_ns = 1796415115636501244ULL,
	  .pid = 4000000, .tid = 7, .cpu = 511, .event = 0, .comm = "a-comm-of-15chr" },
	{ .user_stack = 0, .kern_stack = 0xffffffff81000000ULL, .count = 1,
	  .first_ns = UINT64_MAX - 1, .last_ns = UINT64_MAX, .pid = 0, .tid = 0,
	  .cpu = 0, .event = 63, .comm = "" },
};

static struct bpf_bstack_rec_counts *make_counts(void)
{
	struct bpf_bstack_rec_counts *c = (void *)buf;

	memset(buf, 0, sizeof(buf));
	bpf_bstack__pack_counts(c, sizeof(buf), packed_counts, ARRAY_SIZE(packed_counts));
	return c;
}

static struct bpf_bstack_rec_event *make_event(void)
{
	struct bpf_bstack_rec_event *ev = (void *)buf;

	memset(buf, 0, sizeof(buf));
	bpf_bstack__init_hdr(&ev->hdr, BPF_BSTACK_REC_EVENT, sizeof(*ev));
	ev->index = 3;
	ev->kind = BPF_BSTACK_EVENT_OFFCPU;
	memcpy(ev->name, BPF_BSTACK_OFFCPU_EVENT, sizeof(BPF_BSTACK_OFFCPU_EVENT));
	return ev;
}

static struct bpf_bstack_rec_host *make_host(void)
{
	struct bpf_bstack_rec_host *h = (void *)buf;

	memset(buf, 0, sizeof(buf));
	bpf_bstack__init_hdr(&h->hdr, BPF_BSTACK_REC_HOST, sizeof(*h));
	h->index = 7;
	h->start_ns = 1796415115636501244ULL;
	h->samples = 1234;
	memcpy(h->hostname, "host-a", sizeof("host-a"));
	memcpy(h->os_release, "6.12.0", sizeof("6.12.0"));
	memcpy(h->arch, "x86_64", sizeof("x86_64"));
	return h;
}

static struct bpf_bstack_rec_stats *make_stats(void)
{
	struct bpf_bstack_rec_stats *st = (void *)buf;
	u32 i;

	memset(buf, 0, sizeof(buf));
	st->nr = 9;
	for (i = 0; i < st->nr; i++)
		st->stat[i] = 100 + i;
	bpf_bstack__init_hdr(&st->hdr, BPF_BSTACK_REC_STATS, bpf_bstack__stats_size(9));
	return st;
}

/* decode rec as stored natively and as written by a machine of the other byte order */
static int round_trip(const char *what)
{
	struct bpf_bstack_rec_hdr *hdr = (void *)buf, *out;
	u32 size = hdr->size;
	u64 orig[ARRAY_SIZE(buf)], foreign[ARRAY_SIZE(buf)];
	void *copy;
	int err;

	memcpy(orig, buf, sizeof(buf));
	err = bpf_bstack__decode(orig, size + 4, false, &out, &copy);
	TEST_ASSERT_VAL(what, err == 0 && copy == NULL && !memcmp(out, buf, size));

	memcpy(foreign, buf, sizeof(buf));
	bpf_bstack__swap(foreign, /*to_host=*/false);
	TEST_ASSERT_VAL("swap changes the record", memcmp(foreign, buf, size));
	err = bpf_bstack__decode(foreign, size + 4, true, &out, &copy);
	TEST_ASSERT_VAL(what, err == 0 && copy != NULL);
	TEST_ASSERT_VAL("swapped record decodes to the original", !memcmp(out, buf, size));
	free(copy);

	/* a record that is not 8-byte aligned in memory is copied, not misread */
	memcpy((char *)foreign + 4, buf, size);
	err = bpf_bstack__decode((char *)foreign + 4, size, false, &out, &copy);
	TEST_ASSERT_VAL("unaligned record", err == 0 && !memcmp(out, buf, size));
	free(copy);
	return TEST_OK;
}

static int expect_error(int want, u32 raw_size, bool swap)
{
	struct bpf_bstack_rec_hdr *out;
	void *copy;
	int err = bpf_bstack__decode(buf, raw_size, swap, &out, &copy);

	if (err != want) {
		pr_debug("decode: got %d, want %d (%s)\n", err, want, bpf_bstack__strerror(want));
		return TEST_FAIL;
	}
	TEST_ASSERT_VAL("no record on error", out == NULL && copy == NULL);
	return TEST_OK;
}

/* packed counts come back as the COUNT records they were, in both byte orders */
static int counts_round_trip(void)
{
	const size_t max = sizeof(struct bpf_bstack_rec_counts) +
			   ARRAY_SIZE(packed_counts) * BPF_BSTACK_PACKED_COUNT_MAX + 7;
	struct bpf_bstack_rec_counts *rec = make_counts();
	struct bpf_bstack_rec_count c, reversed[2];
	struct bpf_bstack_counts_iter it;
	size_t i = 0;
	int err;

	TEST_ASSERT_VAL("counts packed", rec->hdr.size && rec->hdr.size <= max &&
			rec->hdr.size % sizeof(u64) == 0);
	TEST_ASSERT_VAL("packed smaller than COUNT records",
			rec->hdr.size < ARRAY_SIZE(packed_counts) * sizeof(c));
	bpf_bstack__counts_begin(&it, rec);
	while ((err = bpf_bstack__counts_next(&it, &c)) > 0) {
		const struct bpf_bstack_rec_count *want = &packed_counts[i++];

		TEST_ASSERT_VAL("a COUNT record", c.hdr.type == BPF_BSTACK_REC_COUNT &&
				c.hdr.size == sizeof(c));
		TEST_ASSERT_VAL("count unpacked as packed",
				!memcmp((char *)&c + sizeof(c.hdr), (char *)want + sizeof(c.hdr),
					sizeof(c) - sizeof(c.hdr)));
	}
	TEST_ASSERT_VAL("every count unpacked", !err && i == ARRAY_SIZE(packed_counts));

	reversed[0] = packed_counts[2];
	reversed[1] = packed_counts[0];
	TEST_ASSERT_VAL("counts out of order refused",
			!bpf_bstack__pack_counts((void *)buf, sizeof(buf), reversed, 2));
	TEST_ASSERT_VAL("counts that do not fit refused",
			!bpf_bstack__pack_counts((void *)buf, 64, packed_counts, 3));
	make_counts();
	return round_trip("packed counts");
}

static int test__bstack_payload_roundtrip(struct test_suite *test __maybe_unused,
					  int subtest __maybe_unused)
{
	struct bpf_bstack_rec_stack *s;

	make_user_stack();
	if (round_trip("user stack") != TEST_OK)
		return TEST_FAIL;

	s = make_user_stack();
	s->kind = BPF_BSTACK_STACK_KERNEL;
	s->hdr.size = bpf_bstack__stack_size(BPF_BSTACK_STACK_KERNEL, 3);
	bpf_bstack__kernel_ips(s)[0] = 0xffffffff81000000ULL;
	if (round_trip("kernel stack") != TEST_OK)
		return TEST_FAIL;

	s = make_user_stack();
	s->kind = BPF_BSTACK_STACK_KERNEL_BID;	/* the same frames, of the kernel */
	if (round_trip("kernel stack of build-id frames") != TEST_OK)
		return TEST_FAIL;

	make_count();
	if (round_trip("count") != TEST_OK)
		return TEST_FAIL;

	if (counts_round_trip() != TEST_OK)
		return TEST_FAIL;

	make_event();
	if (round_trip("event") != TEST_OK)
		return TEST_FAIL;

	make_host();
	if (round_trip("host") != TEST_OK)
		return TEST_FAIL;

	make_stats();
	return round_trip("stats");
}

static int damaged_counts(void)
{
	struct bpf_bstack_rec_count one[1];
	struct bpf_bstack_rec_counts *cs;
	u8 *end;

	cs = make_counts();
	end = (u8 *)cs + cs->hdr.size;
	while (!end[-1])
		end--;		/* the last comm's NUL and the padding */
	cs->hdr.size = end - (u8 *)cs;
	TEST_ASSERT_VAL("packed counts cut short",
			expect_error(-EBADMSG, sizeof(buf), false) == TEST_OK);

	cs = make_counts();
	cs->nr--;		/* and the bytes of the last one left over */
	TEST_ASSERT_VAL("fewer packed counts than the record holds",
			expect_error(-EBADMSG, sizeof(buf), false) == TEST_OK);

	cs = make_counts();
	cs->nr = 0x7fffffff;	/* size arithmetic must not wrap */
	TEST_ASSERT_VAL("huge number of packed counts",
			expect_error(-EBADMSG, sizeof(buf), false) == TEST_OK);

	cs = make_counts();
	cs->hdr.size += 8;	/* a word of zeroes: more than padding */
	TEST_ASSERT_VAL("packed counts with bytes to spare",
			expect_error(-EBADMSG, sizeof(buf), false) == TEST_OK);

	cs = make_counts();
	memset((u8 *)cs + sizeof(*cs) + 6 * sizeof(u64), 0xff, 11);	/* a varint of 11 bytes */
	TEST_ASSERT_VAL("a varint past 64 bits",
			expect_error(-EBADMSG, sizeof(buf), false) == TEST_OK);

	cs = (void *)buf;
	memcpy(one, packed_counts, sizeof(one));
	one[0].event = BPF_BSTACK_MAX_EVENTS;
	bpf_bstack__pack_counts(cs, sizeof(buf), one, 1);
	TEST_ASSERT_VAL("packed count of an impossible event",
			expect_error(-E2BIG, sizeof(buf), false) == TEST_OK);

	/* the same damage in a foreign-endian record: swapping must not overrun */
	cs = make_counts();
	cs->nr = 0x7fffffff;
	bpf_bstack__swap(buf, /*to_host=*/false);
	TEST_ASSERT_VAL("huge number of packed counts, swapped",
			expect_error(-EBADMSG, sizeof(buf), true) == TEST_OK);
	return TEST_OK;
}

static int test__bstack_payload_damaged(struct test_suite *test __maybe_unused,
					int subtest __maybe_unused)
{
	struct bpf_bstack_rec_stack *s;
	struct bpf_bstack_rec_count *c;
	struct bpf_bstack_rec_event *ev;
	struct bpf_bstack_rec_stats *st;
	struct bpf_bstack_rec_host *h;

	s = make_user_stack();
	TEST_ASSERT_VAL("truncated raw data",
			expect_error(-EBADMSG, s->hdr.size - 1, false) == TEST_OK);
	TEST_ASSERT_VAL("shorter than a header",
			expect_error(-EBADMSG, 4, false) == TEST_OK);

	s = make_user_stack();
	s->nr = 4;		/* more frames than the record holds */
	TEST_ASSERT_VAL("frame count beyond size",
			expect_error(-EBADMSG, sizeof(buf), false) == TEST_OK);

	s = make_user_stack();
	s->nr = 0x7fffffff;	/* size arithmetic must not wrap */
	TEST_ASSERT_VAL("huge frame count",
			expect_error(-E2BIG, sizeof(buf), false) == TEST_OK);

	s = make_user_stack();
	s->hdr.version = 2;
	TEST_ASSERT_VAL("unknown version",
			expect_error(-EPROTO, sizeof(buf), false) == TEST_OK);

	s = make_user_stack();
	s->hdr.version = 0x0100;	/* version 1 as the other byte order reads it */
	TEST_ASSERT_VAL("wrong byte order",
			expect_error(-EPROTO, sizeof(buf), false) == TEST_OK);

	s = make_user_stack();
	s->kind = 7;
	TEST_ASSERT_VAL("unknown stack kind",
			expect_error(-ENOTSUP, sizeof(buf), false) == TEST_OK);

	s = make_user_stack();
	s->id = 0;
	TEST_ASSERT_VAL("stack without id",
			expect_error(-EINVAL, sizeof(buf), false) == TEST_OK);

	s = make_user_stack();
	s->hdr.type = 99;
	TEST_ASSERT_VAL("unknown record type",
			expect_error(-ENOTSUP, sizeof(buf), false) == TEST_OK);

	s = make_user_stack();
	s->hdr.size = 0xffffff00;	/* a size past the raw data */
	TEST_ASSERT_VAL("size past the data",
			expect_error(-EBADMSG, sizeof(buf), false) == TEST_OK);

	c = make_count();
	c->hdr.size += 8;
	TEST_ASSERT_VAL("count of the wrong size",
			expect_error(-EBADMSG, sizeof(buf), false) == TEST_OK);

	c = make_count();
	c->event = BPF_BSTACK_MAX_EVENTS;	/* an index past the event table */
	TEST_ASSERT_VAL("count of an impossible event",
			expect_error(-E2BIG, sizeof(buf), false) == TEST_OK);

	if (damaged_counts() != TEST_OK)
		return TEST_FAIL;

	ev = make_event();
	memset(ev->name, 'x', sizeof(ev->name));	/* no NUL */
	TEST_ASSERT_VAL("event name without its end",
			expect_error(-EBADMSG, sizeof(buf), false) == TEST_OK);

	ev = make_event();
	ev->kind = 9;
	TEST_ASSERT_VAL("unknown event kind",
			expect_error(-ENOTSUP, sizeof(buf), false) == TEST_OK);

	ev = make_event();
	ev->index = BPF_BSTACK_MAX_EVENTS;
	TEST_ASSERT_VAL("event index past the table",
			expect_error(-E2BIG, sizeof(buf), false) == TEST_OK);

	h = make_host();
	memset(h->hostname, 'x', sizeof(h->hostname));	/* no NUL */
	TEST_ASSERT_VAL("host name without its end",
			expect_error(-EBADMSG, sizeof(buf), false) == TEST_OK);

	h = make_host();
	h->index = BPF_BSTACK_MAX_HOSTS;
	TEST_ASSERT_VAL("host index past the limit",
			expect_error(-E2BIG, sizeof(buf), false) == TEST_OK);

	st = make_stats();
	st->nr = 1000;
	TEST_ASSERT_VAL("too many counters",
			expect_error(-E2BIG, sizeof(buf), false) == TEST_OK);

	/* the same damage in a foreign-endian record: swapping must not overrun */
	s = make_user_stack();
	s->nr = 0x7fffffff;
	bpf_bstack__swap(buf, /*to_host=*/false);
	TEST_ASSERT_VAL("huge frame count, swapped",
			expect_error(-E2BIG, sizeof(buf), true) == TEST_OK);
	return TEST_OK;
}

/* The row of rows[nr] that covers file offset off */
static const struct bpf_bstack_cfi_row *row_at(const struct bpf_bstack_cfi_row *rows,
					       size_t nr, u64 off)
{
	const struct bpf_bstack_cfi_row *found = NULL;
	size_t i;

	for (i = 0; i < nr && rows[i].offset <= off; i++)
		found = &rows[i];
	return found;
}

static int test__bstack_cfi_table(struct test_suite *test __maybe_unused,
				  int subtest __maybe_unused)
{
	struct bpf_bstack_cfi_table_info info;
	const struct bpf_bstack_cfi_row *row;
	struct bpf_bstack_cfi_row *rows;
	size_t nr, i;
	Dl_info dl;
	int fd, err;

	/* the libc of this process: qsort's entry is at a known rule */
	if (!dladdr((void *)qsort, &dl) || !dl.dli_fname || !dl.dli_fbase)
		return TEST_SKIP;
	fd = open(dl.dli_fname, O_RDONLY);
	if (fd < 0)
		return TEST_SKIP;
	err = bpf_bstack__cfi_table(fd, &rows, &nr, &info);
	close(fd);
	if (err == -EOPNOTSUPP)
		return TEST_SKIP;	/* built without libdw, or not x86-64 */
	TEST_ASSERT_VAL("no table for libc", !err);
	pr_debug("%s: %zu FDEs, %zu rows, %zu invalid, %zu signal, %zu stop, %zu PLT\n",
		 dl.dli_fname, info.nr_fdes, nr, info.nr_invalid, info.nr_signal,
		 info.nr_stop, info.nr_plt);
	TEST_ASSERT_VAL("too few rows", nr > info.nr_fdes && info.nr_fdes > 1000);
	for (i = 1; i < nr; i++)
		TEST_ASSERT_VAL("rows out of order", rows[i - 1].offset < rows[i].offset);
	TEST_ASSERT_VAL("no signal trampoline", info.nr_signal >= 1);
	TEST_ASSERT_VAL("no stack bottom (clone)", info.nr_stop >= 1);
	TEST_ASSERT_VAL("no PLT", info.nr_plt >= 1);
	TEST_ASSERT_VAL("most rows not followed", info.nr_invalid * 10 < nr);

	/* at a function's first instruction the return address is at rsp */
	row = row_at(rows, nr, (u64)((char *)qsort - (char *)dl.dli_fbase));
	TEST_ASSERT_VAL("no row for qsort", row);
	TEST_ASSERT_VAL("qsort's entry is not CFA = rsp + 8",
			row->cfa_kind == BPF_BSTACK_CFA_RSP && row->cfa_offset == 8 && !row->rbp);
	free(rows);
	return TEST_OK;
}

/*
 * OpenSSL's hand-written assembly: CFAs in other registers and as
 * expressions over a saved stack pointer, which the table holds
 */
static int test__bstack_cfi_table_asm(struct test_suite *test __maybe_unused,
				      int subtest __maybe_unused)
{
	static const char * const libcrypto[] = {
		"/usr/lib/x86_64-linux-gnu/libcrypto.so.3", "/usr/lib64/libcrypto.so.3",
		"/usr/lib/libcrypto.so.3",
	};
	struct bpf_bstack_cfi_table_info info;
	struct bpf_bstack_cfi_row *rows;
	size_t nr, i;
	int fd = -1, err;
	u16 off = (-8 & 0x7ff) | (64 / 8) << 11;

	TEST_ASSERT_VAL("N of a DEREF row", BPF_BSTACK_CFA_DEREF_N(off) == -8);
	TEST_ASSERT_VAL("M of a DEREF row", BPF_BSTACK_CFA_DEREF_M(off) == 64);
	for (i = 0; i < ARRAY_SIZE(libcrypto) && fd < 0; i++)
		fd = open(libcrypto[i], O_RDONLY);
	if (fd < 0) {
		pr_debug("no libcrypto.so.3 to read\n");
		return TEST_SKIP;
	}
	err = bpf_bstack__cfi_table(fd, &rows, &nr, &info);
	close(fd);
	if (err == -EOPNOTSUPP)
		return TEST_SKIP;
	TEST_ASSERT_VAL("no table for libcrypto", !err);
	pr_debug("libcrypto: %zu rows, %zu CFA from another register, %zu dereferenced, %zu expressions not held, %zu invalid\n",
		 nr, info.nr_cfa_reg, info.nr_cfa_deref, info.nr_cfa_expr, info.nr_invalid);
	TEST_ASSERT_VAL("no CFA from another register", info.nr_cfa_reg >= 100);
	TEST_ASSERT_VAL("no CFA from a saved stack pointer", info.nr_cfa_deref >= 30);
	TEST_ASSERT_VAL("expressions not held", info.nr_cfa_expr * 100 < info.nr_cfa_deref);
	free(rows);
	return TEST_OK;
}

static struct test_case bstack_tests[] = {
	TEST_CASE("bstack payload round trip, both byte orders", bstack_payload_roundtrip),
	TEST_CASE("bstack damaged payloads are rejected", bstack_payload_damaged),
	TEST_CASE("bstack unwind table of libc", bstack_cfi_table),
	TEST_CASE("bstack unwind table of OpenSSL's assembly", bstack_cfi_table_asm),
	{ .name = NULL, }
};

struct test_suite suite__bstack = {
	.desc = "perf bstack payload",
	.test_cases = bstack_tests,
};
