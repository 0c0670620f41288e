// Structs of xla/pjrt/c/pjrt_c_api.h (openxla/xla commit
// 0882740a8496c82a8dc8a25fadba88ca342fb0aa, PJRT C API 0.94) that
// tfcompat/inspect reads, transcribed member for member; PJRT_Api keeps its
// head and holds the function pointers as an array in the header's order.
// PJRT_Error is the fixture's own (opaque in the header).
#ifndef PJRT_LAYOUT_H_
#define PJRT_LAYOUT_H_
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NFIELDS 129

typedef struct PJRT_Error { int code; char msg[64]; } PJRT_Error;

typedef struct {
  size_t struct_size;
  void* extension_start;
  int major_version;
  int minor_version;
} PJRT_Api_Version;

typedef struct {
  size_t struct_size;
  void* extension_start;
  PJRT_Api_Version pjrt_api_version;
  void* fns[NFIELDS];
} PJRT_Api;

typedef struct {
  size_t struct_size;
  void* extension_start;
  PJRT_Error* error;
} PJRT_Error_Destroy_Args;

typedef struct {
  size_t struct_size;
  void* extension_start;
  const PJRT_Error* error;
  const char* message;
  size_t message_size;
} PJRT_Error_Message_Args;

typedef struct {
  size_t struct_size;
  void* extension_start;
  const PJRT_Error* error;
  int code;
} PJRT_Error_GetCode_Args;

typedef struct {
  size_t struct_size;
  void* extension_start;
} PJRT_Plugin_Initialize_Args;

typedef enum {
  PJRT_NamedValue_kString = 0,
  PJRT_NamedValue_kInt64,
  PJRT_NamedValue_kInt64List,
  PJRT_NamedValue_kFloat,
  PJRT_NamedValue_kBool,
} PJRT_NamedValue_Type;

typedef struct {
  size_t struct_size;
  void* extension_start;
  const char* name;
  size_t name_size;
  PJRT_NamedValue_Type type;
  union {
    const char* string_value;
    int64_t int64_value;
    const int64_t* int64_array_value;
    float float_value;
    bool bool_value;
  };
  size_t value_size;
} PJRT_NamedValue;

typedef struct {
  size_t struct_size;
  void* extension_start;
  const PJRT_NamedValue* attributes;
  size_t num_attributes;
} PJRT_Plugin_Attributes_Args;

#define OFFSET_OF_END(t, m) (offsetof(t, m) + sizeof(((t*)0)->m))

#endif
