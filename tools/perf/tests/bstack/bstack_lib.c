// SPDX-License-Identifier: GPL-2.0
/* A library the perf bstack workload dlopen()s, calls and dlclose()s. */

void bstack_lib_leaf(unsigned long n)
{
	unsigned long i;

	for (i = 0; i < n; i++)
		asm volatile("" : : "r"(i * 13) : "memory");
}

void bstack_lib_spin(unsigned long n)
{
	bstack_lib_leaf(n);
}
