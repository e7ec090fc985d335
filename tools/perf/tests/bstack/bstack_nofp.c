// SPDX-License-Identifier: GPL-2.0
/*
 * Workload for the unwinding tests of perf bstack, built with gcc -O2
 * -fomit-frame-pointer -fno-inline -fno-optimize-sibling-calls: no
 * function keeps rbp as a frame pointer, so only the unwind tables
 * (.eh_frame) lead from a sample back to main, and every function below
 * is a frame of its own.
 *
 *   bstack_nofp SECONDS [signal | deep]
 *
 * spins in nofp_compare(), a callback called by libc's qsort(), under
 * nofp_sort() and nofp_outer().  With "signal", the same work runs in a
 * SIGALRM handler too, whose stacks go through the kernel's signal frame.
 * With "deep", under NOFP_DEEP calls of nofp_deep(): stacks of more than
 * 50 frames.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#define NR_VALUES	4096


static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int nofp_compare(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b, i;

	for (i = 0; i < 64; i++)	/* make the callback the hot spot */
		asm volatile("" : : "r"(i ^ x) : "memory");
	return (x > y) - (x < y);
}

/*
 * Sort nr pseudo-random values.  No rand(): it takes a lock, and the
 * signal handler sorts too.
 */
void nofp_sort(int *values, int nr)
{
	static unsigned int seed = 1;
	int i;

	for (i = 0; i < nr; i++) {
		seed = seed * 1103515245 + 12345;
		values[i] = seed >> 8;
	}
	qsort(values, nr, sizeof(values[0]), nofp_compare);
}

void nofp_outer(int *values, double end)
{
	while (now() < end)
		nofp_sort(values, NR_VALUES);
}

#define NOFP_DEEP	48

int nofp_deep(int *values, double end, int depth)
{
	if (depth)
		return nofp_deep(values, end, depth - 1) + 1;
	nofp_outer(values, end);
	return 0;
}

/*
 * Under 1 KiB, glibc's qsort() sorts on the stack, without malloc(),
 * which a signal handler must not call.
 */
#define NR_SIGNAL_VALUES	128

void nofp_handler(int sig)
{
	int values[NR_SIGNAL_VALUES], i;

	(void)sig;
	for (i = 0; i < 400; i++)	/* a quarter of the time */
		nofp_sort(values, NR_SIGNAL_VALUES);
}

int main(int argc, char **argv)
{
	static int values[NR_VALUES];
	double seconds = argc > 1 ? atof(argv[1]) : 1;

	if (argc > 2 && !strcmp(argv[2], "signal")) {
		struct itimerval it = { { 0, 50000 }, { 0, 50000 } };

		signal(SIGALRM, nofp_handler);
		setitimer(ITIMER_REAL, &it, NULL);
	}
	if (argc > 2 && !strcmp(argv[2], "deep"))
		return nofp_deep(values, now() + seconds, NOFP_DEEP) != NOFP_DEEP;
	nofp_outer(values, now() + seconds);
	return 0;
}
