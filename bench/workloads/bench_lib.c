// SPDX-License-Identifier: GPL-2.0
/* The library of the dlopen workload. */
void bench_lib_leaf(unsigned long n)
{
	unsigned long i;

	for (i = 0; i < n; i++)
		asm volatile("" : : "r"(i) : "memory");
}

void bench_lib_spin(unsigned long n)
{
	bench_lib_leaf(n);
}
