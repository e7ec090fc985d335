// SPDX-License-Identifier: GPL-2.0
/*
 * Workload for the perf bstack event tests: functions called an exact
 * number of times (uprobes, one of them at a 5-byte nop on x86_64),
 * short-lived children forked and exec'd from known functions
 * (tracepoints), and a thread that sleeps in a known function for a known
 * time (off-CPU).  Frame pointers everywhere, as in bstack_work, but in
 * the nop function, a leaf that pushes nothing.  With DEPTH, the calls
 * are made from that many frames of recursion: a stack deeper than the
 * one perf bstack asks for first.  With "twins", the calls alternate, two
 * by two, between two callers of the same code.
 *
 * usage: bstack_events CALLS CHILDREN SLEEP_MS [DEPTH | twins]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <sys/wait.h>

/*
 * glibc's fork() and nanosleep() have no frame pointer (and fork() reuses
 * rbp): a stack taken in their system calls would lose the function that
 * called them.  On x86_64 make the system calls from the known functions
 * themselves, so that their frame is the first one.
 */
#if defined(__x86_64__)
#define bstack_events_syscall(nr, a1, a2) ({				\
	long __ret;							\
	asm volatile("syscall" : "=a"(__ret) : "a"(nr), "D"(a1), "S"(a2)	\
		     : "rcx", "r11", "memory");				\
	__ret;								\
})
#define bstack_events_fork()		((pid_t)bstack_events_syscall(SYS_fork, 0, 0))
#define bstack_events_nanosleep(ts)	bstack_events_syscall(SYS_nanosleep, ts, NULL)
#else
#define bstack_events_fork()		fork()
#define bstack_events_nanosleep(ts)	nanosleep(ts, NULL)
#endif

/* the uprobe target: called exactly CALLS times */
void bstack_events_target(unsigned long i)
{
	asm volatile("" : : "r"(i) : "memory");
}

#if defined(__x86_64__)
/*
 * The other uprobe target, called CALLS times too: its first instruction
 * is a 5-byte nop, where USDT probes built for it put theirs.  Linux 6.18
 * takes a uprobe there through a call to a trampoline and a system call
 * instead of an int3 trap, and the probed task's registers are rebuilt
 * for the consumers: the stack walk starts from them.
 */
__attribute__((naked)) void bstack_events_nop5(unsigned long i)
{
	asm(".byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n\t"
	    "ret\n\t");
}
#else
void bstack_events_nop5(unsigned long i)
{
	asm volatile("" : : "r"(i) : "memory");
}
#endif

void bstack_events_caller(unsigned long calls)
{
	unsigned long i;

	for (i = 0; i < calls; i++) {
		bstack_events_target(i);
		bstack_events_nop5(i);
	}
}

/*
 * Twins: the same code twice, called from one call site.  The target's
 * hits from either have the same registers and stack but for one word,
 * the return address into the twin: a stack recalled from the last hit
 * on the strength of the registers alone would be the other twin's.
 */
void bstack_events_twin_a(unsigned long i)
{
	bstack_events_target(i);
	asm volatile("" : : : "memory");	/* no tail call */
}

void bstack_events_twin_b(unsigned long i)
{
	bstack_events_target(i);
	asm volatile("" : : : "memory");
}

void bstack_events_twins(unsigned long calls)
{
	void (*twin)(unsigned long i);
	unsigned long i;

	for (i = 0; i < calls; i++) {
		twin = (i >> 1) & 1 ? bstack_events_twin_b : bstack_events_twin_a;
		asm("" : "+r"(twin));	/* one call site, through a register */
		twin(i);
	}
}

void bstack_events_deep(unsigned long depth, unsigned long calls)
{
	if (depth)
		bstack_events_deep(depth - 1, calls);
	else
		bstack_events_caller(calls);
	asm volatile("" : : : "memory");	/* no tail call: each level keeps its frame */
}

/*
 * Runs in the child: sys_enter_execve is taken here, before the new image.
 * It returns (on failure), so that its call is not the last instruction of
 * its caller, whose frame would then point past its end.
 */
int bstack_events_exec_site(void)
{
	execl("/bin/true", "true", (char *)NULL);
	return 127;
}

/* sched_process_fork is taken in the parent, here */
void bstack_events_fork_site(void)
{
	pid_t pid = bstack_events_fork();
	int status;

	if (pid == 0)
		_exit(bstack_events_exec_site());
	if (pid > 0)
		waitpid(pid, &status, 0);
}

void bstack_events_sleep_site(unsigned long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	bstack_events_nanosleep(&ts);
}

static void *bstack_events_sleeper(void *arg)
{
	bstack_events_sleep_site((unsigned long)arg);
	return NULL;
}

int main(int argc, char **argv)
{
	unsigned long children, depth, i;
	pthread_t thread;

	if (argc < 4) {
		fprintf(stderr, "usage: %s CALLS CHILDREN SLEEP_MS [DEPTH | twins]\n", argv[0]);
		return 2;
	}
	if (pthread_create(&thread, NULL, bstack_events_sleeper,
			   (void *)strtoul(argv[3], NULL, 0)))
		return 1;
	depth = argc > 4 ? strtoul(argv[4], NULL, 0) : 0;
	if (argc > 4 && !strcmp(argv[4], "twins"))
		bstack_events_twins(strtoul(argv[1], NULL, 0));
	else if (depth)
		bstack_events_deep(depth - 1, strtoul(argv[1], NULL, 0));
	else
		bstack_events_caller(strtoul(argv[1], NULL, 0));
	children = strtoul(argv[2], NULL, 0);
	for (i = 0; i < children; i++)
		bstack_events_fork_site();
	pthread_join(thread, NULL);
	return 0;
}
