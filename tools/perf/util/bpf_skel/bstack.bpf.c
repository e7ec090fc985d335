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

/* resized from user space before load */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u64);
	__type(value, struct bpf_bstack_user_stack);
	__uint(max_entries, 1);
} bstack_user_stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u64);
	__type(value, struct bpf_bstack_kern_stack);
	__uint(max_entries, 1);
} bstack_kern_stacks SEC(".maps");

/* kernel stacks as (build-id, offset), where the kernel has BPF_F_KERNEL_BUILD_ID */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u64);
	__type(value, struct bpf_bstack_user_stack);
	__uint(max_entries, 1);
} bstack_kern_bid_stacks SEC(".maps");

/* user stacks as raw IPs, with --ip-stacks (the cost floor of bench/) */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u64);
	__type(value, struct bpf_bstack_kern_stack);
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

/* per-CPU scratch buffers: stacks are too big for the BPF stack */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct bpf_bstack_user_stack);
	__uint(max_entries, 1);
} bstack_user_buf SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct bpf_bstack_kern_stack);
	__uint(max_entries, 1);
} bstack_kern_buf SEC(".maps");

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

/* toggled while running */
int enabled;
int active_counts;

/* set before load */
const volatile int has_task;
const volatile int uses_tgid;
const volatile int has_uid;
const volatile __u32 filter_uid;
const volatile int user_stack = 1;
const volatile int kern_stack = 1;
const volatile int user_build_id = 1;
const volatile __u32 max_frames = BPF_BSTACK_MAX_STACK;
const volatile __u32 offcpu_event;
const volatile int kern_build_id = 1;
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

static __always_inline void stat_inc(struct bpf_bstack_stats *stats, int idx, __u64 n)
{
	if (stats && idx >= 0 && idx < BPF_BSTACK_STAT_MAX)
		stats->stat[idx] += n;
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

/*
 * Store a stack under its hash, once: the hash, or 0 when the map refused
 * it, full (-E2BIG) or, most likely, without memory for the entry.
 */
static __always_inline __u64 store_stack(void *map, __u64 h, void *buf,
					 struct bpf_bstack_stats *stats, int full_stat,
					 int unstored_stat)
{
	long err = bpf_map_update_elem(map, &h, buf, BPF_NOEXIST);

	if (!err || err == -EEXIST)
		return h;
	stat_inc(stats, err == -E2BIG ? full_stat : unstored_stat, 1);
	return 0;
}

/* A stack of (build-id, offset) frames: the user's, or the kernel's */
static __always_inline __u64 store_bid_stack(void *ctx, struct bpf_bstack_stats *stats,
					     bool user, __u64 kern_skip)
{
	__u64 flags = user ? BPF_F_USER_STACK | BPF_F_USER_BUILD_ID :
			     BPF_F_KERNEL_BUILD_ID | kern_skip;
	void *map = user ? (void *)&bstack_user_stacks : (void *)&bstack_kern_bid_stacks;
	__u32 zero = 0;
	struct bpf_bstack_user_stack *buf;
	__u64 h = 0xcbf29ce484222325ULL, ip_frames = 0;
	long len;
	__u32 i, nr;

	buf = bpf_map_lookup_elem(&bstack_user_buf, &zero);
	if (!buf)
		return 0;

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

	nr = len / sizeof(buf->frame[0]);
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
	return store_stack(map, h, buf, stats,
			   user ? BPF_BSTACK_STAT_USER_FULL : BPF_BSTACK_STAT_KERN_FULL,
			   user ? BPF_BSTACK_STAT_USER_UNSTORED : BPF_BSTACK_STAT_KERN_UNSTORED);
}

/* a stack of IPs: the kernel's, or the user's with --ip-stacks */
static __always_inline __u64 store_ip_stack(void *ctx, struct bpf_bstack_stats *stats,
					    void *map, __u64 flags, int err_stat,
					    int full_stat, int unstored_stat)
{
	__u32 zero = 0;
	struct bpf_bstack_kern_stack *buf;
	__u64 h = 0xcbf29ce484222325ULL;
	long len;
	__u32 i, nr;

	buf = bpf_map_lookup_elem(&bstack_kern_buf, &zero);
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
	return store_stack(map, h, buf, stats, full_stat, unstored_stat);
}

static __always_inline void count_hit(void *counts, struct bpf_bstack_key *key,
				      struct bpf_bstack_stats *stats, __u64 weight)
{
	struct bpf_bstack_count *val, init = { .count = weight, };
	__u64 now = bpf_ktime_get_ns();
	long err;

	val = bpf_map_lookup_elem(counts, key);
	if (!val) {
		init.first_ns = init.last_ns = now;
		err = bpf_map_update_elem(counts, key, &init, BPF_NOEXIST);
		if (!err)
			return;
		if (err != -EEXIST) {
			stat_inc(stats, BPF_BSTACK_STAT_COUNTS_FULL, 1);
			return;
		}
		/* another CPU inserted the same key meanwhile */
		val = bpf_map_lookup_elem(counts, key);
		if (!val) {
			stat_inc(stats, BPF_BSTACK_STAT_COUNTS_FULL, 1);
			return;
		}
	}
	__sync_fetch_and_add(&val->count, weight);
	val->last_ns = now;
}

static __always_inline void count_key(struct bpf_bstack_key *key,
				      struct bpf_bstack_stats *stats, __u64 weight)
{
	if (active_counts)
		count_hit(&bstack_counts1, key, stats, weight);
	else
		count_hit(&bstack_counts0, key, stats, weight);
}

/*
 * The stacks of the current task into key, each stored once; the first
 * kern_skip kernel frames are the BPF machinery's.
 */
static __always_inline void take_stacks(void *ctx, struct bpf_bstack_key *key,
					struct bpf_bstack_stats *stats, __u64 kern_skip)
{
	if (user_stack && user_build_id)
		key->user_stack = store_bid_stack(ctx, stats, true, 0);
	else if (user_stack)
		key->user_stack = store_ip_stack(ctx, stats, &bstack_user_ip_stacks,
						 BPF_F_USER_STACK, BPF_BSTACK_STAT_USER_ERR,
						 BPF_BSTACK_STAT_USER_FULL,
						 BPF_BSTACK_STAT_USER_UNSTORED);
	if (kern_stack && kern_build_id && !kern_build_id_failed)
		key->kern_stack = store_bid_stack(ctx, stats, false,
						  kern_skip & BPF_F_SKIP_FIELD_MASK);
	/* kern_build_id_failed may have been set just now */
	if (kern_stack && (!kern_build_id || kern_build_id_failed))
		key->kern_stack = store_ip_stack(ctx, stats, &bstack_kern_stacks,
						 kern_skip & BPF_F_SKIP_FIELD_MASK,
						 BPF_BSTACK_STAT_KERN_ERR,
						 BPF_BSTACK_STAT_KERN_FULL,
						 BPF_BSTACK_STAT_KERN_UNSTORED);
}

/* A hit of event number 'event' in the current task */
static __always_inline int take_hit(void *ctx, __u32 event)
{
	struct bpf_bstack_key key = { .event = event, };
	struct bpf_bstack_stats *stats;
	__u64 pid_tgid;
	__u32 zero = 0;

	if (!enabled || !task_selected())
		return 0;

	stats = bpf_map_lookup_elem(&bstack_stats, &zero);
	stat_inc(stats, BPF_BSTACK_STAT_SAMPLES, 1);

	pid_tgid = bpf_get_current_pid_tgid();
	key.pid = pid_tgid >> 32;
	key.tid = (__u32)pid_tgid;
	key.cpu = bpf_get_smp_processor_id();
	bpf_get_current_comm(key.comm, sizeof(key.comm));
	take_stacks(ctx, &key, stats, 0);
	count_key(&key, stats, 1);
	return 0;
}

SEC("perf_event")
int on_sample(void *ctx)
{
	return take_hit(ctx, bpf_get_attach_cookie(ctx));
}

/* attached by user space to each tracepoint of -e */
SEC("tracepoint")
int on_tracepoint(void *ctx)
{
	take_hit(ctx, bpf_get_attach_cookie(ctx));
	return 0;	/* the perf event of the tracepoint records nothing */
}

/* attached to --uprobe functions and to the uprobe events of perf probe */
SEC("uprobe")
int on_uprobe(struct pt_regs *ctx)
{
	take_hit(ctx, bpf_get_attach_cookie(ctx));
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
	take_stacks(ctx, &key, stats, 2);
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
		count_key(&key, stats, now - oc->start_ns);
	oc->start_ns = 0;
}

/* --off-cpu, as perf record --off-cpu: prev is still current here */
SEC("tp_btf/sched_switch")
int on_switch(u64 *ctx)
{
	struct task_struct *prev = (struct task_struct *)ctx[1];
	struct task_struct *next = (struct task_struct *)ctx[2];
	__u64 now;

	if (!enabled)
		return 0;
	now = bpf_ktime_get_ns();
	offcpu_start(ctx, prev, now);
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

/* forget exited processes: the filter stays small and a reused pid is not followed */
SEC("tp_btf/sched_process_exit")
int on_exit(u64 *ctx)
{
	struct task_struct *task = (struct task_struct *)ctx[0];
	__u32 pid;

	if (!has_task || !uses_tgid)
		return 0;
	if (task->pid != task->tgid)
		return 0;
	pid = task->tgid;
	bpf_map_delete_elem(&bstack_task_filter, &pid);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
