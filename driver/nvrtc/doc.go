// Package nvrtc compiles CUDA C++ to PTX or cubin at run time with NVIDIA's
// NVRTC, loaded like libcuda: it dlopens libnvrtc when Open is called, so it
// builds without a CUDA toolkit and works wherever the library is
// installed.
//
//	c, err := nvrtc.Open("") // $ACCELKIT_LIBNVRTC, else libnvrtc.so.13, .so.12, libnvrtc.so
//	r, err := c.Compile(ctx, src, nvrtc.Options{Arch: "sm_90", NameExpressions: []string{"scale<float>"}})
//	// r.Code is a cubin (sm_XX) or PTX (compute_XX); r.Lowered["scale<float>"] its kernel's name
//
// The target architectures come from NVRTC itself (nvrtcGetSupportedArchs,
// Compiler.SupportedArchs); an Arch it does not list is refused with
// ErrUnsupportedArch before anything is compiled. A failed compile is a
// *CompileError carrying NVRTC's log; it unwraps to ErrCompile.
//
// Compile checks its context before it starts. NVRTC compiles inside one
// blocking call; where the library has nvrtcSetFlowCallback the context's
// end cancels the compile, and with older libraries the compile runs to
// completion.
//
// Concurrency: a Compiler is immutable and safe for concurrent use. Each
// Compile owns its nvrtcProgram from creation to destruction inside one cgo
// call, and NVRTC allows concurrent calls on distinct programs, so there is
// no lock.
//
// The package needs cgo on Linux; elsewhere Open returns an error wrapping
// driver.ErrNotSupported. Package nvrtctest builds a fake libnvrtc for
// tests, in this module and others.
package nvrtc
