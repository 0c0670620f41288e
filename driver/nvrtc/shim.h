/*
 * The C half of package nvrtc: the few NVRTC types it needs (declared here,
 * so no CUDA toolkit is needed to build), a table of entry points filled by
 * dlsym, and ak_compile, which runs one whole compile (create, name
 * expressions, compile, log, image, lowered names, destroy) in one cgo call.
 *
 * Every buffer ak_compile hands back is malloc'd here and freed by
 * ak_result_free; Go passes only C memory in, and nothing here keeps a
 * pointer past the call.
 */
#ifndef ACCELKIT_NVRTC_SHIM_H
#define ACCELKIT_NVRTC_SHIM_H

#include <dlfcn.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define AK_UNUSED __attribute__((unused))
#define AK_FUNC static inline AK_UNUSED

typedef int nvrtcResult;
typedef struct _nvrtcProgram *nvrtcProgram;

#define AK_NVRTC_SUCCESS 0
#define AK_NVRTC_ERROR_OUT_OF_MEMORY 1
#define AK_NVRTC_ERROR_CANCELLED 16

/* Symbol groups: a missing REQ symbol fails the load; FLOW (cancellation,
 * recent NVRTC only) is optional. */
enum { AK_REQ = 0, AK_FLOW = 1 };

/* X(name, group, return type, params), signatures as in nvrtc.h. */
#define AK_SYMBOLS(X) \
	X(nvrtcGetErrorString, AK_REQ, const char *, (nvrtcResult)) \
	X(nvrtcVersion, AK_REQ, nvrtcResult, (int *, int *)) \
	X(nvrtcGetNumSupportedArchs, AK_REQ, nvrtcResult, (int *)) \
	X(nvrtcGetSupportedArchs, AK_REQ, nvrtcResult, (int *)) \
	X(nvrtcCreateProgram, AK_REQ, nvrtcResult, (nvrtcProgram *, const char *, const char *, int, const char *const *, const char *const *)) \
	X(nvrtcDestroyProgram, AK_REQ, nvrtcResult, (nvrtcProgram *)) \
	X(nvrtcCompileProgram, AK_REQ, nvrtcResult, (nvrtcProgram, int, const char *const *)) \
	X(nvrtcGetPTXSize, AK_REQ, nvrtcResult, (nvrtcProgram, size_t *)) \
	X(nvrtcGetPTX, AK_REQ, nvrtcResult, (nvrtcProgram, char *)) \
	X(nvrtcGetCUBINSize, AK_REQ, nvrtcResult, (nvrtcProgram, size_t *)) \
	X(nvrtcGetCUBIN, AK_REQ, nvrtcResult, (nvrtcProgram, char *)) \
	X(nvrtcGetProgramLogSize, AK_REQ, nvrtcResult, (nvrtcProgram, size_t *)) \
	X(nvrtcGetProgramLog, AK_REQ, nvrtcResult, (nvrtcProgram, char *)) \
	X(nvrtcAddNameExpression, AK_REQ, nvrtcResult, (nvrtcProgram, const char *const)) \
	X(nvrtcGetLoweredName, AK_REQ, nvrtcResult, (nvrtcProgram, const char *const, const char **)) \
	X(nvrtcSetFlowCallback, AK_FLOW, nvrtcResult, (nvrtcProgram, int (*)(void *, void *), void *))

enum {
#define AK_X(n, g, ret, args) AKI_##n,
	AK_SYMBOLS(AK_X)
#undef AK_X
	AK_NSYMS
};

#define AK_X(n, g, ret, args) typedef ret (*ak_fn_##n) args;
AK_SYMBOLS(AK_X)
#undef AK_X

AK_UNUSED static const char *const ak_sym_names[AK_NSYMS] = {
#define AK_X(n, g, ret, args) #n,
	AK_SYMBOLS(AK_X)
#undef AK_X
};
AK_UNUSED static const int ak_sym_groups[AK_NSYMS] = {
#define AK_X(n, g, ret, args) g,
	AK_SYMBOLS(AK_X)
#undef AK_X
};

typedef struct {
	void *handle;
	void *fn[AK_NSYMS];
} ak_lib;

#define AK_FN(l, n) ((ak_fn_##n)(l)->fn[AKI_##n])

AK_FUNC int ak_has_flow(const ak_lib *l) { return l->fn[AKI_nvrtcSetFlowCallback] != NULL; }

/* ak_open dlopens path and resolves every symbol. On failure it returns NULL
 * with the reason in err: the dlerror text, or the name of a missing
 * required symbol (then *missing is 1). */
AK_FUNC ak_lib *ak_open(const char *path, char *err, size_t errlen, int *missing) {
	*missing = 0;
	dlerror();
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		const char *e = dlerror();
		strncpy(err, e ? e : "dlopen failed", errlen - 1);
		err[errlen - 1] = 0;
		return NULL;
	}
	ak_lib *l = calloc(1, sizeof *l);
	if (l == NULL) {
		strncpy(err, "out of memory", errlen - 1);
		err[errlen - 1] = 0;
		dlclose(h);
		return NULL;
	}
	l->handle = h;
	for (int i = 0; i < AK_NSYMS; i++) {
		l->fn[i] = dlsym(h, ak_sym_names[i]);
		if (l->fn[i] == NULL && ak_sym_groups[i] == AK_REQ) {
			*missing = 1;
			strncpy(err, ak_sym_names[i], errlen - 1);
			err[errlen - 1] = 0;
			free(l);
			dlclose(h);
			return NULL;
		}
	}
	return l;
}

AK_FUNC const char *ak_error_string(const ak_lib *l, nvrtcResult r) { return AK_FN(l, nvrtcGetErrorString)(r); }
AK_FUNC nvrtcResult ak_version(const ak_lib *l, int *major, int *minor) { return AK_FN(l, nvrtcVersion)(major, minor); }
AK_FUNC nvrtcResult ak_num_archs(const ak_lib *l, int *n) { return AK_FN(l, nvrtcGetNumSupportedArchs)(n); }
AK_FUNC nvrtcResult ak_archs(const ak_lib *l, int *a) { return AK_FN(l, nvrtcGetSupportedArchs)(a); }

/* Which call of ak_compile failed. */
enum {
	AK_ST_NONE = 0,
	AK_ST_CREATE,
	AK_ST_ADD_NAME,
	AK_ST_FLOW,
	AK_ST_COMPILE,
	AK_ST_LOG,
	AK_ST_CODE,
	AK_ST_LOWERED,
	AK_ST_DESTROY,
	AK_ST_NOMEM, /* a malloc of the shim's own */
};

typedef struct {
	int stage;          /* AK_ST_*: the first call that failed, or NONE */
	nvrtcResult code;   /* its result */
	int failed_name;    /* index of the name expression for ADD_NAME, LOWERED */
	char *log;          /* the compile log (NUL-terminated), or NULL */
	char *image;        /* cubin or PTX, or NULL */
	size_t image_len;   /* without PTX's trailing NUL */
	char **lowered;     /* nnames copies, each NUL-terminated */
} ak_result;

/* ak_flow is the nvrtcSetFlowCallback callback: it cancels once Go has set
 * the flag (ak_cancel). The flag only ever goes from 0 to 1, so the answer
 * stays consistent, as NVRTC requires. */
static int ak_flow(void *flag, void *reserved) {
	(void)reserved;
	return __atomic_load_n((int *)flag, __ATOMIC_ACQUIRE) != 0;
}

AK_FUNC void ak_cancel(int *flag) { __atomic_store_n(flag, 1, __ATOMIC_RELEASE); }

/* ak_fetch reads one of the program's outputs through its size and copy
 * calls into a malloc'd buffer with a NUL appended. */
#define AK_FETCH(l, prog, SizeFn, GetFn, out, outlen, rc) do { \
	size_t n_ = 0; \
	(rc) = AK_FN(l, SizeFn)((prog), &n_); \
	if ((rc) == 0) { \
		(out) = malloc(n_ + 1); \
		if ((out) == NULL) { (rc) = -1; break; } \
		if (n_ > 0) (rc) = AK_FN(l, GetFn)((prog), (out)); \
		(out)[n_] = 0; \
		(outlen) = n_; \
	} \
} while (0)

/*
 * ak_compile runs one compile. cubin selects nvrtcGetCUBIN over
 * nvrtcGetPTX. cancel, when not NULL and the library has
 * nvrtcSetFlowCallback, is the flag that cancels the compile. The program
 * is always destroyed; the lowered names are copied before that, since
 * NVRTC frees them with the program. Returns the first failing stage.
 */
AK_FUNC int ak_compile(const ak_lib *l, const char *src, const char *name,
	int nheaders, const char *const *headers, const char *const *include_names,
	int nopts, const char *const *opts, int nnames, const char *const *names,
	int cubin, int *cancel, ak_result *out) {
	memset(out, 0, sizeof *out);
	nvrtcProgram prog = NULL;
	nvrtcResult r = AK_FN(l, nvrtcCreateProgram)(&prog, src, name, nheaders, headers, include_names);
	if (r != 0) {
		out->stage = AK_ST_CREATE;
		out->code = r;
		return out->stage;
	}
	for (int i = 0; i < nnames; i++) {
		r = AK_FN(l, nvrtcAddNameExpression)(prog, names[i]);
		if (r != 0) {
			out->stage = AK_ST_ADD_NAME;
			out->code = r;
			out->failed_name = i;
			goto destroy;
		}
	}
	if (cancel != NULL && ak_has_flow(l)) {
		r = AK_FN(l, nvrtcSetFlowCallback)(prog, ak_flow, cancel);
		if (r != 0) {
			out->stage = AK_ST_FLOW;
			out->code = r;
			goto destroy;
		}
	}
	nvrtcResult cr = AK_FN(l, nvrtcCompileProgram)(prog, nopts, opts);
	/* The log comes first, whatever the compile did: it is the failure's
	 * explanation and the success's warnings. */
	size_t loglen = 0;
	AK_FETCH(l, prog, nvrtcGetProgramLogSize, nvrtcGetProgramLog, out->log, loglen, r);
	(void)loglen;
	if (cr != 0) {
		out->stage = AK_ST_COMPILE;
		out->code = cr;
		goto destroy;
	}
	if (r != 0) {
		out->stage = r < 0 ? AK_ST_NOMEM : AK_ST_LOG;
		out->code = r;
		goto destroy;
	}
	if (cubin) {
		AK_FETCH(l, prog, nvrtcGetCUBINSize, nvrtcGetCUBIN, out->image, out->image_len, r);
	} else {
		AK_FETCH(l, prog, nvrtcGetPTXSize, nvrtcGetPTX, out->image, out->image_len, r);
		/* nvrtcGetPTXSize counts the trailing NUL. */
		if (r == 0 && out->image_len > 0 && out->image[out->image_len - 1] == 0) out->image_len--;
	}
	if (r != 0) {
		out->stage = r < 0 ? AK_ST_NOMEM : AK_ST_CODE;
		out->code = r;
		goto destroy;
	}
	if (nnames > 0) {
		out->lowered = calloc((size_t)nnames, sizeof(char *));
		if (out->lowered == NULL) {
			out->stage = AK_ST_NOMEM;
			goto destroy;
		}
		for (int i = 0; i < nnames; i++) {
			const char *ln = NULL;
			r = AK_FN(l, nvrtcGetLoweredName)(prog, names[i], &ln);
			if (r == 0 && ln == NULL) r = 3; /* NVRTC_ERROR_INVALID_INPUT */
			if (r != 0) {
				out->stage = AK_ST_LOWERED;
				out->code = r;
				out->failed_name = i;
				goto destroy;
			}
			out->lowered[i] = strdup(ln);
			if (out->lowered[i] == NULL) {
				out->stage = AK_ST_NOMEM;
				goto destroy;
			}
		}
	}
destroy:
	r = AK_FN(l, nvrtcDestroyProgram)(&prog);
	if (r != 0 && out->stage == AK_ST_NONE) {
		out->stage = AK_ST_DESTROY;
		out->code = r;
	}
	return out->stage;
}

AK_FUNC void ak_result_free(ak_result *res, int nnames) {
	free(res->log);
	free(res->image);
	if (res->lowered != NULL) {
		for (int i = 0; i < nnames; i++) free(res->lowered[i]);
		free(res->lowered);
	}
	memset(res, 0, sizeof *res);
}

#endif
