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
/*
 * BPF programs of ours nested on a CPU, each with scratch buffers of its
 * own: a uprobe or tp_btf program, a cpu-clock sample interrupting it,
 * and a hardware-PMU NMI interrupting both.
 */
#define BPF_BSTACK_MAX_NEST	3
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
	BPF_BSTACK_STAT_FP_STACKS,	/* user stacks walked by the kernel (frame pointers) */
	BPF_BSTACK_STAT_CFI_STACKS,	/* user stacks walked with the unwind tables */
	BPF_BSTACK_STAT_CFI_COMPLETE,	/* ... down to the bottom of the stack */
	BPF_BSTACK_STAT_CFI_NO_MAP,	/* a PC in no known mapping: left to the kernel */
	BPF_BSTACK_STAT_CFI_NO_ROW,	/* ... ended at a PC no table row covers */
	BPF_BSTACK_STAT_CFI_UNREADABLE,	/* ... ended: stack memory not readable */
	BPF_BSTACK_STAT_CFI_BAD_RULE,	/* ... ended: a rule not followed, no progress */
	BPF_BSTACK_STAT_CFI_DEPTH,	/* ... cut at the maximum depth */
	BPF_BSTACK_STAT_CFI_FP_FRAMES,	/* frames walked by frame pointer: no table */
	BPF_BSTACK_STAT_NESTED,		/* hits taken while another of ours ran on the CPU */
	BPF_BSTACK_STAT_NESTED_LOST,	/* ... nested too deep: lost */
	BPF_BSTACK_STAT_RECURSION_MISSES, /* hits the kernel did not run us for, another
					   * BPF program running (by user space)
					   */
	BPF_BSTACK_STAT_CFI_FP_GUESSED,	/* frames stepped by frame pointer where no rule was */
	BPF_BSTACK_STAT_KERN_RECALLED,	/* kernel stacks of system call entries not walked again */
	BPF_BSTACK_STAT_CFI_IN_EXEC,	/* user stacks of a task inside execve(), its old image
					 * gone: left to the kernel
					 */
	BPF_BSTACK_STAT_CFI_FP_UNLOADED, /* frames stepped by frame pointer: the table of their
					  * file was not loaded (evicted, no room), and is
					  * asked for
					  */
	/* the unwind tables, counted by user space */
	BPF_BSTACK_STAT_TABLES_LOADED,	/* tables loaded, again after they left too */
	BPF_BSTACK_STAT_TABLES_RELOADED, /* ... of files whose table had left */
	BPF_BSTACK_STAT_TABLES_RECLAIMED, /* tables of files no process mapped any more, freed */
	BPF_BSTACK_STAT_TABLES_EVICTED,	/* tables not used for a while, freed to make room */
	BPF_BSTACK_STAT_TABLES_NO_ROOM,	/* tables that found no room: walked by frame pointer */
	BPF_BSTACK_STAT_TABLES_TOO_LARGE, /* ... of more rows than all there are */
	BPF_BSTACK_STAT_TABLE_ROWS,	/* rows in use */
	BPF_BSTACK_STAT_TABLE_ROWS_MAX,	/* rows in all (--cfi-rows) */
	BPF_BSTACK_STAT_CFI_REG_UNKNOWN, /* table walks ended: the CFA is computed from a
					  * register a callee may have saved, in a
					  * caller's frame, or after a signal
					  */
	BPF_BSTACK_STAT_CFI_TRAMPOLINES, /* frames stepped through CPython's perf trampolines */
	BPF_BSTACK_STAT_CFI_ROWS_RECALLED, /* frames whose rule came from the per-CPU memo of
					    * recent rules, not the table
					    */
	BPF_BSTACK_STAT_CFI_WALKS_RECALLED, /* user stacks of the CPU's last walk, as
					     * the hit had its registers and stack
					     */
	BPF_BSTACK_STAT_MAX,
};

/*
 * The attach cookie of an event is its index; this bit, above it, marks a
 * system call entry tracepoint.  Its kernel stack is the path from the
 * system call instruction to the tracepoint, the same for every hit from
 * one user stack: it is walked once per user stack and remembered.
 */
#define BPF_BSTACK_COOKIE_SYSCALL_ENTRY	(1ULL << 32)

struct bpf_bstack_stats {
	__u64 stat[BPF_BSTACK_STAT_MAX];
};

/* The kernel's walks of user stacks that --walk-cost times */
enum bpf_bstack_walk {
	BPF_BSTACK_WALK_IP,		/* plain IPs */
	BPF_BSTACK_WALK_BUILD_ID,	/* build-id + offset */
	BPF_BSTACK_WALK_NONE,		/* no walk: what a clock read costs */
	BPF_BSTACK_WALKS,
};

/* Where a hit's time goes, as --walk-cost times it with the unwind tables */
enum bpf_bstack_part {
	BPF_BSTACK_PART_TASK,		/* the filter, the hit's task, its stats */
	BPF_BSTACK_PART_MAPPINGS,	/* the process's mappings, its registers */
	BPF_BSTACK_PART_WALK,		/* the user stack (the kernel walks it if no tables) */
	BPF_BSTACK_PART_USER_STORE,	/* the user stack hashed, and stored if new */
	BPF_BSTACK_PART_KERNEL,		/* the kernel stack, walked and stored */
	BPF_BSTACK_PART_COUNT,		/* the hit counted */
	BPF_BSTACK_PARTS,
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
 * User stacks of up to this many frames are kept in a map of their own,
 * whose values are a quarter of the size: most stacks are that short, and
 * a new one is copied whole into a new entry.
 */
#define BPF_BSTACK_SHORT_STACK	32

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

/*
 * Unwinding by the binaries' own tables (.eh_frame), for code without
 * frame pointers.  User space builds one table per file from its CFI and
 * one list of executable mappings per process; the BPF program walks the
 * stack with them and gives each frame as (build-id, file offset), as
 * bpf_get_stack(BPF_F_USER_BUILD_ID) does.
 *
 * A row covers the file offsets from its own to the next row's.  Its rule
 * gives the CFA (the caller's stack pointer); the return address is at
 * CFA - 8, and the caller's rbp at CFA - 8 * rbp when rbp is not 0.
 */
enum bpf_bstack_cfa_kind {
	BPF_BSTACK_CFA_INVALID,		/* no rule the walk can follow: the walk ends */
	BPF_BSTACK_CFA_RSP,		/* CFA = rsp + offset */
	BPF_BSTACK_CFA_RBP,		/* CFA = rbp + offset */
	BPF_BSTACK_CFA_PLT,		/* CFA = rsp + 8, + 8 once (rip & 15) >= offset */
	BPF_BSTACK_CFA_SIGNAL,		/* a signal trampoline: registers in the ucontext */
	BPF_BSTACK_CFA_STOP,		/* return address undefined: the bottom */
	BPF_BSTACK_CFA_NO_FDE,		/* code no FDE covers (.plt.got, entry code):
					 * CFA = rsp + 8 at an interrupted
					 * instruction, else the walk ends
					 */
	BPF_BSTACK_CFA_REG,		/* CFA = register + offset (hand-written
					 * assembly), the register as the sample
					 * left it (see reg_value())
					 */
	BPF_BSTACK_CFA_DEREF,		/* CFA = the word at register + N, plus M:
					 * a stack pointer saved in the frame
					 */
	BPF_BSTACK_CFA_DEREF_INDEXED,	/* CFA = the word at rsp + N + register
					 * times 8, plus M
					 */
};

/*
 * cfa_kind holds the kind in its low 4 bits, and the DWARF number of the
 * register the REG and DEREF kinds read in its high 4 (x86-64: 0 rax,
 * 1 rdx, 2 rcx, 3 rbx, 4 rsi, 5 rdi, 6 rbp, 7 rsp, 8-15 r8-r15).  The
 * DEREF kinds' cfa_offset holds N in its low 11 bits, signed, and M / 8
 * in its high 5.
 */
#define BPF_BSTACK_CFA_KIND(k)		((k) & 15)
#define BPF_BSTACK_CFA_REGNO(k)		((k) >> 4)
#define BPF_BSTACK_CFA_DEREF_N(o)	((int)((__u32)(o) << 21) >> 21)
#define BPF_BSTACK_CFA_DEREF_M(o)	(((o) >> 11) * 8)
#define BPF_BSTACK_CFA_DEREF_N_MIN	(-1024)
#define BPF_BSTACK_CFA_DEREF_N_MAX	1023
#define BPF_BSTACK_CFA_DEREF_M_MAX	248

struct bpf_bstack_cfi_row {
	__u32 offset;			/* file offset of the first byte covered */
	__u8 cfa_kind;			/* enum bpf_bstack_cfa_kind */
	__u8 rbp;			/* rbp saved at CFA - 8 * rbp; 0: unchanged */
	__u16 cfa_offset;
};

/*
 * The rows of a file's table are found by the 4 KiB page of the file that
 * holds an offset: a page's rows lie together, the row that covers the
 * page's start first, but the pages of a file lie anywhere in the rows, so
 * that tables come and go without the rows breaking into pieces too small
 * for the next one.  A page has 2^12 + 1 rows at the most, a hundred or so
 * in most code: the walk's search of them reads a few cache lines.
 */
#define BPF_BSTACK_CFI_PAGE_SHIFT	12

struct bpf_bstack_cfi_page {
	__u32 first;			/* rows [first, first + nr) of bstack_cfi_rows */
	__u32 nr;
};

/*
 * A file with a table: pages [first, first + nr_pages) of bstack_cfi_pages,
 * the first at file offset base.  A table may not be there: found no room,
 * or evicted, not used for a while, to make room for others.  The BPF
 * program asks for it when the file's code runs.
 */
#define BPF_BSTACK_CFI_FILE_UNLOADED	(1U << 0)

struct bpf_bstack_cfi_file {
	__u8 build_id[20];
	__u32 build_id_size;		/* 0: frames as IPs */
	__u32 first;			/* of its pages */
	__u32 nr;			/* rows in all; 0: no table, walk by frame pointer */
	__u32 nr_pages;
	__u32 base;			/* file offset of its first page */
	__u32 used;			/* bpf_ktime_get_ns() >> 30 when last walked */
	__u32 asked;			/* bpf_ktime_get_ns() >> 24 when last asked for */
	__u32 flags;			/* BPF_BSTACK_CFI_FILE_* */
	__u32 gen;			/* a number of its own, not reused: the walk's memo of
					 * rules does not outlive the file in this slot
					 */
};

#define BPF_BSTACK_CFI_MAPS	128	/* executable mappings of a process */
#define BPF_BSTACK_CFI_NO_FILE	0xffffffffU	/* vDSO, JIT: frame pointers, IPs */

struct bpf_bstack_cfi_map {
	__u64 start;
	__u64 end;
	__u64 pgoff;			/* file offset of start */
	__u32 file;			/* index in bstack_cfi_files */
	__u32 reserved;
};

/*
 * A file by its device (the kernel's dev_t: major << 20 | minor), inode
 * and modification time (ns): a binary rebuilt in place keeps its inode,
 * not its table.  0 where the kernel's inode has no i_mtime_sec (< 6.11):
 * then the BPF program finds no file, and asks user space.
 */
struct bpf_bstack_cfi_file_id {
	__u64 dev;
	__u64 ino;
	__u64 mtime;
};

/*
 * The executable mappings of a process, sorted by address.  start_stack
 * (of /proc/PID/stat, randomized at each exec) tells whether they are
 * still those of the process's image.
 */
struct bpf_bstack_cfi_proc {
	__u32 nr;
	__u32 reserved;
	__u64 start_stack;
	__u64 read_ns;			/* bpf_ktime_get_ns() when the mappings were read */
	struct bpf_bstack_cfi_map map[BPF_BSTACK_CFI_MAPS];
};

/* The BPF program asks user space for the mappings of a process, or a table */
struct bpf_bstack_cfi_ask {
	__u32 tgid;
	__u32 file;			/* BPF_BSTACK_CFI_NO_FILE: the mappings of tgid;
					 * else the table of this file, not loaded
					 */
	__u64 time;			/* bpf_ktime_get_ns(): mappings read later will do */
};

#endif /* __BPF_SKEL_BSTACK_H */
