// SPDX-License-Identifier: GPL-2.0
/*
 * A module for the perf bstack tests (make kernel-check): writing N to
 * /proc/bstack_testmod spins for N milliseconds in this module's text, so
 * that samples of the writer have kernel frames in a module, with known
 * function names, to take as build-id + offset and to resolve.
 */
#include <linux/jiffies.h>
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/proc_fs.h>
#include <linux/sched.h>
#include <linux/uaccess.h>

#define BSTACK_TESTMOD_MAX_MS	10000

static struct proc_dir_entry *bstack_testmod_entry;
static unsigned long bstack_testmod_sink;

/* noinline: each function must be a frame of its own on the stacks */
static noinline void bstack_testmod_leaf(void)
{
	int i;

	for (i = 0; i < 1000; i++)
		WRITE_ONCE(bstack_testmod_sink, READ_ONCE(bstack_testmod_sink) + i);
}

static noinline void bstack_testmod_spin(unsigned int ms)
{
	unsigned long end = jiffies + msecs_to_jiffies(ms);

	while (time_before(jiffies, end)) {
		bstack_testmod_leaf();
		cond_resched();
	}
}

static ssize_t bstack_testmod_write(struct file *file, const char __user *buf,
				    size_t count, loff_t *ppos)
{
	unsigned int ms;
	int err;

	err = kstrtouint_from_user(buf, count, 0, &ms);
	if (err)
		return err;
	if (ms > BSTACK_TESTMOD_MAX_MS)
		return -EINVAL;
	bstack_testmod_spin(ms);
	return count;
}

static const struct proc_ops bstack_testmod_ops = {
	.proc_write	= bstack_testmod_write,
	.proc_lseek	= noop_llseek,
};

static int __init bstack_testmod_init(void)
{
	bstack_testmod_entry = proc_create("bstack_testmod", 0200, NULL, &bstack_testmod_ops);
	return bstack_testmod_entry ? 0 : -ENOMEM;
}

static void __exit bstack_testmod_exit(void)
{
	proc_remove(bstack_testmod_entry);
}

module_init(bstack_testmod_init);
module_exit(bstack_testmod_exit);
MODULE_DESCRIPTION("Kernel frames in a module, for the perf bstack tests");
MODULE_LICENSE("GPL");
