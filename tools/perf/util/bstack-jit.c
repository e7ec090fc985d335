// SPDX-License-Identifier: GPL-2.0
/*
 * perf record --bstack: keep the symbols a JIT gives in /tmp/perf-PID.map,
 * or in a jitdump, /tmp/jit-PID.dump (python -X perf_jit).
 *
 * Frames in JIT code are IPs in anonymous memory: perf report names them
 * from the process's perf map, which lives in the /tmp of its mount
 * namespace and is neither kept nor copied anywhere.  bstack makes an ELF
 * image of the map's symbols instead (no code, a NOBITS .text at the
 * addresses the symbols name, a build-id hashed from its content) and
 * puts it into the build-id cache; an MMAP2 with that build-id in
 * perf.data places it in the process.  The frames then resolve like any
 * build-id frame, after the process and its map file are gone, and on
 * other machines (perf archive).
 */
#define pr_fmt(fmt) "perf bstack: " fmt

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <gelf.h>
#include <linux/kernel.h>
#include <linux/string.h>
#include <linux/zalloc.h>

#include "util/bstack-jit.h"
#include "util/build-id.h"
#include "util/debug.h"
#include "util/genelf.h"
#include "util/jitdump.h"

/* symbols further apart than this go into images of their own */
#define JIT_IMAGE_GAP	(64ULL << 20)

struct jit_sym {
	u64	start, size;
	char	*name;
};

struct jit_syms {
	struct jit_sym	*sym;
	size_t		nr, alloc;
};

static void jit_syms__exit(struct jit_syms *s)
{
	size_t i;

	for (i = 0; i < s->nr; i++)
		free(s->sym[i].name);
	zfree(&s->sym);
	s->nr = s->alloc = 0;
}

static int jit_syms__add(struct jit_syms *s, u64 start, u64 size, const char *name)
{
	if (s->nr == s->alloc) {
		size_t n = s->alloc ? s->alloc * 2 : 256;
		void *p = realloc(s->sym, n * sizeof(*s->sym));

		if (!p)
			return -ENOMEM;
		s->sym = p;
		s->alloc = n;
	}
	s->sym[s->nr].name = strdup(name);
	if (!s->sym[s->nr].name)
		return -ENOMEM;
	s->sym[s->nr].start = start;
	s->sym[s->nr].size = size;
	s->nr++;
	return 0;
}

/* "START SIZE name", hex without 0x, as perf's dso__load_perf_map() reads it */
static int read_perf_map(FILE *fp, struct jit_syms *s)
{
	char *line = NULL, *end;
	size_t len = 0;
	ssize_t n;
	int err = 0;

	while (!err && (n = getline(&line, &len, fp)) > 0) {
		u64 start, size;

		line[strcspn(line, "\n")] = '\0';
		start = strtoull(line, &end, 16);
		if (*end != ' ')
			continue;
		size = strtoull(end + 1, &end, 16);
		if (*end != ' ' || !end[1] || !size || start + size < start)
			continue;
		err = jit_syms__add(s, start, size, end + 1);
	}
	free(line);
	return err;
}

/* a record longer than this is damaged: code of 64 MiB, or a name of 64 KiB */
#define JITDUMP_RECORD_MAX	(64U << 20)
#define JITDUMP_NAME_MAX	(64U << 10)

/* The NUL-terminated name after a record's fixed part, at most max bytes */
static int read_jitdump_name(FILE *fp, char *name, size_t max)
{
	size_t i;
	int c;

	for (i = 0; i < max; i++) {
		c = fgetc(fp);
		if (c == EOF)
			return -EINVAL;
		name[i] = c;
		if (!c)
			return 0;
	}
	return -EINVAL;
}

/*
 * The JIT_CODE_LOAD records of a jitdump, as perf inject --jit reads them
 * (util/jitdump.c): where each piece of code was loaded, and its name.
 * Written on this machine by the process, in its byte order.  A damaged
 * record ends the reading, the symbols before it kept.
 */
static int read_jitdump(FILE *fp, struct jit_syms *s)
{
	struct jitheader hdr;
	struct jr_code_load load;
	char *name = malloc(JITDUMP_NAME_MAX);
	long pos;
	int err = 0;

	if (!name)
		return -ENOMEM;
	if (fread(&hdr, sizeof(hdr), 1, fp) != 1 || hdr.magic != JITHEADER_MAGIC ||
	    hdr.total_size < sizeof(hdr) || fseek(fp, hdr.total_size, SEEK_SET)) {
		free(name);
		return -EINVAL;
	}
	while (!err && (pos = ftell(fp)) >= 0 && fread(&load.p, sizeof(load.p), 1, fp) == 1) {
		size_t len = load.p.total_size;

		if (len < sizeof(load.p) || len > JITDUMP_RECORD_MAX)
			break;
		if (load.p.id == JIT_CODE_LOAD && len > sizeof(load)) {
			if (fread(&load.p + 1, sizeof(load) - sizeof(load.p), 1, fp) != 1 ||
			    read_jitdump_name(fp, name, min_t(size_t, len - sizeof(load),
							      JITDUMP_NAME_MAX)))
				break;
			if (load.code_size && load.code_addr + load.code_size > load.code_addr)
				err = jit_syms__add(s, load.code_addr, load.code_size, name);
		}
		if (fseek(fp, pos + len, SEEK_SET))
			break;
	}
	free(name);
	return err;
}

static bool is_jitdump(const char *path)
{
	const char *base = strrchr(path, '/');
	size_t len;

	base = base ? base + 1 : path;
	len = strlen(base);
	return strstarts(base, "jit-") && len > 5 && !strcmp(base + len - 5, ".dump");
}

static int cmp_sym_start(const void *a, const void *b)
{
	const struct jit_sym *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* FNV-1a: the build-id only has to tell different symbol sets apart */
static u64 hash_bytes(u64 h, const void *p, size_t len)
{
	const unsigned char *c = p;

	while (len--)
		h = (h ^ *c++) * 0x100000001b3ULL;
	return h;
}

static void image_build_id(const struct jit_sym *sym, size_t nr, struct build_id *bid)
{
	u64 h[3] = { 0xcbf29ce484222325ULL, 0x84222325cbf29ce4ULL, 0x9ce484222325cbf2ULL };
	u8 data[sizeof(h)];
	size_t i, j;

	for (i = 0; i < nr; i++) {
		for (j = 0; j < ARRAY_SIZE(h); j++) {
			h[j] = hash_bytes(h[j], &sym[i].start, sizeof(sym[i].start));
			h[j] = hash_bytes(h[j], &sym[i].size, sizeof(sym[i].size));
			h[j] = hash_bytes(h[j], sym[i].name, strlen(sym[i].name) + 1);
		}
	}
	memcpy(data, h, sizeof(data));
	build_id__init(bid, data, BUILD_ID_SIZE);
}

static Elf_Scn *add_section(Elf *e, const char *name __maybe_unused, GElf_Shdr *shdr,
			    void *buf, size_t size, Elf_Type type)
{
	Elf_Scn *scn = elf_newscn(e);
	Elf_Data *d;

	if (!scn)
		return NULL;
	if (buf || size) {
		d = elf_newdata(scn);
		if (!d)
			return NULL;
		d->d_buf = buf;
		d->d_size = size;
		d->d_type = type;
		d->d_align = type == ELF_T_BYTE ? 1 : 8;
		d->d_version = EV_CURRENT;
	}
	if (!gelf_update_shdr(scn, shdr))
		return NULL;
	return scn;
}

struct gnu_build_id_note {
	Elf64_Nhdr	nhdr;
	char		name[4];	/* "GNU" */
	u8		desc[BUILD_ID_SIZE];
};

/*
 * Lay out and write an ELF of the symbols sym[0..nr): .text (NOBITS) at
 * their addresses, .symtab, .strtab, the build-id note, and a PT_LOAD
 * that says where .text is in "file offsets", which the MMAP2 of the
 * image uses as its pgoff.
 */
static int write_image(int fd, const struct jit_sym *sym, size_t nr, const struct build_id *bid,
		       u64 *text_off)
{
	static const char shstrtab[] = "\0.text\0.symtab\0.strtab\0.note.gnu.build-id\0.shstrtab";
	u64 lo = sym[0].start, hi = sym[nr - 1].start + sym[nr - 1].size;
	struct gnu_build_id_note note = {
		.nhdr = { .n_namesz = 4, .n_descsz = BUILD_ID_SIZE, .n_type = NT_GNU_BUILD_ID },
		.name = "GNU",
	};
	GElf_Sym *syms = calloc(nr + 1, sizeof(*syms));
	size_t i, len, strsz = 1, pos = 1;
	GElf_Shdr shdr, text;
	char *strtab = NULL;
	GElf_Ehdr ehdr;
	GElf_Phdr phdr;
	Elf_Scn *scn;
	Elf *e = NULL;
	int err = -EINVAL;

	for (i = 0; i < nr; i++)
		strsz += strlen(sym[i].name) + 1;
	strtab = calloc(1, strsz);
	if (!syms || !strtab)
		goto out;
	memcpy(note.desc, bid->data, BUILD_ID_SIZE);
	for (i = 0; i < nr; i++) {
		hi = max(hi, sym[i].start + sym[i].size);
		syms[i + 1].st_name = pos;
		syms[i + 1].st_value = sym[i].start;
		syms[i + 1].st_size = sym[i].size;
		syms[i + 1].st_info = GELF_ST_INFO(STB_GLOBAL, STT_FUNC);
		syms[i + 1].st_shndx = 1;	/* .text */
		len = strlen(sym[i].name) + 1;
		memcpy(strtab + pos, sym[i].name, len);
		pos += len;
	}

	e = elf_begin(fd, ELF_C_WRITE, NULL);
	if (!e || !gelf_newehdr(e, GEN_ELF_CLASS) || !gelf_getehdr(e, &ehdr))
		goto out;
	ehdr.e_ident[EI_DATA] = GEN_ELF_ENDIAN;
	ehdr.e_ident[EI_VERSION] = EV_CURRENT;
	ehdr.e_type = ET_DYN;
	ehdr.e_machine = GEN_ELF_ARCH;
	ehdr.e_version = EV_CURRENT;
	ehdr.e_shstrndx = 5;
	if (!gelf_update_ehdr(e, &ehdr) || !gelf_newphdr(e, 1))
		goto out;

	memset(&text, 0, sizeof(text));
	text.sh_name = 1;
	text.sh_type = SHT_NOBITS;
	text.sh_flags = SHF_ALLOC | SHF_EXECINSTR;
	text.sh_addr = lo;
	text.sh_size = hi - lo;
	text.sh_addralign = 16;
	memset(&shdr, 0, sizeof(shdr));
	/* NOBITS, but libelf wants a data descriptor of its size to lay it out twice */
	if (!add_section(e, ".text", &text, NULL, hi - lo, ELF_T_BYTE))
		goto out;
	shdr.sh_name = 7;
	shdr.sh_type = SHT_SYMTAB;
	shdr.sh_link = 3;
	shdr.sh_info = 1;	/* one local: the null symbol */
	shdr.sh_entsize = gelf_fsize(e, ELF_T_SYM, 1, EV_CURRENT);
	if (!add_section(e, ".symtab", &shdr, syms, (nr + 1) * shdr.sh_entsize, ELF_T_SYM))
		goto out;
	memset(&shdr, 0, sizeof(shdr));
	shdr.sh_name = 15;
	shdr.sh_type = SHT_STRTAB;
	if (!add_section(e, ".strtab", &shdr, strtab, strsz, ELF_T_BYTE))
		goto out;
	shdr.sh_name = 23;
	shdr.sh_type = SHT_NOTE;
	shdr.sh_flags = SHF_ALLOC;
	if (!add_section(e, ".note.gnu.build-id", &shdr, &note, sizeof(note), ELF_T_BYTE))
		goto out;
	shdr.sh_name = 42;
	shdr.sh_type = SHT_STRTAB;
	shdr.sh_flags = 0;
	if (!add_section(e, ".shstrtab", &shdr, (void *)shstrtab, sizeof(shstrtab), ELF_T_BYTE))
		goto out;

	/* lay the sections out, then point the segment at .text */
	if (elf_update(e, ELF_C_NULL) < 0)
		goto out;
	scn = elf_getscn(e, 1);
	if (!scn || !gelf_getshdr(scn, &text))
		goto out;
	memset(&phdr, 0, sizeof(phdr));
	phdr.p_type = PT_LOAD;
	phdr.p_flags = PF_R | PF_X;
	phdr.p_offset = text.sh_offset;
	phdr.p_vaddr = phdr.p_paddr = lo;
	phdr.p_memsz = hi - lo;
	phdr.p_align = 16;
	if (!gelf_update_phdr(e, 0, &phdr) || elf_update(e, ELF_C_WRITE) < 0)
		goto out;
	*text_off = text.sh_offset;
	err = 0;
out:
	if (err)
		pr_debug("cannot write a JIT image: %s\n", elf_errmsg(-1));
	if (e)
		elf_end(e);
	free(syms);
	free(strtab);
	return err;
}

/* One image of sym[0..nr) into the build-id cache, and to cb */
static int cache_image(pid_t pid, const char *kind, const struct jit_sym *sym, size_t nr,
		       bpf_bstack_jit_image_cb cb, void *arg)
{
	struct bpf_bstack_jit_image img = { .start = sym[0].start, .nr_syms = nr, };
	char tmp[] = "/tmp/perf-bstack-jit-XXXXXX", sbid[SBUILD_ID_SIZE];
	size_t i;
	int fd, err;

	for (i = 0; i < nr; i++)
		img.end = max(img.end, sym[i].start + sym[i].size);
	image_build_id(sym, nr, &img.bid);
	build_id__sprintf(&img.bid, sbid);
	snprintf(img.name, sizeof(img.name), BPF_BSTACK_JIT_PREFIX "%s-%d.%s", kind, pid,
		 strcmp(kind, "jit") ? "map" : "dump");

	fd = mkstemp(tmp);
	if (fd < 0)
		return -errno;
	err = write_image(fd, sym, nr, &img.bid, &img.pgoff);
	close(fd);
	if (!err && build_id_cache__add(sbid, tmp, tmp, NULL, false, false, img.name, NULL))
		err = -EIO;
	unlink(tmp);
	return err ?: cb(&img, arg);
}

int bpf_bstack__jit_images(pid_t pid, const char *map_path, bpf_bstack_jit_image_cb cb,
			   void *arg)
{
	const char *kind = is_jitdump(map_path) ? "jit" : "perf";
	struct jit_syms s = {};
	size_t i, first = 0;
	u64 end = 0;
	FILE *fp;
	int err;

	fp = fopen(map_path, "r");
	if (!fp)
		return -errno;
	err = strcmp(kind, "jit") ? read_perf_map(fp, &s) : read_jitdump(fp, &s);
	fclose(fp);
	if (err || !s.nr)
		goto out;
	if (elf_version(EV_CURRENT) == EV_NONE) {
		err = -ENOTSUP;
		goto out;
	}
	qsort(s.sym, s.nr, sizeof(*s.sym), cmp_sym_start);
	/* an image per cluster: one spanning the address space would cover libraries */
	for (i = 0; i < s.nr && !err; i++) {
		if (i > first && s.sym[i].start > end + JIT_IMAGE_GAP) {
			err = cache_image(pid, kind, s.sym + first, i - first, cb, arg);
			first = i;
		}
		end = max(i == first ? 0 : end, s.sym[i].start + s.sym[i].size);
	}
	if (!err)
		err = cache_image(pid, kind, s.sym + first, s.nr - first, cb, arg);
out:
	jit_syms__exit(&s);
	return err;
}
