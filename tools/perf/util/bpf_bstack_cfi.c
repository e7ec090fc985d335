// SPDX-License-Identifier: GPL-2.0
/*
 * perf record --bstack: load the unwind tables of the processes the BPF
 * program walks.
 *
 * The BPF program asks, through a ring buffer, for each process it has no
 * mappings of (a new one, one that exec'd, or one that mapped new code).
 * A thread reads the process's executable mappings from /proc/PID/maps,
 * builds the table of each file it has not seen (libc's once for all
 * processes), reaching the file through /proc/PID/map_files, so that
 * binaries deleted or replaced since, or in another mount namespace, are
 * read as the process maps them, and gives the BPF program the process's
 * list of mappings.  Each file also goes into the build-id cache then,
 * while a process maps it: a binary that only lived in a container's
 * mount namespace, or was deleted or replaced since, is still there for
 * the report; and so does its table, which the next recording reads from
 * there instead of building it again.
 */
#define pr_fmt(fmt) "perf bstack: " fmt

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <unistd.h>
#include <gelf.h>
#include <limits.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <linux/bpf.h>
#include <linux/compiler.h>
#include <linux/err.h>
#include <linux/kernel.h>
#include <linux/zalloc.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <internal/lib.h>

#include "util/bstack-cfi.h"
#include "util/build-id.h"
#include "util/debug.h"
#include "util/hashmap.h"
#include "util/symbol.h"
#include "util/time-utils.h"

#include "bpf_skel/bstack.h"
#include "bpf_skel/bstack.skel.h"



struct bpf_bstack_cfi {
	struct bstack_bpf	*skel;
	struct ring_buffer	*ask;
	pthread_t		thread;
	bool			running;
	int			stop_fd;	/* eventfd: the thread is to end */
	bool			save_binaries;	/* into the build-id cache */
	struct bpf_bstack_cfi_row *rows;	/* bstack_cfi_rows, mmap'ed */
	size_t			rows_size;
	u32			nr_rows, max_rows;
	u32			nr_files, max_files;
	struct hashmap		*files;		/* struct bpf_bstack_cfi_file_id * -> file index */
	struct bpf_link		*dl_links[8];	/* on each dynamic linker seen */
	int			nr_dl_links;
	/* for the summary */
	u64			nr_loads, nr_load_errors;
	u32			nr_no_table, nr_table_full, nr_too_many_maps;
	u32			nr_saved, nr_save_failed;
	u32			nr_from_cache;
	u32			nr_preloaded;	/* before the workload ran */
	u64			nr_asks_read;	/* asks the BPF program answered itself */
	struct bpf_bstack_cfi_proc *proc_buf;	/* a process's entry, looked at */
};

static size_t file_key_hash(long key, void *ctx __maybe_unused)
{
	const struct bpf_bstack_cfi_file_id *k = (const void *)key;

	return (k->dev * 0x9e3779b97f4a7c15ULL) ^ k->ino;
}

static bool file_key_equal(long a, long b, void *ctx __maybe_unused)
{
	return !memcmp((const void *)a, (const void *)b, sizeof(struct bpf_bstack_cfi_file_id));
}

/*
 * A table kept beside its binary in the build-id cache, so that the next
 * recording reads it instead of building it again (libc's, perl's, a
 * hundred milliseconds of libdw each): this header, then the rows.  For
 * this machine's perf: native byte order and row layout.  The version
 * changes with anything that makes the rows of a binary other rows.
 */
#define CFI_CACHE_NAME		"bstack-cfi"
#define CFI_CACHE_MAGIC		0x4946434b54534250ULL	/* "PBSTKCFI" */
#define CFI_CACHE_VERSION	1

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
 * Read the cached table of f into the shared array at the first free row:
 * its number of rows, or a negative error (none, damaged, another layout:
 * the table is built instead).
 */
static ssize_t read_cached_table(struct bpf_bstack_cfi *cfi, const struct bpf_bstack_cfi_file *f)
{
	struct bpf_bstack_cfi_row *rows = cfi->rows + cfi->nr_rows;
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
	    hdr.row_size != sizeof(*rows) || hdr.nr > cfi->max_rows ||
	    (u64)st.st_size != sizeof(hdr) + hdr.nr * sizeof(*rows))
		goto out;
	if (hdr.nr > cfi->max_rows - cfi->nr_rows) {
		err = -ENOSPC;
		goto out;
	}
	len = hdr.nr * sizeof(*rows);
	if (readn(fd, rows, len) == (ssize_t)len && rows_sorted(rows, hdr.nr))
		err = hdr.nr;
out:
	close(fd);
	if (err == -EINVAL)
		pr_debug("unwind table %s: damaged or of another perf, built again\n", path);
	return err;
}

/* Keep a table built for f in the build-id cache: written aside, then renamed */
static void cache_table(const struct bpf_bstack_cfi_file *f,
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

/*
 * The rows of f into the shared array, from the build-id cache or built
 * from the file open at fd, and f pointed at them
 */
static int add_file_rows(struct bpf_bstack_cfi *cfi, struct bpf_bstack_cfi_file *f, int fd)
{
	bool cached = cfi->save_binaries && f->build_id_size;
	struct bpf_bstack_cfi_row *rows = NULL;
	size_t nr = 0;
	ssize_t ret;
	int err;

	ret = cached ? read_cached_table(cfi, f) : -ENOENT;
	if (ret == -ENOSPC) {
		cfi->nr_table_full++;
		return 0;
	}
	if (ret >= 0) {
		cfi->nr_from_cache++;
		nr = ret;
		goto out;
	}
	err = bpf_bstack__cfi_table(fd, &rows, &nr, NULL);
	if (err) {
		cfi->nr_no_table++;	/* walked by frame pointer */
		return 0;
	}
	if (nr > cfi->max_rows - cfi->nr_rows) {
		cfi->nr_table_full++;
		free(rows);
		return 0;
	}
	memcpy(cfi->rows + cfi->nr_rows, rows, nr * sizeof(*rows));
	if (cached)
		cache_table(f, rows, nr);
	free(rows);
out:
	f->first = cfi->nr_rows;
	f->nr = nr;
	cfi->nr_rows += nr;
	return 0;
}

/*
 * A dynamic linker tells debuggers of each dlopen() and dlclose() by
 * calling _dl_debug_state(): follow it, so that a library loaded where
 * another one was is not unwound with the other's table.  Each dynamic
 * linker file (a container has its own) gets its uprobe once.
 */
static void follow_dynamic_linker(struct bpf_bstack_cfi *cfi, const char *path,
				  const char *name)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .func_name = "_dl_debug_state");
	const char *base = strrchr(name, '/');
	struct bpf_link *link;

	if (!base || strncmp(base + 1, "ld-", 3) || cfi->nr_dl_links == ARRAY_SIZE(cfi->dl_links))
		return;
	link = bpf_program__attach_uprobe_opts(cfi->skel->progs.on_dl_change, -1, path, 0,
					       &opts);
	if (!link) {
		pr_debug("no uprobe on _dl_debug_state of %s: %m\n", name);
		return;
	}
	cfi->dl_links[cfi->nr_dl_links++] = link;
}

/*
 * Keep the file under its path, as mapped (no " (deleted)"), in the
 * build-id cache, copied from path, the process's view of it.
 */
static void save_binary(struct bpf_bstack_cfi *cfi, const char *path, const char *name,
			const struct bpf_bstack_cfi_file *f)
{
	char sbid[SBUILD_ID_SIZE], *proper;
	struct build_id bid;
	size_t len;

	if (!cfi->save_binaries || !f->build_id_size)
		return;
	proper = strndup(name, strcspn(name, "\n"));
	if (!proper)
		return;
	len = strlen(proper);
	if (len > 10 && !strcmp(proper + len - 10, " (deleted)"))
		proper[len - 10] = '\0';
	build_id__init(&bid, f->build_id, f->build_id_size);
	build_id__sprintf(&bid, sbid);
	if (build_id_cache__add(sbid, path, path, NULL, false, false, proper, NULL))
		cfi->nr_save_failed++;
	else
		cfi->nr_saved++;
	free(proper);
}

/*
 * Add the file at path, whose device and inode are key, named name where
 * it is mapped: its build-id, its copy in the build-id cache, its table,
 * and its index for the BPF program.  BPF_BSTACK_CFI_NO_FILE if it cannot
 * be read.
 */
static u32 add_file(struct bpf_bstack_cfi *cfi, const struct bpf_bstack_cfi_file_id *key,
		    const char *path, const char *name)
{
	struct bpf_bstack_cfi_file f = {};
	struct bpf_bstack_cfi_file_id *k;
	struct build_id bid;
	u32 i;
	int fd;

	if (cfi->nr_files == cfi->max_files)
		return BPF_BSTACK_CFI_NO_FILE;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return BPF_BSTACK_CFI_NO_FILE;
	if (filename__read_build_id(path, &bid) > 0 && bid.size <= sizeof(f.build_id)) {
		memcpy(f.build_id, bid.data, bid.size);
		f.build_id_size = bid.size;
	}
	/* first: the table is kept in the binary's directory of the cache */
	save_binary(cfi, path, name, &f);
	add_file_rows(cfi, &f, fd);
	close(fd);
	follow_dynamic_linker(cfi, path, name);

	k = malloc(sizeof(*k));
	if (!k)
		return BPF_BSTACK_CFI_NO_FILE;
	*k = *key;
	i = cfi->nr_files;
	if (bpf_map_update_elem(bpf_map__fd(cfi->skel->maps.bstack_cfi_files), &i, &f, BPF_ANY) ||
	    hashmap__add(cfi->files, k, i)) {
		free(k);
		return BPF_BSTACK_CFI_NO_FILE;
	}
	/* for the BPF program to find it in the VMAs of a process, after an exec or dlopen() */
	bpf_map_update_elem(bpf_map__fd(cfi->skel->maps.bstack_cfi_file_ids), key, &i, BPF_ANY);
	cfi->nr_files++;
	return i;
}

/*
 * The index of the file mapped at start-end in pid: its table is built
 * the first time it is seen.  BPF_BSTACK_CFI_NO_FILE if it cannot be read.
 */
static u32 file_index(struct bpf_bstack_cfi *cfi, int pid, u64 start, u64 end,
		      const struct bpf_bstack_cfi_file_id *key, const char *name)
{
	char path[64];
	long idx;

	if (hashmap__find(cfi->files, key, &idx))
		return idx;
	/* the file as mapped: deleted, replaced or in another namespace */
	snprintf(path, sizeof(path), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, pid, start, end);
	return add_file(cfi, key, path, name);
}

/* start_stack of /proc/PID/stat, the 28th field: it changes at each exec */
static int read_start_stack(int pid, __u64 *start_stack)
{
	char path[64], buf[1024], *p;
	ssize_t n;
	int fd, i;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -EINVAL;
	buf[n] = '\0';
	p = strrchr(buf, ')');	/* the comm may hold spaces */
	for (i = 3; p && i <= 28; i++)
		p = strchr(p + 1, ' ');
	if (!p)
		return -EINVAL;
	*start_stack = strtoull(p + 1, NULL, 10);
	return 0;
}

/* The kernel's dev_t of a device, as the BPF program reads it from an inode */
static u64 kernel_dev(unsigned int dev_major, unsigned int dev_minor)
{
	return ((u64)dev_major << 20) | dev_minor;
}

/* One line of /proc/PID/maps, if it maps code, into proc */
static void add_mapping(struct bpf_bstack_cfi *cfi, int pid, struct bpf_bstack_cfi_proc *proc,
			const char *line)
{
	struct bpf_bstack_cfi_map *m;
	struct bpf_bstack_cfi_file_id key;
	unsigned int major, minor;
	u64 start, end, pgoff, ino;
	char perms[5];
	int pos = 0;

	if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %4s %" SCNx64 " %x:%x %" SCNu64 " %n",
		   &start, &end, perms, &pgoff, &major, &minor, &ino, &pos) < 7 ||
	    perms[2] != 'x' || !strncmp(line + pos, "[vsyscall]", 10))
		return;
	if (proc->nr == BPF_BSTACK_CFI_MAPS) {
		cfi->nr_too_many_maps++;
		return;
	}
	m = &proc->map[proc->nr++];
	m->start = start;
	m->end = end;
	m->pgoff = pgoff;
	/* the vDSO and JIT code: by frame pointer, as IPs */
	m->file = BPF_BSTACK_CFI_NO_FILE;
	if (ino && line[pos] == '/') {
		key.dev = kernel_dev(major, minor);
		key.ino = ino;
		m->file = file_index(cfi, pid, start, end, &key, line + pos);
	}
}

/* Give the BPF program the mappings of pid, with the tables of their files */
int bpf_bstack_cfi__load_pid(struct bpf_bstack_cfi *cfi, int pid)
{
	struct bpf_bstack_cfi_proc *proc;
	char path[64], *line = NULL;
	u32 key = pid, files = cfi->nr_files;
	u64 start = rdclock();
	size_t len = 0;
	FILE *fp;
	int err;

	proc = zalloc(sizeof(*proc));
	if (!proc)
		return -ENOMEM;
	/* the BPF program checks it against the last dlopen() or dlclose() */
	proc->read_ns = start;
	err = read_start_stack(pid, &proc->start_stack);
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	fp = err ? NULL : fopen(path, "r");
	if (!fp) {
		/* gone already: its samples keep the kernel's walk */
		free(proc);
		cfi->nr_load_errors++;
		return -ENOENT;
	}
	while (getline(&line, &len, fp) > 0)
		add_mapping(cfi, pid, proc, line);
	free(line);
	fclose(fp);

	err = bpf_map_update_elem(bpf_map__fd(cfi->skel->maps.bstack_cfi_procs), &key, proc,
				  BPF_ANY);
	free(proc);
	if (err) {
		cfi->nr_load_errors++;
		return -errno;
	}
	cfi->nr_loads++;
	pr_debug("unwind tables of pid %d: %u new files, %.1f ms\n", pid, cfi->nr_files - files,
		 (rdclock() - start) / 1e6);
	return 0;
}

/*
 * The files of a program perf is about to start: the binary, its dynamic
 * linker and the libraries it needs, at most this many
 */
#define PRELOAD_MAX_FILES	32
#define PRELOAD_MAX_DIRS	8

struct preload {
	char	*files[PRELOAD_MAX_FILES];
	int	nr_files;
	char	*dirs[PRELOAD_MAX_DIRS];	/* where libraries are looked for */
	int	nr_dirs;
};

/* Add s, allocated, to list unless it is there or full: list owns s, or it is freed */
static void add_unique(char **list, int *nr, int max, char *s)
{
	int i;

	for (i = 0; i < *nr; i++) {
		if (!strcmp(list[i], s)) {
			free(s);
			return;
		}
	}
	if (*nr == max) {
		free(s);
		return;
	}
	list[(*nr)++] = s;
}

static void preload_add_dir(struct preload *p, const char *dir, size_t len)
{
	char *d = len ? strndup(dir, len) : NULL;

	if (d)
		add_unique(p->dirs, &p->nr_dirs, PRELOAD_MAX_DIRS, d);
}

static void preload_add_file(struct preload *p, const char *path)
{
	char *real = realpath(path, NULL);

	if (real)
		add_unique(p->files, &p->nr_files, PRELOAD_MAX_FILES, real);
}

/*
 * The dynamic linker's own directory is where the system's libraries are
 * (/lib/x86_64-linux-gnu on Debian), the same under /usr, then the
 * directories every dynamic linker looks in.
 */
static void preload_interp(struct preload *p, const char *interp)
{
	static const char * const dirs[] = { "/lib64", "/usr/lib64", "/lib", "/usr/lib" };
	char *real = realpath(interp, NULL), usr[PATH_MAX];
	size_t i;

	preload_add_file(p, interp);
	if (real) {
		preload_add_dir(p, real, strrchr(real, '/') - real);
		if (!strncmp(real, "/lib/", 5) &&
		    snprintf(usr, sizeof(usr), "/usr%s", real) < (int)sizeof(usr))
			preload_add_dir(p, usr, strrchr(usr, '/') - usr);
		free(real);
	}
	for (i = 0; i < ARRAY_SIZE(dirs); i++)
		preload_add_dir(p, dirs[i], strlen(dirs[i]));
}

/* A library the file at path needs, where the dynamic linker would find it */
static void preload_needed(struct preload *p, const char *path, const char *runpath,
			   const char *lib)
{
	char file[PATH_MAX];
	const char *dir, *end;
	int i;

	if (strchr(lib, '/')) {
		preload_add_file(p, lib);
		return;
	}
	/* DT_RUNPATH first, with $ORIGIN: the directory of the file */
	for (dir = runpath; dir && *dir; dir = *end ? end + 1 : end) {
		end = dir + strcspn(dir, ":");
		if (!strncmp(dir, "$ORIGIN", 7))
			snprintf(file, sizeof(file), "%.*s%.*s/%s",
				 (int)(strrchr(path, '/') - path), path,
				 (int)(end - dir - 7), dir + 7, lib);
		else
			snprintf(file, sizeof(file), "%.*s/%s", (int)(end - dir), dir, lib);
		if (!access(file, R_OK)) {
			preload_add_file(p, file);
			return;
		}
	}
	for (i = 0; i < p->nr_dirs; i++) {
		snprintf(file, sizeof(file), "%s/%s", p->dirs[i], lib);
		if (!access(file, R_OK)) {
			preload_add_file(p, file);
			return;
		}
	}
}

/* The dynamic section of elf: DT_NEEDED and DT_RUNPATH (or DT_RPATH) */
static void preload_dynamic(struct preload *p, const char *path, Elf *elf)
{
	const char *runpath = NULL;
	Elf_Scn *scn = NULL;
	GElf_Shdr shdr;
	Elf_Data *data;
	GElf_Dyn dyn;
	size_t i, n;

	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		if (gelf_getshdr(scn, &shdr) && shdr.sh_type == SHT_DYNAMIC)
			break;
	}
	data = scn ? elf_getdata(scn, NULL) : NULL;
	if (!data || !shdr.sh_entsize)
		return;
	n = shdr.sh_size / shdr.sh_entsize;
	for (i = 0; i < n && gelf_getdyn(data, i, &dyn); i++) {
		if (dyn.d_tag == DT_RUNPATH || (dyn.d_tag == DT_RPATH && !runpath))
			runpath = elf_strptr(elf, shdr.sh_link, dyn.d_un.d_val);
	}
	for (i = 0; i < n && gelf_getdyn(data, i, &dyn); i++) {
		const char *lib;

		if (dyn.d_tag != DT_NEEDED)
			continue;
		lib = elf_strptr(elf, shdr.sh_link, dyn.d_un.d_val);
		if (lib)
			preload_needed(p, path, runpath, lib);
	}
}

/* The command as execvp() finds it */
static char *find_command(const char *cmd)
{
	const char *path = getenv("PATH"), *dir, *end;
	char file[PATH_MAX];

	if (strchr(cmd, '/'))
		return strdup(cmd);
	for (dir = path; dir && *dir; dir = *end ? end + 1 : end) {
		end = dir + strcspn(dir, ":");
		snprintf(file, sizeof(file), "%.*s/%s", (int)(end - dir), dir, cmd);
		if (!access(file, X_OK))
			return strdup(file);
	}
	return NULL;
}

/*
 * A script's interpreter, from its #! line.  With /usr/bin/env, also the
 * program env finds and runs.
 */
static void preload_interpreter(struct preload *p, int fd)
{
	char line[PATH_MAX], *prog, *arg, *found;
	ssize_t n = pread(fd, line, sizeof(line) - 1, 0);

	if (n < 3 || line[0] != '#' || line[1] != '!')
		return;
	line[n] = '\0';
	prog = line + 2 + strspn(line + 2, " \t");
	prog[strcspn(prog, " \t\n")] = '\0';
	arg = prog + strlen(prog) + 1;
	preload_add_file(p, prog);
	if (arg < line + n && !strcmp(prog, "/usr/bin/env")) {
		arg += strspn(arg, " \t");
		arg[strcspn(arg, " \t\n")] = '\0';
		found = *arg ? find_command(arg) : NULL;
		if (found)
			preload_add_file(p, found);
		free(found);
	}
}

/*
 * The dynamic linker (PT_INTERP) of the ELF file at path and what it
 * needs, or the interpreter of a script: false if path is no ELF file
 */
static bool preload_deps(struct preload *p, const char *path)
{
	char interp[PATH_MAX];
	bool is_elf = false;
	GElf_Phdr phdr;
	size_t i, n;
	Elf *elf;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (elf && elf_kind(elf) == ELF_K_ELF && !elf_getphdrnum(elf, &n)) {
		is_elf = true;
		for (i = 0; i < n && gelf_getphdr(elf, i, &phdr); i++) {
			size_t size = phdr.p_filesz;

			if (phdr.p_type != PT_INTERP || !size || size >= sizeof(interp) ||
			    pread(fd, interp, size, phdr.p_offset) != (ssize_t)size)
				continue;
			interp[size] = '\0';
			preload_interp(p, interp);
		}
		preload_dynamic(p, path, elf);
	} else {
		preload_interpreter(p, fd);
	}
	elf_end(elf);
	close(fd);
	return is_elf;
}

/*
 * Load the tables of the program perf starts, cmd, and of the files it
 * will map first, before it runs: its exec then finds them all, and its
 * first samples are unwound with them.  Without that, a program that ends
 * within milliseconds is walked by frame pointer until user space has
 * read its mappings.  Libraries are looked for as the dynamic linker
 * would, bar its cache: one missed is loaded when it is mapped, as before.
 */
void bpf_bstack_cfi__preload(struct bpf_bstack_cfi *cfi, const char *cmd)
{
	struct bpf_bstack_cfi_file_id key;
	struct preload p = {};
	char *bin = find_command(cmd);
	struct stat st;
	long idx;
	int i;

	if (!bin)
		return;
	preload_add_file(&p, bin);
	free(bin);
	/* files queued while the ones before them are read */
	for (i = 0; i < p.nr_files; i++) {
		if (!preload_deps(&p, p.files[i]) || stat(p.files[i], &st))
			continue;
		key.dev = kernel_dev(major(st.st_dev), minor(st.st_dev));
		key.ino = st.st_ino;
		if (!hashmap__find(cfi->files, &key, &idx) &&
		    add_file(cfi, &key, p.files[i], p.files[i]) != BPF_BSTACK_CFI_NO_FILE)
			cfi->nr_preloaded++;
	}
	for (i = 0; i < p.nr_files; i++)
		free(p.files[i]);
	for (i = 0; i < p.nr_dirs; i++)
		free(p.dirs[i]);
	pr_debug("unwind tables of %s and %d files it needs loaded before it runs\n", cmd,
		 p.nr_files - 1);
}

/*
 * The BPF program holds mappings of the process read after it asked: it
 * read them itself at the exec or dlopen() that followed (a sample taken
 * inside execve(), after the new image replaced the old one, asks for a
 * process the exec will read), or a load of an earlier ask did.
 */
static bool read_since(struct bpf_bstack_cfi *cfi, const struct bpf_bstack_cfi_ask *ask)
{
	u32 key = ask->tgid;

	return !bpf_map_lookup_elem(bpf_map__fd(cfi->skel->maps.bstack_cfi_procs), &key,
				    cfi->proc_buf) &&
	       cfi->proc_buf->read_ns > ask->time;
}

static int on_ask(void *ctx, void *data, size_t size)
{
	struct bpf_bstack_cfi *cfi = ctx;
	const struct bpf_bstack_cfi_ask *ask = data;

	if (size < sizeof(*ask))
		return 0;
	if (read_since(cfi, ask)) {
		cfi->nr_asks_read++;
		return 0;
	}
	bpf_bstack_cfi__load_pid(cfi, ask->tgid);
	return 0;
}

/*
 * Asleep until the BPF program asks for tables or perf stops it: a thread
 * woken by a timeout, ten times a second, was most of what an idle
 * recording cost.
 */
static void *cfi_thread(void *arg)
{
	struct bpf_bstack_cfi *cfi = arg;
	struct pollfd fds[2] = {
		{ .fd = ring_buffer__epoll_fd(cfi->ask), .events = POLLIN },
		{ .fd = cfi->stop_fd, .events = POLLIN },
	};

	while (poll(fds, ARRAY_SIZE(fds), -1) >= 0 || errno == EINTR) {
		if (fds[1].revents)
			break;
		if (fds[0].revents)
			ring_buffer__consume(cfi->ask);
	}
	return NULL;
}

int bpf_bstack_cfi__start(struct bpf_bstack_cfi *cfi)
{
	int err;

	cfi->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (cfi->stop_fd < 0) {
		pr_err("cannot start the unwind table thread: %m\n");
		return -errno;
	}
	err = pthread_create(&cfi->thread, NULL, cfi_thread, cfi);
	if (err) {
		pr_err("cannot start the unwind table thread: %s\n", strerror(err));
		return -err;
	}
	cfi->running = true;
	return 0;
}

/* After the skeleton is loaded: map its rows */
struct bpf_bstack_cfi *bpf_bstack_cfi__new(struct bstack_bpf *skel, bool save_binaries)
{
	struct bpf_bstack_cfi *cfi = zalloc(sizeof(*cfi));
	struct bpf_map *rows = skel->maps.bstack_cfi_rows;
	long page = sysconf(_SC_PAGESIZE);

	if (!cfi)
		return NULL;
	cfi->stop_fd = -1;
	cfi->skel = skel;
	cfi->save_binaries = save_binaries;
	cfi->proc_buf = malloc(sizeof(*cfi->proc_buf));
	if (!cfi->proc_buf)
		goto err;
	cfi->max_rows = bpf_map__max_entries(rows);
	cfi->max_files = bpf_map__max_entries(skel->maps.bstack_cfi_files);
	cfi->rows_size = roundup((size_t)cfi->max_rows * sizeof(*cfi->rows), page);
	cfi->rows = mmap(NULL, cfi->rows_size, PROT_READ | PROT_WRITE, MAP_SHARED,
			 bpf_map__fd(rows), 0);
	if (cfi->rows == MAP_FAILED) {
		pr_err("cannot map the unwind table: %m\n");
		cfi->rows = NULL;
		goto err;
	}
	cfi->files = hashmap__new(file_key_hash, file_key_equal, NULL);
	if (IS_ERR(cfi->files)) {
		cfi->files = NULL;
		goto err;
	}
	cfi->ask = ring_buffer__new(bpf_map__fd(skel->maps.bstack_cfi_ask), on_ask, cfi, NULL);
	if (!cfi->ask)
		goto err;
	return cfi;
err:
	bpf_bstack_cfi__delete(cfi);
	return NULL;
}

void bpf_bstack_cfi__summary(struct bpf_bstack_cfi *cfi, FILE *fp)
{
	double mib = sizeof(*cfi->rows) / 1048576.0;

	fprintf(fp, "[ perf bstack: unwind tables: %u files (%u read from the build-id cache,",
		cfi->nr_files, cfi->nr_from_cache);
	fprintf(fp, " %u loaded before the command ran,", cfi->nr_preloaded);
	fprintf(fp, " %u without .eh_frame,", cfi->nr_no_table);
	fprintf(fp, " %u past the table's end), %u rows of %u (%.1f of %.1f MiB),",
		cfi->nr_table_full, cfi->nr_rows, cfi->max_rows, cfi->nr_rows * mib,
		cfi->max_rows * mib);
	fprintf(fp, " %" PRIu64 " process loads (%" PRIu64 " more asked for, read by BPF since)",
		cfi->nr_loads, cfi->nr_asks_read);
	if (cfi->save_binaries)
		fprintf(fp, ", %u binaries saved as mapped (%u failed)", cfi->nr_saved,
			cfi->nr_save_failed);
	if (cfi->nr_load_errors)
		fprintf(fp, ", %" PRIu64 " of exited processes", cfi->nr_load_errors);
	if (cfi->nr_too_many_maps)
		fprintf(fp, ", %u mappings past %d per process", cfi->nr_too_many_maps,
			BPF_BSTACK_CFI_MAPS);
	fprintf(fp, " ]\n");
}

void bpf_bstack_cfi__delete(struct bpf_bstack_cfi *cfi)
{
	struct hashmap_entry *cur;
	size_t bkt;
	int i;

	if (!cfi)
		return;
	if (cfi->running) {
		eventfd_write(cfi->stop_fd, 1);
		pthread_join(cfi->thread, NULL);
	}
	if (cfi->stop_fd >= 0)
		close(cfi->stop_fd);
	for (i = 0; i < cfi->nr_dl_links; i++)
		bpf_link__destroy(cfi->dl_links[i]);
	ring_buffer__free(cfi->ask);
	if (cfi->files) {
		hashmap__for_each_entry(cfi->files, cur, bkt)
			free((void *)cur->pkey);
		hashmap__free(cfi->files);
	}
	if (cfi->rows)
		munmap(cfi->rows, cfi->rows_size);
	free(cfi->proc_buf);
	free(cfi);
}
