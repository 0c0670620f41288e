// A fake PluggableDevice plugin for tfcompat/inspect's tests, filling in
// what stream_executor.h's example SE_InitPlugin does (and a graph
// optimizer, as grappler.h's TF_InitGraph example). It calls nothing of
// TensorFlow's: the inspector runs it without TensorFlow loaded. Variants:
//
//   FIX_PLATFORM_SIZE=n  SP_Platform.struct_size (default: through
//                        use_bfc_allocator, the b8016ccb header's size)
//   FIX_NO_CREATE_DEVICE leave SP_PlatformFns.create_device NULL
//   FIX_NO_GRAPH         do not export TF_InitGraph
#include "se_layout.h"

#define EXPORT __attribute__((visibility("default")))

#ifndef FIX_PLATFORM_SIZE
#define FIX_PLATFORM_SIZE TF_OFFSET_OF_END(SP_Platform, use_bfc_allocator)
#endif

static void get_device_count(void) {}
__attribute__((used)) static void create_device(void) {}
static void destroy_device(void) {}
static void create_device_fns(void) {}
static void destroy_device_fns(void) {}
static void create_stream_executor(void) {}
static void destroy_stream_executor(void) {}
static void create_timer_fns(void) {}
static void destroy_timer_fns(void) {}
static void destroy_platform(SP_Platform* p) { (void)p; }
static void destroy_platform_fns(SP_PlatformFns* f) { (void)f; }

EXPORT void SE_InitPlugin(SE_PlatformRegistrationParams* params, TF_Status* status) {
  (void)status;
  params->struct_size = TF_OFFSET_OF_END(SE_PlatformRegistrationParams, destroy_platform_fns);
  params->platform->struct_size = FIX_PLATFORM_SIZE;
  params->platform->name = "MY_DEVICE";
  params->platform->type = "GPU";
  params->platform->use_bfc_allocator = 1;
  SP_PlatformFns* f = params->platform_fns;
  f->struct_size = TF_OFFSET_OF_END(SP_PlatformFns, destroy_timer_fns);
  f->get_device_count = (void*)get_device_count;
#ifndef FIX_NO_CREATE_DEVICE
  f->create_device = (void*)create_device;
#endif
  f->destroy_device = (void*)destroy_device;
  f->create_device_fns = (void*)create_device_fns;
  f->destroy_device_fns = (void*)destroy_device_fns;
  f->create_stream_executor = (void*)create_stream_executor;
  f->destroy_stream_executor = (void*)destroy_stream_executor;
  f->create_timer_fns = (void*)create_timer_fns;
  f->destroy_timer_fns = (void*)destroy_timer_fns;
  params->destroy_platform = destroy_platform;
  params->destroy_platform_fns = destroy_platform_fns;
}

#ifndef FIX_NO_GRAPH
static void optimize(void) {}

EXPORT void TF_InitGraph(TP_OptimizerRegistrationParams* params, TF_Status* status) {
  (void)status;
  params->struct_size = TF_OFFSET_OF_END(TP_OptimizerRegistrationParams, optimizer);
  params->device_type = "GPU";
  params->optimizer_configs->struct_size = TF_OFFSET_OF_END(TP_OptimizerConfigs, scoped_allocator_optimization);
  params->optimizer_configs->remapping = TF_TriState_Off;
  params->optimizer->struct_size = TF_OFFSET_OF_END(TP_Optimizer, destroy_func);
  params->optimizer->optimize_func = (void*)optimize;
}
#endif

EXPORT void TF_InitKernel(void) {}
