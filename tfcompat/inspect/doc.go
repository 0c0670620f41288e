// Package inspect loads a PJRT or TensorFlow PluggableDevice plugin and
// says whether it fits: the checks a framework makes (or crashes for want
// of) when it loads one, applied by tfcompat's rules, with the rule that
// decided each verdict in words a user can act on.
//
// For a PJRT plugin it reads PJRT_Api through GetPjrtApi: struct_size, the
// pjrt_api_version it was built against and the verdict of tfcompat's
// version rule against a framework's version (Options.Framework), and the
// function pointers left NULL among those its struct_size covers; on
// request (Options.Init) it calls PJRT_Plugin_Initialize and
// PJRT_Plugin_Attributes and reads errors back through PJRT_Error_Message.
// For a PluggableDevice plugin it calls SE_InitPlugin with correctly sized
// params and reports the platform's name and type, each struct_size
// against tfcompat.CheckStructSize's rule, and every callback TensorFlow
// requires that is NULL; TF_InitGraph's optimizer registration when
// exported. InspectPlugins follows PJRT_NAMES_AND_LIBRARY_PATHS and the
// JSON plugin configs it names.
//
// The inspecting process never loads a plugin: each is loaded in a child
// process, a re-execution of the same executable with a time limit, so a
// plugin that crashes, hangs or exits is reported (signal, timeout or exit
// code, with the step it happened in) rather than taking the caller down.
// A program using this package must therefore call RunChild first thing
// in main (and a test binary in TestMain). Plugins are loaded with
// github.com/ebitengine/purego, without cgo: the module builds and tests
// with CGO_ENABLED=0. Loading is supported on linux and darwin, amd64 and
// arm64; elsewhere Inspect returns ErrNotSupported.
//
// Struct layouts are transcribed from the headers' field order, at the
// header revisions the module README lists, and held against the C
// compiler's offsets in the tests. Every exported function is safe for concurrent use; each
// Inspect runs its own child.
package inspect
