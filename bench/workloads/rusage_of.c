// SPDX-License-Identifier: GPL-2.0
/*
 * rusage_of FILE CMD [ARG...]: run CMD and write the CPU time it and its
 * children used, in seconds, to FILE.  Under a profiler that runs it, the
 * profiler's own CPU time is then the children's total less this.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct rusage ru;
	int status;
	FILE *f;
	pid_t pid;

	if (argc < 3) {
		fprintf(stderr, "usage: rusage_of FILE CMD [ARG...]\n");
		return 2;
	}
	pid = fork();
	if (pid < 0)
		return 2;
	if (!pid) {
		execvp(argv[2], argv + 2);
		_exit(127);
	}
	if (wait4(pid, &status, 0, &ru) < 0)
		return 2;
	f = fopen(argv[1], "w");
	if (!f)
		return 2;
	fprintf(f, "%.6f\n", ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
		(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6);
	fclose(f);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
