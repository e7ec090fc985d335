/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Layouts shared by bstack.bpf.c and util/bpf_bstack.c.
 *
 * Stacks are kept in hash maps keyed by a 64-bit hash of their contents
 * rather than in BPF_MAP_TYPE_STACK_TRACE maps: a stack trace map hashes
 * the raw IPs into a fixed number of buckets, so every ASLR'd short-lived
 * process takes new buckets and colliding stacks are lost with -EEXIST.
 * Hashing the (build-id, offset) frames makes the same code path of two
 * processes one stack, and a hash map only fails when it is full.
 */
#ifndef __BPF_SKEL_BSTACK_H
#define __BPF_SKEL_BSTACK_H

#define BPF_BSTACK_MAX_STACK	127
#define BPF_BSTACK_COMM_LEN	16

/* Counters kept by the BPF program, in a per-CPU array */
enum bpf_bstack_stat {
	BPF_BSTACK_STAT_SAMPLES,	/* samples that passed the filters */
	BPF_BSTACK_STAT_USER_NONE,	/* no user stack (kernel thread, idle) */
	BPF_BSTACK_STAT_USER_ERR,	/* bpf_get_stack() failed: user stack lost */
	BPF_BSTACK_STAT_KERN_ERR,	/* bpf_get_stack() failed: kernel stack lost */
	BPF_BSTACK_STAT_USER_FULL,	/* user stack map full: user stack lost */
	BPF_BSTACK_STAT_KERN_FULL,	/* kernel stack map full: kernel stack lost */
	BPF_BSTACK_STAT_COUNTS_FULL,	/* counts map full: sample lost */
	BPF_BSTACK_STAT_USER_FRAMES,	/* user frames captured */
	BPF_BSTACK_STAT_USER_IP_FRAMES,	/* of which came back as IPs */
	BPF_BSTACK_STAT_OFFCPU_LOST,	/* no task storage: off-CPU time lost */
	BPF_BSTACK_STAT_USER_UNSTORED,	/* user stack map update failed, not full */
	BPF_BSTACK_STAT_KERN_UNSTORED,	/* kernel stack map update failed, not full */
	BPF_BSTACK_STAT_MAX,
};

struct bpf_bstack_stats {
	__u64 stat[BPF_BSTACK_STAT_MAX];
};

/*
 * One count per unique {event, pid, tid, cpu, comm, user stack, kernel
 * stack}.  The event is the index user space gave the event as its BPF
 * attach cookie.
 */
struct bpf_bstack_key {
	__u64 user_stack;		/* hash of the user stack, 0: none */
	__u64 kern_stack;		/* hash of the kernel stack, 0: none */
	__u32 pid;
	__u32 tid;
	__u32 cpu;
	__u32 event;
	char comm[BPF_BSTACK_COMM_LEN];
};

struct bpf_bstack_count {
	__u64 count;			/* hits, or ns off-CPU */
	__u64 first_ns;			/* bpf_ktime_get_ns() of the first hit */
	__u64 last_ns;			/* ... and of the last one */
};

/* An off-CPU task: the stacks it blocked with, and since when */
struct bpf_bstack_offcpu {
	__u64 start_ns;			/* 0: not blocked */
	__u64 user_stack;
	__u64 kern_stack;
};

/*
 * Values of the stack maps; the maps are sized to --max-stack frames.
 * The frames past nr are left over from earlier stacks.
 */
struct bpf_bstack_user_stack {
	__u64 nr;
	struct bpf_stack_build_id frame[BPF_BSTACK_MAX_STACK];
};

struct bpf_bstack_kern_stack {
	__u64 nr;
	__u64 ip[BPF_BSTACK_MAX_STACK];
};

#endif /* __BPF_SKEL_BSTACK_H */
