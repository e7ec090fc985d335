// SPDX-License-Identifier: GPL-2.0
/*
 * A library the perf bstack workload dlopen()s, calls and dlclose()s.  Built
 * twice: as libbstack_lib.so, and with BSTACK_LIB_OTHER as
 * libbstack_lib_other.so, the same code under other names, which the
 * workload loads where the first one was.
 */
#ifdef BSTACK_LIB_OTHER
#define bstack_lib_leaf	bstack_lib_other_leaf
#define bstack_lib_spin	bstack_lib_other_spin
#endif

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
