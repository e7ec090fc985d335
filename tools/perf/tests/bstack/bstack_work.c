// SPDX-License-Identifier: GPL-2.0
/*
 * Workload for the perf bstack tests: a main loop, short-lived fork+exec
 * children running bstack_child, and one or two libraries that are, in
 * turn, dlopen()ed, used and dlclose()d.  Built with frame pointers so
 * that every function below shows up in user stacks.
 *
 * usage: bstack_work SECONDS CHILD_BINARY LIBRARY [OTHER_LIBRARY]
 *
 * With BSTACK_WORK_CPU_FILE set, the CPU time it and its children used, in
 * milliseconds, and the number of children it ran are written there at the
 * end: what a sampler of this workload can have samples of, whatever else
 * the machine was doing.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/wait.h>

/*
 * Loop turns of each of the main loop's and a library's spins, about 3 ms
 * each: at 99 Hz, a 3-second run has some 20 samples in each (with 3 M
 * turns, 5: one run in 150 had none in the library)
 */
#define BSTACK_WORK_SPIN	12000000UL

static double bstack_work_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

void bstack_work_leaf(unsigned long n)
{
	unsigned long i;

	for (i = 0; i < n; i++)
		asm volatile("" : : "r"(i * 7) : "memory");
}

void bstack_work_middle(unsigned long n)
{
	bstack_work_leaf(n);
}

static unsigned long bstack_work_children;

/* 40 ms: at 99 Hz, 1 child in 50 has no sample */
static void bstack_work_child(const char *child)
{
	pid_t pid = fork();
	int status;

	if (pid == 0) {
		execl(child, child, "40", (char *)NULL);
		_exit(127);
	}
	if (pid > 0) {
		waitpid(pid, &status, 0);
		bstack_work_children++;
	}
}

static void bstack_work_library(const char *lib, const char *spin)
{
	void (*fn)(unsigned long n);
	void *h = dlopen(lib, RTLD_NOW);

	if (!h) {
		/* the tests then miss the library's frames: say why */
		fprintf(stderr, "bstack_work: %s\n", dlerror());
		return;
	}
	fn = (void (*)(unsigned long n))dlsym(h, spin);
	if (fn)
		fn(BSTACK_WORK_SPIN);
	dlclose(h);
}

/*
 * Loaded where the first library was, just after it was unloaded: its own
 * caller tells in every stack which of the two a frame must be in.
 */
static void bstack_work_other_library(const char *lib)
{
	bstack_work_library(lib, "bstack_lib_other_spin");
	asm volatile("" : : : "memory");	/* no tail call: keep this frame */
}

static long bstack_work_cpu_ms(int who)
{
	struct rusage ru;

	if (getrusage(who, &ru))
		return 0;
	return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
}

static void bstack_work_write_cpu(void)
{
	const char *path = getenv("BSTACK_WORK_CPU_FILE");
	FILE *f;

	if (!path)
		return;
	f = fopen(path, "w");
	if (!f) {
		perror(path);
		return;
	}
	fprintf(f, "%ld %lu\n", bstack_work_cpu_ms(RUSAGE_SELF) +
		bstack_work_cpu_ms(RUSAGE_CHILDREN), bstack_work_children);
	fclose(f);
}

int main(int argc, char **argv)
{
	double end;

	if (argc < 4) {
		fprintf(stderr, "usage: %s SECONDS CHILD LIBRARY [OTHER_LIBRARY]\n", argv[0]);
		return 2;
	}
	end = bstack_work_now() + atof(argv[1]);
	while (bstack_work_now() < end) {
		bstack_work_middle(BSTACK_WORK_SPIN);
		bstack_work_child(argv[2]);
		bstack_work_library(argv[3], "bstack_lib_spin");
		if (argc > 4)
			bstack_work_other_library(argv[4]);
	}
	bstack_work_write_cpu();
	return 0;
}
