// SPDX-License-Identifier: GPL-2.0
/* A short-lived child for the perf bstack tests: spins for N ms, exits. */
#include <stdlib.h>
#include <time.h>


void bstack_child_leaf(void)
{
	unsigned long i;

	for (i = 0; i < 100000; i++)
		asm volatile("" : : "r"(i) : "memory");
}

void bstack_child_spin(long ms)
{
	struct timespec ts, end;

	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_nsec += (ms % 1000) * 1000000L;
	end.tv_sec += ms / 1000 + end.tv_nsec / 1000000000L;
	end.tv_nsec %= 1000000000L;
	do {
		bstack_child_leaf();
		clock_gettime(CLOCK_MONOTONIC, &ts);
	} while (ts.tv_sec < end.tv_sec ||
		 (ts.tv_sec == end.tv_sec && ts.tv_nsec < end.tv_nsec));
}

int main(int argc, char **argv)
{
	bstack_child_spin(argc > 1 ? atol(argv[1]) : 20);
	return 0;
}
