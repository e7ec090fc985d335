// SPDX-License-Identifier: GPL-2.0
/*
 * The files a program maps before it runs, found as the kernel and the
 * dynamic linker would: the binary as execvp() finds it (or a script's
 * interpreter, through /usr/bin/env too), its dynamic linker (PT_INTERP)
 * and the libraries it needs (DT_NEEDED, in its DT_RUNPATH or DT_RPATH
 * with $ORIGIN, then the system's library directories; not ld.so.cache).
 * perf bstack record loads their unwind tables before it starts the
 * program, so that a command that ends within milliseconds is unwound
 * with them from its first sample.
 */
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <gelf.h>
#include <linux/compiler.h>
#include <linux/kernel.h>
#include <linux/zalloc.h>

#include "util/bstack-preload.h"

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

static void preload_add_dir(struct bstack_preload *p, const char *dir, size_t len)
{
	char *d = len ? strndup(dir, len) : NULL;

	if (d)
		add_unique(p->dirs, &p->nr_dirs, BSTACK_PRELOAD_MAX_DIRS, d);
}

static void preload_add_file(struct bstack_preload *p, const char *path)
{
	char *real = realpath(path, NULL);

	if (real)
		add_unique(p->files, &p->nr_files, BSTACK_PRELOAD_MAX_FILES, real);
}

/*
 * The dynamic linker's own directory is where the system's libraries are
 * (/lib/x86_64-linux-gnu on Debian), the same under /usr, then the
 * directories every dynamic linker looks in.
 */
static void preload_interp(struct bstack_preload *p, const char *interp)
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
static void preload_needed(struct bstack_preload *p, const char *path, const char *runpath,
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
static void preload_dynamic(struct bstack_preload *p, const char *path, Elf *elf)
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
static void preload_interpreter(struct bstack_preload *p, int fd)
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
static bool preload_deps(struct bstack_preload *p, const char *path)
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

/* The files cmd maps first into p, the ELF ones: 0, or -1 if cmd is not found */
int bstack_preload__find(struct bstack_preload *p, const char *cmd)
{
	bool elf[BSTACK_PRELOAD_MAX_FILES];
	char *bin = find_command(cmd);
	int i, nr = 0;

	memset(p, 0, sizeof(*p));
	if (!bin)
		return -1;
	preload_add_file(p, bin);
	free(bin);
	/* files queued while the ones before them are read */
	for (i = 0; i < p->nr_files; i++)
		elf[i] = preload_deps(p, p->files[i]);
	for (i = 0; i < p->nr_files; i++) {
		if (elf[i])
			p->files[nr++] = p->files[i];
		else
			free(p->files[i]);
	}
	p->nr_files = nr;
	return 0;
}

void bstack_preload__exit(struct bstack_preload *p)
{
	int i;

	for (i = 0; i < p->nr_files; i++)
		zfree(&p->files[i]);
	for (i = 0; i < p->nr_dirs; i++)
		zfree(&p->dirs[i]);
	p->nr_files = p->nr_dirs = 0;
}
