// SPDX-License-Identifier: GPL-2.0
/*
 * Benchmark workloads for perf bstack, each a fixed amount of work:
 *   bench_work cpu     N  nested functions, N rounds
 *   bench_work churn   N  N fork+exec of bench_child (a short-lived binary)
 *   bench_work dlopen  N  N dlopen/call/dlclose of libbench.so
 *   bench_work threads N  two threads of nested functions, N rounds each
 *   bench_work events  N  N calls of bench_event(), each a getppid() system
 *                         call: hits for a uprobe and for a tracepoint
 *   bench_work events-nop5 N  the same through bench_event_nop5(), whose
 *                         first instruction is a 5-byte nop
 * At exit it prints its own cost: "bench: wall S cpu S" (children included).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>

static char dir[4096];

void bench_leaf(unsigned long n)
{
	unsigned long i;

	for (i = 0; i < n; i++)
		asm volatile("" : : "r"(i) : "memory");
}

void bench_inner(unsigned long n)
{
	bench_leaf(n);
}

void bench_outer(unsigned long n)
{
	bench_inner(n);
}

static void run_cpu(long n)
{
	while (n-- > 0)
		bench_outer(1000000);
}

static void *thread_main(void *arg)
{
	run_cpu((long)arg);
	return NULL;
}

static void run_threads(long n)
{
	pthread_t t[2];
	int i;

	for (i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, thread_main, (void *)n);
	for (i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
}

static void run_churn(long n)
{
	char child[4200];

	snprintf(child, sizeof(child), "%s/bench_child", dir);
	while (n-- > 0) {
		pid_t pid = fork();
		int status;

		if (pid == 0) {
			execl(child, child, (char *)NULL);
			_exit(127);
		}
		if (pid > 0)
			waitpid(pid, &status, 0);
	}
}

static void run_dlopen(long n)
{
	char lib[4200];

	snprintf(lib, sizeof(lib), "%s/libbench.so", dir);
	while (n-- > 0) {
		void *h = dlopen(lib, RTLD_NOW);
		void (*fn)(unsigned long n);

		if (!h)
			exit(1);
		fn = (void (*)(unsigned long n))dlsym(h, "bench_lib_spin");
		if (fn)
			fn(200000);
		dlclose(h);
	}
}

/* the uprobe target; its system call is the tracepoint's hit */
void bench_event(unsigned long i)
{
	asm volatile("" : : "r"(i) : "memory");
	syscall(SYS_getppid);
}

/*
 * The same hit at a 5-byte nop, where USDT probes built for it put theirs:
 * since Linux 6.18 the kernel turns a uprobe on such a nop into a call to a
 * trampoline on x86-64 instead of an int3 trap, so what is left of a hit is
 * mostly what the recorder does with it.
 */
__attribute__((naked)) void bench_event_nop5(unsigned long i)
{
	asm(".byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n\t"
	    "jmp bench_event\n\t");
}

static void run_events(long n, void (*event)(unsigned long i))
{
	long i;

	for (i = 0; i < n; i++)
		event(i);
}

static double seconds(struct timeval tv)
{
	return tv.tv_sec + tv.tv_usec / 1e6;
}

int main(int argc, char **argv)
{
	struct timespec t0, t1;
	struct rusage self, kids;
	char *slash;
	long n;

	if (argc < 3) {
		fprintf(stderr, "usage: %s cpu|churn|dlopen|threads|events|events-nop5 N\n",
			argv[0]);
		return 2;
	}
	snprintf(dir, sizeof(dir), "%s", argv[0]);
	slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
	else
		snprintf(dir, sizeof(dir), ".");
	n = atol(argv[2]);

	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (!strcmp(argv[1], "cpu"))
		run_cpu(n);
	else if (!strcmp(argv[1], "churn"))
		run_churn(n);
	else if (!strcmp(argv[1], "dlopen"))
		run_dlopen(n);
	else if (!strcmp(argv[1], "threads"))
		run_threads(n);
	else if (!strcmp(argv[1], "events"))
		run_events(n, bench_event);
	else if (!strcmp(argv[1], "events-nop5"))
		run_events(n, bench_event_nop5);
	else
		return 2;
	clock_gettime(CLOCK_MONOTONIC, &t1);

	getrusage(RUSAGE_SELF, &self);
	getrusage(RUSAGE_CHILDREN, &kids);
	fprintf(stderr, "bench: wall %.6f cpu %.6f\n",
		(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9,
		seconds(self.ru_utime) + seconds(self.ru_stime) +
		seconds(kids.ru_utime) + seconds(kids.ru_stime));
	return 0;
}
