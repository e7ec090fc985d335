// SPDX-License-Identifier: GPL-2.0
/*
 * perf bstack: unwind tables kept in the build-id cache, beside the
 * binary they were built from.
 */
#define pr_fmt(fmt) "perf bstack: " fmt

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/stat.h>
#include <linux/bpf.h>
#include <internal/lib.h>

#include "util/bstack-cfi.h"
#include "util/build-id.h"
#include "util/debug.h"
#include "bpf_skel/bstack.h"

/*
 * A table kept beside its binary in the build-id cache, so that the next
 * recording reads it instead of building it again (libc's, perl's, a
 * hundred milliseconds of libdw each): this header, then the rows.  For
 * this machine's perf: native byte order and row layout.  The version
 * changes with anything that makes the rows of a binary other rows.
 */
#define CFI_CACHE_NAME		"bstack-cfi"
#define CFI_CACHE_MAGIC		0x4946434b54534250ULL	/* "PBSTKCFI" */
#define CFI_CACHE_VERSION	2

struct cfi_cache_header {
	u64	magic;
	u32	version;
	u32	row_size;
	u64	nr;
};

/* The table's path in the build-id cache: beside the binary's "elf" */
static int cfi_cache_path(const struct bpf_bstack_cfi_file *f, char *path, size_t size)
{
	char sbid[SBUILD_ID_SIZE], link[PATH_MAX];
	struct build_id bid;

	build_id__init(&bid, f->build_id, f->build_id_size);
	build_id__sprintf(&bid, sbid);
	if (!build_id_cache__linkname(sbid, link, sizeof(link)) ||
	    (size_t)snprintf(path, size, "%s/" CFI_CACHE_NAME, link) >= size)
		return -ENAMETOOLONG;
	return 0;
}

/* Rows of a table are in the order of their offsets: anything else is damage */
static bool rows_sorted(const struct bpf_bstack_cfi_row *rows, size_t nr)
{
	size_t i;

	for (i = 1; i < nr; i++)
		if (rows[i].offset < rows[i - 1].offset)
			return false;
	return true;
}

/*
 * Read the cached table of f into *rowsp: its number of rows, or a
 * negative error (none, damaged, another layout: the table is built
 * instead).
 */
ssize_t bstack_cfi_cache__read(const struct bpf_bstack_cfi_file *f,
			       struct bpf_bstack_cfi_row **rowsp)
{
	struct bpf_bstack_cfi_row *rows = NULL;
	struct cfi_cache_header hdr;
	char path[PATH_MAX];
	struct stat st;
	ssize_t err = -EINVAL;
	size_t len;
	int fd;

	if (cfi_cache_path(f, path, sizeof(path)))
		return -ENAMETOOLONG;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || readn(fd, &hdr, sizeof(hdr)) != sizeof(hdr) ||
	    hdr.magic != CFI_CACHE_MAGIC || hdr.version != CFI_CACHE_VERSION ||
	    hdr.row_size != sizeof(*rows) || hdr.nr > UINT32_MAX ||
	    (u64)st.st_size != sizeof(hdr) + hdr.nr * sizeof(*rows))
		goto out;
	len = hdr.nr * sizeof(*rows);
	rows = malloc(len ?: 1);
	if (!rows) {
		err = -ENOMEM;
		goto out;
	}
	if (readn(fd, rows, len) == (ssize_t)len && rows_sorted(rows, hdr.nr)) {
		*rowsp = rows;
		rows = NULL;
		err = hdr.nr;
	}
out:
	free(rows);
	close(fd);
	if (err == -EINVAL)
		pr_debug("unwind table %s: damaged or of another perf, built again\n", path);
	return err;
}

/* Keep a table built for f in the build-id cache: written aside, then renamed */
void bstack_cfi_cache__write(const struct bpf_bstack_cfi_file *f,
			     const struct bpf_bstack_cfi_row *rows, size_t nr)
{
	struct cfi_cache_header hdr = {
		.magic		= CFI_CACHE_MAGIC,
		.version	= CFI_CACHE_VERSION,
		.row_size	= sizeof(*rows),
		.nr		= nr,
	};
	char path[PATH_MAX], tmp[PATH_MAX + 16];
	size_t len = nr * sizeof(*rows);
	bool ok;
	int fd;

	if (cfi_cache_path(f, path, sizeof(path)))
		return;
	snprintf(tmp, sizeof(tmp), "%s.%d", path, getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	ok = writen(fd, &hdr, sizeof(hdr)) == sizeof(hdr) &&
	     writen(fd, rows, len) == (ssize_t)len;
	if (close(fd) || !ok || rename(tmp, path)) {
		pr_debug("cannot keep the unwind table %s: %m\n", path);
		unlink(tmp);
	}
}
