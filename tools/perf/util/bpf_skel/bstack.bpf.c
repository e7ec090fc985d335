// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * perf bstack: sample user stacks as (build-id, file offset) frames.
 *
 * Attached to per-CPU sampling events, to tracepoints and to uprobes,
 * with the index of the event as attach cookie, and to sched_switch for
 * off-CPU time.  Each hit takes the user stack with BPF_F_USER_BUILD_ID
 * and the kernel stack as IPs, stores each stack once in a hash map keyed
 * by a hash of its frames, and counts hits (or, off-CPU, nanoseconds) per
 * {event, pid, tid, cpu, comm, user stack, kernel stack}.  Nothing goes
 * through the perf ring buffer: user space drains the maps into perf.data.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <asm-generic/errno-base.h>

#include "bstack.h"

#define CLONE_THREAD	0x10000
#define TASK_INTERRUPTIBLE	0x0001
#define TASK_UNINTERRUPTIBLE	0x0002

/*
 * The stack maps are resized from user space before load (--max-stack):
 * given by size, not by BTF type, whose size would no longer match.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(key_size, sizeof(__u64));
	__uint(value_size, sizeof(struct bpf_bstack_user_stack));
	__uint(max_entries, 1);
} bstack_user_stacks SEC(".maps");

/* the user stacks of up to short_frames frames, resized from user space */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(key_size, sizeof(__u64));
	__uint(value_size, sizeof(struct bpf_bstack_user_stack));
	__uint(max_entries, 1);
} bstack_user_short_stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(key_size, sizeof(__u64));
	__uint(value_size, sizeof(struct bpf_bstack_kern_stack));
	__uint(max_entries, 1);
} bstack_kern_stacks SEC(".maps");

/* kernel stacks as (build-id, offset), where the kernel has BPF_F_KERNEL_BUILD_ID */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(key_size, sizeof(__u64));
	__uint(value_size, sizeof(struct bpf_bstack_user_stack));
	__uint(max_entries, 1);
} bstack_kern_bid_stacks SEC(".maps");

/* user stacks as raw IPs, with --ip-stacks (the cost floor of bench/) */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(key_size, sizeof(__u64));
	__uint(value_size, sizeof(struct bpf_bstack_kern_stack));
	__uint(max_entries, 1);
} bstack_user_ip_stacks SEC(".maps");

/* two count maps, so that a periodic drain reads one while BPF fills the other */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct bpf_bstack_key);
	__type(value, struct bpf_bstack_count);
	__uint(max_entries, 1);
} bstack_counts0 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct bpf_bstack_key);
	__type(value, struct bpf_bstack_count);
	__uint(max_entries, 1);
} bstack_counts1 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct bpf_bstack_stats);
	__uint(max_entries, 1);
} bstack_stats SEC(".maps");

/*
 * Per-CPU scratch buffers, as stacks are too big for the BPF stack: one
 * per nesting level, since a sampling program may interrupt a uprobe or
 * tp_btf program of ours in the middle of a stack.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct bpf_bstack_user_stack);
	__uint(max_entries, BPF_BSTACK_MAX_NEST);
} bstack_user_buf SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct bpf_bstack_kern_stack);
	__uint(max_entries, BPF_BSTACK_MAX_NEST);
} bstack_kern_buf SEC(".maps");

/* how many programs of ours run on this CPU, one interrupting the other */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, 1);
} bstack_nest SEC(".maps");

/*
 * Unwind tables (see bstack.h), filled by user space: the rows of every
 * file, the files, and the executable mappings of each process.  A
 * process without an entry is walked by the kernel and asked for.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct bpf_bstack_cfi_row);
	__uint(max_entries, 1);
} bstack_cfi_rows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct bpf_bstack_cfi_page);
	__uint(max_entries, 1);
} bstack_cfi_pages SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct bpf_bstack_cfi_file);
	__uint(max_entries, 1);
} bstack_cfi_files SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, __u32);
	__type(value, struct bpf_bstack_cfi_proc);
	__uint(max_entries, 1);
} bstack_cfi_procs SEC(".maps");

/* the index in bstack_cfi_files of each file user space gave a table */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct bpf_bstack_cfi_file_id);
	__type(value, __u32);
	__uint(max_entries, 1);
} bstack_cfi_file_ids SEC(".maps");

/* a process's mappings as the BPF program reads them, before they are stored */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct bpf_bstack_cfi_proc);
	__uint(max_entries, BPF_BSTACK_MAX_NEST);
} bstack_cfi_proc_buf SEC(".maps");

/* when each process was last asked for, so that it is not asked at every sample */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 1);
} bstack_cfi_asked SEC(".maps");

/*
 * When the code mapped in each process last changed (dlopen(), dlclose(),
 * exec): mappings read before are out of date, even those user space
 * stores after it, as it reads them long before it is done with the
 * tables.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 1);
} bstack_cfi_changed SEC(".maps");

/* tgids whose mappings user space should (re)load */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} bstack_cfi_ask SEC(".maps");

/*
 * The kernel stack of each user stack at each system call entry
 * tracepoint (BPF_BSTACK_COOKIE_SYSCALL_ENTRY): the walk through the
 * tracing code to the entry path is half of what a hit costs
 */
struct bpf_bstack_memo_key {
	__u64 user_stack;
	__u32 event;
	__u32 reserved;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct bpf_bstack_memo_key);
	__type(value, __u64);
	__uint(max_entries, 8192);
} bstack_kern_memo SEC(".maps");

/* the last of them recalled on each CPU: a loop hits the same one again */
struct bpf_bstack_memo_last {
	struct bpf_bstack_memo_key key;
	__u64 kern_stack;
	__u64 stacks_gen;	/* stacks_gen before kern_stack was last seen stored */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct bpf_bstack_memo_last);
	__uint(max_entries, BPF_BSTACK_MAX_NEST);
} bstack_kern_memo_last SEC(".maps");

/* tgids (or tids) to sample, resized from user space */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, __u8);
	__uint(max_entries, 1);
} bstack_task_filter SEC(".maps");

/* off-CPU: where and since when each blocked task of interest sleeps */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct bpf_bstack_offcpu);
} bstack_offcpu SEC(".maps");

/*
 * Wakes perf record when the maps took half of their entries since the
 * last drain, so that it drains them before they fill: no timer polls.
 */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} bstack_wake SEC(".maps");

/* toggled while running */
int enabled;
int active_counts;
/* entries put into the maps since perf last drained them: it drains before they fill */
__u64 counts_added[2];
__u64 stacks_added;
/* processes forgotten: the tables of their files may be reclaimed now */
__u64 procs_freed;
/*
 * Bumped after each change of bstack_cfi_procs or bstack_cfi_changed, by
 * BPF and user space: a walk recalled is of mappings that did not change
 */
__u64 procs_gen;
/*
 * Bumped by perf before and after it takes the stacks it wrote out of the
 * maps, at each drain: a stack seen stored at this generation is there
 */
__u64 stacks_gen;
int wake_sent;		/* since the last drain */

/* set before load */
const volatile __u64 counts_half = -1;	/* half of a counts map's entries */
const volatile __u64 stacks_half = -1;	/* half of a stack map's */
const volatile int has_task;
const volatile int uses_tgid;
const volatile int has_uid;
const volatile __u32 filter_uid;
const volatile int user_stack = 1;
const volatile int kern_stack = 1;
const volatile int user_build_id = 1;
const volatile __u32 max_frames = BPF_BSTACK_MAX_STACK;
const volatile __u32 short_frames = BPF_BSTACK_SHORT_STACK;
const volatile __u32 offcpu_event;
const volatile int kern_build_id = 1;
const volatile int cfi;		/* unwind with the tables where a process has them */
const volatile __u32 memo_shift = 12;	/* bstack_cfi_memo has 2^memo_shift entries */
/*
 * --walk-cost: with --no-cfi, the kernel walks each user stack twice, as
 * IPs and with build-ids, and both walks are timed: the two compared on
 * the same samples.  With the unwind tables, the parts of each hit are.
 */
const volatile int walk_cost;
__u64 walk_cost_ns[BPF_BSTACK_WALKS];
/*
 * --walk-cost with the unwind tables: the ns of each part of the hits,
 * from one clock read to the next (the reads are in the parts)
 */
__u64 part_ns[BPF_BSTACK_PARTS];
/* set at the first -EINVAL: this kernel has no BPF_F_KERNEL_BUILD_ID */
int kern_build_id_failed;

#ifndef BPF_F_KERNEL_BUILD_ID
#define BPF_F_KERNEL_BUILD_ID	(1ULL << 12)
#endif

/*
 * The frames asked of bpf_get_stack(), user and kernel: the depth of the
 * deepest stack seen so far plus a margin, up to max_frames.  The kernel
 * zeroes what a stack leaves of the buffer it is given, and for 127
 * build-id frames that is 4 KiB, a third of what a build-id stack costs
 * more than an IP one.  A stack that fills the buffer may have been cut:
 * it is taken again with max_frames, and the hint grows.  Racing updates
 * cost a retry, never a frame.  In a context with interrupts off, the
 * kernel cannot lock the mm for build-ids a second time (its unlock is
 * still queued), so a user stack taken again there comes back as IPs
 * (on a kernel that remembers the mappings of the last stacks, only its
 * frames outside them): that happens while the hint grows, a few stacks
 * in a recording.
 */
#define DEPTH_HINT_MARGIN	16
__u32 depth_hint[2] = { DEPTH_HINT_MARGIN, DEPTH_HINT_MARGIN };	/* user, kernel stacks */

/* The masks keep the bounds visible to the verifier, whatever registers clang picks */
static __always_inline __u32 max_depth(void)
{
	__u32 n = max_frames & BPF_BSTACK_MAX_STACK;

	return n ? n : BPF_BSTACK_MAX_STACK;
}

static __always_inline long get_stack(void *ctx, void *frames, __u32 frame_size,
				      __u64 flags)
{
	int hint = flags & BPF_F_USER_STACK ? 0 : 1;
	__u32 max = max_depth(), n = depth_hint[hint] & BPF_BSTACK_MAX_STACK;
	long len;

	if (!n || n > max)
		n = max;
	len = bpf_get_stack(ctx, frames, n * frame_size, flags);
	if (n == max || len != n * frame_size)
		return len;
	len = bpf_get_stack(ctx, frames, max * frame_size, flags);
	if (len > 0) {
		n = len / frame_size + DEPTH_HINT_MARGIN;
		depth_hint[hint] = n < max ? n : max;
	}
	return len;
}

/* get_stack(), its time added to walk_cost_ns[walk] */
static __always_inline long timed_get_stack(void *ctx, void *frames, __u32 frame_size,
					    __u64 flags, int walk)
{
	__u64 start = bpf_ktime_get_ns();
	long len = get_stack(ctx, frames, frame_size, flags);

	if (walk >= 0 && walk < BPF_BSTACK_WALKS)
		__sync_fetch_and_add(&walk_cost_ns[walk], bpf_ktime_get_ns() - start);
	return len;
}

/* --walk-cost without the tables: the kernel's walks, timed */
static __always_inline bool time_walks(void)
{
	return walk_cost && !cfi;
}

/* --walk-cost with the tables: the parts of a hit, timed */
static __always_inline bool time_parts(void)
{
	return walk_cost && cfi;
}

static __always_inline __u64 part_start(void)
{
	return time_parts() ? bpf_ktime_get_ns() : 0;
}

/* The time since *since to part, and the part after it starts now (no since: untimed) */
static __always_inline void part_done(__u64 *since, int part)
{
	__u64 now;

	if (!time_parts() || !since)
		return;
	now = bpf_ktime_get_ns();
	__sync_fetch_and_add(&part_ns[part], now - *since);
	*since = now;
}

static __always_inline void stat_inc(struct bpf_bstack_stats *stats, int idx, __u64 n)
{
	if (stats && idx >= 0 && idx < BPF_BSTACK_STAT_MAX)
		stats->stat[idx] += n;
}

/* A process's mappings changed, or its process is gone: no walk is recalled across */
static __always_inline void procs_changed(void)
{
	__sync_fetch_and_add(&procs_gen, 1);
}

/* The index of this program's scratch buffers: how many of ours it interrupted */
static __always_inline __u32 nest_level(void)
{
	__u32 zero = 0, *depth = bpf_map_lookup_elem(&bstack_nest, &zero);

	return depth && *depth ? (*depth - 1) % BPF_BSTACK_MAX_NEST : 0;
}

/* Enter a program that uses scratch buffers: false if nested too deep */
static __always_inline bool nest_enter(struct bpf_bstack_stats *stats)
{
	__u32 zero = 0, *depth = bpf_map_lookup_elem(&bstack_nest, &zero);

	if (!depth)
		return false;
	if (*depth >= BPF_BSTACK_MAX_NEST) {
		stat_inc(stats, BPF_BSTACK_STAT_NESTED_LOST, 1);
		return false;
	}
	if (*depth)
		stat_inc(stats, BPF_BSTACK_STAT_NESTED, 1);
	*depth += 1;
	return true;
}

static __always_inline void nest_exit(void)
{
	__u32 zero = 0, *depth = bpf_map_lookup_elem(&bstack_nest, &zero);

	if (depth && *depth)
		*depth -= 1;
}

/* 64-bit FNV-1a over words, with a final avalanche */
static __always_inline __u64 hash_word(__u64 h, __u64 w)
{
	return (h ^ w) * 0x100000001b3ULL;
}

static __always_inline __u64 hash_final(__u64 h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	/* 0 means "no stack" */
	return h ? h : 1;
}

static __always_inline int task_selected(void)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 id = uses_tgid ? pid_tgid >> 32 : (__u32)pid_tgid;

	if (has_uid && (__u32)bpf_get_current_uid_gid() != filter_uid)
		return 0;
	if (has_task && !bpf_map_lookup_elem(&bstack_task_filter, &id))
		return 0;
	return 1;
}

/* Tell perf once a map took half of its entries (the count read after the add) */
static __always_inline void note_added(__u64 *added, __u64 half)
{
	__u64 one = 1;

	__sync_fetch_and_add(added, 1);
	if (*added >= half && !wake_sent) {
		wake_sent = 1;
		bpf_ringbuf_output(&bstack_wake, &one, sizeof(one), BPF_RB_FORCE_WAKEUP);
	}
}

/*
 * Store a stack under its hash, once: the hash, or 0 when the map refused
 * it, full (-E2BIG) or, most likely, without memory for the entry.  Most
 * stacks were seen before: a lookup, which takes no lock, finds them.  A
 * stack likely new (fresh) is inserted at once: on a compile, where most
 * are new, a lookup that missed cost about what the insert did.  *added
 * (if any) is set when the stack was not there.
 */
static __always_inline __u64 store_stack(void *map, __u64 h, void *buf,
					 struct bpf_bstack_stats *stats, int full_stat,
					 int unstored_stat, bool fresh, bool *added)
{
	long err;

	if (!fresh && bpf_map_lookup_elem(map, &h))
		return h;
	err = bpf_map_update_elem(map, &h, buf, BPF_NOEXIST);
	if (!err) {
		note_added(&stacks_added, stacks_half);
		if (added)
			*added = true;
	}
	if (!err || err == -EEXIST)
		return h;
	/* the program this hit interrupted holds the bucket: it may be there */
	if (fresh && err == -EBUSY && bpf_map_lookup_elem(map, &h))
		return h;
	stat_inc(stats, err == -E2BIG ? full_stat : unstored_stat, 1);
	return 0;
}

/* The map of user stacks of nr frames */
static __always_inline void *user_stack_map(__u32 nr)
{
	return nr <= short_frames ? (void *)&bstack_user_short_stacks : (void *)&bstack_user_stacks;
}

/* Hash the nr frames of buf and store them, once (fresh, added: as store_stack()'s) */
static __always_inline __u64 store_frames(struct bpf_bstack_user_stack *buf, __u32 nr,
					  struct bpf_bstack_stats *stats, bool user,
					  bool fresh, bool *added)
{
	__u64 h = 0xcbf29ce484222325ULL, ip_frames = 0;
	void *map;
	__u32 i;

	for (i = 0; i < BPF_BSTACK_MAX_STACK; i++) {
		struct bpf_stack_build_id *f;
		__u64 *w;

		if (i >= nr)
			break;
		f = &buf->frame[i];
		w = (__u64 *)f;
		if (f->status == BPF_STACK_BUILD_ID_IP)
			ip_frames++;
		h = hash_word(h, w[0]);
		h = hash_word(h, w[1]);
		h = hash_word(h, w[2]);
		h = hash_word(h, w[3]);
	}
	h = hash_final(hash_word(h, nr));
	if (user) {
		stat_inc(stats, BPF_BSTACK_STAT_USER_FRAMES, nr);
		stat_inc(stats, BPF_BSTACK_STAT_USER_IP_FRAMES, ip_frames);
	}
	buf->nr = nr;
	/* the hash covers nr: a stack is always looked for in the same map */
	map = user ? user_stack_map(nr) : &bstack_kern_bid_stacks;
	return store_stack(map, h, buf, stats,
			   user ? BPF_BSTACK_STAT_USER_FULL : BPF_BSTACK_STAT_KERN_FULL,
			   user ? BPF_BSTACK_STAT_USER_UNSTORED : BPF_BSTACK_STAT_KERN_UNSTORED,
			   fresh, added);
}

/* A stack of (build-id, offset) frames: the user's, or the kernel's */
static __always_inline __u64 store_bid_stack(void *ctx, struct bpf_bstack_stats *stats,
					     bool user, __u64 kern_skip)
{
	__u64 flags = user ? BPF_F_USER_STACK | BPF_F_USER_BUILD_ID :
			     BPF_F_KERNEL_BUILD_ID | kern_skip;
	__u32 level = nest_level();
	struct bpf_bstack_user_stack *buf;
	long len;

	buf = bpf_map_lookup_elem(&bstack_user_buf, &level);
	if (!buf)
		return 0;

	if (user && time_walks())
		len = timed_get_stack(ctx, buf->frame, sizeof(buf->frame[0]), flags,
				      BPF_BSTACK_WALK_BUILD_ID);
	else
		len = get_stack(ctx, buf->frame, sizeof(buf->frame[0]), flags);
	if (!user && len == -EINVAL) {
		kern_build_id_failed = 1;	/* the caller takes IPs instead */
		return 0;
	}
	if (len == -EFAULT || len == 0) {
		if (user)
			stat_inc(stats, BPF_BSTACK_STAT_USER_NONE, 1);
		return 0;
	}
	if (len < 0) {
		stat_inc(stats, user ? BPF_BSTACK_STAT_USER_ERR : BPF_BSTACK_STAT_KERN_ERR, 1);
		return 0;
	}
	if (user)
		stat_inc(stats, BPF_BSTACK_STAT_FP_STACKS, 1);
	return store_frames(buf, len / sizeof(buf->frame[0]), stats, user, false, NULL);
}

/* the x86-64 user registers the walk starts from, and those a CFA rule may name */
struct pt_regs___bstack {
	unsigned long r15;
	unsigned long r14;
	unsigned long r13;
	unsigned long r12;
	unsigned long bp;
	unsigned long bx;
	unsigned long r11;
	unsigned long r10;
	unsigned long r9;
	unsigned long r8;
	unsigned long ax;
	unsigned long cx;
	unsigned long dx;
	unsigned long si;
	unsigned long di;
	unsigned long ip;
	unsigned long sp;
} __attribute__((preserve_access_index));

struct mm_struct___bstack {
	unsigned long start_stack;
} __attribute__((preserve_access_index));

/* where a task single-steps the copy of a probed instruction, and where that is */
struct uprobe_task___bstack {
	unsigned long vaddr;
	unsigned long xol_vaddr;
} __attribute__((preserve_access_index));

struct task_struct___bstack {
	struct uprobe_task___bstack *utask;
} __attribute__((preserve_access_index));

/* longer than any x86 instruction: a PC this far past a copy is in that copy */
#define XOL_INSN_MAX	16

/*
 * A task stopped at a uprobe on an instruction the kernel does not
 * emulate runs a copy of it in the [uprobes] page, then traps: a sample
 * there has its PC in that page, which no table covers.  The walk starts
 * from the probed instruction instead, where the copy stands for it.
 */
static __always_inline __u64 probed_pc(struct task_struct *task, __u64 pc)
{
	struct task_struct___bstack *t = (void *)task;
	struct uprobe_task___bstack *ut;
	__u64 xol;

	/* a kernel without uprobes has no utask */
	if (!bpf_core_field_exists(t->utask))
		return pc;
	ut = t->utask;
	if (!ut)
		return pc;
	xol = ut->xol_vaddr;
	if (!xol || pc - xol >= XOL_INSN_MAX)
		return pc;
	return ut->vaddr + (pc - xol);
}

/* a frame pointer further above sp than a thread's stack is big is no frame pointer */
#define FP_GUESS_MAX	(8ULL << 20)
/* where a signal trampoline finds the interrupted registers: the ucontext */
#define UC_MCONTEXT_RBP	(40 + 10 * 8)
#define UC_MCONTEXT_RSP	(40 + 15 * 8)
#define UC_MCONTEXT_RIP	(40 + 16 * 8)

/*
 * The user stack is read a block at a time, as the frames of a walk lie
 * together: one copy of a block costs about what one of a word does.  A
 * block is aligned and never crosses a page, so it is readable wherever a
 * word of it is.
 */
#define CFI_WINDOW	512

/*
 * A walk to the bottom of the stack, as far as it depended on the sample:
 * its registers and the words of the stack it read.  A hit with the same
 * registers, in the same process with the same mappings, that finds the
 * same words at the same addresses, has the same stack: a loop that hits
 * an event again and again has it walked once.  Walks that read anything
 * else (another register, code, a signal frame) or stepped other than by
 * a rule are not remembered, nor are more reads than fit: recalled, they
 * would not count what they did.
 */
#define CFI_LAST_READS	16
/*
 * The words are read again in one copy, from the lowest to the highest:
 * a copy of a KiB costs about what a copy of one word does
 */
#define CFI_LAST_SPAN	1024

struct cfi_last_walk {
	__u64 pc, sp, bp;
	__u64 procs_gen;	/* procs_gen before it looked its process's mappings up */
	__u64 stacks_gen;	/* stacks_gen before its stack was last seen stored */
	__u64 hash;		/* of its stack, stored */
	__u32 tgid;
	__u32 nr;		/* its frames, 0: no walk to recall */
	__u32 now;		/* w->now at the walk: tables' used stamps stay fresh */
	__u32 nr_reads;		/* > CFI_LAST_READS: not to be remembered */
	__u64 lo, hi;		/* the stack it read, from the first byte to past the last */
	__u64 addr[CFI_LAST_READS];
	__u64 val[CFI_LAST_READS];
	__u8 stack[CFI_LAST_SPAN];	/* a recall's copy of lo..hi */
};

/*
 * The state of a walk.  It lives in a map, not on the BPF stack: the
 * verifier does not follow the values of map memory, so the loops over
 * frames and the binary searches converge at once instead of being
 * explored for every value of their indexes.
 */
struct cfi_walk {
	__u64 pc;
	__u64 sp;
	__u64 bp;
	__u32 tgid;
	__u32 nr;		/* frames so far */
	__u32 max;
	int end;		/* the stat of why the walk ended, 0: still walking */
	__u32 lo, hi;		/* of a binary search */
	__u32 now;		/* bpf_ktime_get_ns() >> 30, to stamp the tables used */
	__u64 regs;		/* the sample's user registers (struct pt_regs *) */
	__u64 procs_gen;	/* procs_gen as the hit began */
	__u64 stacks_gen;	/* stacks_gen as the hit began */
	struct bpf_bstack_cfi_row row;	/* the rule of this frame */
	__u32 map_hint;		/* the mapping of the frame before */
	bool exact;		/* pc is not a return address: the leaf, or after a signal */
	bool guessed;		/* pc came from a frame pointer where no rule was */
	bool searched;		/* a rule was searched, not recalled: the stack is likely new */
	__u64 win_base;		/* user address of win, 1: none */
	__u8 win[CFI_WINDOW];	/* the user stack there */
	struct cfi_last_walk last;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct cfi_walk);
	__uint(max_entries, BPF_BSTACK_MAX_NEST);
} bstack_cfi_walk SEC(".maps");

/* The executable mapping of proc that holds pc */
static __always_inline struct bpf_bstack_cfi_map *find_map(struct cfi_walk *w,
							   struct bpf_bstack_cfi_proc *proc,
							   __u64 pc)
{
	struct bpf_bstack_cfi_map *m;
	__u32 mid;
	int i;

	/* callers are mostly in the callee's file */
	m = &proc->map[w->map_hint & (BPF_BSTACK_CFI_MAPS - 1)];
	if (w->map_hint < proc->nr && m->start <= pc && pc < m->end)
		return m;
	w->lo = 0;
	w->hi = proc->nr < BPF_BSTACK_CFI_MAPS ? proc->nr : BPF_BSTACK_CFI_MAPS;
	for (i = 0; i < 8; i++) {	/* 2^8 > BPF_BSTACK_CFI_MAPS */
		if (w->lo >= w->hi)
			break;
		mid = ((w->lo + w->hi) / 2) & (BPF_BSTACK_CFI_MAPS - 1);
		if (proc->map[mid].start <= pc)
			w->lo = mid + 1;
		else
			w->hi = mid;
	}
	if (!w->lo)
		return NULL;
	w->map_hint = w->lo - 1;
	m = &proc->map[w->map_hint & (BPF_BSTACK_CFI_MAPS - 1)];
	return pc < m->end ? m : NULL;
}

/*
 * The rules of the return addresses walked lately: the outer frames of a
 * program's stacks are the same from one sample to the next, and a rule
 * recalled costs one cache line where the table's search costs several,
 * each a miss in megabytes of rows.  Shared by the CPUs, which mostly run
 * the same programs (the cc1s of a build): on a compile, one memo of 128
 * KiB recalled 88 % of the rules at about 100 ns each, where one of 64 KiB
 * per CPU recalled 85 % at 170 (fewer pages: fewer TLB misses).  perf
 * sizes it to the CPUs (memo_shift).  An entry is keyed by the file's gen
 * and the offset; its check is that key xor the rule, so that an entry
 * half written, by a walk that interrupted this one or by another CPU, is
 * no match.
 */
struct cfi_memo_entry {
	__u64 check;
	__u64 row;		/* struct bpf_bstack_cfi_row */
};

_Static_assert(sizeof(struct bpf_bstack_cfi_row) == sizeof(__u64), "a rule is a word");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct cfi_memo_entry);
	__uint(max_entries, 1);		/* sized by perf */
} bstack_cfi_memo SEC(".maps");

static __always_inline struct cfi_memo_entry *cfi_memo_slot(__u64 key)
{
	__u32 i = (key * 0x9e3779b97f4a7c15ULL) >> (64 - memo_shift);

	return bpf_map_lookup_elem(&bstack_cfi_memo, &i);
}

/*
 * The row of file that covers file offset off: its page's rows, then a
 * binary search of them, a few cache lines apart
 */
static __always_inline struct bpf_bstack_cfi_row *find_row(struct cfi_walk *w,
							   struct bpf_bstack_cfi_file *file,
							   __u64 off)
{
	struct bpf_bstack_cfi_page *page;
	struct bpf_bstack_cfi_row *row;
	__u32 mid;
	int i;

	if (off < file->base || (off - file->base) >> BPF_BSTACK_CFI_PAGE_SHIFT >= file->nr_pages)
		return NULL;
	mid = file->first + ((off - file->base) >> BPF_BSTACK_CFI_PAGE_SHIFT);
	page = bpf_map_lookup_elem(&bstack_cfi_pages, &mid);
	if (!page)
		return NULL;
	w->lo = page->first;
	w->hi = page->first + page->nr;
	/* a plain loop, as find_map()'s: bpf_for() costs a call a turn */
	for (i = 0; i < BPF_BSTACK_CFI_PAGE_SHIFT + 2; i++) {
		if (w->lo >= w->hi)
			break;
		mid = w->lo + (w->hi - w->lo) / 2;
		row = bpf_map_lookup_elem(&bstack_cfi_rows, &mid);
		if (!row)
			return NULL;
		if (row->offset <= off)
			w->lo = mid + 1;
		else
			w->hi = mid;
	}
	if (w->lo == page->first)
		return NULL;
	mid = w->lo - 1;
	return bpf_map_lookup_elem(&bstack_cfi_rows, &mid);
}

/* The rule of file offset off into w->row, recalled or searched: false if none */
static __always_inline bool frame_rule(struct cfi_walk *w, struct bpf_bstack_cfi_file *file,
				       __u64 off, struct bpf_bstack_stats *stats)
{
	__u64 key = (__u64)file->gen << 32 | (__u32)off, bits;
	struct bpf_bstack_cfi_row *row;
	struct cfi_memo_entry *e;

	/* rows hold 32-bit offsets: there is no rule past 4 GiB of a file */
	if (off >> 32)
		return false;
	e = cfi_memo_slot(key);
	if (e) {
		bits = e->row;
		if ((e->check ^ bits) == key) {
			__builtin_memcpy(&w->row, &bits, sizeof(w->row));
			stat_inc(stats, BPF_BSTACK_STAT_CFI_ROWS_RECALLED, 1);
			return true;
		}
	}
	w->searched = true;
	row = find_row(w, file, off);
	if (!row)
		return false;
	w->row = *row;
	if (e) {
		__builtin_memcpy(&bits, row, sizeof(bits));
		e->row = bits;
		e->check = key ^ bits;
	}
	return true;
}

static __always_inline int read_word(__u64 *val, __u64 addr)
{
	return bpf_probe_read_user(val, sizeof(*val), (void *)addr);
}

/* A word of the user stack, through the walk's window */
static __always_inline int read_window(struct cfi_walk *w, __u64 *val, __u64 addr)
{
	__u64 base = addr & ~(__u64)(CFI_WINDOW - 1);
	__u32 off = addr & (CFI_WINDOW - 1);

	if (off > CFI_WINDOW - sizeof(*val))
		return read_word(val, addr);
	if (base != w->win_base) {
		if (bpf_probe_read_user(w->win, CFI_WINDOW, (void *)base)) {
			w->win_base = 1;
			return -1;
		}
		w->win_base = base;
	}
	__builtin_memcpy(val, &w->win[off], sizeof(*val));
	return 0;
}

/* The walk cannot be recalled: it depended on more than the words it read */
static __always_inline void walk_not_recallable(struct cfi_walk *w)
{
	w->last.nr_reads = CFI_LAST_READS + 1;
}

/*
 * A word of the user stack that a rule read, noted for the walk's recall
 * (steps other than by a rule are not recalled: they read with
 * read_window()).  Without a branch: each instruction here is verified
 * again for each state of the walk's loop, and older kernels' verifiers
 * (6.12) have little room left.  Past the last note the walk is no longer
 * recallable, and the notes wrap.
 */
static __always_inline int read_stack(struct cfi_walk *w, __u64 *val, __u64 addr)
{
	__u32 i = w->last.nr_reads;

	if (read_window(w, val, addr))
		return -1;
	w->last.addr[i & (CFI_LAST_READS - 1)] = addr;
	w->last.val[i & (CFI_LAST_READS - 1)] = *val;
	w->last.nr_reads = i + 1;
	return 0;
}

/* Add the frame of w->pc to buf, as (build-id, offset) where the file has one */
static __always_inline void add_frame(struct cfi_walk *w, struct bpf_bstack_user_stack *buf,
				      struct bpf_bstack_cfi_map *m,
				      struct bpf_bstack_cfi_file *file)
{
	__u32 idx = w->nr;
	struct bpf_stack_build_id *f;

	if (idx >= BPF_BSTACK_MAX_STACK)
		return;
	f = &buf->frame[idx];
	if (file && file->build_id_size) {
		f->status = BPF_STACK_BUILD_ID_VALID;
		__builtin_memcpy(f->build_id, file->build_id, sizeof(f->build_id));
		f->offset = w->pc - m->start + m->pgoff;
	} else {
		f->status = BPF_STACK_BUILD_ID_IP;
		__builtin_memset(f->build_id, 0, sizeof(f->build_id));
		f->ip = w->pc;
		walk_not_recallable(w);
	}
	w->nr = idx + 1;
}

/* The caller's frame by frame pointer: code without a table (vDSO, JIT) */
static __always_inline int fp_step(struct cfi_walk *w, struct bpf_bstack_stats *stats)
{
	__u64 ra, bp;

	stat_inc(stats, BPF_BSTACK_STAT_CFI_FP_FRAMES, 1);
	walk_not_recallable(w);
	if (w->bp <= w->sp)
		return BPF_BSTACK_STAT_CFI_BAD_RULE;
	if (read_window(w, &bp, w->bp) || read_window(w, &ra, w->bp + 8))
		return BPF_BSTACK_STAT_CFI_UNREADABLE;
	if (!ra)
		return BPF_BSTACK_STAT_CFI_COMPLETE;
	w->sp = w->bp + 16;
	w->bp = bp;
	w->pc = ra;
	w->exact = false;
	return 0;
}

/*
 * CPython's perf trampolines (python -X perf, 3.12 and later) are copies of
 * "sub $8,%rsp; call *%rcx; add $8,%rsp; ret" in anonymous memory, with no
 * frame pointer and no unwind table: a return address into one is known by
 * the code around it (as libgcc knows a signal trampoline by its code), and
 * the trampoline's caller is right above it.
 */
#define PY_TRAMPOLINE_CALL	0xd1ffU			/* call *%rcx */
#define PY_TRAMPOLINE_RET	0xc308c48348ULL		/* add $8,%rsp; ret */

static __always_inline int trampoline_step(struct cfi_walk *w, struct bpf_bstack_stats *stats)
{
	__u64 code, ra;

	walk_not_recallable(w);
	if (w->exact || read_word(&code, w->pc - 2) ||
	    (code & 0xffff) != PY_TRAMPOLINE_CALL ||
	    ((code >> 16) & 0xffffffffffULL) != PY_TRAMPOLINE_RET)
		return -1;
	if (read_window(w, &ra, w->sp + 8))
		return BPF_BSTACK_STAT_CFI_UNREADABLE;
	stat_inc(stats, BPF_BSTACK_STAT_CFI_TRAMPOLINES, 1);
	if (!ra)
		return BPF_BSTACK_STAT_CFI_COMPLETE;
	w->sp += 16;
	w->pc = ra;
	return 0;
}

/*
 * Code in a file with no rule for pc (hand-written assembly, V8's builtins):
 * its frame pointer, if it points a little above sp, is the best guess.  A
 * guess that leads into no mapping ends the stack at the frame before it.
 */
static __always_inline int guess_step(struct cfi_walk *w, struct bpf_bstack_stats *stats)
{
	if (w->bp <= w->sp || w->bp - w->sp > FP_GUESS_MAX)
		return BPF_BSTACK_STAT_CFI_NO_ROW;
	stat_inc(stats, BPF_BSTACK_STAT_CFI_FP_GUESSED, 1);
	w->guessed = true;
	return fp_step(w, stats);
}

/* The registers a signal interrupted, saved in the ucontext at sp */
static __always_inline int signal_step(struct cfi_walk *w)
{
	walk_not_recallable(w);
	if (read_word(&w->bp, w->sp + UC_MCONTEXT_RBP) ||
	    read_word(&w->pc, w->sp + UC_MCONTEXT_RIP) ||
	    read_word(&w->sp, w->sp + UC_MCONTEXT_RSP))
		return BPF_BSTACK_STAT_CFI_UNREADABLE;
	w->regs = 0;	/* the interrupted code's are in the ucontext */
	w->exact = true;	/* the interrupted instruction, not a return address */
	return w->pc ? 0 : BPF_BSTACK_STAT_CFI_COMPLETE;
}

/* Where register regno (DWARF's number) is in struct pt_regs */
static __always_inline __u32 reg_offset(__u32 regno)
{
	switch (regno) {
	case 0: return bpf_core_field_offset(struct pt_regs___bstack, ax);
	case 1: return bpf_core_field_offset(struct pt_regs___bstack, dx);
	case 2: return bpf_core_field_offset(struct pt_regs___bstack, cx);
	case 3: return bpf_core_field_offset(struct pt_regs___bstack, bx);
	case 4: return bpf_core_field_offset(struct pt_regs___bstack, si);
	case 5: return bpf_core_field_offset(struct pt_regs___bstack, di);
	case 8: return bpf_core_field_offset(struct pt_regs___bstack, r8);
	case 9: return bpf_core_field_offset(struct pt_regs___bstack, r9);
	case 10: return bpf_core_field_offset(struct pt_regs___bstack, r10);
	case 11: return bpf_core_field_offset(struct pt_regs___bstack, r11);
	case 12: return bpf_core_field_offset(struct pt_regs___bstack, r12);
	case 13: return bpf_core_field_offset(struct pt_regs___bstack, r13);
	case 14: return bpf_core_field_offset(struct pt_regs___bstack, r14);
	case 15: return bpf_core_field_offset(struct pt_regs___bstack, r15);
	default: return -1;
	}
}

/* rbx, rbp, r12-r15: a callee that uses one saves it, and restores it */
#define CALLEE_SAVED	(1U << 3 | 1U << 6 | 1U << 12 | 1U << 13 | 1U << 14 | 1U << 15)

/*
 * Register regno as the walk knows it: rsp and rbp in any frame, the
 * others as the sample left them.  In a caller's frame, a callee-saved
 * one is wherever a callee saved it, which the walk does not follow; a
 * caller-saved one no rule restores has kept its value, as DWARF
 * unwinders take it (hand-written assembly that keeps its CFA in rax
 * calls helpers that leave rax alone): the walk goes on as after a
 * frame-pointer guess, and ends where that leads to no code.
 */
static __always_inline int reg_value(struct cfi_walk *w, __u32 regno, __u64 *val)
{
	__u32 off;

	if (regno == 7) {
		*val = w->sp;
		return 0;
	}
	if (regno == 6) {
		*val = w->bp;
		return 0;
	}
	walk_not_recallable(w);
	off = reg_offset(regno);
	if (!w->regs || off == (__u32)-1)
		return BPF_BSTACK_STAT_CFI_REG_UNKNOWN;
	if (w->nr != 1) {
		if (CALLEE_SAVED & (1U << regno))
			return BPF_BSTACK_STAT_CFI_REG_UNKNOWN;
		w->guessed = true;
	}
	return bpf_probe_read_kernel(val, sizeof(*val), (void *)(w->regs + off)) ?
	       BPF_BSTACK_STAT_CFI_UNREADABLE : 0;
}

/* CFA = *(base + N) + M, base a register, or rsp + 8 * a register */
static __always_inline int deref_cfa(struct cfi_walk *w, struct bpf_bstack_cfi_row *row,
				     bool indexed, __u64 *cfa)
{
	__u32 regno = BPF_BSTACK_CFA_REGNO(row->cfa_kind);
	__u64 base, idx;
	int err;

	walk_not_recallable(w);	/* rare, and its read is not noted */
	err = reg_value(w, regno, indexed ? &idx : &base);
	if (err)
		return err;
	if (indexed)
		base = w->sp + 8 * idx;
	if (read_window(w, cfa, base + BPF_BSTACK_CFA_DEREF_N(row->cfa_offset)))
		return BPF_BSTACK_STAT_CFI_UNREADABLE;
	*cfa += BPF_BSTACK_CFA_DEREF_M(row->cfa_offset);
	return 0;
}

/* The caller's frame by the row's rule */
static __always_inline int row_step(struct cfi_walk *w, struct bpf_bstack_cfi_row *row)
{
	__u64 cfa, ra, bp;
	int err;

	switch (BPF_BSTACK_CFA_KIND(row->cfa_kind)) {
	case BPF_BSTACK_CFA_RSP:
		cfa = w->sp + row->cfa_offset;
		break;
	case BPF_BSTACK_CFA_RBP:
		cfa = w->bp + row->cfa_offset;
		break;
	case BPF_BSTACK_CFA_PLT:
		cfa = w->sp + 8 + ((w->pc & 15) >= row->cfa_offset ? 8 : 0);
		break;
	case BPF_BSTACK_CFA_SIGNAL:
		return signal_step(w);
	case BPF_BSTACK_CFA_STOP:
		return BPF_BSTACK_STAT_CFI_COMPLETE;
	case BPF_BSTACK_CFA_NO_FDE:
		/* the leaf in a PLT stub, which has pushed nothing (cfi_step guesses elsewhere) */
		cfa = w->sp + 8;
		break;
	case BPF_BSTACK_CFA_REG:
		err = reg_value(w, BPF_BSTACK_CFA_REGNO(row->cfa_kind), &cfa);
		if (err)
			return err;
		cfa += row->cfa_offset;
		break;
	case BPF_BSTACK_CFA_DEREF:
	case BPF_BSTACK_CFA_DEREF_INDEXED:
		err = deref_cfa(w, row, BPF_BSTACK_CFA_KIND(row->cfa_kind) ==
				BPF_BSTACK_CFA_DEREF_INDEXED, &cfa);
		if (err)
			return err;
		break;
	default:
		return BPF_BSTACK_STAT_CFI_BAD_RULE;
	}
	/* the caller's frame is above this one: a rule that says otherwise is wrong here */
	if (cfa <= w->sp)
		return BPF_BSTACK_STAT_CFI_BAD_RULE;
	if (read_stack(w, &ra, cfa - 8))
		return BPF_BSTACK_STAT_CFI_UNREADABLE;
	if (row->rbp) {
		if (read_stack(w, &bp, cfa - 8 * (__u64)row->rbp))
			return BPF_BSTACK_STAT_CFI_UNREADABLE;
		w->bp = bp;
	}
	if (!ra)
		return BPF_BSTACK_STAT_CFI_COMPLETE;
	w->sp = cfa;
	w->pc = ra;
	w->exact = false;
	return 0;
}

/*
 * The table of file (index i) is not loaded: it found no room, or was
 * evicted to make room.  Ask user space for it, every 16 ms at most, and
 * step by frame pointer meanwhile.
 */
static __always_inline void ask_table(struct cfi_walk *w, __u32 i,
				      struct bpf_bstack_cfi_file *file,
				      struct bpf_bstack_stats *stats)
{
	struct bpf_bstack_cfi_ask ask = {
		.tgid	= w->tgid,
		.file	= i,
		.time	= bpf_ktime_get_ns(),
	};
	__u32 now = ask.time >> 24;

	stat_inc(stats, BPF_BSTACK_STAT_CFI_FP_UNLOADED, 1);
	walk_not_recallable(w);
	if (file->asked == now)
		return;
	file->asked = now;
	bpf_ringbuf_output(&bstack_cfi_ask, &ask, sizeof(ask), 0);
}

/* One frame of the walk: the stat of why the walk ended there, 0 to go on */
static __always_inline int cfi_step(struct cfi_walk *w, struct bpf_bstack_cfi_proc *proc,
				    struct bpf_bstack_user_stack *buf,
				    struct bpf_bstack_stats *stats)
{
	struct bpf_bstack_cfi_file *file = NULL;
	struct bpf_bstack_cfi_map *m;
	__u64 pc = w->exact ? w->pc : w->pc - 1;	/* a call may end its function */

	if (w->nr >= w->max)
		return BPF_BSTACK_STAT_CFI_DEPTH;
	m = find_map(w, proc, pc);
	if (!m)
		return w->guessed ? BPF_BSTACK_STAT_CFI_NO_ROW : BPF_BSTACK_STAT_CFI_NO_MAP;
	w->guessed = false;
	if (m->file != BPF_BSTACK_CFI_NO_FILE)
		file = bpf_map_lookup_elem(&bstack_cfi_files, &m->file);
	add_frame(w, buf, m, file);
	if (!file || !file->nr) {
		int ret = file ? -1 : trampoline_step(w, stats);

		if (ret >= 0)
			return ret;
		if (file && (file->flags & BPF_BSTACK_CFI_FILE_UNLOADED))
			ask_table(w, m->file, file, stats);
		return fp_step(w, stats);
	}
	/* a store once a second at most: the line is shared by every CPU */
	if (file->used != w->now)
		file->used = w->now;
	if (!frame_rule(w, file, pc - m->start + m->pgoff, stats) ||
	    (w->row.cfa_kind == BPF_BSTACK_CFA_NO_FDE && !w->exact))
		return guess_step(w, stats);
	return row_step(w, &w->row);
}

/*
 * One frame of the walk, in a function of its own (global): the verifier
 * checks it once, whatever the states of the loop that calls it, where
 * inlined its paths were checked again for each, and the verifier of
 * 6.12 ran out of its million instructions.  Its arguments may be NULL
 * as far as the verifier knows.
 */
__noinline int cfi_walk_frame(struct cfi_walk *w, struct bpf_bstack_cfi_proc *proc,
			      struct bpf_bstack_user_stack *buf, struct bpf_bstack_stats *stats)
{
	if (!w || !proc || !buf)
		return BPF_BSTACK_STAT_CFI_BAD_RULE;
	return cfi_step(w, proc, buf, stats);
}

/*
 * Ask user space for the mappings of tgid, at most once in 10 ms: it may
 * be new, or have mapped new code since.
 */
static __always_inline void ask_mappings(__u32 tgid)
{
	struct bpf_bstack_cfi_ask ask = {};
	__u64 now = bpf_ktime_get_ns(), *last;

	last = bpf_map_lookup_elem(&bstack_cfi_asked, &tgid);
	if (last && now - *last < 10 * 1000 * 1000)
		return;
	bpf_map_update_elem(&bstack_cfi_asked, &tgid, &now, BPF_ANY);
	ask.tgid = tgid;
	ask.file = BPF_BSTACK_CFI_NO_FILE;
	ask.time = now;
	bpf_ringbuf_output(&bstack_cfi_ask, &ask, sizeof(ask), 0);
}

/*
 * The stack of this CPU's last walk into *hash, if this hit is where that
 * walk began, in the same process, no process's mappings changed since,
 * it finds the same words on the stack, and the stack is still stored (a
 * drain may have forgotten it since).  Two lookups of the process's
 * mappings and its changes would cost as much as the rest of the recall.
 */
static __always_inline bool recall_walk(struct cfi_walk *w, __u64 *hash,
					struct bpf_bstack_stats *stats)
{
	struct cfi_last_walk *last = &w->last;
	__u64 val, span = last->hi - last->lo, off;
	__u32 nr = last->nr;
	int i;

	if (!nr || last->tgid != w->tgid || last->pc != w->pc || last->sp != w->sp ||
	    last->bp != w->bp || last->procs_gen != w->procs_gen || last->now != w->now)
		return false;
	if (span > CFI_LAST_SPAN || bpf_probe_read_user(last->stack, span, (void *)last->lo))
		return false;
	for (i = 0; i < CFI_LAST_READS; i++) {
		if (i >= last->nr_reads)
			break;
		off = last->addr[i] - last->lo;
		if (off > CFI_LAST_SPAN - sizeof(val))
			return false;
		__builtin_memcpy(&val, &last->stack[off], sizeof(val));
		if (val != last->val[i])
			return false;
	}
	/* a drain since may have taken it out: then it is walked and stored again */
	if (last->stacks_gen != w->stacks_gen) {
		if (!bpf_map_lookup_elem(user_stack_map(nr), &last->hash))
			return false;
		last->stacks_gen = w->stacks_gen;
	}
	*hash = last->hash;
	stat_inc(stats, BPF_BSTACK_STAT_CFI_STACKS, 1);
	stat_inc(stats, BPF_BSTACK_STAT_CFI_COMPLETE, 1);
	stat_inc(stats, BPF_BSTACK_STAT_USER_FRAMES, nr);
	stat_inc(stats, BPF_BSTACK_STAT_CFI_WALKS_RECALLED, 1);
	return true;
}

/* Start a walk from w's registers, noting what it reads for its recall */
static __always_inline void start_walk(struct cfi_walk *w)
{
	struct cfi_last_walk *last = &w->last;

	last->nr = 0;
	last->nr_reads = 0;
	last->pc = w->pc;
	last->sp = w->sp;
	last->bp = w->bp;
	last->tgid = w->tgid;
	last->now = w->now;
	last->procs_gen = w->procs_gen;
}

/* Remember a walk to the bottom that depended on nothing but what it noted */
static __always_inline void remember_walk(struct cfi_walk *w, __u64 hash)
{
	struct cfi_last_walk *last = &w->last;
	int i;

	if (w->end != BPF_BSTACK_STAT_CFI_COMPLETE || !hash || last->nr_reads > CFI_LAST_READS)
		return;
	last->lo = -1;
	last->hi = 0;
	/* unrolled, as recall_walk()'s: bpf_for() costs a call a turn */
	for (i = 0; i < CFI_LAST_READS; i++) {
		if (i >= last->nr_reads)
			break;
		if (last->addr[i] < last->lo)
			last->lo = last->addr[i];
		if (last->addr[i] + sizeof(__u64) > last->hi)
			last->hi = last->addr[i] + sizeof(__u64);
	}
	if (last->hi - last->lo > CFI_LAST_SPAN)
		return;
	last->hash = hash;
	last->nr = w->nr;
	last->stacks_gen = w->stacks_gen;
}

/*
 * The user stack walked with the unwind tables into *hash (0: none), or
 * false when the process has no tables yet: then the kernel walks it.
 * *added is set if the stack was new.
 */
static __always_inline bool store_cfi_stack(struct bpf_bstack_stats *stats, __u64 *hash,
					    __u64 now, __u64 *since, bool *added)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct pt_regs___bstack *regs;
	struct bpf_bstack_user_stack *buf;
	struct bpf_bstack_cfi_proc *proc;
	__u32 level = nest_level(), tgid;
	struct cfi_walk *w;
	__u64 *changed;
	bool stale;
	int i;

	w = bpf_map_lookup_elem(&bstack_cfi_walk, &level);
	if (!w || !task->mm)
		return false;
	tgid = bpf_get_current_pid_tgid() >> 32;
	/* before the lookups: a change after them is seen by the next hit's recall */
	w->procs_gen = procs_gen;
	w->stacks_gen = stacks_gen;
	regs = (struct pt_regs___bstack *)bpf_task_pt_regs(task);
	w->tgid = tgid;
	/* loads through the kernel's pointers, not probe reads: cheaper, as safe */
	w->pc = probed_pc(task, regs->ip);
	w->sp = regs->sp;
	w->bp = regs->bp;
	w->win_base = 1;
	w->now = now >> 30;
	part_done(since, BPF_BSTACK_PART_MAPPINGS);
	if (recall_walk(w, hash, stats)) {
		part_done(since, BPF_BSTACK_PART_WALK);
		part_done(since, BPF_BSTACK_PART_USER_STORE);
		return true;
	}
	proc = bpf_map_lookup_elem(&bstack_cfi_procs, &tgid);
	/* read before an exec, a dlopen() or dlclose(): other code may be there now */
	changed = bpf_map_lookup_elem(&bstack_cfi_changed, &tgid);
	stale = proc && changed && *changed > proc->read_ns;
	/*
	 * None yet, or of the image before an exec.  A task inside execve(),
	 * past the point where the new image replaced the old one, still has
	 * the old image's mappings and no later change: the exec's tracepoint
	 * is about to read the new ones, do not ask for them too.  Older than
	 * the last change, they are of an exec that raced with user space.
	 */
	if (!proc || proc->start_stack != ((struct mm_struct___bstack *)task->mm)->start_stack) {
		if (!proc || stale)
			ask_mappings(tgid);
		else
			stat_inc(stats, BPF_BSTACK_STAT_CFI_IN_EXEC, 1);
		return false;
	}
	if (stale) {
		stat_inc(stats, BPF_BSTACK_STAT_CFI_NO_MAP, 1);
		ask_mappings(tgid);
		return false;
	}
	buf = bpf_map_lookup_elem(&bstack_user_buf, &level);
	if (!buf)
		return false;
	w->regs = (__u64)regs;
	w->exact = true;
	w->guessed = false;
	w->searched = false;
	w->max = max_depth();
	w->nr = 0;
	w->end = 0;
	part_done(since, BPF_BSTACK_PART_MAPPINGS);
	start_walk(w);
	/*
	 * An open-coded loop, not bpf_loop(): the process's mappings, found
	 * once, stay at hand instead of being looked up for every frame
	 */
	bpf_for(i, 0, BPF_BSTACK_MAX_STACK) {
		w->end = cfi_walk_frame(w, proc, buf, stats);
		if (w->end)
			break;
	}
	if (!w->end)
		w->end = BPF_BSTACK_STAT_CFI_DEPTH;
	part_done(since, BPF_BSTACK_PART_WALK);
	if (w->end == BPF_BSTACK_STAT_CFI_NO_MAP) {
		/* new code (dlopen, JIT): the mappings are out of date, the kernel walks */
		stat_inc(stats, BPF_BSTACK_STAT_CFI_NO_MAP, 1);
		ask_mappings(tgid);
		return false;
	}
	stat_inc(stats, BPF_BSTACK_STAT_CFI_STACKS, 1);
	stat_inc(stats, w->end, 1);
	*hash = store_frames(buf, w->nr, stats, true, w->searched, added);
	remember_walk(w, *hash);
	part_done(since, BPF_BSTACK_PART_USER_STORE);
	return true;
}

/* a stack of IPs: the kernel's, or the user's with --ip-stacks */
static __always_inline __u64 store_ip_stack(void *ctx, struct bpf_bstack_stats *stats,
					    void *map, __u64 flags, int err_stat,
					    int full_stat, int unstored_stat)
{
	__u32 level = nest_level();
	struct bpf_bstack_kern_stack *buf;
	__u64 h = 0xcbf29ce484222325ULL;
	long len;
	__u32 i, nr;

	buf = bpf_map_lookup_elem(&bstack_kern_buf, &level);
	if (!buf)
		return 0;

	len = get_stack(ctx, buf->ip, sizeof(buf->ip[0]), flags);
	if (len == -EFAULT || len == 0)
		return 0;
	if (len < 0) {
		stat_inc(stats, err_stat, 1);
		return 0;
	}

	nr = len / sizeof(buf->ip[0]);
	for (i = 0; i < BPF_BSTACK_MAX_STACK; i++) {
		if (i >= nr)
			break;
		h = hash_word(h, buf->ip[i]);
	}
	h = hash_final(hash_word(h, nr));
	buf->nr = nr;
	return store_stack(map, h, buf, stats, full_stat, unstored_stat, false, NULL);
}

/* Count weight for key at time now in counts, inserting it at once if fresh */
static __always_inline void count_hit(void *counts, struct bpf_bstack_key *key,
				      struct bpf_bstack_stats *stats, __u64 weight, __u64 now,
				      bool fresh)
{
	struct bpf_bstack_count *val = NULL, init = { .count = weight, };
	long err;

	if (!fresh)
		val = bpf_map_lookup_elem(counts, key);
	if (!val) {
		init.first_ns = init.last_ns = now;
		err = bpf_map_update_elem(counts, key, &init, BPF_NOEXIST);
		if (!err) {
			/* of the map in use, if a drain has not just swapped them */
			note_added(&counts_added[active_counts & 1], counts_half);
			return;
		}
		if (err != -EEXIST && !(fresh && err == -EBUSY)) {
			stat_inc(stats, BPF_BSTACK_STAT_COUNTS_FULL, 1);
			return;
		}
		/* there: inserted meanwhile by another CPU, or not fresh after all */
		val = bpf_map_lookup_elem(counts, key);
		if (!val) {
			stat_inc(stats, BPF_BSTACK_STAT_COUNTS_FULL, 1);
			return;
		}
	}
	__sync_fetch_and_add(&val->count, weight);
	val->last_ns = now;
}

/*
 * Count weight for key, at time now.  A key whose user stack was new
 * (fresh) is new too, most likely: it is inserted without a lookup first.
 */
static __always_inline void count_key(struct bpf_bstack_key *key,
				      struct bpf_bstack_stats *stats, __u64 weight, __u64 now,
				      bool fresh)
{
	if (active_counts)
		count_hit(&bstack_counts1, key, stats, weight, now, fresh);
	else
		count_hit(&bstack_counts0, key, stats, weight, now, fresh);
}

/* Kernel stacks as (build-id, offset): asked for, and this kernel has them */
static __always_inline bool kern_stacks_as_bid(void)
{
	return kern_build_id && !kern_build_id_failed;
}

static __always_inline void *kern_stack_map(void)
{
	return kern_stacks_as_bid() ? (void *)&bstack_kern_bid_stacks : (void *)&bstack_kern_stacks;
}

/*
 * The kernel stack remembered for key's user stack at key's system call
 * entry, if it is still in its map: a drain may have taken it out since,
 * and then it is walked and stored again.
 */
static __always_inline bool recall_kern_stack(struct bpf_bstack_key *key,
					      struct bpf_bstack_stats *stats)
{
	struct bpf_bstack_memo_key mk = { .user_stack = key->user_stack, .event = key->event, };
	struct bpf_bstack_memo_last *last;
	__u64 *h, kern, gen = stacks_gen;
	__u32 level = nest_level();

	if (!key->user_stack)
		return false;
	/* a value, not a pointer into one map or the other: one path to verify after */
	last = bpf_map_lookup_elem(&bstack_kern_memo_last, &level);
	if (last && last->key.user_stack == mk.user_stack && last->key.event == mk.event) {
		kern = last->kern_stack;
		if (last->stacks_gen == gen)
			goto known;
	} else {
		h = bpf_map_lookup_elem(&bstack_kern_memo, &mk);
		if (!h)
			return false;
		kern = *h;
	}
	if (!bpf_map_lookup_elem(kern_stack_map(), &kern))
		return false;
	if (last) {
		last->key = mk;
		last->kern_stack = kern;
		last->stacks_gen = gen;
	}
known:
	key->kern_stack = kern;
	stat_inc(stats, BPF_BSTACK_STAT_KERN_RECALLED, 1);
	return true;
}

static __always_inline void remember_kern_stack(struct bpf_bstack_key *key)
{
	struct bpf_bstack_memo_key mk = { .user_stack = key->user_stack, .event = key->event, };

	if (key->user_stack && key->kern_stack)
		bpf_map_update_elem(&bstack_kern_memo, &mk, &key->kern_stack, BPF_ANY);
}

/* --walk-cost: the user stack as IPs, timed and thrown away */
static __always_inline void time_ip_walk(void *ctx)
{
	__u32 level = nest_level();
	struct bpf_bstack_kern_stack *buf;

	buf = bpf_map_lookup_elem(&bstack_kern_buf, &level);
	if (buf)
		timed_get_stack(ctx, buf->ip, sizeof(buf->ip[0]), BPF_F_USER_STACK,
				BPF_BSTACK_WALK_IP);
}

/* --walk-cost: nothing, timed: the cost of the clock reads, to take off */
static __always_inline void time_no_walk(void)
{
	__u64 start = bpf_ktime_get_ns();

	__sync_fetch_and_add(&walk_cost_ns[BPF_BSTACK_WALK_NONE], bpf_ktime_get_ns() - start);
}

/*
 * The stacks of the current task into key, each stored once; the first
 * kern_skip kernel frames are the BPF machinery's.  At a system call
 * entry (syscall_entry), the kernel stack follows from the user stack.
 * A hit in user mode (in_user) has no kernel stack: none is asked for.
 */
static __always_inline void take_stacks(void *ctx, struct bpf_bstack_key *key,
					struct bpf_bstack_stats *stats, __u64 kern_skip,
					bool syscall_entry, bool in_user, __u64 now,
					__u64 *since, bool *new_stack)
{
	/* the first walk may find the stack's memory colder: take turns */
	bool ip_walk_first = time_walks() && stats &&
			     (stats->stat[BPF_BSTACK_STAT_SAMPLES] & 1);

	if (user_stack && ip_walk_first)
		time_ip_walk(ctx);
	if (user_stack && user_build_id && cfi &&
	    store_cfi_stack(stats, &key->user_stack, now, since, new_stack))
		;	/* walked with the tables */
	else if (user_stack && user_build_id)
		key->user_stack = store_bid_stack(ctx, stats, true, 0);
	else if (user_stack)
		key->user_stack = store_ip_stack(ctx, stats, &bstack_user_ip_stacks,
						 BPF_F_USER_STACK, BPF_BSTACK_STAT_USER_ERR,
						 BPF_BSTACK_STAT_USER_FULL,
						 BPF_BSTACK_STAT_USER_UNSTORED);
	if (user_stack && time_walks() && !ip_walk_first)
		time_ip_walk(ctx);
	if (user_stack && time_walks())
		time_no_walk();
	part_done(since, BPF_BSTACK_PART_WALK);
	if (!kern_stack || in_user || (syscall_entry && recall_kern_stack(key, stats))) {
		part_done(since, BPF_BSTACK_PART_KERNEL);
		return;
	}
	if (kern_stacks_as_bid())
		key->kern_stack = store_bid_stack(ctx, stats, false,
						  kern_skip & BPF_F_SKIP_FIELD_MASK);
	/* kern_build_id_failed may have been set just now */
	if (!kern_stacks_as_bid())
		key->kern_stack = store_ip_stack(ctx, stats, &bstack_kern_stacks,
						 kern_skip & BPF_F_SKIP_FIELD_MASK,
						 BPF_BSTACK_STAT_KERN_ERR,
						 BPF_BSTACK_STAT_KERN_FULL,
						 BPF_BSTACK_STAT_KERN_UNSTORED);
	if (syscall_entry)
		remember_kern_stack(key);
	part_done(since, BPF_BSTACK_PART_KERNEL);
}

/*
 * A hit of the event whose attach cookie is 'cookie' in the current task,
 * in user mode (in_user) or in the kernel
 */
static __always_inline int take_hit(void *ctx, __u64 cookie, bool in_user)
{
	struct bpf_bstack_key key = { .event = (__u32)cookie, };
	__u64 pid_tgid, now, since = part_start();
	struct bpf_bstack_stats *stats;
	bool new_stack = false;
	__u32 zero = 0;

	if (!enabled || !task_selected())
		return 0;

	stats = bpf_map_lookup_elem(&bstack_stats, &zero);
	if (!nest_enter(stats))
		return 0;
	stat_inc(stats, BPF_BSTACK_STAT_SAMPLES, 1);
	/* one clock read for the hit: the tables' stamps and the count's time */
	now = bpf_ktime_get_ns();

	pid_tgid = bpf_get_current_pid_tgid();
	key.pid = pid_tgid >> 32;
	key.tid = (__u32)pid_tgid;
	key.cpu = bpf_get_smp_processor_id();
	bpf_get_current_comm(key.comm, sizeof(key.comm));
	part_done(&since, BPF_BSTACK_PART_TASK);
	take_stacks(ctx, &key, stats, 0, cookie & BPF_BSTACK_COOKIE_SYSCALL_ENTRY, in_user,
		    now, &since, &new_stack);
	count_key(&key, stats, 1, now, new_stack);
	part_done(&since, BPF_BSTACK_PART_COUNT);
	nest_exit();
	return 0;
}

/*
 * The start of a sampling program's context on x86-64 (struct
 * bpf_perf_event_data): the user-space ABI's struct pt_regs of what the
 * sample interrupted.  Its fields are read whole, 8 bytes each.
 */
struct bstack_sample_regs {
	__u64 r15, r14, r13, r12, bp, bx, r11, r10, r9, r8;
	__u64 ax, cx, dx, si, di, orig_ax, ip, cs, flags, sp, ss;
};

/* A sample that interrupted user space: its privilege level, cs's low bits */
static __always_inline bool sample_in_user_mode(void *ctx)
{
	return (((struct bstack_sample_regs *)ctx)->cs & 3) == 3;
}

SEC("perf_event")
int on_sample(void *ctx)
{
	return take_hit(ctx, bpf_get_attach_cookie(ctx), sample_in_user_mode(ctx));
}

/* attached by user space to each tracepoint of -e */
SEC("tracepoint")
int on_tracepoint(void *ctx)
{
	take_hit(ctx, bpf_get_attach_cookie(ctx), false);
	return 0;	/* the perf event of the tracepoint records nothing */
}

/* attached to --uprobe functions and to the uprobe events of perf probe */
SEC("uprobe")
int on_uprobe(struct pt_regs *ctx)
{
	take_hit(ctx, bpf_get_attach_cookie(ctx), false);
	return 0;
}

/* perf's minimal vmlinux.h has no task state: name the field for CO-RE */
struct task_struct___state {
	long __state;
} __attribute__((preserve_access_index));

/* Going off-CPU blocked: remember the stacks (those of current) and when */
static __always_inline void offcpu_start(void *ctx, struct task_struct *prev, __u64 now)
{
	struct bpf_bstack_key key = {};
	struct bpf_bstack_stats *stats;
	struct bpf_bstack_offcpu *oc;
	__u32 zero = 0;
	long state = BPF_CORE_READ((struct task_struct___state *)prev, __state);

	if (!(state & (TASK_INTERRUPTIBLE | TASK_UNINTERRUPTIBLE)) || !task_selected())
		return;
	stats = bpf_map_lookup_elem(&bstack_stats, &zero);
	oc = bpf_task_storage_get(&bstack_offcpu, prev, NULL, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!oc) {
		stat_inc(stats, BPF_BSTACK_STAT_OFFCPU_LOST, 1);
		return;
	}
	/* the program and bpf_trace_run4() */
	take_stacks(ctx, &key, stats, 2, false, false, now, NULL, NULL);
	oc->user_stack = key.user_stack;
	oc->kern_stack = key.kern_stack;
	oc->start_ns = now;
}

/* Coming back: count the time blocked on the stacks it blocked with */
static __always_inline void offcpu_end(struct task_struct *next, __u64 now)
{
	struct bpf_bstack_key key = { .event = offcpu_event, };
	struct bpf_bstack_stats *stats;
	struct bpf_bstack_offcpu *oc;
	__u32 zero = 0;

	oc = bpf_task_storage_get(&bstack_offcpu, next, NULL, 0);
	if (!oc || !oc->start_ns)
		return;
	stats = bpf_map_lookup_elem(&bstack_stats, &zero);
	stat_inc(stats, BPF_BSTACK_STAT_SAMPLES, 1);
	key.user_stack = oc->user_stack;
	key.kern_stack = oc->kern_stack;
	key.pid = BPF_CORE_READ(next, tgid);
	key.tid = BPF_CORE_READ(next, pid);
	key.cpu = bpf_get_smp_processor_id();
	BPF_CORE_READ_STR_INTO(&key.comm, next, comm);
	if (key.user_stack || key.kern_stack)
		count_key(&key, stats, now - oc->start_ns, now, false);
	oc->start_ns = 0;
}

/* --off-cpu, as perf record --off-cpu: prev is still current here */
SEC("tp_btf/sched_switch")
int on_switch(u64 *ctx)
{
	struct task_struct *prev = (struct task_struct *)ctx[1];
	struct task_struct *next = (struct task_struct *)ctx[2];
	__u32 zero = 0;
	__u64 now;

	if (!enabled)
		return 0;
	now = bpf_ktime_get_ns();
	if (nest_enter(bpf_map_lookup_elem(&bstack_stats, &zero))) {
		offcpu_start(ctx, prev, now);
		nest_exit();
	}
	offcpu_end(next, now);
	return 0;
}

/* follow the children of the target processes, as off-cpu does */
SEC("tp_btf/task_newtask")
int on_newtask(u64 *ctx)
{
	struct task_struct *task;
	u64 clone_flags;
	__u32 pid;
	__u8 val = 1;

	if (!has_task || !uses_tgid)
		return 0;

	task = (struct task_struct *)bpf_get_current_task();
	pid = BPF_CORE_READ(task, tgid);
	if (!bpf_map_lookup_elem(&bstack_task_filter, &pid))
		return 0;

	task = (struct task_struct *)ctx[0];
	clone_flags = ctx[1];
	pid = task->tgid;
	if (!(clone_flags & CLONE_THREAD))
		bpf_map_update_elem(&bstack_task_filter, &pid, &val, BPF_NOEXIST);
	return 0;
}

/* a forked process has its parent's mappings: it is unwound from its first sample */
SEC("tp_btf/task_newtask")
int on_newtask_cfi(u64 *ctx)
{
	struct task_struct *task = (struct task_struct *)ctx[0];
	struct bpf_bstack_cfi_proc *proc;
	__u32 parent, child;

	if (!cfi || (ctx[1] & CLONE_THREAD))
		return 0;
	parent = bpf_get_current_pid_tgid() >> 32;
	child = task->tgid;
	proc = bpf_map_lookup_elem(&bstack_cfi_procs, &parent);
	if (proc)
		bpf_map_update_elem(&bstack_cfi_procs, &child, proc, BPF_ANY);
	else
		bpf_map_delete_elem(&bstack_cfi_procs, &child);	/* of a reused pid */
	procs_changed();
	return 0;
}

#define VM_EXEC	0x00000004

/* the kernel's open-coded VMA iterator (6.7+): its state, as uapi gives it */
struct bpf_iter_task_vma {
	__u64 __opaque[1];	/* 8-byte aligned, as the kernel wants it */
};

/* what the walk needs of a VMA, for CO-RE */
struct vm_area_struct___bstack {
	unsigned long vm_start;
	unsigned long vm_end;
	unsigned long vm_pgoff;
	unsigned long vm_flags;
	struct file___bstack *vm_file;
} __attribute__((preserve_access_index));

struct super_block___bstack {
	__u32 s_dev;
} __attribute__((preserve_access_index));

struct inode___bstack {
	unsigned long i_ino;
	struct super_block___bstack *i_sb;
	__s64 i_mtime_sec;
	__u32 i_mtime_nsec;
} __attribute__((preserve_access_index));

struct file___bstack {
	struct inode___bstack *f_inode;
} __attribute__((preserve_access_index));

extern int bpf_iter_task_vma_new(struct bpf_iter_task_vma *it, struct task_struct *task,
				 __u64 addr) __weak __ksym;
extern struct vm_area_struct___bstack *
bpf_iter_task_vma_next(struct bpf_iter_task_vma *it) __weak __ksym;
extern void bpf_iter_task_vma_destroy(struct bpf_iter_task_vma *it) __weak __ksym;

/*
 * Add the executable mapping vma to proc: false when its file has no
 * table yet (user space must build it) or proc is full.
 */
static __always_inline bool add_vma(struct bpf_bstack_cfi_proc *proc,
				    struct vm_area_struct___bstack *vma)
{
	struct bpf_bstack_cfi_file_id id;
	struct bpf_bstack_cfi_map *m;
	struct inode___bstack *inode;
	__u32 *file, nr = proc->nr;

	if (nr >= BPF_BSTACK_CFI_MAPS)
		return false;
	m = &proc->map[nr];
	m->start = vma->vm_start;
	m->end = vma->vm_end;
	m->pgoff = vma->vm_pgoff << 12;
	m->file = BPF_BSTACK_CFI_NO_FILE;	/* the vDSO, JIT code */
	m->reserved = 0;
	if (vma->vm_file) {
		inode = BPF_CORE_READ(vma, vm_file, f_inode);
		id.ino = BPF_CORE_READ(inode, i_ino);
		id.dev = BPF_CORE_READ(inode, i_sb, s_dev);
		id.mtime = 0;
		if (bpf_core_field_exists(inode->i_mtime_sec))
			id.mtime = BPF_CORE_READ(inode, i_mtime_sec) * 1000000000ULL +
				   BPF_CORE_READ(inode, i_mtime_nsec);
		file = bpf_map_lookup_elem(&bstack_cfi_file_ids, &id);
		if (!file)
			return false;
		m->file = *file;
	}
	proc->nr = nr + 1;
	return true;
}

/*
 * Store the mappings of the current process, read from its VMAs, when user
 * space has the tables of all its files: a process that exec'd a binary
 * seen before, or dlopen()ed a library seen before, is unwound from its
 * next sample, without waiting for user space.  In process context only:
 * the VMA iterator takes the mmap lock.
 */
static __always_inline bool read_mappings(__u32 tgid)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct vm_area_struct___bstack *vma;
	struct bpf_bstack_cfi_proc *proc;
	__u32 level = nest_level();
	bool complete = true;

	proc = bpf_map_lookup_elem(&bstack_cfi_proc_buf, &level);
	if (!proc || !task->mm || !bpf_iter_task_vma_new)
		return false;
	proc->nr = 0;
	proc->read_ns = bpf_ktime_get_ns();
	proc->start_stack = BPF_CORE_READ((struct mm_struct___bstack *)task->mm, start_stack);
	bpf_for_each(task_vma, vma, (struct task_struct *)task, 0) {
		if (!(vma->vm_flags & VM_EXEC))
			continue;
		if (!add_vma(proc, vma)) {
			complete = false;
			break;
		}
	}
	if (!complete || bpf_map_update_elem(&bstack_cfi_procs, &tgid, proc, BPF_ANY))
		return false;
	procs_changed();
	return true;
}

/*
 * The mappings of tgid changed: read them, or forget them and ask user
 * space for them at once.
 */
static __always_inline void mappings_changed(__u32 tgid)
{
	__u64 now = bpf_ktime_get_ns();
	__u32 zero = 0;
	bool done;

	bpf_map_update_elem(&bstack_cfi_changed, &tgid, &now, BPF_ANY);
	procs_changed();

	if (nest_enter(bpf_map_lookup_elem(&bstack_stats, &zero))) {
		done = read_mappings(tgid);
		nest_exit();
		if (done)
			return;
	}
	bpf_map_delete_elem(&bstack_cfi_procs, &tgid);
	procs_changed();
	bpf_map_delete_elem(&bstack_cfi_asked, &tgid);
	ask_mappings(tgid);
}

/*
 * Attached by user space to _dl_debug_state() of each dynamic linker the
 * processes use: the function debuggers break on, which the dynamic
 * linker calls before and after dlopen() or dlclose() change the link map.
 * Code may now be mapped where other code was.
 */
SEC("uprobe")
int on_dl_change(struct pt_regs *ctx)
{
	if (cfi && enabled && task_selected())
		mappings_changed(bpf_get_current_pid_tgid() >> 32);
	return 0;
}

/* an exec replaces the mappings: ask for the new ones at once */
SEC("tp_btf/sched_process_exec")
int on_exec(u64 *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	if (!cfi || !enabled || !task_selected())
		return 0;
	mappings_changed(tgid);
	return 0;
}

/*
 * Forget a process (the filter's entry, its mappings) when its task is
 * freed, not when it starts to exit:
 * the exit path tears its memory down (exit_mm()), which is real cost, and
 * recent kernels trace sched_process_exit before it.  The filter stays
 * small, and a reused pid is not followed: pids are handed out in turn, so
 * one is not reused in the grace period between its release and the free.
 */
SEC("tp_btf/sched_process_free")
int on_free(u64 *ctx)
{
	struct task_struct *task = (struct task_struct *)ctx[0];
	__u32 pid;

	if (task->pid != task->tgid)
		return 0;
	pid = task->tgid;
	/* its mappings: the tables of files no process maps any more can go */
	if (cfi && !bpf_map_delete_elem(&bstack_cfi_procs, &pid)) {
		__sync_fetch_and_add(&procs_freed, 1);
		procs_changed();
	}
	if (has_task && uses_tgid)
		bpf_map_delete_elem(&bstack_task_filter, &pid);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
