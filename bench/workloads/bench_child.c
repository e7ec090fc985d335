// SPDX-License-Identifier: GPL-2.0
/* The short-lived child of the churn workload: a little work, then exit. */
void bench_child_leaf(unsigned long n)
{
	unsigned long i;

	for (i = 0; i < n; i++)
		asm volatile("" : : "r"(i) : "memory");
}

int main(void)
{
	bench_child_leaf(300000);
	return 0;
}
