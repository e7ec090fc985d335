// SPDX-License-Identifier: GPL-2.0
/*
 * The kernel and module frames of a perf bstack recording, in the
 * conversion to a standard perf.data.  Kernel stacks taken as build-id +
 * offset from _text (BPF_F_KERNEL_BUILD_ID) are placed in a kernel map of
 * their own, with the recorded kernel's build-id, at the _text of the
 * kernel running here if it is the same one, else where perf finds its
 * symbols by build-id; module frames in their recorded module maps, or in
 * maps of their own.  Kernel stacks taken as addresses keep the recorded
 * kernel and module maps.
 */
#define pr_fmt(fmt) "perf bstack: " fmt

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <linux/kernel.h>
#include <linux/zalloc.h>
#include <api/fs/fs.h>

#include "util/bstack.h"
#include "util/bstack-convert.h"
#include "util/build-id.h"
#include "util/debug.h"
#include "util/dso.h"
#include "util/env.h"
#include "util/event.h"
#include "util/hashmap.h"
#include "util/machine.h"
#include "util/map.h"
#include "util/maps.h"
#include "util/sample.h"
#include "util/session.h"
#include "util/symbol.h"
#include "util/synthetic-events.h"
#include "bpf_skel/bstack.h"

/*
 * Kernel frames as build-id + offset from _text are placed in a kernel map
 * of their own, at this _text (x86_64's without KASLR) when the kernel
 * they were taken in is not the one running here: perf relocates the
 * symbols of its vmlinux or kallsyms copy to it.
 */
#define KERNEL_BID_TEXT	0xffffffff81000000ULL
#define KERNEL_BID_LEN	(1ULL << 30)
/*
 * Frames of a module are placed in its recorded map, at the text address
 * it was loaded at.  A module missing from the recorded module list
 * (loaded after the recording started) gets a map of its own here, in the
 * 2 GiB below the kernel image that x86_64 leaves unused.
 */
#define KMOD_BID_BASE	0xffffffff00000000ULL
#define KMOD_BID_SIZE	(32ULL << 20)
#define MAX_KMODS	64

static bool is_kernel_bid(struct bstack_conv *c, const u8 *build_id)
{
	return c->kernel_bid.size &&
	       !memcmp(build_id, c->kernel_bid.data, min_t(size_t, c->kernel_bid.size,
							  BUILD_ID_SIZE));
}

/* A frame of a module, at its offset from the text of the module's map */
static u64 kmod_frame_ip(struct bstack_conv *c, const struct bpf_bstack_frame *f)
{
	struct bpf_bstack_summary *sum = c->sum;
	struct map *map;

	sum->nr_kern_module_frames += c->rec_counts;
	if (!hashmap__find(c->kmods, bpf_bstack__bid_key(f->build_id), &map) || !map) {
		sum->nr_kern_unplaced_frames += c->rec_counts;
		return UNKNOWN_IP;
	}
	if (f->offset >= map__size(map)) {
		sum->nr_kern_bogus_frames += c->rec_counts;
		return UNKNOWN_IP;
	}
	return map__start(map) + f->offset;
}

/*
 * A kernel frame as build-id + offset from _text (BPF_F_KERNEL_BUILD_ID):
 * an address in the kernel map written for the kernel it was taken in.
 * Frames of modules have the module's build-id.
 */
u64 bstack_conv__kernel_frame_ip(struct bstack_conv *c, const struct bpf_bstack_frame *f)
{
	struct bpf_bstack_summary *sum = c->sum;

	if (f->status != BPF_STACK_BUILD_ID_VALID)
		return f->offset;	/* an IP: a BPF program, a trampoline */
	sum->nr_kern_bid_frames += c->rec_counts;
	if (!is_kernel_bid(c, f->build_id))
		return kmod_frame_ip(c, f);
	if (f->offset >= c->kernel_len) {
		sum->nr_kern_bogus_frames += c->rec_counts;
		return UNKNOWN_IP;
	}
	return c->kernel_text + f->offset;
}

/* The kernel of a recording: the header says which, or else its first frame */
static bool recorded_kernel_bid(struct bstack_conv *c, struct dso *kernel)
{
	struct hashmap_entry *cur;
	size_t bkt;
	u32 i;

	if (kernel && dso__has_build_id(kernel)) {
		c->kernel_bid = *dso__bid(kernel);
		return true;
	}
	hashmap__for_each_entry(c->stacks, cur, bkt) {
		struct bpf_bstack_rec_stack *stack = cur->pvalue;

		if (stack->kind != BPF_BSTACK_STACK_KERNEL_BID)
			continue;
		for (i = 0; i < stack->nr; i++) {
			const struct bpf_bstack_frame *f = &bpf_bstack__user_frames(stack)[i];

			if (f->status == BPF_STACK_BUILD_ID_VALID) {
				build_id__init(&c->kernel_bid, f->build_id, BUILD_ID_SIZE);
				return true;
			}
		}
	}
	return false;
}

/* Is the recorded kernel the one running here? Then where is its _text? */
static bool running_kernel_text(struct bstack_conv *c, u64 *text)
{
	struct build_id bid;

	return sysfs__read_build_id("/sys/kernel/notes", &bid) == 0 &&
	       bid.size >= c->kernel_bid.size &&
	       !memcmp(bid.data, c->kernel_bid.data, c->kernel_bid.size) &&
	       !kallsyms__get_symbol_start("/proc/kallsyms", "_text", text) && *text;
}

/* Where perf report finds the symbols of another kernel, by build-id */
static bool kernel_in_buildid_cache(struct dso *kernel)
{
	char path[PATH_MAX], sbid[SBUILD_ID_SIZE];

	if (__dso__build_id_filename(kernel, path, sizeof(path), false, false) &&
	    is_regular_file(path))
		return true;	/* a vmlinux */
	build_id__sprintf(dso__bid(kernel), sbid);
	return build_id_cache__kallsyms_path(sbid, path, sizeof(path)) &&
	       is_regular_file(path);
}

/*
 * Kernel stacks as build-id + offset resolve through the kernel they were
 * taken in: the running one, or a vmlinux (or kallsyms copy) in the
 * build-id cache or from debuginfod.  Their frames go into a kernel map of
 * that build-id, which perf report then loads like any recorded kernel.
 */
/*
 * Where kernel and module frames are placed (KERNEL_BID_TEXT and
 * KMOD_BID_BASE) is x86_64's layout: the frames of other kernels stay
 * unplaced, and are counted so.
 */
static bool kernel_bid_placeable(struct bstack_conv *c)
{
	const char *arch = perf_env__arch(&c->session->header.env);

	if (arch && !strcmp(arch, "x86"))
		return true;
	pr_warning("kernel frames as build-id + offset are placed for x86 recordings only, not %s\n",
		   arch ?: "of an unknown architecture");
	return false;
}

static void setup_kernel_bid(struct bstack_conv *c, struct dso *kernel)
{
	struct bpf_bstack_summary *sum = c->sum;
	char sbid[SBUILD_ID_SIZE];

	if (!kernel || !recorded_kernel_bid(c, kernel))
		return;
	if (!dso__has_build_id(kernel))
		dso__set_build_id(kernel, &c->kernel_bid);
	dso__set_hit(kernel);
	build_id__sprintf(&c->kernel_bid, sbid);
	snprintf(sum->kernel_bid, sizeof(sum->kernel_bid), "%s", sbid);

	if (running_kernel_text(c, &c->kernel_text)) {
		sum->kernel_found = BPF_BSTACK_KERNEL_RUNNING;
		return;
	}
	c->kernel_text = KERNEL_BID_TEXT;
	if (kernel_in_buildid_cache(kernel)) {
		sum->kernel_found = BPF_BSTACK_KERNEL_CACHED;
	} else if (bstack_conv__fetch_from_debuginfod(kernel, true) &&
		   kernel_in_buildid_cache(kernel)) {
		sum->nr_fetched++;
		sum->kernel_found = BPF_BSTACK_KERNEL_CACHED;
	} else {
		sum->kernel_found = BPF_BSTACK_KERNEL_MISSING;
		bpf_bstack__summary_add_missing(sum, sbid, "[kernel.kallsyms] (its vmlinux)");
	}
}

struct kmod_search {
	struct build_id	bid;		/* by build-id */
	u64		above;		/* or the first one above this address */
	struct map	*map;
};

static int kmod_by_bid_cb(struct map *map, void *data)
{
	struct kmod_search *args = data;
	struct dso *dso = map__dso(map);

	if (!__map__is_kmodule(map) || !dso__has_build_id(dso) ||
	    !dso__build_id_equal(dso, &args->bid))
		return 0;
	args->map = map__get(map);
	return 1;
}

/* The map of a module of the recorded module list, by its build-id */
static struct map *recorded_kmod_map(struct machine *machine, const u8 *build_id)
{
	struct kmod_search args = { .map = NULL, };

	build_id__init(&args.bid, build_id, BUILD_ID_SIZE);
	maps__for_each_map(machine__kernel_maps(machine), kmod_by_bid_cb, &args);
	return args.map;
}

/*
 * A module that is not in the recorded module list is named after its
 * path in the build-id cache; "[buildid:<hex>]" when it is not there, or
 * when another build of it was recorded.  A recorded module that has no
 * build-id is taken to be this one.
 */
static struct map *kmod_by_name(struct machine *machine, struct build_id *bid,
				char *name, size_t size)
{
	struct kmod_path m = { .name = NULL, };
	char sbid[SBUILD_ID_SIZE], *orig;
	struct map *map = NULL;

	build_id__sprintf(bid, sbid);
	snprintf(name, size, "[buildid:%s]", sbid);
	orig = build_id_cache__origname(sbid);
	if (orig && !kmod_path__parse_name(&m, orig) && m.kmod && m.name) {
		map = maps__find_by_name(machine__kernel_maps(machine), m.name);
		if (!map)
			snprintf(name, size, "%s", orig);
		else if (!dso__has_build_id(map__dso(map)))
			dso__set_build_id(map__dso(map), bid);
		else
			map__zput(map);
	}
	free(m.name);
	free(orig);
	return map;
}

/* A kernel MMAP2 of a binary known by its build-id; returns its size */
static size_t kernel_bid_mmap(struct perf_record_mmap2 *mm, struct machine *machine,
			      u64 start, u64 len, const struct build_id *bid, const char *name)
{
	memset(mm, 0, sizeof(*mm));
	mm->header.type = PERF_RECORD_MMAP2;
	mm->header.misc = PERF_RECORD_MISC_KERNEL | PERF_RECORD_MISC_MMAP_BUILD_ID;
	mm->pid = machine->pid;
	mm->start = start;
	mm->len = len;
	mm->build_id_size = bid->size;
	memcpy(mm->build_id, bid->data, bid->size);
	return offsetof(struct perf_record_mmap2, filename) +
	       scnprintf(mm->filename, sizeof(mm->filename), "%s", name) + 1;
}

/* A map of its own for a module, fed to the machine like a recorded one */
static struct map *new_kmod_map(struct bstack_conv *c, struct machine *machine,
				const struct build_id *bid, const char *name)
{
	struct perf_record_mmap2 *mm = &c->event->mmap2;
	struct perf_sample sample = { .cpumode = PERF_RECORD_MISC_KERNEL, };
	u64 start = KMOD_BID_BASE + c->nr_new_kmods * KMOD_BID_SIZE;

	if (c->nr_new_kmods >= MAX_KMODS)
		return NULL;
	mm->header.size = kernel_bid_mmap(mm, machine, start, KMOD_BID_SIZE, bid, name);
	if (machine__process_mmap2_event(machine, c->event, &sample))
		return NULL;
	c->nr_new_kmods++;
	return maps__find(machine__kernel_maps(machine), start);
}

/*
 * Is the module loaded here, at the address it was recorded at?  Then
 * perf report takes its symbols from kallsyms, with the kernel's.
 */
static bool kmod_loaded_here(struct bstack_conv *c, struct map *map)
{
	struct dso *dso = map__dso(map);
	int len = dso__short_name_len(dso) - 2;	/* "[name]" */
	unsigned long long text;
	char path[PATH_MAX];
	struct build_id bid;

	if (c->sum->kernel_found != BPF_BSTACK_KERNEL_RUNNING || len <= 0)
		return false;
	snprintf(path, sizeof(path), "/sys/module/%.*s/notes/.note.gnu.build-id", len,
		 dso__short_name(dso) + 1);
	if (sysfs__read_build_id(path, &bid) || !dso__build_id_equal(dso, &bid))
		return false;
	snprintf(path, sizeof(path), "/sys/module/%.*s/sections/.text", len,
		 dso__short_name(dso) + 1);
	return !filename__read_xll(path, &text) && text == map__start(map);
}

/* Where are the symbols of a module?  Listed as missing when nowhere */
static void check_kmod_symbols(struct bstack_conv *c, struct map *map)
{
	struct bpf_bstack_summary *sum = c->sum;
	struct dso *dso = map__dso(map);
	char sbid[SBUILD_ID_SIZE], path[PATH_MAX];
	u64 size;

	dso__set_hit(dso);
	if (kmod_loaded_here(c, map) ||
	    bstack_conv__find_or_fetch_binary(c, dso, true, path, &size))
		return;
	sum->nr_kmods_missing++;
	build_id__sprintf(dso__bid(dso), sbid);
	bpf_bstack__summary_add_missing(sum, sbid, dso__long_name(dso));
}

static int add_kmod(struct bstack_conv *c, struct machine *machine, const u8 *build_id)
{
	char name[PATH_MAX];
	struct build_id bid;
	struct map *map;

	build_id__init(&bid, build_id, BUILD_ID_SIZE);
	map = recorded_kmod_map(machine, build_id);
	if (!map)
		map = kmod_by_name(machine, &bid, name, sizeof(name));
	if (!map)
		map = new_kmod_map(c, machine, &bid, name);
	/* NULL too: its frames are then counted as of no module map */
	if (hashmap__add(c->kmods, bpf_bstack__bid_key(build_id), map)) {
		map__put(map);
		return -ENOMEM;
	}
	c->sum->nr_kmods++;
	if (map)
		check_kmod_symbols(c, map);
	return 0;
}

/*
 * The modules that build-id kernel frames name, each given a map before
 * the module maps are written out: its recorded one, or a new one.
 */
static int setup_kernel_modules(struct bstack_conv *c, struct machine *machine)
{
	struct hashmap_entry *cur;
	size_t bkt;
	u32 i;
	int err;

	hashmap__for_each_entry(c->stacks, cur, bkt) {
		struct bpf_bstack_rec_stack *stack = cur->pvalue;
		const struct bpf_bstack_frame *f = bpf_bstack__user_frames(stack);

		if (stack->kind != BPF_BSTACK_STACK_KERNEL_BID)
			continue;
		for (i = 0; i < stack->nr; i++) {
			if (f[i].status != BPF_STACK_BUILD_ID_VALID ||
			    is_kernel_bid(c, f[i].build_id) ||
			    hashmap__find(c->kmods, bpf_bstack__bid_key(f[i].build_id), NULL))
				continue;
			err = add_kmod(c, machine, f[i].build_id);
			if (err)
				return err;
		}
	}
	return 0;
}

static int first_kmod_above_cb(struct map *map, void *data)
{
	struct kmod_search *args = data;

	if (__map__is_kmodule(map) && map__start(map) > args->above &&
	    (!args->map || map__start(map) < map__start(args->map))) {
		map__put(args->map);
		args->map = map__get(map);
	}
	return 0;
}

/* The kernel map ends where the first module above it starts: no overlap */
static u64 kernel_bid_len(struct machine *machine, u64 text)
{
	struct kmod_search args = { .above = text, .map = NULL, };
	u64 len = KERNEL_BID_LEN;

	maps__for_each_map(machine__kernel_maps(machine), first_kmod_above_cb, &args);
	if (args.map && map__start(args.map) - text < len)
		len = map__start(args.map) - text;
	map__put(args.map);
	return len;
}

/* The kernel map of setup_kernel_bid(), with its build-id */
static int write_kernel_bid_mmap(struct bstack_conv *c, struct machine *machine)
{
	struct perf_record_mmap2 *mm = &c->event->mmap2;
	char name[KMAP_NAME_LEN];
	size_t size;

	snprintf(name, sizeof(name), "%s_text", machine->mmap_name);
	size = kernel_bid_mmap(mm, machine, c->kernel_text, c->kernel_len, &c->kernel_bid, name);
	mm->pgoff = c->kernel_text;	/* where the reference symbol, _text, is */
	return bstack_conv__write_with_id(c, c->event, size, machine->pid, 0, 0);
}

/*
 * The maps of the kernel and its modules: where kernel frames are build-id
 * + offset, placed for them (a write error stays in c->err, and stops the
 * writes that follow); else as recorded
 */
int bstack_conv__kernel_maps(struct bstack_conv *c, struct machine *machine)
{
	int err;

	if (c->has_kern_bid && machine__kernel_map(machine) && kernel_bid_placeable(c))
		setup_kernel_bid(c, map__dso(machine__kernel_map(machine)));
	if (c->kernel_bid.size) {
		err = setup_kernel_modules(c, machine);
		if (err)
			return err;
		c->kernel_len = kernel_bid_len(machine, c->kernel_text);
		write_kernel_bid_mmap(c, machine);
	} else {
		perf_event__synthesize_kernel_mmap(&c->tool, bstack_conv__synthesized, machine);
	}
	perf_event__synthesize_modules(&c->tool, bstack_conv__synthesized, machine);
	return 0;
}
