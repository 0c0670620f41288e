package inspect

import "fmt"

// C struct layouts, from the headers' field order, for LP64 targets (linux
// and darwin on amd64/arm64: size_t and pointers 8 bytes, int 4 bytes,
// TF_Bool 1 byte). Offsets are written out rather than computed so a
// reviewer can hold them against the header line by line.
//
// PJRT: xla/pjrt/c/pjrt_c_api.h in openxla/xla at commit
// 0882740a8496c82a8dc8a25fadba88ca342fb0aa (PJRT_API_MAJOR 0,
// PJRT_API_MINOR 94), cross-checked against commit
// 00fcf3f218e36866d5a84d127aed963df0aa3db3 (minor 33). The two agree on
// PJRT_Api up to and including PJRT_Buffer_CopyToMemory (pjrtAgreedFields
// entries); after it the 0.33 header has PJRT_Executable_OutputShardings
// where 0.94 has PJRT_Client_CreateViewOfDeviceBuffer, so names past that
// point are the 0.94 header's. The 0.33 header calls the second member of
// each struct `void* priv`, 0.94 `PJRT_Extension_Base* extension_start`:
// the same pointer-sized slot.
//
// StreamExecutor: tensorflow/c/experimental/stream_executor/stream_executor.h
// in tensorflow/tensorflow at commit b8016ccb55bc3795b5328105110cdd6be620b557
// (SP_Platform with use_bfc_allocator) and 01de704305665adca66fe1f4ca77872df63fe376
// (before it); the NULL checks TensorFlow applies after SE_InitPlugin are
// ValidateSEPlatformRegistrationParams, ValidateSPPlatform and
// ValidateSPPlatformFns in stream_executor.cc at commit
// c8e5f66965714c8eb3211ae8099c467872b5901a.

// PJRT_Api and the structs reached from it.
const (
	pjrtAPIStructSizeOff = 0  // size_t struct_size
	pjrtAPIVersionOff    = 16 // PJRT_Api_Version pjrt_api_version (after struct_size, extension_start)
	pjrtVersionMajorOff  = pjrtAPIVersionOff + 16
	pjrtVersionMinorOff  = pjrtAPIVersionOff + 20
	// PJRT_Api_Version_STRUCT_SIZE: offset of minor_version (16) + 4.
	pjrtVersionStructSize = 24
	// The first function pointer follows pjrt_api_version (16 + 24).
	pjrtFirstFnOff = 40

	// PJRT_Error_Destroy_Args {struct_size, extension_start, error}.
	pjrtErrorDestroyArgsSize = 24
	// PJRT_Error_Message_Args {struct_size, extension_start, error,
	// message (out), message_size (out)}.
	pjrtErrorMessageArgsSize = 40
	pjrtErrorMessageMsgOff   = 24
	pjrtErrorMessageLenOff   = 32
	// PJRT_Error_GetCode_Args {struct_size, extension_start, error, code
	// (out, a C enum: int)}: offset of code (24) + 4.
	pjrtErrorGetCodeArgsSize = 28
	pjrtErrorGetCodeCodeOff  = 24
	// PJRT_Plugin_Initialize_Args {struct_size, extension_start}.
	pjrtPluginInitializeArgsSize = 16
	// PJRT_Plugin_Attributes_Args {struct_size, extension_start, attributes
	// (out), num_attributes (out)}. The 0.33 header's STRUCT_SIZE ended at
	// attributes (24); 0.94's ends at num_attributes (32). Passing 32 is
	// valid for both (larger, never smaller).
	pjrtPluginAttributesArgsSize = 32
	pjrtPluginAttributesPtrOff   = 16
	pjrtPluginAttributesNumOff   = 24
	// PJRT_NamedValue {struct_size, extension_start, name, name_size, type
	// (enum, 4 bytes + 4 padding), union (8 bytes), value_size}: STRUCT_SIZE
	// is the offset of value_size (48) + 8, and also sizeof, the stride of
	// an attribute array. Same layout in 0.33 and 0.94.
	pjrtNamedValueSize      = 56
	pjrtNamedValueNameOff   = 16
	pjrtNamedValueNameLen   = 24
	pjrtNamedValueTypeOff   = 32
	pjrtNamedValueUnionOff  = 40
	pjrtNamedValueValLenOff = 48
)

// PJRT_Error_Code_UNIMPLEMENTED in both header revisions.
const pjrtErrorCodeUnimplemented = 12

// PJRT_NamedValue_Type.
const (
	namedString    = 0
	namedInt64     = 1
	namedInt64List = 2
	namedFloat     = 3
	namedBool      = 4
)

// pjrtFields are PJRT_Api's function pointers in the 0.94 header's order;
// field i is at pjrtFirstFnOff + 8*i.
var pjrtFields = []string{
	"PJRT_Error_Destroy", "PJRT_Error_Message", "PJRT_Error_GetCode",
	"PJRT_Plugin_Initialize", "PJRT_Plugin_Attributes",
	"PJRT_Event_Destroy", "PJRT_Event_IsReady", "PJRT_Event_Error", "PJRT_Event_Await", "PJRT_Event_OnReady",
	"PJRT_Client_Create", "PJRT_Client_Destroy", "PJRT_Client_PlatformName", "PJRT_Client_ProcessIndex",
	"PJRT_Client_PlatformVersion", "PJRT_Client_Devices", "PJRT_Client_AddressableDevices",
	"PJRT_Client_LookupDevice", "PJRT_Client_LookupAddressableDevice", "PJRT_Client_AddressableMemories",
	"PJRT_Client_Compile", "PJRT_Client_DefaultDeviceAssignment", "PJRT_Client_BufferFromHostBuffer",
	"PJRT_DeviceDescription_Id", "PJRT_DeviceDescription_ProcessIndex", "PJRT_DeviceDescription_Attributes",
	"PJRT_DeviceDescription_Kind", "PJRT_DeviceDescription_DebugString", "PJRT_DeviceDescription_ToString",
	"PJRT_Device_GetDescription", "PJRT_Device_IsAddressable", "PJRT_Device_LocalHardwareId",
	"PJRT_Device_AddressableMemories", "PJRT_Device_DefaultMemory", "PJRT_Device_MemoryStats",
	"PJRT_Memory_Id", "PJRT_Memory_Kind", "PJRT_Memory_DebugString", "PJRT_Memory_ToString",
	"PJRT_Memory_AddressableByDevices",
	"PJRT_Executable_Destroy", "PJRT_Executable_Name", "PJRT_Executable_NumReplicas",
	"PJRT_Executable_NumPartitions", "PJRT_Executable_NumOutputs",
	"PJRT_Executable_SizeOfGeneratedCodeInBytes", "PJRT_Executable_GetCostAnalysis",
	"PJRT_Executable_OutputMemoryKinds", "PJRT_Executable_OptimizedProgram", "PJRT_Executable_Serialize",
	"PJRT_LoadedExecutable_Destroy", "PJRT_LoadedExecutable_GetExecutable",
	"PJRT_LoadedExecutable_AddressableDevices", "PJRT_LoadedExecutable_Delete",
	"PJRT_LoadedExecutable_IsDeleted", "PJRT_LoadedExecutable_Execute",
	"PJRT_Executable_DeserializeAndLoad", "PJRT_LoadedExecutable_Fingerprint",
	"PJRT_Buffer_Destroy", "PJRT_Buffer_ElementType", "PJRT_Buffer_Dimensions",
	"PJRT_Buffer_UnpaddedDimensions", "PJRT_Buffer_DynamicDimensionIndices", "PJRT_Buffer_GetMemoryLayout",
	"PJRT_Buffer_OnDeviceSizeInBytes", "PJRT_Buffer_Device", "PJRT_Buffer_Memory", "PJRT_Buffer_Delete",
	"PJRT_Buffer_IsDeleted", "PJRT_Buffer_CopyToDevice", "PJRT_Buffer_ToHostBuffer", "PJRT_Buffer_IsOnCpu",
	"PJRT_Buffer_ReadyEvent", "PJRT_Buffer_UnsafePointer", "PJRT_Buffer_IncreaseExternalReferenceCount",
	"PJRT_Buffer_DecreaseExternalReferenceCount", "PJRT_Buffer_OpaqueDeviceMemoryDataPointer",
	"PJRT_CopyToDeviceStream_Destroy", "PJRT_CopyToDeviceStream_AddChunk",
	"PJRT_CopyToDeviceStream_TotalBytes", "PJRT_CopyToDeviceStream_GranuleSize",
	"PJRT_CopyToDeviceStream_CurrentBytes",
	"PJRT_TopologyDescription_Create", "PJRT_TopologyDescription_Destroy",
	"PJRT_TopologyDescription_PlatformName", "PJRT_TopologyDescription_PlatformVersion",
	"PJRT_TopologyDescription_GetDeviceDescriptions", "PJRT_TopologyDescription_Serialize",
	"PJRT_TopologyDescription_Attributes",
	"PJRT_Compile",
	// Appended fields ("Always add new fields to the end of the struct").
	"PJRT_Executable_OutputElementTypes", "PJRT_Executable_OutputDimensions",
	"PJRT_Buffer_CopyToMemory",
	// From here the 0.33 header differs (see the file comment).
	"PJRT_Client_CreateViewOfDeviceBuffer",
	"PJRT_Executable_Fingerprint",
	"PJRT_Client_TopologyDescription",
	"PJRT_Executable_GetCompiledMemoryStats",
	"PJRT_Memory_Kind_Id",
	"PJRT_ExecuteContext_Create", "PJRT_ExecuteContext_Destroy", "PJRT_Buffer_CopyRawToHost",
	"PJRT_AsyncHostToDeviceTransferManager_Destroy", "PJRT_AsyncHostToDeviceTransferManager_TransferData",
	"PJRT_Client_CreateBuffersForAsyncHostToDevice", "PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer",
	"PJRT_AsyncHostToDeviceTransferManager_Device", "PJRT_AsyncHostToDeviceTransferManager_BufferCount",
	"PJRT_AsyncHostToDeviceTransferManager_BufferSize", "PJRT_AsyncHostToDeviceTransferManager_SetBufferError",
	"PJRT_AsyncHostToDeviceTransferManager_AddMetadata", "PJRT_Client_DmaMap", "PJRT_Client_DmaUnmap",
	"PJRT_Client_CreateUninitializedBuffer", "PJRT_Client_UpdateGlobalProcessInfo",
	"PJRT_TopologyDescription_Deserialize", "PJRT_Client_CreateAliasBuffer", "PJRT_Client_FulfillAliasBuffer",
	"PJRT_LoadedExecutable_GetDeviceAssignment", "PJRT_Client_CreateErrorBuffer",
	"PJRT_AsyncHostToDeviceTransferManager_TransferLiteral", "PJRT_Buffer_CopyRawToHostFuture",
	"PJRT_Device_PoisonExecution", "PJRT_Device_CreateAsyncTrackingEvent", "PJRT_AsyncTrackingEvent_Destroy",
	"PJRT_Executable_GetCompileOptions", "PJRT_Buffer_DonateWithControlDependency",
	"PJRT_Event_Create", "PJRT_Event_Set", "PJRT_Device_GetAttributes",
}

// pjrtAgreedFields is how many leading pjrtFields the 0.33 and 0.94 headers
// name alike (through PJRT_Buffer_CopyToMemory).
const pjrtAgreedFields = 93

// PJRTHeaderMinor is PJRT_API_MINOR of the header pjrtFields come from.
const PJRTHeaderMinor = 94

// pjrtAPIStructSize is PJRT_Api_STRUCT_SIZE of the 0.94 header.
var pjrtAPIStructSize = pjrtFirstFnOff + 8*len(pjrtFields)

// pjrtRequired are the entries a framework calls on every plugin it loads,
// before anything a user asks for, with the reason a NULL breaks it.
var pjrtRequired = map[string]string{
	"PJRT_Error_Destroy":     "every PJRT_Error a plugin returns must be freed through it",
	"PJRT_Error_Message":     "a framework reads every error's message through it",
	"PJRT_Error_GetCode":     "a framework reads every error's code through it",
	"PJRT_Plugin_Initialize": "InitializePjrtPlugin (xla/pjrt/pjrt_api.cc) calls it before anything else",
	"PJRT_Plugin_Attributes": "clients read the plugin's attributes (xla_version, stablehlo versions) when they load it; a NULL or unimplemented one breaks them (aws-neuron/aws-neuron-sdk#1094, iree-org/iree#19223)",
	"PJRT_Client_Create":     "no client, no devices",
	"PJRT_Client_Destroy":    "a framework frees its client through it",
}

// SE_PlatformRegistrationParams {struct_size, ext, major_version,
// minor_version, patch_version (int32 each, then 4 bytes padding),
// platform, platform_fns, destroy_platform, destroy_platform_fns}.
const (
	seParamsSize         = 64 // TF_OFFSET_OF_END(..., destroy_platform_fns): 56 + 8
	seParamsMajorOff     = 16
	seParamsMinorOff     = 20
	seParamsPatchOff     = 24
	seParamsPlatformOff  = 32
	seParamsFnsOff       = 40
	seParamsDestroyPOff  = 48
	seParamsDestroyFnOff = 56
)

// SP_Platform {struct_size, ext, name, type, supports_unified_memory
// (TF_Bool), use_bfc_allocator (TF_Bool, b8016ccb), force_memory_growth
// (TF_Bool; since TensorFlow 2.7 per tfcompat.Features, not read in a
// header here)}.
const (
	spPlatformNameOff = 16
	spPlatformTypeOff = 24
	spPlatformUMOff   = 32
	spPlatformBFCOff  = 33
	spPlatformFMGOff  = 34
	// TF_OFFSET_OF_END(SP_Platform, supports_unified_memory) in 01de7043:
	// the smallest SP_Platform any header declares.
	spPlatformSizeV0 = 33
	// TF_OFFSET_OF_END(SP_Platform, use_bfc_allocator) in b8016ccb.
	spPlatformSizeBFC = 34
	// TF_OFFSET_OF_END(SP_Platform, force_memory_growth).
	spPlatformSizeFMG = 35
	// The buffer handed to the plugin: room for every member above, zeroed.
	spPlatformBuf = 64
)

// SP_PlatformFns {struct_size, ext, then the callbacks below in order}:
// SP_PLATFORM_FNS_STRUCT_SIZE is 16 + 8*9 = 88 in both revisions read.
var spPlatformFns = []string{
	"get_device_count", "create_device", "destroy_device",
	"create_device_fns", "destroy_device_fns",
	"create_stream_executor", "destroy_stream_executor",
	"create_timer_fns", "destroy_timer_fns",
}

const (
	spPlatformFnsFirstOff = 16
	spPlatformFnsSize     = 88
)

// spPlatformFnsRequired are ValidateSPPlatformFns's TF_VALIDATE_NOT_NULL
// members; TensorFlow refuses the plugin when any is NULL.
var spPlatformFnsRequired = map[string]bool{
	"create_device": true, "destroy_device": true,
	"create_stream_executor": true, "destroy_stream_executor": true,
	"create_device_fns": true, "destroy_device_fns": true,
}

// TP_OptimizerRegistrationParams (grappler.h, tensorflow/tensorflow at
// commit c5530b006bd33fbb0d0f9ca492ee7c5e726bf404) {struct_size, ext,
// major_version, minor_version, patch_version (int32 each, 4 bytes
// padding), device_type, optimizer_configs, optimizer}.
const (
	tpParamsSize       = 56 // TF_OFFSET_OF_END(..., optimizer): 48 + 8
	tpParamsMajorOff   = 16
	tpParamsMinorOff   = 20
	tpParamsPatchOff   = 24
	tpParamsDeviceOff  = 32
	tpParamsConfigsOff = 40
	tpParamsOptOff     = 48
	// TP_OptimizerConfigs {struct_size, ext, 19 TF_TriState (C enum, 4
	// bytes) from disable_model_pruning to scoped_allocator_optimization}:
	// 16 + 19*4.
	tpConfigsSize = 92
	// TP_Optimizer {struct_size, ext, create_func, optimize_func,
	// destroy_func}.
	tpOptimizerSize       = 40
	tpOptimizerCreateOff  = 16
	tpOptimizerOptOff     = 24
	tpOptimizerDestroyOff = 32
)

// The Graph C API version TF_InitGraph receives (GO_MAJOR.GO_MINOR.GO_PATCH
// in grappler.h at c5530b00).
const (
	goMajor = 0
	goMinor = 0
	goPatch = 1
)

// pjrtExtraFields is how many function pointers past the header's last
// the child reads (named "field N"): a plugin newer than the header.
const pjrtExtraFields = 64

// pjrtFieldName names PJRT_Api's function pointer i.
func pjrtFieldName(i int) string {
	if i < len(pjrtFields) {
		return pjrtFields[i]
	}
	return fmt.Sprintf("field %d (past the 0.%d header)", i, PJRTHeaderMinor)
}
