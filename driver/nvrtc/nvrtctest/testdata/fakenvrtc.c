/*
 * A fake libnvrtc for accelkit's tests: the NVRTC entry points package nvrtc
 * uses, with a "compiler" that scans the source for __global__ kernels and
 * emits PTX (compute_XX) or a fake cubin (sm_XX) declaring them.
 *
 * What it does, as a real NVRTC would:
 *  - nvrtcVersion: 13.0, or $ACCELKIT_FAKENVRTC_VERSION ("12.8");
 *  - nvrtcGetSupportedArchs: 75 80 86 87 89 90 100 103 110 120 121 (CUDA 12
 *    adds 50 .. 72), or $ACCELKIT_FAKENVRTC_ARCHS ("75,80,90");
 *  - options: -arch=/--gpu-architecture= (also as two options) must name a
 *    supported sm_NN[a|f] or compute_NN[a|f] (default compute_52); other
 *    options must be known ones; else NVRTC_ERROR_INVALID_OPTION;
 *  - #include "x" / <x> of a header given to nvrtcCreateProgram (scanned
 *    too); any other include is a catastrophic error; #error fails the
 *    compile with its text in the log; #warning adds a warning to the log;
 *  - kernels: `[extern "C"] [template <...>] __global__ void NAME(params)`,
 *    also inside extern "C" { ... } blocks. extern "C" kernels keep their
 *    name; the others get an Itanium-style mangled name; template kernels
 *    exist only as instantiated by name expressions (NAME<float>);
 *  - a name expression that names no kernel fails the compile;
 *  - parameter types, as NVRTC declares them in PTX: pointers, long,
 *    long long, size_t (.u64), int, unsigned (.u32), float (.f32), double
 *    (.f64);
 *  - $ACCELKIT_FAKENVRTC_FAIL_COMPILE=1 fails every compile;
 *    $ACCELKIT_FAKENVRTC_COMPILE_MS=N makes each compile take N ms, asking
 *    the nvrtcSetFlowCallback callback every millisecond whether to cancel.
 * fake_counter(name) counts the calls of each entry point.
 *
 * A fake cubin is "\x7fELF", the line "ACCELKIT-FAKE-CUBIN sm_XX", then the
 * PTX text.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EXPORT __attribute__((visibility("default")))

typedef int nvrtcResult;
enum {
	NVRTC_SUCCESS = 0,
	NVRTC_ERROR_OUT_OF_MEMORY = 1,
	NVRTC_ERROR_PROGRAM_CREATION_FAILURE = 2,
	NVRTC_ERROR_INVALID_INPUT = 3,
	NVRTC_ERROR_INVALID_PROGRAM = 4,
	NVRTC_ERROR_INVALID_OPTION = 5,
	NVRTC_ERROR_COMPILATION = 6,
	NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION = 8,
	NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION = 9,
	NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID = 10,
	NVRTC_ERROR_CANCELLED = 16,
};

static const char *const error_names[] = {
	"NVRTC_SUCCESS",
	"NVRTC_ERROR_OUT_OF_MEMORY",
	"NVRTC_ERROR_PROGRAM_CREATION_FAILURE",
	"NVRTC_ERROR_INVALID_INPUT",
	"NVRTC_ERROR_INVALID_PROGRAM",
	"NVRTC_ERROR_INVALID_OPTION",
	"NVRTC_ERROR_COMPILATION",
	"NVRTC_ERROR_BUILTIN_OPERATION_FAILURE",
	"NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION",
	"NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION",
	"NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID",
	"NVRTC_ERROR_INTERNAL_ERROR",
	"NVRTC_ERROR_TIME_FILE_WRITE_FAILED",
	"NVRTC_ERROR_NO_PCH_CREATE_ATTEMPTED",
	"NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED",
	"NVRTC_ERROR_PCH_CREATE",
	"NVRTC_ERROR_CANCELLED",
	"NVRTC_ERROR_TIME_TRACE_FILE_WRITE_FAILED",
	"NVRTC_ERROR_BUSY",
};

/* ---- counters ------------------------------------------------------------ */

static const char *const counter_names[] = {
	"nvrtcGetErrorString", "nvrtcVersion", "nvrtcGetNumSupportedArchs", "nvrtcGetSupportedArchs",
	"nvrtcCreateProgram", "nvrtcDestroyProgram", "nvrtcCompileProgram", "nvrtcGetPTXSize",
	"nvrtcGetPTX", "nvrtcGetCUBINSize", "nvrtcGetCUBIN", "nvrtcGetProgramLogSize",
	"nvrtcGetProgramLog", "nvrtcAddNameExpression", "nvrtcGetLoweredName", "nvrtcSetFlowCallback",
	"live_programs",
};
#define NCOUNTERS ((int)(sizeof counter_names / sizeof counter_names[0]))
static long long counters[NCOUNTERS];

static void count(const char *name, long long d) {
	for (int i = 0; i < NCOUNTERS; i++) {
		if (strcmp(counter_names[i], name) == 0) {
			__atomic_add_fetch(&counters[i], d, __ATOMIC_RELAXED);
			return;
		}
	}
}
#define COUNT() count(__func__, 1)

/* fake_counter returns how often an entry point was called ("live_programs":
 * created and not yet destroyed), or -1 for an unknown name. */
EXPORT long long fake_counter(const char *name) {
	for (int i = 0; i < NCOUNTERS; i++) {
		if (strcmp(counter_names[i], name) == 0) return __atomic_load_n(&counters[i], __ATOMIC_RELAXED);
	}
	return -1;
}

/* ---- growable strings ---------------------------------------------------- */

typedef struct { char *p; size_t n, cap; } sbuf;

static void sb_grow(sbuf *b, size_t more) {
	if (b->n + more + 1 <= b->cap) return;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < b->n + more + 1) cap *= 2;
	char *p = realloc(b->p, cap);
	if (p == NULL) abort(); /* a test fake: out of memory is fatal */
	b->p = p;
	b->cap = cap;
}
static void sb_add(sbuf *b, const char *s, size_t n) {
	sb_grow(b, n);
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = 0;
}
static void sb_puts(sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }
static void sb_printf(sbuf *b, const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	sb_grow(b, (size_t)n);
	va_start(ap, fmt);
	vsnprintf(b->p + b->n, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->n += (size_t)n;
}
static char *xstrdup(const char *s) {
	char *p = strdup(s ? s : "");
	if (p == NULL) abort();
	return p;
}

/* ---- programs ------------------------------------------------------------ */

#define MAX_PARAMS 32
#define MAX_TPARAMS 8

typedef struct {
	char *name;
	int extern_c;
	int ntparams;
	char *tparams[MAX_TPARAMS];   /* template parameter names */
	int tparam_type[MAX_TPARAMS]; /* 1: typename/class, 0: a value */
	int nparams;
	char *params[MAX_PARAMS];     /* each parameter's declaration text */
} kernel;

typedef struct {
	char *lowered;
	char *ptx_params; /* the .param lines */
} entry;

typedef struct prog {
	unsigned magic;
	char *src, *name;
	int nheaders;
	char **hsrc, **hname;
	int nexpr;
	char **exprs;
	char **lowered; /* per expression, after a successful compile */
	int state;      /* 0 not compiled, 1 compiled, 2 failed */
	sbuf log;
	sbuf ptx;       /* with its NUL counted by nvrtcGetPTXSize */
	sbuf cubin;
	int (*flow)(void *, void *);
	void *payload;
} prog;

#define PROG_MAGIC 0x6e767274u

static prog *get(void *p) {
	prog *g = p;
	return (g != NULL && g->magic == PROG_MAGIC) ? g : NULL;
}

EXPORT const char *nvrtcGetErrorString(nvrtcResult r) {
	COUNT();
	if (r >= 0 && r < (int)(sizeof error_names / sizeof error_names[0])) return error_names[r];
	return "NVRTC_ERROR unknown";
}

static void version(int *major, int *minor) {
	*major = 13;
	*minor = 0;
	const char *v = getenv("ACCELKIT_FAKENVRTC_VERSION");
	if (v != NULL && *v) sscanf(v, "%d.%d", major, minor);
}

EXPORT nvrtcResult nvrtcVersion(int *major, int *minor) {
	COUNT();
	if (major == NULL || minor == NULL) return NVRTC_ERROR_INVALID_INPUT;
	version(major, minor);
	return NVRTC_SUCCESS;
}

#define MAX_ARCHS 64

static int archs(int *out) {
	const char *v = getenv("ACCELKIT_FAKENVRTC_ARCHS");
	int n = 0;
	if (v != NULL && *v) {
		const char *p = v;
		while (*p && n < MAX_ARCHS) {
			char *end;
			long a = strtol(p, &end, 10);
			if (end == p) break;
			out[n++] = (int)a;
			p = end;
			while (*p == ',' || *p == ' ') p++;
		}
		return n;
	}
	int major, minor;
	version(&major, &minor);
	static const int old[] = {50, 52, 53, 60, 61, 62, 70, 72};
	static const int cur[] = {75, 80, 86, 87, 89, 90, 100, 103, 110, 120, 121};
	if (major < 13)
		for (size_t i = 0; i < sizeof old / sizeof old[0]; i++) out[n++] = old[i];
	for (size_t i = 0; i < sizeof cur / sizeof cur[0]; i++) out[n++] = cur[i];
	return n;
}

EXPORT nvrtcResult nvrtcGetNumSupportedArchs(int *num) {
	COUNT();
	if (num == NULL) return NVRTC_ERROR_INVALID_INPUT;
	int a[MAX_ARCHS];
	*num = archs(a);
	return NVRTC_SUCCESS;
}

EXPORT nvrtcResult nvrtcGetSupportedArchs(int *out) {
	COUNT();
	if (out == NULL) return NVRTC_ERROR_INVALID_INPUT;
	int a[MAX_ARCHS];
	int n = archs(a);
	memcpy(out, a, (size_t)n * sizeof(int));
	return NVRTC_SUCCESS;
}

EXPORT nvrtcResult nvrtcCreateProgram(void **out, const char *src, const char *name, int nheaders,
	const char *const *headers, const char *const *include_names) {
	COUNT();
	if (out == NULL || src == NULL || nheaders < 0) return NVRTC_ERROR_INVALID_INPUT;
	if (nheaders > 0 && (headers == NULL || include_names == NULL)) return NVRTC_ERROR_INVALID_INPUT;
	prog *g = calloc(1, sizeof *g);
	if (g == NULL) return NVRTC_ERROR_OUT_OF_MEMORY;
	g->magic = PROG_MAGIC;
	g->src = xstrdup(src);
	g->name = xstrdup(name && *name ? name : "default_program");
	g->nheaders = nheaders;
	g->hsrc = calloc((size_t)nheaders + 1, sizeof(char *));
	g->hname = calloc((size_t)nheaders + 1, sizeof(char *));
	for (int i = 0; i < nheaders; i++) {
		g->hsrc[i] = xstrdup(headers[i]);
		g->hname[i] = xstrdup(include_names[i]);
	}
	*out = g;
	count("live_programs", 1);
	return NVRTC_SUCCESS;
}

EXPORT nvrtcResult nvrtcDestroyProgram(void **p) {
	COUNT();
	if (p == NULL) return NVRTC_ERROR_INVALID_INPUT;
	prog *g = get(*p);
	if (g == NULL) return NVRTC_ERROR_INVALID_PROGRAM;
	g->magic = 0;
	free(g->src);
	free(g->name);
	for (int i = 0; i < g->nheaders; i++) {
		free(g->hsrc[i]);
		free(g->hname[i]);
	}
	free(g->hsrc);
	free(g->hname);
	for (int i = 0; i < g->nexpr; i++) {
		free(g->exprs[i]);
		if (g->lowered) free(g->lowered[i]);
	}
	free(g->exprs);
	free(g->lowered);
	free(g->log.p);
	free(g->ptx.p);
	free(g->cubin.p);
	free(g);
	*p = NULL;
	count("live_programs", -1);
	return NVRTC_SUCCESS;
}

EXPORT nvrtcResult nvrtcAddNameExpression(void *p, const char *const expr) {
	COUNT();
	prog *g = get(p);
	if (g == NULL) return NVRTC_ERROR_INVALID_PROGRAM;
	if (expr == NULL) return NVRTC_ERROR_INVALID_INPUT;
	if (g->state != 0) return NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION;
	char **e = realloc(g->exprs, (size_t)(g->nexpr + 1) * sizeof(char *));
	if (e == NULL) return NVRTC_ERROR_OUT_OF_MEMORY;
	g->exprs = e;
	g->exprs[g->nexpr++] = xstrdup(expr);
	return NVRTC_SUCCESS;
}

EXPORT nvrtcResult nvrtcSetFlowCallback(void *p, int (*cb)(void *, void *), void *payload) {
	COUNT();
	prog *g = get(p);
	if (g == NULL) return NVRTC_ERROR_INVALID_PROGRAM;
	g->flow = cb;
	g->payload = payload;
	return NVRTC_SUCCESS;
}

/* ---- the "compiler" ------------------------------------------------------ */

typedef struct {
	prog *g;
	sbuf text;      /* the source and its headers, directives removed */
	int failed;
	int arch;       /* 90 */
	char arch_suffix[2];
	int is_virtual; /* compute_ */
	kernel kernels[256];
	int nkernels;
	sbuf options;   /* for the PTX's comment */
} compilation;

static void fail(compilation *c, const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	sb_grow(&c->g->log, (size_t)n);
	va_start(ap, fmt);
	vsnprintf(c->g->log.p + c->g->log.n, (size_t)n + 1, fmt, ap);
	va_end(ap);
	c->g->log.n += (size_t)n;
	c->failed = 1;
}

static const char *find_header(prog *g, const char *name, size_t n) {
	for (int i = 0; i < g->nheaders; i++) {
		if (strlen(g->hname[i]) == n && strncmp(g->hname[i], name, n) == 0) return g->hsrc[i];
	}
	return NULL;
}

/* preprocess copies file's lines into c->text, following #include of the
 * program's headers and acting on #error and #warning. */
static void preprocess(compilation *c, const char *file, const char *src, int depth) {
	if (depth > 32) {
		fail(c, "%s(1): catastrophic error: #include nested too deeply\n", file);
		return;
	}
	int line = 0;
	const char *p = src;
	while (*p && !c->failed) {
		line++;
		const char *eol = strchr(p, '\n');
		size_t len = eol ? (size_t)(eol - p) : strlen(p);
		const char *q = p;
		while (q < p + len && (*q == ' ' || *q == '\t')) q++;
		if (q < p + len && *q == '#') {
			q++;
			while (q < p + len && (*q == ' ' || *q == '\t')) q++;
			const char *word = q;
			while (q < p + len && isalpha((unsigned char)*q)) q++;
			size_t wl = (size_t)(q - word);
			while (q < p + len && (*q == ' ' || *q == '\t')) q++;
			int rest = (int)(p + len - q);
			if (wl == 5 && strncmp(word, "error", 5) == 0) {
				fail(c, "%s(%d): catastrophic error: #error directive: %.*s\n\n"
					"1 catastrophic error detected in the compilation of \"%s\".\nCompilation terminated.\n",
					file, line, rest, q, c->g->name);
				return;
			}
			if (wl == 7 && strncmp(word, "warning", 7) == 0) {
				sb_printf(&c->g->log, "%s(%d): warning #1105-D: #warning directive: %.*s\n", file, line, rest, q);
			} else if (wl == 7 && strncmp(word, "include", 7) == 0) {
				char close = *q == '<' ? '>' : '"';
				if (*q != '<' && *q != '"') {
					fail(c, "%s(%d): catastrophic error: #include expects \"FILENAME\" or <FILENAME>\n", file, line);
					return;
				}
				const char *nb = q + 1, *ne = nb;
				while (ne < p + len && *ne != close) ne++;
				const char *h = find_header(c->g, nb, (size_t)(ne - nb));
				if (h == NULL) {
					fail(c, "%s(%d): catastrophic error: cannot open source file \"%.*s\"\n\n"
						"1 catastrophic error detected in the compilation of \"%s\".\nCompilation terminated.\n",
						file, line, (int)(ne - nb), nb, c->g->name);
					return;
				}
				char hname[256];
				snprintf(hname, sizeof hname, "%.*s", (int)(ne - nb), nb);
				preprocess(c, hname, h, depth + 1);
			}
			/* other directives (#pragma, #define, ...) are dropped */
			sb_puts(&c->text, "\n");
		} else {
			sb_add(&c->text, p, len);
			sb_puts(&c->text, "\n");
		}
		p = eol ? eol + 1 : p + len;
	}
}

/* ---- a tokenizer good enough for declarations ---------------------------- */

typedef struct { const char *s; size_t n; } tok;

/* next returns the next token of *pp (identifier, number, string literal or
 * one punctuation character), skipping space and comments; n = 0 at the end. */
static tok next(const char **pp) {
	const char *p = *pp;
	for (;;) {
		while (*p && isspace((unsigned char)*p)) p++;
		if (p[0] == '/' && p[1] == '/') {
			while (*p && *p != '\n') p++;
			continue;
		}
		if (p[0] == '/' && p[1] == '*') {
			const char *e = strstr(p + 2, "*/");
			p = e ? e + 2 : p + strlen(p);
			continue;
		}
		break;
	}
	tok t = {p, 0};
	if (!*p) {
		*pp = p;
		return t;
	}
	if (isalpha((unsigned char)*p) || *p == '_') {
		while (isalnum((unsigned char)p[t.n]) || p[t.n] == '_') t.n++;
	} else if (isdigit((unsigned char)*p)) {
		while (isalnum((unsigned char)p[t.n]) || p[t.n] == '.') t.n++;
	} else if (*p == '"' || *p == '\'') {
		char q = *p;
		t.n = 1;
		while (p[t.n] && p[t.n] != q) t.n += p[t.n] == '\\' && p[t.n + 1] ? 2 : 1;
		if (p[t.n]) t.n++;
	} else {
		t.n = 1;
	}
	*pp = p + t.n;
	return t;
}

static int is(tok t, const char *s) { return t.n == strlen(s) && strncmp(t.s, s, t.n) == 0; }
static char *tokdup(const char *s, size_t n) {
	char *p = malloc(n + 1);
	if (p == NULL) abort();
	memcpy(p, s, n);
	p[n] = 0;
	return p;
}

/* scan finds the kernels of c->text. */
static void scan(compilation *c) {
	const char *p = c->text.p ? c->text.p : "";
	int externc_block[512];
	int depth = 0;
	int pending_c = 0;   /* extern "C" seen for the coming declaration */
	int ntp = 0;         /* template parameters of the coming declaration */
	char *tp[MAX_TPARAMS];
	int tpt[MAX_TPARAMS];
	tok prev = {"", 0}, prev2 = {"", 0};
	for (;;) {
		tok t = next(&p);
		if (t.n == 0) break;
		if (is(t, "\"C\"") && is(prev, "extern")) {
			pending_c = 1;
		} else if (is(t, "{")) {
			if (depth < 511) externc_block[depth + 1] = pending_c || (depth > 0 && externc_block[depth]);
			depth++;
			pending_c = 0;
			for (int i = 0; i < ntp; i++) free(tp[i]);
			ntp = 0;
		} else if (is(t, "}")) {
			if (depth > 0) depth--;
			pending_c = 0;
		} else if (is(t, ";")) {
			pending_c = 0;
			for (int i = 0; i < ntp; i++) free(tp[i]);
			ntp = 0;
		} else if (is(t, "template")) {
			tok lt = next(&p);
			if (!is(lt, "<")) continue;
			/* template parameters: "typename T", "class T", "int N", split at commas */
			int level = 1;
			tok last = {"", 0};
			int kind = 0;
			while (level > 0) {
				tok u = next(&p);
				if (u.n == 0) break;
				if (is(u, "<")) level++;
				if (is(u, ">")) level--;
				if ((is(u, ",") && level == 1) || level == 0) {
					if (last.n && ntp < MAX_TPARAMS) {
						tp[ntp] = tokdup(last.s, last.n);
						tpt[ntp++] = kind;
					}
					last.n = 0;
					kind = 0;
					continue;
				}
				if (is(u, "typename") || is(u, "class")) kind = 1;
				else if (isalpha((unsigned char)u.s[0]) || u.s[0] == '_') last = u;
			}
			prev2 = prev;
			prev = t;
			continue;
		} else if (is(t, "__global__")) {
			int externc = pending_c || (depth > 0 && depth < 512 && externc_block[depth]);
			tok u = next(&p);
			while (is(u, "__launch_bounds__") || is(u, "static") || is(u, "inline") ||
			       is(u, "__noinline__") || is(u, "__forceinline__")) {
				if (is(u, "__launch_bounds__")) {
					int level = 0;
					do {
						u = next(&p);
						if (is(u, "(")) level++;
						if (is(u, ")")) level--;
					} while (u.n && level > 0);
				}
				u = next(&p);
			}
			if (!is(u, "void")) {
				fail(c, "%s: error: a __global__ function must have a void return type (got \"%.*s\")\n",
					c->g->name, (int)u.n, u.s);
				return;
			}
			tok name = next(&p);
			tok lp = next(&p);
			if (!is(lp, "(") || name.n == 0) {
				fail(c, "%s: error: expected a kernel name and \"(\" after __global__ void\n", c->g->name);
				return;
			}
			if (c->nkernels >= (int)(sizeof c->kernels / sizeof c->kernels[0])) {
				fail(c, "%s: error: too many kernels for the fake NVRTC\n", c->g->name);
				return;
			}
			kernel *k = &c->kernels[c->nkernels++];
			memset(k, 0, sizeof *k);
			k->name = tokdup(name.s, name.n);
			k->extern_c = externc;
			k->ntparams = ntp;
			for (int i = 0; i < ntp; i++) {
				k->tparams[i] = tp[i];
				k->tparam_type[i] = tpt[i];
			}
			ntp = 0;
			/* parameters: the text between the parentheses, split at top-level commas */
			const char *start = p;
			int level = 1, angle = 0;
			const char *q = p;
			while (*q && level > 0) {
				if (*q == '(') level++;
				else if (*q == ')') level--;
				else if (*q == '<') angle++;
				else if (*q == '>') angle--;
				if ((level == 0 || (*q == ',' && level == 1 && angle == 0))) {
					const char *a = start, *b = q;
					while (a < b && isspace((unsigned char)*a)) a++;
					while (b > a && isspace((unsigned char)b[-1])) b--;
					if (b > a && !(b - a == 4 && strncmp(a, "void", 4) == 0)) {
						if (k->nparams >= MAX_PARAMS) {
							fail(c, "%s: error: kernel %s has too many parameters for the fake NVRTC\n", c->g->name, k->name);
							return;
						}
						k->params[k->nparams++] = tokdup(a, (size_t)(b - a));
					}
					start = q + 1;
				}
				q++;
			}
			p = q;
			pending_c = 0;
		}
		prev2 = prev;
		prev = t;
	}
	(void)prev2;
	for (int i = 0; i < ntp; i++) free(tp[i]);
}

/* ---- types and mangling -------------------------------------------------- */

typedef struct {
	const char *words; /* the base type's words, normalized */
	const char *mangle;
	const char *ptx;
	int size;
} basetype;

static const basetype basetypes[] = {
	{"float", "f", "f32", 4},
	{"double", "d", "f64", 8},
	{"int", "i", "u32", 4},
	{"signed int", "i", "u32", 4},
	{"signed", "i", "u32", 4},
	{"unsigned int", "j", "u32", 4},
	{"unsigned", "j", "u32", 4},
	{"long", "l", "u64", 8},
	{"long int", "l", "u64", 8},
	{"unsigned long", "m", "u64", 8},
	{"size_t", "m", "u64", 8},
	{"long long", "x", "u64", 8},
	{"long long int", "x", "u64", 8},
	{"unsigned long long", "y", "u64", 8},
	{"unsigned long long int", "y", "u64", 8},
	{"char", "c", "b8", 1},
	{"void", "v", "", 0},
};

/* a parsed type: base words, const on the base, pointer levels */
typedef struct {
	char base[128];
	int base_const;
	int pointers;
	int ptr_const[8]; /* const on the pointee at each level */
} ctype;

/* parse_type reads a parameter declaration (or a template argument, named
 * = 0) into t; the parameter's name, when there, is dropped. Template
 * parameter names in tnames are replaced by targs. */
static int parse_type(const char *decl, int named, ctype *t, int ntp, char *const *tnames, char *const *targs) {
	memset(t, 0, sizeof *t);
	tok words[32];
	int nw = 0;
	const char *p = decl;
	for (;;) {
		tok u = next(&p);
		if (u.n == 0) break;
		if (nw < 32) words[nw++] = u;
	}
	/* drop a trailing name: the last identifier after a '*' or after a complete base type */
	int end = nw;
	if (named && end > 1 && (isalpha((unsigned char)words[end - 1].s[0]) || words[end - 1].s[0] == '_') &&
	    !is(words[end - 1], "const") && !is(words[end - 1], "__restrict__") && !is(words[end - 1], "int") &&
	    !is(words[end - 1], "long") && !is(words[end - 1], "float") && !is(words[end - 1], "double") &&
	    !is(words[end - 1], "unsigned") && !is(words[end - 1], "char")) {
		end--;
	}
	int seen_ptr = 0;
	for (int i = 0; i < end; i++) {
		tok u = words[i];
		if (is(u, "*")) {
			if (t->pointers >= 8) return -1;
			t->pointers++;
			seen_ptr = 1;
			continue;
		}
		if (is(u, "__restrict__") || is(u, "volatile") || is(u, "struct")) continue;
		if (is(u, "const")) {
			if (!seen_ptr) t->base_const = 1;
			/* const after a '*' qualifies the pointer itself: irrelevant to the callee's ABI */
			continue;
		}
		if (seen_ptr) return -1;
		const char *w = u.s;
		size_t wn = u.n;
		for (int k = 0; k < ntp; k++) {
			if (strlen(tnames[k]) == u.n && strncmp(tnames[k], u.s, u.n) == 0) {
				w = targs[k];
				wn = strlen(targs[k]);
			}
		}
		size_t cur = strlen(t->base);
		if (cur + wn + 2 >= sizeof t->base) return -1;
		if (cur) strcat(t->base, " ");
		strncat(t->base, w, wn);
	}
	/* the pointee of the innermost pointer carries the base's const */
	if (t->pointers > 0) t->ptr_const[t->pointers - 1] = t->base_const;
	return t->base[0] ? 0 : -1;
}

static const basetype *lookup_base(const char *words) {
	for (size_t i = 0; i < sizeof basetypes / sizeof basetypes[0]; i++) {
		if (strcmp(basetypes[i].words, words) == 0) return &basetypes[i];
	}
	return NULL;
}

/* substitution candidates of one mangled name, in order */
typedef struct {
	char *items[64];
	int n;
} subs;

static void sub_ref(sbuf *out, int i) {
	if (i == 0) {
		sb_puts(out, "S_");
	} else {
		/* seq-id: base 36, digits then upper-case letters */
		char buf[16];
		int k = 0, v = i - 1;
		do {
			int d = v % 36;
			buf[k++] = (char)(d < 10 ? '0' + d : 'A' + d - 10);
			v /= 36;
		} while (v);
		sb_puts(out, "S");
		while (k) sb_add(out, &buf[--k], 1);
		sb_puts(out, "_");
	}
}

/* emit writes enc (a type's encoding), or its substitution if seen. */
static void emit(sbuf *out, subs *s, const char *enc, int candidate) {
	for (int i = 0; i < s->n; i++) {
		if (strcmp(s->items[i], enc) == 0) {
			sub_ref(out, i);
			return;
		}
	}
	sb_puts(out, enc);
	if (candidate && s->n < 64) s->items[s->n++] = xstrdup(enc);
}

/* mangle_type writes the Itanium encoding of t (pointers, const pointees and
 * the base), using and extending s. tp_index >= 0 marks a base that is that
 * template parameter (encoded T_, T0_, ...). */
static int mangle_type(sbuf *out, subs *s, const ctype *t, int tp_index) {
	sbuf enc = {0};
	const basetype *b = lookup_base(t->base);
	if (tp_index >= 0) {
		if (tp_index == 0) sb_puts(&enc, "T_");
		else sb_printf(&enc, "T%d_", tp_index - 1);
	} else if (b != NULL) {
		sb_puts(&enc, b->mangle);
	} else {
		free(enc.p);
		return -1;
	}
	/* build from the inside out: base, [K]base, P[K]base, ... Each
	 * non-builtin layer is a substitution candidate. */
	sbuf work = {0};
	int builtin = tp_index < 0;
	if (tp_index >= 0) {
		sbuf tmp = {0};
		emit(&tmp, s, enc.p, 1);
		sb_puts(&work, tmp.p);
		free(tmp.p);
	} else {
		sb_puts(&work, enc.p);
	}
	free(enc.p);
	for (int level = t->pointers; level >= 1; level--) {
		int konst = t->ptr_const[level - 1];
		if (konst) {
			sbuf k = {0};
			sb_puts(&k, "K");
			sb_puts(&k, work.p);
			free(work.p);
			work = (sbuf){0};
			sbuf tmp = {0};
			emit(&tmp, s, k.p, 1);
			sb_puts(&work, tmp.p);
			free(tmp.p);
			free(k.p);
		}
		sbuf ptr = {0};
		sb_puts(&ptr, "P");
		sb_puts(&ptr, work.p);
		free(work.p);
		work = (sbuf){0};
		sbuf tmp = {0};
		emit(&tmp, s, ptr.p, 1);
		sb_puts(&work, tmp.p);
		free(tmp.p);
		free(ptr.p);
		builtin = 0;
	}
	(void)builtin;
	sb_puts(out, work.p);
	free(work.p);
	return 0;
}

static void free_subs(subs *s) {
	for (int i = 0; i < s->n; i++) free(s->items[i]);
	s->n = 0;
}

/* template_arg_index returns which template parameter t's base names, or -1 */
static int tparam_of(const kernel *k, const char *decl) {
	const char *p = decl;
	for (;;) {
		tok u = next(&p);
		if (u.n == 0) return -1;
		for (int i = 0; i < k->ntparams; i++) {
			if (strlen(k->tparams[i]) == u.n && strncmp(k->tparams[i], u.s, u.n) == 0) return i;
		}
	}
}

/* instantiate builds the lowered name and the PTX parameter list of k with
 * template arguments targs (k->ntparams of them). */
static int instantiate(compilation *c, const kernel *k, char *const *targs, entry *e) {
	sbuf name = {0}, params = {0};
	subs s = {0};
	if (k->extern_c) {
		sb_puts(&name, k->name);
	} else {
		sb_printf(&name, "_Z%zu%s", strlen(k->name), k->name);
		if (k->ntparams > 0) {
			/* the template name is the first candidate */
			sbuf tn = {0};
			sb_printf(&tn, "%zu%s", strlen(k->name), k->name);
			s.items[s.n++] = xstrdup(tn.p);
			free(tn.p);
			sb_puts(&name, "I");
			for (int i = 0; i < k->ntparams; i++) {
				if (k->tparam_type[i]) {
					ctype t;
					if (parse_type(targs[i], 0, &t, 0, NULL, NULL) != 0 || mangle_type(&name, &s, &t, -1) != 0) {
						fail(c, "%s: error: template argument \"%s\" of %s is not a type the fake NVRTC knows\n",
							c->g->name, targs[i], k->name);
						goto bad;
					}
				} else {
					sb_printf(&name, "Li%sE", targs[i]);
				}
			}
			sb_puts(&name, "Ev"); /* a function template's encoding includes its return type */
		}
		if (k->nparams == 0) sb_puts(&name, "v");
	}
	for (int i = 0; i < k->nparams; i++) {
		ctype t;
		if (parse_type(k->params[i], 1, &t, k->ntparams, k->tparams, targs) != 0) {
			fail(c, "%s: error: parameter \"%s\" of %s is not a type the fake NVRTC knows\n", c->g->name, k->params[i], k->name);
			goto bad;
		}
		const basetype *b = lookup_base(t.base);
		const char *ptx;
		if (t.pointers > 0) {
			ptx = "u64";
		} else if (b != NULL && b->size > 0 && b->size != 1) {
			ptx = b->ptx;
		} else {
			fail(c, "%s: error: parameter \"%s\" of %s: the fake NVRTC takes pointers, int, unsigned, float, double, long long and size_t\n",
				c->g->name, k->params[i], k->name);
			goto bad;
		}
		if (!k->extern_c) {
			int tpi = tparam_of(k, k->params[i]);
			if (tpi >= 0 && k->tparam_type[tpi]) {
				/* the type as written (T, T*, const T*): encode through the template parameter */
				ctype tt;
				char *tn[MAX_TPARAMS];
				for (int j = 0; j < k->ntparams; j++) tn[j] = k->tparams[j];
				parse_type(k->params[i], 1, &tt, 0, NULL, NULL);
				(void)tn;
				if (mangle_type(&name, &s, &tt, tpi) != 0) goto bad;
			} else if (mangle_type(&name, &s, &t, -1) != 0) {
				fail(c, "%s: error: cannot mangle parameter \"%s\" of %s\n", c->g->name, k->params[i], k->name);
				goto bad;
			}
		}
		sb_printf(&params, "%s\t.param .%s %s_param_%d", i ? ",\n" : "", ptx, "P", i);
	}
	free_subs(&s);
	e->lowered = name.p ? name.p : xstrdup("");
	/* name the params after the entry, as NVRTC does */
	sbuf fixed = {0};
	const char *p = params.p ? params.p : "";
	while (*p) {
		const char *m = strstr(p, " P_param_");
		if (m == NULL) {
			sb_puts(&fixed, p);
			break;
		}
		sb_add(&fixed, p, (size_t)(m - p) + 1);
		sb_puts(&fixed, e->lowered);
		p = m + 2;
	}
	free(params.p);
	e->ptx_params = fixed.p ? fixed.p : xstrdup("");
	return 0;
bad:
	free_subs(&s);
	free(name.p);
	free(params.p);
	return -1;
}

/* parse_expr splits "NAME" or "NAME<a, b>" (an optional leading & dropped). */
static int parse_expr(const char *expr, char *name, size_t namecap, char **targs, int *ntargs) {
	while (*expr == ' ' || *expr == '&') expr++;
	const char *lt = strchr(expr, '<');
	size_t n = lt ? (size_t)(lt - expr) : strlen(expr);
	while (n > 0 && expr[n - 1] == ' ') n--;
	if (n == 0 || n >= namecap) return -1;
	memcpy(name, expr, n);
	name[n] = 0;
	for (size_t i = 0; i < n; i++) {
		if (!isalnum((unsigned char)name[i]) && name[i] != '_' && name[i] != ':') return -1;
	}
	*ntargs = 0;
	if (lt == NULL) return 0;
	const char *gt = strrchr(lt, '>');
	if (gt == NULL) return -1;
	const char *a = lt + 1;
	while (a < gt && *ntargs < MAX_TPARAMS) {
		const char *comma = memchr(a, ',', (size_t)(gt - a));
		const char *b = comma ? comma : gt;
		const char *s = a, *e = b;
		while (s < e && isspace((unsigned char)*s)) s++;
		while (e > s && isspace((unsigned char)e[-1])) e--;
		targs[(*ntargs)++] = tokdup(s, (size_t)(e - s));
		a = b + 1;
	}
	return 0;
}

/* ---- options ------------------------------------------------------------- */

static const char *const known_options[] = {
	"-std=", "--std=", "-D", "--define-macro=", "-U", "--undefine-macro=", "-I", "--include-path=",
	"--use_fast_math", "-use_fast_math", "-G", "--device-debug", "-lineinfo", "--generate-line-info",
	"-default-device", "--device-as-default-execution-space", "-dc", "--device-c", "-dw", "--device-w",
	"-rdc=", "--relocatable-device-code=", "-ftz=", "--ftz=", "-prec-div=", "--prec-div=",
	"-prec-sqrt=", "--prec-sqrt=", "-fmad=", "--fmad=", "-maxrregcount=", "--maxrregcount=",
	"-dopt=", "--dopt=", "-w", "--disable-warnings", "-restrict", "--restrict", "-lto", "-dlto",
	"-Ofc=", "--Ofast-compile=", "-no-cache", "--no-cache", "-frandom-seed=", "--frandom-seed=",
	"-extra-device-vectorization", "--extra-device-vectorization", "-builtin-move-forward=",
	"-builtin-initializer-list=", "-pch", "--pch", "-split-compile=", "--split-compile=",
	"-Werror=", "--Werror=", "-err-no", "--display-error-number", "-diag-error=", "-diag-suppress=",
	"-diag-warn=", "--diag-error=", "--diag-suppress=", "--diag-warn=", "-time=", "--time=",
	"-minimal", "--minimal", "-device-int128", "--device-int128",
};

static int known_option(const char *o) {
	for (size_t i = 0; i < sizeof known_options / sizeof known_options[0]; i++) {
		const char *k = known_options[i];
		size_t n = strlen(k);
		if (k[n - 1] == '=' || strcmp(k, "-D") == 0 || strcmp(k, "-U") == 0 || strcmp(k, "-I") == 0) {
			if (strncmp(o, k, n) == 0) return 1;
		} else if (strcmp(o, k) == 0) {
			return 1;
		}
	}
	return 0;
}

/* parse_arch reads sm_NN[a|f] or compute_NN[a|f]. */
static int parse_arch(const char *s, compilation *c) {
	const char *p;
	if (strncmp(s, "sm_", 3) == 0) {
		c->is_virtual = 0;
		p = s + 3;
	} else if (strncmp(s, "compute_", 8) == 0) {
		c->is_virtual = 1;
		p = s + 8;
	} else {
		return -1;
	}
	if (!isdigit((unsigned char)*p) || *p == '0') return -1;
	char *end;
	long n = strtol(p, &end, 10);
	if (n < 10 || n > 9999) return -1;
	c->arch = (int)n;
	c->arch_suffix[0] = 0;
	if ((*end == 'a' || *end == 'f') && end[1] == 0) {
		c->arch_suffix[0] = *end;
		c->arch_suffix[1] = 0;
	} else if (*end != 0) {
		return -1;
	}
	int a[MAX_ARCHS];
	int na = archs(a);
	for (int i = 0; i < na; i++) {
		if (a[i] == c->arch) return 0;
	}
	return -1;
}

static void sleep_ms(int ms) {
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static void reset_outputs(prog *g) {
	g->log.n = 0;
	if (g->log.p) g->log.p[0] = 0;
	g->ptx.n = 0;
	g->cubin.n = 0;
}

EXPORT nvrtcResult nvrtcCompileProgram(void *p, int nopts, const char *const *opts) {
	COUNT();
	prog *g = get(p);
	if (g == NULL) return NVRTC_ERROR_INVALID_PROGRAM;
	if (nopts < 0 || (nopts > 0 && opts == NULL)) return NVRTC_ERROR_INVALID_INPUT;
	reset_outputs(g);
	sb_puts(&g->log, "");
	compilation *c = calloc(1, sizeof *c);
	if (c == NULL) return NVRTC_ERROR_OUT_OF_MEMORY;
	c->g = g;
	nvrtcResult rc = NVRTC_SUCCESS;
	const char *arch = "compute_52";
	for (int i = 0; i < nopts; i++) {
		const char *o = opts[i];
		if (o == NULL) {
			rc = NVRTC_ERROR_INVALID_INPUT;
			goto out;
		}
		sb_printf(&c->options, "%s%s", i ? " " : "", o);
		if (strncmp(o, "-arch=", 6) == 0) arch = o + 6;
		else if (strncmp(o, "--gpu-architecture=", 19) == 0) arch = o + 19;
		else if ((strcmp(o, "-arch") == 0 || strcmp(o, "--gpu-architecture") == 0) && i + 1 < nopts) {
			arch = opts[++i];
			sb_printf(&c->options, " %s", arch);
		} else if (!known_option(o)) {
			sb_printf(&g->log, "nvrtc: error: unrecognized option %s\n", o);
			rc = NVRTC_ERROR_INVALID_OPTION;
			goto out;
		}
	}
	if (parse_arch(arch, c) != 0) {
		sb_printf(&g->log, "nvrtc: error: invalid value for --gpu-architecture (-arch): %s\n", arch);
		rc = NVRTC_ERROR_INVALID_OPTION;
		goto out;
	}
	const char *f = getenv("ACCELKIT_FAKENVRTC_FAIL_COMPILE");
	if (f != NULL && strcmp(f, "1") == 0) {
		sb_printf(&g->log, "%s: error: the fake NVRTC fails every compile (ACCELKIT_FAKENVRTC_FAIL_COMPILE=1)\n", g->name);
		rc = NVRTC_ERROR_COMPILATION;
		goto out;
	}
	const char *ms = getenv("ACCELKIT_FAKENVRTC_COMPILE_MS");
	int wait = ms ? atoi(ms) : 0;
	for (int i = 0; i < wait; i++) {
		if (g->flow != NULL && g->flow(g->payload, NULL) == 1) {
			sb_printf(&g->log, "%s: compilation cancelled\n", g->name);
			rc = NVRTC_ERROR_CANCELLED;
			goto out;
		}
		sleep_ms(1);
	}
	preprocess(c, g->name, g->src, 0);
	if (c->failed) {
		rc = NVRTC_ERROR_COMPILATION;
		goto out;
	}
	scan(c);
	if (c->failed) {
		rc = NVRTC_ERROR_COMPILATION;
		goto out;
	}

	/* entries: every non-template kernel, and the instantiations the name
	 * expressions ask for */
	entry entries[512];
	int nentries = 0;
	char **lowered = calloc((size_t)g->nexpr + 1, sizeof(char *));
	for (int i = 0; i < c->nkernels && !c->failed; i++) {
		if (c->kernels[i].ntparams > 0) continue;
		if (instantiate(c, &c->kernels[i], NULL, &entries[nentries]) == 0) nentries++;
	}
	for (int i = 0; i < g->nexpr && !c->failed; i++) {
		char name[256];
		char *targs[MAX_TPARAMS];
		int ntargs = 0;
		if (parse_expr(g->exprs[i], name, sizeof name, targs, &ntargs) != 0) {
			fail(c, "%s(1): error: name expression \"%s\" is not a valid expression\n", g->name, g->exprs[i]);
			break;
		}
		kernel *k = NULL;
		for (int j = 0; j < c->nkernels; j++) {
			if (strcmp(c->kernels[j].name, name) == 0) k = &c->kernels[j];
		}
		if (k == NULL) {
			fail(c, "%s(1): error: identifier \"%s\" is undefined\n\n1 error detected in the compilation of \"%s\".\n",
				g->name, name, g->name);
		} else if (k->ntparams != ntargs) {
			fail(c, "%s(1): error: %s takes %d template arguments; name expression \"%s\" gives %d\n",
				g->name, name, k->ntparams, g->exprs[i], ntargs);
		} else {
			entry e;
			if (instantiate(c, k, targs, &e) == 0) {
				lowered[i] = xstrdup(e.lowered);
				int dup = 0;
				for (int j = 0; j < nentries; j++) dup |= strcmp(entries[j].lowered, e.lowered) == 0;
				if (!dup && nentries < 512) {
					entries[nentries++] = e;
				} else {
					free(e.lowered);
					free(e.ptx_params);
				}
			}
		}
		for (int j = 0; j < ntargs; j++) free(targs[j]);
	}
	if (!c->failed) {
		sbuf *x = &g->ptx;
		int major, minor;
		version(&major, &minor);
		sb_printf(x, "//\n// Generated by the accelkit fake NVRTC %d.%d\n// Options: %s\n//\n\n", major, minor,
			c->options.p ? c->options.p : "");
		sb_printf(x, ".version 8.0\n.target sm_%d%s\n.address_size 64\n", c->arch, c->arch_suffix);
		for (int i = 0; i < nentries; i++) {
			sb_printf(x, "\n.visible .entry %s(\n%s\n)\n{\n\tret;\n}\n", entries[i].lowered, entries[i].ptx_params);
		}
		if (!c->is_virtual) {
			sb_add(&g->cubin, "\x7f" "ELF", 4);
			sb_printf(&g->cubin, "ACCELKIT-FAKE-CUBIN sm_%d%s\n", c->arch, c->arch_suffix);
			sb_add(&g->cubin, x->p, x->n);
		}
		g->lowered = lowered;
		lowered = NULL;
	}
	for (int i = 0; i < nentries; i++) {
		free(entries[i].lowered);
		free(entries[i].ptx_params);
	}
	if (lowered) {
		for (int i = 0; i < g->nexpr; i++) free(lowered[i]);
		free(lowered);
	}
	if (c->failed) rc = NVRTC_ERROR_COMPILATION;
out:
	for (int i = 0; i < c->nkernels; i++) {
		free(c->kernels[i].name);
		for (int j = 0; j < c->kernels[i].ntparams; j++) free(c->kernels[i].tparams[j]);
		for (int j = 0; j < c->kernels[i].nparams; j++) free(c->kernels[i].params[j]);
	}
	free(c->text.p);
	free(c->options.p);
	free(c);
	g->state = rc == NVRTC_SUCCESS ? 1 : 2;
	if (rc != NVRTC_SUCCESS) {
		g->ptx.n = 0;
		g->cubin.n = 0;
	}
	return rc;
}

EXPORT nvrtcResult nvrtcGetProgramLogSize(void *p, size_t *n) {
	COUNT();
	prog *g = get(p);
	if (g == NULL) return NVRTC_ERROR_INVALID_PROGRAM;
	if (n == NULL) return NVRTC_ERROR_INVALID_INPUT;
	*n = g->log.n + 1;
	return NVRTC_SUCCESS;
}

EXPORT nvrtcResult nvrtcGetProgramLog(void *p, char *out) {
	COUNT();
	prog *g = get(p);
	if (g == NULL) return NVRTC_ERROR_INVALID_PROGRAM;
	if (out == NULL) return NVRTC_ERROR_INVALID_INPUT;
	if (g->log.n) memcpy(out, g->log.p, g->log.n);
	out[g->log.n] = 0;
	return NVRTC_SUCCESS;
}

EXPORT nvrtcResult nvrtcGetPTXSize(void *p, size_t *n) {
	COUNT();
	prog *g = get(p);
	if (g == NULL || g->state != 1) return NVRTC_ERROR_INVALID_PROGRAM;
	if (n == NULL) return NVRTC_ERROR_INVALID_INPUT;
	*n = g->ptx.n + 1;
	return NVRTC_SUCCESS;
}

EXPORT nvrtcResult nvrtcGetPTX(void *p, char *out) {
	COUNT();
	prog *g = get(p);
	if (g == NULL || g->state != 1) return NVRTC_ERROR_INVALID_PROGRAM;
	if (out == NULL) return NVRTC_ERROR_INVALID_INPUT;
	memcpy(out, g->ptx.p, g->ptx.n);
	out[g->ptx.n] = 0;
	return NVRTC_SUCCESS;
}

EXPORT nvrtcResult nvrtcGetCUBINSize(void *p, size_t *n) {
	COUNT();
	prog *g = get(p);
	if (g == NULL || g->state != 1) return NVRTC_ERROR_INVALID_PROGRAM;
	if (n == NULL) return NVRTC_ERROR_INVALID_INPUT;
	*n = g->cubin.n; /* 0 for a compute_ target, as NVRTC */
	return NVRTC_SUCCESS;
}

EXPORT nvrtcResult nvrtcGetCUBIN(void *p, char *out) {
	COUNT();
	prog *g = get(p);
	if (g == NULL || g->state != 1) return NVRTC_ERROR_INVALID_PROGRAM;
	if (out == NULL) return NVRTC_ERROR_INVALID_INPUT;
	if (g->cubin.n) memcpy(out, g->cubin.p, g->cubin.n);
	return NVRTC_SUCCESS;
}

EXPORT nvrtcResult nvrtcGetLoweredName(void *p, const char *const expr, const char **out) {
	COUNT();
	prog *g = get(p);
	if (g == NULL) return NVRTC_ERROR_INVALID_PROGRAM;
	if (expr == NULL || out == NULL) return NVRTC_ERROR_INVALID_INPUT;
	if (g->state != 1) return NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION;
	for (int i = 0; i < g->nexpr; i++) {
		if (strcmp(g->exprs[i], expr) == 0 && g->lowered && g->lowered[i]) {
			*out = g->lowered[i];
			return NVRTC_SUCCESS;
		}
	}
	return NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID;
}
