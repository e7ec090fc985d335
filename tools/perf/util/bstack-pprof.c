// SPDX-License-Identifier: GPL-2.0
/*
 * perf bstack report --pprof: write the resolved stacks as a pprof profile.
 *
 * profile.proto needs two wire types (varints and length-delimited
 * fields) and five small messages, so it is encoded here rather than by a
 * protobuf library perf does not depend on.  Each user binary is a
 * mapping with its build-id, at the address the converter placed it, from
 * file offset 0: a location's address minus the mapping's start is the
 * frame's file offset, which readers turn into an ELF address with the
 * binary's program headers.  With raw, user mappings have no functions,
 * for a reader to symbolize by build-id; kernel frames and JIT code keep
 * their names, as no reader can symbolize them.
 */
#define pr_fmt(fmt) "perf bstack: " fmt

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <linux/err.h>
#include <linux/kernel.h>
#include <linux/string.h>
#include <linux/zalloc.h>
#ifdef HAVE_ZLIB_SUPPORT
#include <zlib.h>
#endif

#include "util/bstack-jit.h"
#include "util/bstack-payload.h"
#include "util/bstack-pprof.h"
#include "util/build-id.h"
#include "util/callchain.h"
#include "util/copyfile.h"
#include "util/debug.h"
#include "util/dso.h"
#include "util/hashmap.h"
#include "util/map.h"
#include "util/symbol.h"
#include "util/util.h"

/* profile.proto field numbers */
enum {
	PROFILE_SAMPLE_TYPE = 1, PROFILE_SAMPLE, PROFILE_MAPPING, PROFILE_LOCATION,
	PROFILE_FUNCTION, PROFILE_STRING_TABLE, PROFILE_TIME_NANOS = 9,
	PROFILE_DURATION_NANOS, PROFILE_DEFAULT_SAMPLE_TYPE = 14,
};
enum { VALUE_TYPE_TYPE = 1, VALUE_TYPE_UNIT };
enum { SAMPLE_LOCATION_ID = 1, SAMPLE_VALUE, SAMPLE_LABEL };
enum { LABEL_KEY = 1, LABEL_STR, LABEL_NUM };
enum {
	MAPPING_ID = 1, MAPPING_MEMORY_START, MAPPING_MEMORY_LIMIT, MAPPING_FILE_OFFSET,
	MAPPING_FILENAME, MAPPING_BUILD_ID, MAPPING_HAS_FUNCTIONS,
};
enum { LOCATION_ID = 1, LOCATION_MAPPING_ID, LOCATION_ADDRESS, LOCATION_LINE };
enum { LINE_FUNCTION_ID = 1 };
enum { FUNCTION_ID = 1, FUNCTION_NAME, FUNCTION_SYSTEM_NAME };

#define WIRE_VARINT	0
#define WIRE_LEN	2

/* A growing buffer of encoded protobuf */
struct pb {
	u8	*buf;
	size_t	len, alloc;
	int	err;
};

static void pb_put(struct pb *pb, const void *data, size_t len)
{
	/* an empty message has no buffer yet: nothing to copy from it */
	if (pb->err || !len)
		return;
	if (pb->len + len > pb->alloc) {
		size_t n = max(pb->alloc * 2, pb->len + len + 256);
		u8 *p = realloc(pb->buf, n);

		if (!p) {
			pb->err = -ENOMEM;
			return;
		}
		pb->buf = p;
		pb->alloc = n;
	}
	memcpy(pb->buf + pb->len, data, len);
	pb->len += len;
}

static void pb_varint(struct pb *pb, u64 v)
{
	u8 b[10];
	int n = 0;

	do {
		b[n] = v & 0x7f;
		v >>= 7;
		if (v)
			b[n] |= 0x80;
		n++;
	} while (v);
	pb_put(pb, b, n);
}

/* A varint field; proto3 leaves zeros out */
static void pb_uint(struct pb *pb, int field, u64 v)
{
	if (!v)
		return;
	pb_varint(pb, (u64)field << 3 | WIRE_VARINT);
	pb_varint(pb, v);
}

static void pb_bytes(struct pb *pb, int field, const void *data, size_t len)
{
	pb_varint(pb, (u64)field << 3 | WIRE_LEN);
	pb_varint(pb, len);
	pb_put(pb, data, len);
}

/* A submessage, built in sub, which is emptied for the next one */
static void pb_msg(struct pb *pb, int field, struct pb *sub)
{
	if (sub->err)
		pb->err = sub->err;
	pb_bytes(pb, field, sub->buf, sub->len);
	sub->len = 0;
}

static void pb_packed(struct pb *pb, int field, const u64 *v, size_t nr, struct pb *tmp)
{
	size_t i;

	for (i = 0; i < nr; i++)
		pb_varint(tmp, v[i]);
	pb_msg(pb, field, tmp);
}

struct pprof_mapping {
	struct dso	*dso;
	u64		start, limit;
	u64		filename, build_id;	/* string indices */
	u64		nr_outermost;		/* samples whose outermost user frame is here */
	bool		has_functions;
};

struct pprof_location {
	u64		mapping_id, address, function_id;
};

struct bpf_bstack_pprof {
	bool		raw;
	/* strings: index 0 is "" */
	char		**str;
	size_t		nr_str, alloc_str;
	struct hashmap	*str_index;	/* char * -> index */
	struct hashmap	*mapping_index;	/* struct dso * -> id */
	struct hashmap	*location_index; /* struct pprof_location * -> id */
	struct hashmap	*function_index; /* name index -> id */
	struct pprof_mapping *mapping;
	size_t		nr_mapping, alloc_mapping;
	struct pprof_location *location;
	size_t		nr_location, alloc_location;
	u64		*function;	/* name index of each */
	size_t		nr_function, alloc_function;
	u64		types[BPF_BSTACK_MAX_EVENTS][2];	/* type, unit string indices */
	int		nr_types;
	u64		time_ns, duration_ns;
	struct pb	samples, tmp, tmp2;
	u64		*ids;		/* scratch: a sample's location ids */
	size_t		alloc_ids;
};

static size_t str_hash_fn(long key, void *ctx __maybe_unused)
{
	return str_hash((const char *)key);
}

static bool str_equal_fn(long a, long b, void *ctx __maybe_unused)
{
	return !strcmp((const char *)a, (const char *)b);
}

static size_t ptr_hash_fn(long key, void *ctx __maybe_unused)
{
	return (key >> 4) * 0x9e3779b97f4a7c15ULL;
}

static bool ptr_equal_fn(long a, long b, void *ctx __maybe_unused)
{
	return a == b;
}

static size_t location_hash_fn(long key, void *ctx __maybe_unused)
{
	const struct pprof_location *l = (const void *)key;

	return (l->mapping_id * 0x9e3779b97f4a7c15ULL) ^ l->address;
}

static bool location_equal_fn(long a, long b, void *ctx __maybe_unused)
{
	const struct pprof_location *x = (const void *)a, *y = (const void *)b;

	return x->mapping_id == y->mapping_id && x->address == y->address;
}

/* Grow array *p of *alloc elements of size sz to hold one more than nr */
static int grow(void *p, size_t *alloc, size_t nr, size_t sz)
{
	void **arr = p;
	size_t n;
	void *q;

	if (nr < *alloc)
		return 0;
	n = *alloc ? *alloc * 2 : 64;
	q = realloc(*arr, n * sz);
	if (!q)
		return -ENOMEM;
	*arr = q;
	*alloc = n;
	return 0;
}

/* The index of s in the string table, added if new; 0 ("") on error */
static u64 intern(struct bpf_bstack_pprof *p, const char *s)
{
	long idx;
	char *copy;

	if (!s || !*s)
		return 0;
	if (hashmap__find(p->str_index, s, &idx))
		return idx;
	if (grow(&p->str, &p->alloc_str, p->nr_str, sizeof(*p->str)))
		return 0;
	copy = strdup(s);
	if (!copy || hashmap__add(p->str_index, copy, (long)p->nr_str)) {
		free(copy);
		return 0;
	}
	p->str[p->nr_str] = copy;
	return p->nr_str++;
}

struct bpf_bstack_pprof *bpf_bstack_pprof__new(bool raw)
{
	struct bpf_bstack_pprof *p = zalloc(sizeof(*p));

	if (!p)
		return NULL;
	p->raw = raw;
	p->str_index = hashmap__new(str_hash_fn, str_equal_fn, NULL);
	p->mapping_index = hashmap__new(ptr_hash_fn, ptr_equal_fn, NULL);
	p->location_index = hashmap__new(location_hash_fn, location_equal_fn, NULL);
	p->function_index = hashmap__new(ptr_hash_fn, ptr_equal_fn, NULL);
	p->str = calloc(64, sizeof(*p->str));
	p->alloc_str = 64;
	if (p->str) {
		p->str[0] = strdup("");	/* string 0 must be "" */
		p->nr_str = 1;
	}
	if (IS_ERR(p->str_index) || IS_ERR(p->mapping_index) || IS_ERR(p->location_index) ||
	    IS_ERR(p->function_index) || !p->str || !p->str[0]) {
		if (IS_ERR(p->str_index))
			p->str_index = NULL;
		if (IS_ERR(p->mapping_index))
			p->mapping_index = NULL;
		if (IS_ERR(p->location_index))
			p->location_index = NULL;
		if (IS_ERR(p->function_index))
			p->function_index = NULL;
		bpf_bstack_pprof__delete(p);
		return NULL;
	}
	return p;
}

void bpf_bstack_pprof__delete(struct bpf_bstack_pprof *p)
{
	struct hashmap_entry *cur;
	size_t i, bkt;

	if (!p)
		return;
	if (p->location_index) {
		hashmap__for_each_entry(p->location_index, cur, bkt)
			free((void *)cur->pkey);
	}
	hashmap__free(p->location_index);
	hashmap__free(p->str_index);
	hashmap__free(p->mapping_index);
	hashmap__free(p->function_index);
	for (i = 0; i < p->nr_str; i++)
		free(p->str[i]);
	free(p->str);
	for (i = 0; i < p->nr_mapping; i++)
		dso__put(p->mapping[i].dso);
	free(p->mapping);
	free(p->location);
	free(p->function);
	free(p->samples.buf);
	free(p->tmp.buf);
	free(p->tmp2.buf);
	free(p->ids);
	free(p);
}

int bpf_bstack_pprof__add_type(struct bpf_bstack_pprof *p, const char *type, const char *unit)
{
	if (p->nr_types == (int)ARRAY_SIZE(p->types)) {
		pr_err("pprof: more than %zu sample types\n", ARRAY_SIZE(p->types));
		return -E2BIG;
	}
	p->types[p->nr_types][0] = intern(p, type);
	p->types[p->nr_types][1] = intern(p, unit);
	return p->nr_types++;
}

void bpf_bstack_pprof__set_time(struct bpf_bstack_pprof *p, u64 time_ns, u64 duration_ns)
{
	p->time_ns = time_ns;
	p->duration_ns = duration_ns;
}

static bool is_user_dso(struct dso *dso)
{
	return dso__kernel(dso) == DSO_SPACE__USER;
}

/* The mapping id of map's binary: 0 for none */
static u64 mapping_id(struct bpf_bstack_pprof *p, struct map *map)
{
	struct dso *dso = map ? map__dso(map) : NULL;
	struct pprof_mapping *m;
	char sbid[SBUILD_ID_SIZE];
	long id;

	if (!dso)
		return 0;
	if (hashmap__find(p->mapping_index, dso, &id))
		return id;
	if (grow(&p->mapping, &p->alloc_mapping, p->nr_mapping, sizeof(*p->mapping)))
		return 0;
	m = &p->mapping[p->nr_mapping];
	memset(m, 0, sizeof(*m));
	m->start = map__start(map);
	m->limit = map__end(map);
	m->filename = intern(p, dso__long_name(dso));
	if (dso__has_build_id(dso)) {
		build_id__sprintf(dso__bid(dso), sbid);
		m->build_id = intern(p, sbid);
	}
	/* no reader has the kernel's symbols, or JIT images */
	m->has_functions = !p->raw || !is_user_dso(dso) ||
			   strstarts(dso__long_name(dso), BPF_BSTACK_JIT_PREFIX);
	if (hashmap__add(p->mapping_index, dso, (long)p->nr_mapping + 1))
		return 0;
	m->dso = dso__get(dso);
	return ++p->nr_mapping;
}

static u64 function_id(struct bpf_bstack_pprof *p, const char *name)
{
	u64 name_idx = intern(p, name);
	long id;

	if (!name_idx)
		return 0;
	if (hashmap__find(p->function_index, (long)name_idx, &id))
		return id;
	if (grow(&p->function, &p->alloc_function, p->nr_function, sizeof(*p->function)) ||
	    hashmap__add(p->function_index, (long)name_idx, (long)p->nr_function + 1))
		return 0;
	p->function[p->nr_function] = name_idx;
	return ++p->nr_function;
}

/* The location id of a frame, added if new */
static u64 location_id(struct bpf_bstack_pprof *p, struct callchain_cursor_node *node)
{
	struct pprof_location key = { .address = node->ip, }, *l;
	long id;

	key.mapping_id = mapping_id(p, node->ms.map);
	if (hashmap__find(p->location_index, &key, &id))
		return id;
	if (node->ms.sym && (!key.mapping_id || p->mapping[key.mapping_id - 1].has_functions))
		key.function_id = function_id(p, node->ms.sym->name);
	if (grow(&p->location, &p->alloc_location, p->nr_location, sizeof(*p->location)))
		return 0;
	l = malloc(sizeof(*l));
	if (!l)
		return 0;
	*l = key;
	if (hashmap__add(p->location_index, l, (long)p->nr_location + 1)) {
		free(l);
		return 0;
	}
	p->location[p->nr_location] = key;
	return ++p->nr_location;
}

/* The executable of a sample: the binary of its outermost user frame */
static void count_outermost(struct bpf_bstack_pprof *p, u64 n, u64 value)
{
	while (n--) {
		u64 m = p->location[p->ids[n] - 1].mapping_id;

		if (m && is_user_dso(p->mapping[m - 1].dso)) {
			p->mapping[m - 1].nr_outermost += value;
			return;
		}
	}
}

static void add_label(struct pb *pb, struct pb *tmp, u64 key, u64 str, u64 num)
{
	pb_uint(tmp, LABEL_KEY, key);
	if (str)
		pb_uint(tmp, LABEL_STR, str);
	else
		pb_uint(tmp, LABEL_NUM, num);
	pb_msg(pb, SAMPLE_LABEL, tmp);
}

int bpf_bstack_pprof__add_sample(struct bpf_bstack_pprof *p,
				 struct callchain_cursor_node **nodes, u64 nr,
				 int type, u64 value,
				 const struct bpf_bstack_pprof_labels *labels)
{
	struct pb *s = &p->tmp, *t = &p->tmp2;
	u64 values[ARRAY_SIZE(p->types)] = {};
	u64 i, n = 0;

	if (type < 0 || type >= p->nr_types)
		return -EINVAL;
	if (nr > p->alloc_ids) {
		u64 *q = realloc(p->ids, nr * sizeof(*q));

		if (!q)
			return -ENOMEM;
		p->ids = q;
		p->alloc_ids = nr;
	}
	for (i = 0; i < nr; i++) {
		u64 id = location_id(p, nodes[i]);

		if (!id)
			return -ENOMEM;
		p->ids[n++] = id;
	}
	count_outermost(p, n, value);
	values[type] = value;

	pb_packed(s, SAMPLE_LOCATION_ID, p->ids, n, t);
	pb_packed(s, SAMPLE_VALUE, values, p->nr_types, t);
	add_label(s, t, intern(p, "comm"), intern(p, labels->comm ?: "[unknown]"), 0);
	add_label(s, t, intern(p, "event"), intern(p, labels->event), 0);
	add_label(s, t, intern(p, "pid"), 0, labels->pid);
	add_label(s, t, intern(p, "tid"), 0, labels->tid);
	add_label(s, t, intern(p, "cpu"), 0, labels->cpu);
	pb_msg(&p->samples, PROFILE_SAMPLE, s);
	return p->samples.err;
}

static void encode_mapping(struct bpf_bstack_pprof *p, struct pb *out, size_t i)
{
	const struct pprof_mapping *mp = &p->mapping[i];
	struct pb *m = &p->tmp;

	pb_uint(m, MAPPING_ID, i + 1);
	pb_uint(m, MAPPING_MEMORY_START, mp->start);
	pb_uint(m, MAPPING_MEMORY_LIMIT, mp->limit);
	pb_uint(m, MAPPING_FILENAME, mp->filename);
	pb_uint(m, MAPPING_BUILD_ID, mp->build_id);
	pb_uint(m, MAPPING_HAS_FUNCTIONS, mp->has_functions);
	pb_msg(out, PROFILE_MAPPING, m);
}

/* pprof takes the first mapping for the main binary: the most samples' executable */
static size_t main_mapping(struct bpf_bstack_pprof *p)
{
	size_t i, best = 0;

	for (i = 1; i < p->nr_mapping; i++) {
		if (p->mapping[i].nr_outermost > p->mapping[best].nr_outermost)
			best = i;
	}
	return best;
}

static void encode_profile(struct bpf_bstack_pprof *p, struct pb *out)
{
	struct pb *m = &p->tmp, *t = &p->tmp2;
	size_t i, first = main_mapping(p);

	for (i = 0; i < (size_t)p->nr_types; i++) {
		pb_uint(m, VALUE_TYPE_TYPE, p->types[i][0]);
		pb_uint(m, VALUE_TYPE_UNIT, p->types[i][1]);
		pb_msg(out, PROFILE_SAMPLE_TYPE, m);
	}
	pb_put(out, p->samples.buf, p->samples.len);
	if (p->nr_mapping)
		encode_mapping(p, out, first);
	for (i = 0; i < p->nr_mapping; i++) {
		if (i != first)
			encode_mapping(p, out, i);
	}
	for (i = 0; i < p->nr_location; i++) {
		const struct pprof_location *l = &p->location[i];

		pb_uint(m, LOCATION_ID, i + 1);
		pb_uint(m, LOCATION_MAPPING_ID, l->mapping_id);
		pb_uint(m, LOCATION_ADDRESS, l->address);
		if (l->function_id) {
			pb_uint(t, LINE_FUNCTION_ID, l->function_id);
			pb_msg(m, LOCATION_LINE, t);
		}
		pb_msg(out, PROFILE_LOCATION, m);
	}
	for (i = 0; i < p->nr_function; i++) {
		pb_uint(m, FUNCTION_ID, i + 1);
		pb_uint(m, FUNCTION_NAME, p->function[i]);
		pb_uint(m, FUNCTION_SYSTEM_NAME, p->function[i]);
		pb_msg(out, PROFILE_FUNCTION, m);
	}
	for (i = 0; i < p->nr_str; i++)
		pb_bytes(out, PROFILE_STRING_TABLE, p->str[i], strlen(p->str[i]));
	pb_uint(out, PROFILE_TIME_NANOS, p->time_ns);
	pb_uint(out, PROFILE_DURATION_NANOS, p->duration_ns);
	if (p->nr_types)
		pb_uint(out, PROFILE_DEFAULT_SAMPLE_TYPE, p->types[0][0]);
	if (m->err || t->err)
		out->err = -ENOMEM;
}

/* gzipped, as pprof files are, where perf has zlib */
static int write_file(const char *path, const void *buf, size_t len)
{
#ifdef HAVE_ZLIB_SUPPORT
	gzFile gz = gzopen(path, "wb");
	int ok;

	if (!gz)
		return -errno ?: -ENOMEM;
	ok = !len || gzwrite(gz, buf, len) == (int)len;
	if (gzclose(gz) != Z_OK || !ok)
		return -EIO;
	return 0;
#else
	FILE *fp = fopen(path, "w");
	int ok;

	if (!fp)
		return -errno;
	ok = fwrite(buf, 1, len, fp) == len;
	if (fclose(fp) || !ok)
		return -EIO;
	return 0;
#endif
}

int bpf_bstack_pprof__write(struct bpf_bstack_pprof *p, const char *path)
{
	struct pb out = {};
	int err;

	encode_profile(p, &out);
	err = out.err ?: p->samples.err;
	if (!err)
		err = write_file(path, out.buf, out.len);
	free(out.buf);
	if (err)
		pr_err("cannot write %s: %s\n", path, strerror(-err));
	return err;
}

/* The file of dso's build-id: in the build-id cache, or still at its path */
static bool binary_of(struct dso *dso, char *link_name, char *path)
{
	struct build_id bid;

	/* the cache's .build-id entry is a relative symbolic link */
	if (dso__build_id_filename(dso, link_name, PATH_MAX, false) &&
	    realpath(link_name, path) && !access(path, R_OK))
		return true;
	snprintf(path, PATH_MAX, "%s", dso__long_name(dso));
	return filename__read_build_id(path, &bid) > 0 && dso__build_id_equal(dso, &bid);
}

/* dir/<build-id>/<basename>: a hard link into the cache, or a copy */
static int copy_binary(struct dso *dso, const char *dir)
{
	char link_name[PATH_MAX], from[PATH_MAX], to[PATH_MAX], sbid[SBUILD_ID_SIZE];
	const char *base;

	if (!binary_of(dso, link_name, from))
		return -ENOENT;
	build_id__sprintf(dso__bid(dso), sbid);
	base = strrchr(dso__long_name(dso), '/');
	base = base ? base + 1 : dso__long_name(dso);
	if (snprintf(to, sizeof(to), "%s/%s", dir, sbid) >= (int)sizeof(to))
		return -ENAMETOOLONG;
	if (mkdir_p(to, 0755))
		return -errno;
	if (snprintf(to, sizeof(to), "%s/%s/%s", dir, sbid, base) >= (int)sizeof(to))
		return -ENAMETOOLONG;
	if (!access(to, F_OK))
		return 0;
	if (!link(from, to))
		return 0;
	return copyfile(from, to) ? -EIO : 0;
}

int bpf_bstack_pprof__copy_binaries(struct bpf_bstack_pprof *p, const char *dir_name)
{
	char dir[PATH_MAX];
	int missing = 0;
	size_t i;

	/* mkdir_p() wants an absolute path */
	if ((mkdir(dir_name, 0755) && errno != EEXIST) || !realpath(dir_name, dir)) {
		pr_err("cannot create %s: %m\n", dir_name);
		return -errno;
	}
	for (i = 0; i < p->nr_mapping; i++) {
		struct dso *dso = p->mapping[i].dso;

		if (!is_user_dso(dso) || !dso__has_build_id(dso))
			continue;
		if (copy_binary(dso, dir)) {
			pr_warning("%s: not in the build-id cache, not copied\n",
				   dso__long_name(dso));
			missing++;
		}
	}
	return missing;
}
