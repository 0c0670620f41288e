// Package program is the whole path from CUDA C++ source to a running
// kernel, cached: source and options -> key (with the toolchain probed) ->
// progcache.GetOrCompile (compile once, on any cache) -> load on the
// device -> kernel.
//
//	l, err := program.New(program.Options{Device: dev}) // NVRTC, default cache
//	p, err := l.Load(ctx, program.Source{Name: "add.cu", Code: src})
//	k, err := p.Kernel("accelkit_vector_add")
//	err = k.Launch(nil, driver.LaunchConfig{Grid: driver.Dim3{X: blocks}, Block: driver.Dim3{X: 256}}, args)
//
// The key is progcache.MakeKey of the source, the options as compiled (the
// architecture resolved from the device when not given), the name
// expressions, and the toolchain, probed rather than passed in: the
// compiler's version ("nvrtc"), the device's driver version ("driver"),
// the linker ("linker": "none", as nothing links yet) and this module's
// version ("accelkit", ModuleVersion). A probe that fails is keyed as
// "unavailable: <why>", never left empty, so machines with different
// toolchains never share an entry.
//
// With no cache given, programs live in a progcache/filestream cache under
// the user's cache directory (DefaultDir), which $ACCELKIT_PROGRAM_CACHE
// moves. Any progcache.Cache can stand in: a bolt file, memory, or a
// progcache/tiered cache in front of a progcache/redistier one, so that a
// fleet compiles each program once.
//
// Load needs a device that offers driver.Launcher (CUDA; the sim, which
// runs PTX of its registered kernels) and a Compiler: NVRTC, loaded at run
// time by driver/nvrtc, or a stand-in of your own.
package program
