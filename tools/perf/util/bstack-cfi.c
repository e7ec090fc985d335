// SPDX-License-Identifier: GPL-2.0
/*
 * perf bstack: the unwind table of an x86-64 binary, from its .eh_frame.
 *
 * libdw gives the rules at each address (dwarf_cfi_addrframe()); the FDEs
 * are found through the binary search table of .eh_frame_hdr, which the
 * dynamic linker's own unwinder relies on and every linked x86-64 ELF
 * file has.  Each range of addresses with one rule becomes a row keyed by
 * file offset, in the compact form the BPF walk reads (bpf_skel/bstack.h):
 * the CFA from a register plus an offset, the PLT's expression, the forms
 * of hand-written assembly that reload a saved stack pointer, a signal
 * trampoline, or the bottom of the stack; anything else is a row the walk
 * stops at.
 */
#define pr_fmt(fmt) "perf bstack: " fmt

#include <stdlib.h>
#include <string.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <gelf.h>
#include <linux/bpf.h>
#include <linux/kernel.h>

#include "util/bstack-cfi.h"
#include "util/debug.h"

#include "bpf_skel/bstack.h"

/* DWARF register numbers of x86-64 */
#define DWARF_RBP	6
#define DWARF_RSP	7
#define DWARF_RA	16

#define DW_EH_PE_udata4		0x03
#define DW_EH_PE_sdata4		0x0b
#define DW_EH_PE_datarel	0x30

struct cfi_table {
	struct bpf_bstack_cfi_row	*rows;
	size_t				nr, alloc;
	GElf_Phdr			text[8];	/* the executable PT_LOADs */
	int				nr_text;
	struct bpf_bstack_cfi_table_info *info;
};

/* The file offset of vaddr in an executable segment, or -1 */
static s64 text_offset(const struct cfi_table *t, u64 vaddr)
{
	int i;

	for (i = 0; i < t->nr_text; i++) {
		const GElf_Phdr *p = &t->text[i];

		if (vaddr >= p->p_vaddr && vaddr < p->p_vaddr + p->p_filesz)
			return vaddr - p->p_vaddr + p->p_offset;
	}
	return -1;
}

static int add_row(struct cfi_table *t, u64 vaddr, struct bpf_bstack_cfi_row row)
{
	s64 off = text_offset(t, vaddr);
	struct bpf_bstack_cfi_row *last = t->nr ? &t->rows[t->nr - 1] : NULL;

	if (off < 0 || off > UINT32_MAX)
		return 0;	/* not code of this file */
	row.offset = off;
	if (last && last->offset == row.offset) {
		*last = row;	/* an empty range before it */
		return 0;
	}
	if (last && last->cfa_kind == row.cfa_kind && last->rbp == row.rbp &&
	    last->cfa_offset == row.cfa_offset)
		return 0;	/* the same rule goes on */
	if (t->nr == t->alloc) {
		size_t alloc = t->alloc ? t->alloc * 2 : 1024;
		void *rows = realloc(t->rows, alloc * sizeof(*t->rows));

		if (!rows)
			return -ENOMEM;
		t->rows = rows;
		t->alloc = alloc;
	}
	t->rows[t->nr++] = row;
	return 0;
}

/*
 * The PLT's CFA: rsp + 8, and 8 more once a lazy entry has pushed its
 * index, at (rip & 15) >= 11 (or 10 in some linkers' PLTs):
 * breg7 8; breg16 0; lit15; and; lit11; ge; lit3; shl; plus
 */
static int plt_threshold(const Dwarf_Op *ops, size_t nops)
{
	if (nops != 9 || ops[0].atom != DW_OP_breg7 || ops[0].number != 8 ||
	    ops[1].atom != DW_OP_breg16 || ops[2].atom != DW_OP_lit15 ||
	    ops[3].atom != DW_OP_and || ops[5].atom != DW_OP_ge ||
	    ops[6].atom != DW_OP_lit3 || ops[7].atom != DW_OP_shl || ops[8].atom != DW_OP_plus)
		return -1;
	if (ops[4].atom != DW_OP_lit10 && ops[4].atom != DW_OP_lit11)
		return -1;
	return ops[4].atom - DW_OP_lit0;
}

/* The x86-64 general register DW_OP_bregN or DW_OP_bregx reads, or -1 */
static int breg_regno(const Dwarf_Op *op)
{
	if (op->atom >= DW_OP_breg0 && op->atom <= DW_OP_breg15)
		return op->atom - DW_OP_breg0;
	if (op->atom == DW_OP_bregx && op->number < 16)
		return op->number;
	return -1;
}

/* The offset of a DW_OP_bregN or DW_OP_bregx */
static s64 breg_offset(const Dwarf_Op *op)
{
	return (s64)(op->atom == DW_OP_bregx ? op->number2 : op->number);
}

/* cfa_offset of the DEREF kinds: *(base + n) + m, if the row can hold them */
static bool deref_offsets(s64 n, u64 m, u16 *offset)
{
	if (n < BPF_BSTACK_CFA_DEREF_N_MIN || n > BPF_BSTACK_CFA_DEREF_N_MAX ||
	    m % 8 || m > BPF_BSTACK_CFA_DEREF_M_MAX)
		return false;
	*offset = (n & 0x7ff) | (m / 8) << 11;
	return true;
}

/*
 * The CFA of OpenSSL's and other hand-written assembly that keeps the
 * caller's stack pointer in the frame (breg7 N; deref; plus_uconst M),
 * or in a table indexed by a register (breg7 N; bregR 0; lit8; mul;
 * plus; deref; plus_uconst M)
 */
static void cfa_deref(const Dwarf_Op *ops, size_t nops, struct bpf_bstack_cfi_row *row)
{
	bool plus = ops[nops - 1].atom == DW_OP_plus_uconst;
	u64 m = plus ? ops[nops - 1].number : 0;
	size_t n = plus ? nops - 1 : nops;
	int base = breg_regno(&ops[0]), index;
	u16 offset;

	if (base < 0 || ops[n - 1].atom != DW_OP_deref)
		return;
	if (n == 2 && deref_offsets(breg_offset(&ops[0]), m, &offset)) {
		row->cfa_kind = BPF_BSTACK_CFA_DEREF | base << 4;
		row->cfa_offset = offset;
		return;
	}
	index = n == 6 ? breg_regno(&ops[1]) : -1;
	if (base == DWARF_RSP && index >= 0 && !breg_offset(&ops[1]) &&
	    ops[2].atom == DW_OP_lit8 && ops[3].atom == DW_OP_mul && ops[4].atom == DW_OP_plus &&
	    deref_offsets(breg_offset(&ops[0]), m, &offset)) {
		row->cfa_kind = BPF_BSTACK_CFA_DEREF_INDEXED | index << 4;
		row->cfa_offset = offset;
	}
}

/* The CFA part of a row: kind and offset */
static void cfa_rule(Dwarf_Frame *frame, struct bpf_bstack_cfi_row *row)
{
	Dwarf_Op *ops;
	size_t nops;
	s64 off;
	int plt, reg;

	row->cfa_kind = BPF_BSTACK_CFA_INVALID;
	if (dwarf_frame_cfa(frame, &ops, &nops) || !nops)
		return;
	reg = breg_regno(&ops[0]);
	if (nops == 1 && reg >= 0) {
		off = breg_offset(&ops[0]);
		if (off < 0 || off > UINT16_MAX)
			return;
		if (reg == DWARF_RSP)
			row->cfa_kind = BPF_BSTACK_CFA_RSP;
		else if (reg == DWARF_RBP)
			row->cfa_kind = BPF_BSTACK_CFA_RBP;
		else
			row->cfa_kind = BPF_BSTACK_CFA_REG | reg << 4;
		row->cfa_offset = off;
		return;
	}
	plt = plt_threshold(ops, nops);
	if (plt > 0) {
		row->cfa_kind = BPF_BSTACK_CFA_PLT;
		row->cfa_offset = plt;
		return;
	}
	if (nops >= 2 && nops <= 7)
		cfa_deref(ops, nops, row);
}

/* Whether register regno is saved at CFA + *off (true), or unchanged (*off = 0) */
static bool saved_at_cfa(Dwarf_Frame *frame, int regno, s64 *off, bool *undefined)
{
	Dwarf_Op mem[3], *ops;
	size_t nops;

	*off = 0;
	*undefined = false;
	if (dwarf_frame_register(frame, regno, mem, &ops, &nops))
		return false;
	if (!nops) {
		*undefined = ops == mem;
		return !*undefined;
	}
	if (nops == 2 && ops[0].atom == DW_OP_call_frame_cfa && ops[1].atom == DW_OP_plus_uconst) {
		*off = (s64)ops[1].number;
		return true;
	}
	return false;
}

/* The row for the rules of frame */
static struct bpf_bstack_cfi_row frame_row(Dwarf_Frame *frame, bool signal)
{
	struct bpf_bstack_cfi_row row = { .cfa_kind = BPF_BSTACK_CFA_INVALID, };
	bool undefined;
	s64 off;

	if (signal) {
		row.cfa_kind = BPF_BSTACK_CFA_SIGNAL;
		return row;
	}
	if (!saved_at_cfa(frame, DWARF_RA, &off, &undefined)) {
		if (undefined)	/* _start, the child side of clone */
			row.cfa_kind = BPF_BSTACK_CFA_STOP;
		return row;
	}
	if (off != -8)
		return row;
	if (!saved_at_cfa(frame, DWARF_RBP, &off, &undefined))
		return row;
	if (off > 0 || off % 8 || -off / 8 > UINT8_MAX)
		return row;
	row.rbp = -off / 8;
	cfa_rule(frame, &row);
	return row;
}

static void count_row(struct bpf_bstack_cfi_table_info *info,
		      const struct bpf_bstack_cfi_row *row, bool cfa_expr)
{
	switch (BPF_BSTACK_CFA_KIND(row->cfa_kind)) {
	case BPF_BSTACK_CFA_INVALID:
		info->nr_invalid++;
		info->nr_cfa_expr += cfa_expr;
		break;
	case BPF_BSTACK_CFA_SIGNAL:
		info->nr_signal++;
		break;
	case BPF_BSTACK_CFA_STOP:
		info->nr_stop++;
		break;
	case BPF_BSTACK_CFA_PLT:
		info->nr_plt++;
		break;
	case BPF_BSTACK_CFA_REG:
		info->nr_cfa_reg++;
		break;
	case BPF_BSTACK_CFA_DEREF:
	case BPF_BSTACK_CFA_DEREF_INDEXED:
		info->nr_cfa_deref++;
		break;
	default:
		break;
	}
}

/* Whether frame's CFA is an expression, not a register plus an offset */
static bool cfa_is_expr(Dwarf_Frame *frame)
{
	Dwarf_Op *ops;
	size_t nops;

	return !dwarf_frame_cfa(frame, &ops, &nops) && nops &&
	       (nops > 1 || breg_regno(&ops[0]) < 0);
}

/* The rows of the FDE at vaddr start, which ends at limit at the latest */
static int add_fde_rows(struct cfi_table *t, Dwarf_CFI *cfi, u64 start, u64 limit)
{
	struct bpf_bstack_cfi_row gap = { .cfa_kind = BPF_BSTACK_CFA_NO_FDE, };
	u64 pc = start;
	int err;

	while (pc < limit) {
		Dwarf_Frame *frame;
		Dwarf_Addr from, to;
		bool signal = false;
		struct bpf_bstack_cfi_row row;

		if (dwarf_cfi_addrframe(cfi, pc, &frame))
			break;
		if (dwarf_frame_info(frame, &from, &to, &signal) < 0 || to <= pc) {
			free(frame);
			break;
		}
		row = frame_row(frame, signal);
		count_row(t->info, &row, cfa_is_expr(frame));
		free(frame);
		err = add_row(t, pc, row);
		if (err)
			return err;
		pc = to;
	}
	/* code between FDEs has no rule: PLT stubs, entry code, padding */
	return pc < limit ? add_row(t, pc, gap) : 0;
}

static s32 get_s32(const u8 *p)
{
	s32 v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/*
 * The FDE start addresses of .eh_frame_hdr's search table, sorted: the
 * encodings gcc and the binutils and lld linkers write (a 4-byte pointer
 * to .eh_frame, udata4 count, datarel sdata4 pairs).
 */
static int fde_starts(Elf *elf, const GElf_Phdr *hdr, u64 **starts, size_t *nr)
{
	Elf_Data *data = elf_getdata_rawchunk(elf, hdr->p_offset, hdr->p_filesz, ELF_T_BYTE);
	const u8 *p;
	size_t i, count;

	if (!data || data->d_size < 12)
		return -EINVAL;
	p = data->d_buf;
	if (p[0] != 1 || (p[1] & 0x0f) != DW_EH_PE_sdata4 || p[2] != DW_EH_PE_udata4 ||
	    p[3] != (DW_EH_PE_datarel | DW_EH_PE_sdata4))
		return -EINVAL;
	count = (u32)get_s32(p + 8);
	if (count > (data->d_size - 12) / 8)
		return -EINVAL;
	*starts = calloc(count + 1, sizeof(**starts));
	if (!*starts)
		return -ENOMEM;
	for (i = 0; i < count; i++)
		(*starts)[i] = hdr->p_vaddr + get_s32(p + 12 + i * 8);
	*nr = count;
	return 0;
}

static int read_segments(Elf *elf, struct cfi_table *t, GElf_Phdr *eh_frame_hdr)
{
	size_t i, nphdr;
	bool found = false;

	if (elf_getphdrnum(elf, &nphdr))
		return -EINVAL;
	for (i = 0; i < nphdr; i++) {
		GElf_Phdr phdr;

		if (!gelf_getphdr(elf, i, &phdr))
			return -EINVAL;
		if (phdr.p_type == PT_LOAD && (phdr.p_flags & PF_X) &&
		    t->nr_text < (int)ARRAY_SIZE(t->text))
			t->text[t->nr_text++] = phdr;
		if (phdr.p_type == PT_GNU_EH_FRAME) {
			*eh_frame_hdr = phdr;
			found = true;
		}
	}
	return found && t->nr_text ? 0 : -ENOENT;
}

static int cmp_row(const void *a, const void *b)
{
	const struct bpf_bstack_cfi_row *x = a, *y = b;

	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/*
 * The dynamic linker's entry code (_start, _dl_start_user) has no FDE: a
 * walk that gets there has reached the bottom of the stack of a process
 * still starting.  Executables mark their _start so themselves.
 */
static void mark_entry_point(Elf *elf, struct cfi_table *t)
{
	struct bpf_bstack_cfi_row *row = NULL;
	GElf_Ehdr ehdr;
	s64 off;
	size_t i;

	if (!gelf_getehdr(elf, &ehdr))
		return;
	off = text_offset(t, ehdr.e_entry);
	for (i = 0; off >= 0 && i < t->nr && t->rows[i].offset <= off; i++)
		row = &t->rows[i];
	if (row && row->cfa_kind == BPF_BSTACK_CFA_NO_FDE) {
		row->cfa_kind = BPF_BSTACK_CFA_STOP;
		t->info->nr_stop++;
	}
}

static int build_table(Elf *elf, struct cfi_table *t)
{
	GElf_Phdr hdr = {};
	Dwarf_CFI *cfi;
	u64 *starts = NULL;
	size_t i, nr = 0;
	int err;

	err = read_segments(elf, t, &hdr);
	if (!err)
		err = fde_starts(elf, &hdr, &starts, &nr);
	if (err)
		return err;
	cfi = dwarf_getcfi_elf(elf);
	if (!cfi) {
		free(starts);
		return -ENOENT;
	}
	t->info->nr_fdes = nr;
	for (i = 0; i < nr && !err; i++)
		err = add_fde_rows(t, cfi, starts[i], i + 1 < nr ? starts[i + 1] : UINT64_MAX);
	dwarf_cfi_end(cfi);
	free(starts);
	/* several executable segments come in the order of their addresses */
	qsort(t->rows, t->nr, sizeof(*t->rows), cmp_row);
	if (!err)
		mark_entry_point(elf, t);
	return err;
}

/*
 * The unwind table of the ELF file open at fd: *rows (to free) and their
 * number.  -ENOENT: the file has no .eh_frame_hdr to unwind with.
 */
int bpf_bstack__cfi_table(int fd, struct bpf_bstack_cfi_row **rows, size_t *nr,
			  struct bpf_bstack_cfi_table_info *info)
{
	struct bpf_bstack_cfi_table_info dummy;
	struct cfi_table t = { .info = info ? info : &dummy, };
	Elf *elf;
	int err;

	memset(t.info, 0, sizeof(*t.info));
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf)
		return -EINVAL;
	err = elf_kind(elf) == ELF_K_ELF ? build_table(elf, &t) : -EINVAL;
	elf_end(elf);
	if (err) {
		free(t.rows);
		return err;
	}
	*rows = t.rows;
	*nr = t.nr;
	return 0;
}
