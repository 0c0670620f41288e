// Prints the C compiler's offsets and sizes of the transcribed structs, one
// "name value" per line, for tfcompat/inspect's layout test.
#include <stdio.h>

#include "pjrt_layout.h"
#include "se_layout.h"

#define OFFSET_OF_END_P(t, m) (offsetof(t, m) + sizeof(((t*)0)->m))
#define P(name, v) printf("%s %zu\n", name, (size_t)(v))

int main(void) {
  P("pjrtAPIVersionOff", offsetof(PJRT_Api, pjrt_api_version));
  P("pjrtVersionMajorOff", offsetof(PJRT_Api, pjrt_api_version) + offsetof(PJRT_Api_Version, major_version));
  P("pjrtVersionMinorOff", offsetof(PJRT_Api, pjrt_api_version) + offsetof(PJRT_Api_Version, minor_version));
  P("pjrtVersionStructSize", OFFSET_OF_END_P(PJRT_Api_Version, minor_version));
  P("pjrtFirstFnOff", offsetof(PJRT_Api, fns));
  P("pjrtErrorDestroyArgsSize", OFFSET_OF_END_P(PJRT_Error_Destroy_Args, error));
  P("pjrtErrorMessageArgsSize", OFFSET_OF_END_P(PJRT_Error_Message_Args, message_size));
  P("pjrtErrorMessageMsgOff", offsetof(PJRT_Error_Message_Args, message));
  P("pjrtErrorMessageLenOff", offsetof(PJRT_Error_Message_Args, message_size));
  P("pjrtErrorGetCodeArgsSize", OFFSET_OF_END_P(PJRT_Error_GetCode_Args, code));
  P("pjrtErrorGetCodeCodeOff", offsetof(PJRT_Error_GetCode_Args, code));
  P("pjrtPluginInitializeArgsSize", OFFSET_OF_END_P(PJRT_Plugin_Initialize_Args, extension_start));
  P("pjrtPluginAttributesArgsSize", OFFSET_OF_END_P(PJRT_Plugin_Attributes_Args, num_attributes));
  P("pjrtPluginAttributesPtrOff", offsetof(PJRT_Plugin_Attributes_Args, attributes));
  P("pjrtPluginAttributesNumOff", offsetof(PJRT_Plugin_Attributes_Args, num_attributes));
  P("pjrtNamedValueSize", OFFSET_OF_END_P(PJRT_NamedValue, value_size));
  P("pjrtNamedValueSizeof", sizeof(PJRT_NamedValue));
  P("pjrtNamedValueNameOff", offsetof(PJRT_NamedValue, name));
  P("pjrtNamedValueNameLen", offsetof(PJRT_NamedValue, name_size));
  P("pjrtNamedValueTypeOff", offsetof(PJRT_NamedValue, type));
  P("pjrtNamedValueUnionOff", offsetof(PJRT_NamedValue, string_value));
  P("pjrtNamedValueValLenOff", offsetof(PJRT_NamedValue, value_size));
  P("pjrtAPIStructSize", offsetof(PJRT_Api, fns) + NFIELDS * sizeof(void*));

  P("seParamsSize", TF_OFFSET_OF_END(SE_PlatformRegistrationParams, destroy_platform_fns));
  P("seParamsMajorOff", offsetof(SE_PlatformRegistrationParams, major_version));
  P("seParamsMinorOff", offsetof(SE_PlatformRegistrationParams, minor_version));
  P("seParamsPatchOff", offsetof(SE_PlatformRegistrationParams, patch_version));
  P("seParamsPlatformOff", offsetof(SE_PlatformRegistrationParams, platform));
  P("seParamsFnsOff", offsetof(SE_PlatformRegistrationParams, platform_fns));
  P("seParamsDestroyPOff", offsetof(SE_PlatformRegistrationParams, destroy_platform));
  P("seParamsDestroyFnOff", offsetof(SE_PlatformRegistrationParams, destroy_platform_fns));
  P("spPlatformNameOff", offsetof(SP_Platform, name));
  P("spPlatformTypeOff", offsetof(SP_Platform, type));
  P("spPlatformUMOff", offsetof(SP_Platform, supports_unified_memory));
  P("spPlatformSizeV0", TF_OFFSET_OF_END(SP_Platform, supports_unified_memory));
  P("spPlatformSizeBFC", TF_OFFSET_OF_END(SP_Platform, use_bfc_allocator));
  P("spPlatformSizeFMG", TF_OFFSET_OF_END(SP_Platform, force_memory_growth));
  P("spPlatformFnsFirstOff", offsetof(SP_PlatformFns, get_device_count));
  P("spPlatformFnsSize", TF_OFFSET_OF_END(SP_PlatformFns, destroy_timer_fns));
  P("tpParamsSize", TF_OFFSET_OF_END(TP_OptimizerRegistrationParams, optimizer));
  P("tpParamsMajorOff", offsetof(TP_OptimizerRegistrationParams, major_version));
  P("tpParamsDeviceOff", offsetof(TP_OptimizerRegistrationParams, device_type));
  P("tpParamsConfigsOff", offsetof(TP_OptimizerRegistrationParams, optimizer_configs));
  P("tpParamsOptOff", offsetof(TP_OptimizerRegistrationParams, optimizer));
  P("tpConfigsSize", TF_OFFSET_OF_END(TP_OptimizerConfigs, scoped_allocator_optimization));
  P("tpOptimizerSize", TF_OFFSET_OF_END(TP_Optimizer, destroy_func));
  P("tpOptimizerCreateOff", offsetof(TP_Optimizer, create_func));
  P("tpOptimizerOptOff", offsetof(TP_Optimizer, optimize_func));
  P("tpOptimizerDestroyOff", offsetof(TP_Optimizer, destroy_func));
  return 0;
}
