// Structs of tensorflow/c/experimental/stream_executor/stream_executor.h
// (tensorflow/tensorflow commit b8016ccb55bc3795b5328105110cdd6be620b557,
// SP_Platform through use_bfc_allocator, plus force_memory_growth, which
// tfcompat dates to TensorFlow 2.7) and
// tensorflow/c/experimental/grappler/grappler.h (commit
// c5530b006bd33fbb0d0f9ca492ee7c5e726bf404) that tfcompat/inspect reads,
// transcribed member for member; callbacks the inspector only tests for
// NULL are void pointers. TF_Status is opaque.
#ifndef SE_LAYOUT_H_
#define SE_LAYOUT_H_
#include <stddef.h>
#include <stdint.h>

typedef unsigned char TF_Bool;
typedef struct TF_Status TF_Status;

#define TF_OFFSET_OF_END(TYPE, MEMBER) \
  (offsetof(TYPE, MEMBER) + sizeof(((TYPE*)0)->MEMBER))

typedef struct SP_Platform {
  size_t struct_size;
  void* ext;
  const char* name;
  const char* type;
  TF_Bool supports_unified_memory;
  TF_Bool use_bfc_allocator;
  TF_Bool force_memory_growth;
} SP_Platform;

typedef struct SP_PlatformFns {
  size_t struct_size;
  void* ext;
  void* get_device_count;
  void* create_device;
  void* destroy_device;
  void* create_device_fns;
  void* destroy_device_fns;
  void* create_stream_executor;
  void* destroy_stream_executor;
  void* create_timer_fns;
  void* destroy_timer_fns;
} SP_PlatformFns;

typedef struct SE_PlatformRegistrationParams {
  size_t struct_size;
  void* ext;
  int32_t major_version;
  int32_t minor_version;
  int32_t patch_version;
  SP_Platform* platform;
  SP_PlatformFns* platform_fns;
  void (*destroy_platform)(SP_Platform* platform);
  void (*destroy_platform_fns)(SP_PlatformFns* platform_fns);
} SE_PlatformRegistrationParams;

typedef enum TF_TriState {
  TF_TriState_Default = 0,
  TF_TriState_Off,
  TF_TriState_On,
} TF_TriState;

typedef struct TP_OptimizerConfigs {
  size_t struct_size;
  void* ext;
  TF_TriState disable_model_pruning;
  TF_TriState implementation_selector;
  TF_TriState function_optimization;
  TF_TriState common_subgraph_elimination;
  TF_TriState arithmetic_optimization;
  TF_TriState debug_stripper;
  TF_TriState constant_folding;
  TF_TriState shape_optimization;
  TF_TriState auto_mixed_precision;
  TF_TriState auto_mixed_precision_bfloat16;
  TF_TriState auto_mixed_precision_mkl;
  TF_TriState pin_to_host_optimization;
  TF_TriState layout_optimizer;
  TF_TriState remapping;
  TF_TriState loop_optimization;
  TF_TriState dependency_optimization;
  TF_TriState auto_parallel;
  TF_TriState memory_optimization;
  TF_TriState scoped_allocator_optimization;
} TP_OptimizerConfigs;

typedef struct TP_Optimizer {
  size_t struct_size;
  void* ext;
  void* (*create_func)(void);
  void* optimize_func;
  void (*destroy_func)(void*);
} TP_Optimizer;

typedef struct TP_OptimizerRegistrationParams {
  size_t struct_size;
  void* ext;
  int32_t major_version;
  int32_t minor_version;
  int32_t patch_version;
  const char* device_type;
  TP_OptimizerConfigs* optimizer_configs;
  TP_Optimizer* optimizer;
} TP_OptimizerRegistrationParams;
#endif
