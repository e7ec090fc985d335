// SPDX-License-Identifier: GPL-2.0
/*
 * perf bstack report --flamegraph: the resolved stacks as an HTML page.
 *
 * Each recorded event gets its own graph: a tree of frames, comm at the
 * root, whose values are the samples (hits, nanoseconds off-CPU) at or
 * under each frame, as d3-flame-graph (github.com/spiermar/d3-flame-graph)
 * draws it, with zoom on click and a search box.  The scripts of d3 and
 * d3-flame-graph, fetched at build time at pinned versions, are inlined,
 * so the page needs no network, and can be mailed or archived as is.
 */
#define pr_fmt(fmt) "perf bstack: " fmt

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/err.h>
#include <linux/kernel.h>
#include <linux/zalloc.h>

#include "util/bstack-flamegraph.h"
#include "util/bstack-payload.h"
#include "util/debug.h"
#include "util/hashmap.h"
#include "util/util.h"

struct fg_node {
	const struct fg_node	*parent;
	char			*name;
	u64			value;		/* at or under this frame */
	struct fg_node		*child, *next;	/* first child, next sibling */
};

struct fg_graph {
	char		*event, *unit;
	struct fg_node	root;
};

struct bpf_bstack_flamegraph {
	struct fg_graph	graph[BPF_BSTACK_MAX_EVENTS];
	int		nr_graphs;
	struct hashmap	*children;	/* struct fg_node * (by parent and name) -> itself */
};

static size_t node_hash(long key, void *ctx __maybe_unused)
{
	const struct fg_node *n = (const void *)key;

	return str_hash(n->name) ^ ((size_t)n->parent >> 4) * 0x9e3779b97f4a7c15ULL;
}

static bool node_equal(long a, long b, void *ctx __maybe_unused)
{
	const struct fg_node *x = (const void *)a, *y = (const void *)b;

	return x->parent == y->parent && !strcmp(x->name, y->name);
}

struct bpf_bstack_flamegraph *bpf_bstack_flamegraph__new(void)
{
	struct bpf_bstack_flamegraph *fg = zalloc(sizeof(*fg));

	if (!fg)
		return NULL;
	fg->children = hashmap__new(node_hash, node_equal, NULL);
	if (IS_ERR(fg->children)) {
		free(fg);
		return NULL;
	}
	return fg;
}

static void free_children(struct fg_node *n)
{
	struct fg_node *c, *next;

	for (c = n->child; c; c = next) {
		next = c->next;
		free_children(c);
		free(c->name);
		free(c);
	}
}

void bpf_bstack_flamegraph__delete(struct bpf_bstack_flamegraph *fg)
{
	int i;

	if (!fg)
		return;
	for (i = 0; i < fg->nr_graphs; i++) {
		free_children(&fg->graph[i].root);
		free(fg->graph[i].event);
		free(fg->graph[i].unit);
	}
	hashmap__free(fg->children);
	free(fg);
}

int bpf_bstack_flamegraph__add_graph(struct bpf_bstack_flamegraph *fg, const char *event,
				     const char *unit)
{
	struct fg_graph *g;

	if (fg->nr_graphs == (int)ARRAY_SIZE(fg->graph)) {
		pr_err("flame graph: more than %zu events\n", ARRAY_SIZE(fg->graph));
		return -E2BIG;
	}
	g = &fg->graph[fg->nr_graphs];
	g->event = strdup(event);
	g->unit = strdup(unit);
	g->root.name = g->event;
	if (!g->event || !g->unit) {
		free(g->event);
		free(g->unit);
		return -ENOMEM;
	}
	return fg->nr_graphs++;
}

static struct fg_node *child_of(struct bpf_bstack_flamegraph *fg, struct fg_node *parent,
				const char *name)
{
	struct fg_node probe = { .parent = parent, .name = (char *)name, }, *n;

	if (hashmap__find(fg->children, &probe, &n))
		return n;
	n = zalloc(sizeof(*n));
	if (!n)
		return NULL;
	n->parent = parent;
	n->name = strdup(name);
	if (!n->name || hashmap__add(fg->children, n, n)) {
		free(n->name);
		free(n);
		return NULL;
	}
	n->next = parent->child;
	parent->child = n;
	return n;
}

int bpf_bstack_flamegraph__add_stack(struct bpf_bstack_flamegraph *fg, int graph,
				     const char **names, u64 nr, u64 value)
{
	struct fg_node *n;
	u64 i;

	if (graph < 0 || graph >= fg->nr_graphs)
		return -EINVAL;
	n = &fg->graph[graph].root;
	n->value += value;
	for (i = 0; i < nr; i++) {
		n = child_of(fg, n, names[i]);
		if (!n)
			return -ENOMEM;
		n->value += value;
	}
	return 0;
}

/* s as a JavaScript string literal that cannot end the <script> it is in */
static void write_js_string(FILE *fp, const char *s)
{
	fputc('"', fp);
	for (; *s; s++) {
		unsigned char c = *s;

		if (c == '"' || c == '\\')
			fprintf(fp, "\\%c", c);
		else if (c < 0x20 || c == '<' || c == '>' || c == '&')
			fprintf(fp, "\\u%04x", c);
		else
			fputc(c, fp);
	}
	fputc('"', fp);
}

static void write_node(FILE *fp, const struct fg_node *n)
{
	const struct fg_node *c;

	fputs("{\"name\":", fp);
	write_js_string(fp, n->name);
	fprintf(fp, ",\"value\":%" PRIu64 ",\"children\":[", n->value);
	for (c = n->child; c; c = c->next) {
		write_node(fp, c);
		if (c->next)
			fputc(',', fp);
	}
	fputs("]}", fp);
}

/* Copy the file assets/name into the page */
static int inline_asset(FILE *fp, const char *assets, const char *name)
{
	char path[PATH_MAX], buf[BUFSIZ];
	FILE *in;
	size_t n;

	snprintf(path, sizeof(path), "%s/%s", assets, name);
	in = fopen(path, "r");
	if (!in) {
		pr_err("cannot read %s: %m: install perf, or set PERF_EXEC_PATH to its build directory\n",
		       path);
		return -ENOENT;
	}
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
		fwrite(buf, 1, n, fp);
	fclose(in);
	return 0;
}

static const char page_style[] =
	"body { font-family: sans-serif; margin: 1em 2em; }\n"
	"h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 1.5em; }\n"
	"form { margin: 0.5em 0; }\n";

static const char page_form[] =
	"<form id=\"search\"><input id=\"term\" placeholder=\"function\">\n"
	"<button type=\"submit\">Search</button>\n"
	"<button type=\"button\" id=\"reset\">Reset zoom</button></form>\n";

/* Draw each graph, and search or reset all of them from the form */
static const char page_script[] =
	"const width = Math.max(600, document.body.clientWidth - 20);\n"
	"/* d3-flame-graph 5's UMD bundle exports the chart as default */\n"
	"const newChart = flamegraph.flamegraph || flamegraph.default;\n"
	"const charts = graphs.map((g, i) => {\n"
	"  const c = newChart().width(width).cellHeight(18)\n"
	"    .transitionDuration(0).minFrameSize(1).sort(true)\n"
	"    .setLabelHandler(d => d.data.name + ' (' + d.value + ' ' + g.unit + ')');\n"
	"  d3.select('#graph' + i).datum(g.root).call(c);\n"
	"  return c;\n"
	"});\n"
	"document.getElementById('search').addEventListener('submit', e => {\n"
	"  e.preventDefault();\n"
	"  const term = document.getElementById('term').value;\n"
	"  charts.forEach(c => term ? c.search(term) : c.clear());\n"
	"});\n"
	"document.getElementById('reset').addEventListener('click', () => {\n"
	"  charts.forEach(c => { c.clear(); c.resetZoom(); });\n"
	"});\n";

static int write_page(FILE *fp, struct bpf_bstack_flamegraph *fg, const char *assets,
		      const char *title)
{
	int i, err;

	fputs("<!DOCTYPE html>\n<html>\n<head>\n<meta charset=\"utf-8\">\n<title>", fp);
	/* d3-flame-graph's script brings its own style */
	fprintf(fp, "perf bstack flame graph</title>\n<style>\n%s</style>\n</head>\n", page_style);
	fputs("<body>\n<h1>perf bstack flame graph</h1>\n<p id=\"title\"></p>\n", fp);
	fputs(page_form, fp);
	for (i = 0; i < fg->nr_graphs; i++)
		fprintf(fp, "<h2 id=\"event%d\"></h2>\n<div id=\"graph%d\"></div>\n", i, i);
	fputs("<script>\n", fp);
	err = inline_asset(fp, assets, "d3.min.js");
	fputs("\n</script>\n<script>\n", fp);
	if (!err)
		err = inline_asset(fp, assets, "d3-flamegraph.umd.min.js");
	if (err)
		return err;
	fputs("\n</script>\n<script>\nconst graphs = [\n", fp);
	for (i = 0; i < fg->nr_graphs; i++) {
		fputs("{\"event\":", fp);
		write_js_string(fp, fg->graph[i].event);
		fputs(",\"unit\":", fp);
		write_js_string(fp, fg->graph[i].unit);
		fputs(",\"root\":", fp);
		write_node(fp, &fg->graph[i].root);
		fputs("},\n", fp);
	}
	fputs("];\nconst title = ", fp);
	write_js_string(fp, title);
	fputs(";\ndocument.getElementById('title').textContent = title;\n"
	      "graphs.forEach((g, i) => { document.getElementById('event' + i).textContent =\n"
	      "  g.event + ': ' + g.root.value + ' ' + g.unit; });\n", fp);
	fputs(page_script, fp);
	fputs("</script>\n</body>\n</html>\n", fp);
	return 0;
}

int bpf_bstack_flamegraph__write(struct bpf_bstack_flamegraph *fg, const char *path,
				 const char *assets, const char *title)
{
	FILE *fp = fopen(path, "w");
	int err;

	if (!fp) {
		pr_err("cannot create %s: %m\n", path);
		return -errno;
	}
	err = write_page(fp, fg, assets, title);
	if (ferror(fp) && !err)
		err = -EIO;
	if (fclose(fp) && !err)
		err = -errno;
	if (err) {
		unlink(path);
		if (err != -ENOENT)
			pr_err("cannot write %s: %s\n", path, strerror(-err));
	}
	return err;
}
