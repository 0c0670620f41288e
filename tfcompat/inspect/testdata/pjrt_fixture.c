// A fake PJRT plugin for tfcompat/inspect's tests. The structs are
// transcribed from xla/pjrt/c/pjrt_c_api.h (openxla/xla 0882740a, PJRT C API
// 0.94); only what the inspector reads is kept, the rest of PJRT_Api is an
// array of function pointers in the header's order. Variants by -D:
//
//   FIX_MINOR=n       pjrt_api_version.minor_version (default 94)
//   FIX_FIELDS=n      function pointers covered by struct_size (default 129)
//   FIX_NULL=i        leave function pointer i NULL
//   FIX_NO_API        GetPjrtApi not exported (hidden, as when a plugin
//                     misses the visibility attribute or extern "C")
//   FIX_SEGV          GetPjrtApi dereferences NULL
//   FIX_HANG          GetPjrtApi never returns
//   FIX_EXIT=n        GetPjrtApi calls exit(n)
//   FIX_ATTR_UNIMPL   PJRT_Plugin_Attributes returns UNIMPLEMENTED
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef FIX_MINOR
#define FIX_MINOR 94
#endif
#ifndef FIX_FIELDS
#define FIX_FIELDS 129
#endif

#include "pjrt_layout.h"


static int initialized;

static void error_destroy(PJRT_Error_Destroy_Args* a) { free(a->error); }

static void error_message(PJRT_Error_Message_Args* a) {
  a->message = a->error->msg;
  a->message_size = strlen(a->error->msg);
}

static PJRT_Error* error_getcode(PJRT_Error_GetCode_Args* a) {
  a->code = a->error->code;
  return NULL;
}

static PJRT_Error* new_error(int code, const char* msg) {
  PJRT_Error* e = calloc(1, sizeof *e);
  e->code = code;
  snprintf(e->msg, sizeof e->msg, "%s", msg);
  return e;
}

static PJRT_Error* plugin_initialize(PJRT_Plugin_Initialize_Args* a) {
  if (a->struct_size < OFFSET_OF_END(PJRT_Plugin_Initialize_Args, extension_start))
    return new_error(3, "Unexpected PJRT_Plugin_Initialize_Args size");
  initialized = 1;
  return NULL;
}

__attribute__((used)) static const int64_t stablehlo_version[] = {1, 9, 3};
__attribute__((used)) static PJRT_NamedValue attrs[3];

static PJRT_Error* plugin_attributes(PJRT_Plugin_Attributes_Args* a) {
#ifdef FIX_ATTR_UNIMPL
  (void)a;
  return new_error(12, "PJRT_Plugin_Attributes not implemented");
#else
  if (a->struct_size < OFFSET_OF_END(PJRT_Plugin_Attributes_Args, num_attributes))
    return new_error(3, "Unexpected PJRT_Plugin_Attributes_Args size");
  if (!initialized) return new_error(9, "PJRT_Plugin_Initialize not called");
  attrs[0] = (PJRT_NamedValue){.struct_size = OFFSET_OF_END(PJRT_NamedValue, value_size),
      .name = "xla_version", .name_size = 11, .type = PJRT_NamedValue_kInt64, .int64_value = 2, .value_size = 1};
  attrs[1] = (PJRT_NamedValue){.struct_size = OFFSET_OF_END(PJRT_NamedValue, value_size),
      .name = "stablehlo_current_version", .name_size = 25, .type = PJRT_NamedValue_kInt64List,
      .int64_array_value = stablehlo_version, .value_size = 3};
  attrs[2] = (PJRT_NamedValue){.struct_size = OFFSET_OF_END(PJRT_NamedValue, value_size),
      .name = "platform", .name_size = 8, .type = PJRT_NamedValue_kString, .string_value = "fake\x1b[2J", .value_size = 8};
  a->attributes = attrs;
  a->num_attributes = 3;
  return NULL;
#endif
}

// Every other entry: present, never called by the inspector.
static PJRT_Error* unimplemented(void* args) {
  (void)args;
  return new_error(12, "not implemented by the fixture");
}

static PJRT_Api api;

#ifdef FIX_NO_API
#define API_EXPORT __attribute__((used))
#else
#define API_EXPORT __attribute__((visibility("default")))
#endif

API_EXPORT const PJRT_Api* GetPjrtApi(void) {
#ifdef FIX_SEGV
  volatile int* p = NULL;
  *p = 1;
#endif
#ifdef FIX_HANG
  for (;;) pause();
#endif
#ifdef FIX_EXIT
  exit(FIX_EXIT);
#endif
  api.struct_size = offsetof(PJRT_Api, fns) + FIX_FIELDS * sizeof(void*);
  api.pjrt_api_version.struct_size = OFFSET_OF_END(PJRT_Api_Version, minor_version);
  api.pjrt_api_version.major_version = 0;
  api.pjrt_api_version.minor_version = FIX_MINOR;
  for (int i = 0; i < NFIELDS; i++) api.fns[i] = (void*)unimplemented;
  api.fns[0] = (void*)error_destroy;
  api.fns[1] = (void*)error_message;
  api.fns[2] = (void*)error_getcode;
  api.fns[3] = (void*)plugin_initialize;
  api.fns[4] = (void*)plugin_attributes;
#ifdef FIX_NULL
  api.fns[FIX_NULL] = NULL;
#endif
  return &api;
}
