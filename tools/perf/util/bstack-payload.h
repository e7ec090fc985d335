/* SPDX-License-Identifier: GPL-2.0 */
#ifndef PERF_UTIL_BSTACK_PAYLOAD_H
#define PERF_UTIL_BSTACK_PAYLOAD_H

/*
 * perf bstack: the payload of stacks sampled by BPF as (build-id, file
 * offset) frames, and its decoder.
 *
 * "bstack" elsewhere in perf means the branch stack; everything here is
 * prefixed bpf_bstack to keep the two apart.
 *
 * The samples are stored in perf.data as PERF_RECORD_SAMPLEs of a
 * bpf-output event named BPF_BSTACK_EVENT whose PERF_SAMPLE_RAW data is a
 * versioned payload, one record per sample:
 *
 *   STACK  a unique stack, written once: its id, its kind and its frames,
 *          user frames exactly as the kernel returned them (struct
 *          bpf_stack_build_id: status, 20-byte build-id, offset or IP),
 *          kernel frames as IPs;
 *   COUNT  how many samples hit {pid, tid, cpu, comm, user stack, kernel
 *          stack}, with the time of the first and last hit;
 *   COUNTS the COUNTs of a drain packed together, column by column, the
 *          small numbers as varints: a busy recording is mostly COUNTs
 *          of short-lived tasks, whose stack ids and times compress
 *          better side by side than record by record;
 *   STATS  the recorder's counters (samples, lost stacks per cause, IP
 *          fallback frames), cumulative, written at each drain;
 *   EVENT  an event stacks were taken at: its index (the event of COUNT
 *          records), its kind and its name, written once.  A recording
 *          without EVENT records has one sampling event, index 0.
 *   HOST   in a merge of recordings (perf bstack merge): a recording
 *          machine, its index and what its header said of it.  The pid
 *          and tid of its COUNT and side-band records carry the index in
 *          bits BPF_BSTACK_HOST_SHIFT and up, so that the tasks of two
 *          machines never meet; a recording without HOST records is of
 *          one machine, index 0.
 *
 * All fields are in the byte order of the recording machine; readers pass
 * needs_swap to bpf_bstack__decode().  See perf.data-file-format.txt.
 */
#include <stdbool.h>
#include <stddef.h>
#include <linux/compiler.h>
#include <linux/types.h>

#define BPF_BSTACK_EVENT		"bstack"
#define BPF_BSTACK_PAYLOAD_VERSION	1
#define BPF_BSTACK_MAX_FRAMES		1024	/* accepted from a file */
#define BPF_BSTACK_MAX_STATS		64

enum bpf_bstack_rec_type {
	BPF_BSTACK_REC_STACK = 1,
	BPF_BSTACK_REC_COUNT = 2,
	BPF_BSTACK_REC_STATS = 3,
	BPF_BSTACK_REC_EVENT = 4,
	BPF_BSTACK_REC_HOST = 5,
	BPF_BSTACK_REC_COUNTS = 6,
};

/* pids are below 1 << 22 (PID_MAX_LIMIT); pid_t stays positive */
#define BPF_BSTACK_HOST_SHIFT		22
#define BPF_BSTACK_MAX_HOSTS		512
#define BPF_BSTACK_HOST_NAME_LEN	64

static inline u32 bpf_bstack__host_of(u32 pid)
{
	return pid == (u32)-1 ? 0 : pid >> BPF_BSTACK_HOST_SHIFT;
}

#define BPF_BSTACK_MAX_EVENTS		64
#define BPF_BSTACK_EVENT_NAME_LEN	64
#define BPF_BSTACK_OFFCPU_EVENT		"offcpu-time"

enum bpf_bstack_event_kind {
	BPF_BSTACK_EVENT_SAMPLE		= 1,	/* a sampling event: counts are samples */
	BPF_BSTACK_EVENT_TRACEPOINT	= 2,	/* counts are hits */
	BPF_BSTACK_EVENT_UPROBE		= 3,	/* counts are hits */
	BPF_BSTACK_EVENT_OFFCPU		= 4,	/* counts are nanoseconds blocked */
};

enum bpf_bstack_stack_kind {
	BPF_BSTACK_STACK_USER	= 1,	/* struct bpf_bstack_frame[] */
	BPF_BSTACK_STACK_KERNEL	= 2,	/* u64 ip[] */
	BPF_BSTACK_STACK_USER_IP = 3,	/* u64 ip[]: user stack without build-ids */
	BPF_BSTACK_STACK_KERNEL_BID = 4,	/* struct bpf_bstack_frame[]: kernel frames
						 * with BPF_F_KERNEL_BUILD_ID
						 */
};

/* the kernel's struct bpf_stack_build_id, spelled out for the file format */
struct bpf_bstack_frame {
	s32	status;			/* BPF_STACK_BUILD_ID_VALID or _IP */
	u8	build_id[20];
	u64	offset;			/* file offset (VALID) or IP */
};

struct bpf_bstack_rec_hdr {
	u16	version;
	u16	type;
	u32	size;			/* of the whole record, header included */
};

struct bpf_bstack_rec_stack {
	struct bpf_bstack_rec_hdr hdr;
	u64	id;
	u32	kind;
	u32	nr;
	/* nr frames follow */
};

struct bpf_bstack_rec_count {
	struct bpf_bstack_rec_hdr hdr;
	u64	user_stack;		/* STACK id, 0: none */
	u64	kern_stack;
	u64	count;		/* samples, hits or ns: see the event's kind */
	u64	first_ns;		/* CLOCK_MONOTONIC */
	u64	last_ns;
	u32	pid;
	u32	tid;
	u32	cpu;
	u32	event;			/* EVENT index */
	char	comm[16];
};

/*
 * nr COUNTs sorted by first_ns: two columns of u64 stack ids (user, then
 * kernel), then LEB128 varints column by column: count, first_ns (from
 * the previous one, the first from base_ns), last_ns - first_ns, pid,
 * tid - pid (zigzag), cpu and event; then each comm, NUL-terminated; zero
 * padding to 8 bytes.  Decoded with bpf_bstack__counts_next().
 */
struct bpf_bstack_rec_counts {
	struct bpf_bstack_rec_hdr hdr;
	u32	nr;
	u32	reserved;
	u64	base_ns;
	u64	stack[];		/* 2 * nr */
};

/* what a COUNT takes at most in a COUNTS record: ids, varints, comm */
#define BPF_BSTACK_PACKED_COUNT_MAX	(2 * 8 + 3 * 10 + 4 * 5 + 16)
/* as many as always fit a perf sample (a u16 size) with room to spare */
#define BPF_BSTACK_COUNTS_PER_RECORD	700
#define BPF_BSTACK_COUNTS_MAX_SIZE	(sizeof(struct bpf_bstack_rec_counts) + 7 + \
					 BPF_BSTACK_COUNTS_PER_RECORD * BPF_BSTACK_PACKED_COUNT_MAX)

struct bpf_bstack_counts_iter {
	const struct bpf_bstack_rec_counts *rec;
	const u8	*col[8];	/* where the next value of each column is */
	const u8	*end;
	u32		i;
	u64		first_ns;
};

struct bpf_bstack_rec_stats {
	struct bpf_bstack_rec_hdr hdr;
	u32	nr;
	u32	reserved;
	u64	stat[];			/* indexed by enum bpf_bstack_stat */
};

struct bpf_bstack_rec_event {
	struct bpf_bstack_rec_hdr hdr;
	u32	index;
	u32	kind;			/* enum bpf_bstack_event_kind */
	char	name[BPF_BSTACK_EVENT_NAME_LEN];	/* NUL-terminated */
};

struct bpf_bstack_rec_host {
	struct bpf_bstack_rec_hdr hdr;
	u32	index;
	u32	reserved;
	u64	start_ns;		/* wall-clock time of its first sample, 0: unknown */
	u64	samples;		/* what its recorder counted */
	char	hostname[BPF_BSTACK_HOST_NAME_LEN];	/* NUL-terminated, all three */
	char	os_release[BPF_BSTACK_HOST_NAME_LEN];
	char	arch[16];
};

static inline struct bpf_bstack_frame *
bpf_bstack__user_frames(struct bpf_bstack_rec_stack *stack)
{
	return (struct bpf_bstack_frame *)(stack + 1);
}

static inline u64 *bpf_bstack__kernel_ips(struct bpf_bstack_rec_stack *stack)
{
	return (u64 *)(stack + 1);
}

size_t bpf_bstack__stack_size(u32 kind, u32 nr);
size_t bpf_bstack__stats_size(u32 nr);
void bpf_bstack__init_hdr(struct bpf_bstack_rec_hdr *hdr, u16 type, u32 size);
void bpf_bstack__swap(void *rec, bool to_host);
int bpf_bstack__decode(const void *raw, u32 raw_size, bool needs_swap,
		       struct bpf_bstack_rec_hdr **rec, void **copy);
size_t bpf_bstack__pack_counts(struct bpf_bstack_rec_counts *rec, size_t size,
			       const struct bpf_bstack_rec_count *count, u32 nr);
void bpf_bstack__counts_begin(struct bpf_bstack_counts_iter *it,
			      const struct bpf_bstack_rec_counts *rec);
int bpf_bstack__counts_next(struct bpf_bstack_counts_iter *it, struct bpf_bstack_rec_count *out);
const char *bpf_bstack__strerror(int err);
const char *bpf_bstack__stat_name(int stat);
u64 bpf_bstack__lost_stacks(const u64 *stat, bool user);
const char *bpf_bstack__event_kind_name(u32 kind);

#endif /* PERF_UTIL_BSTACK_PAYLOAD_H */
