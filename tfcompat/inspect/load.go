//go:build (linux || darwin) && (amd64 || arm64)

package inspect

// The child's side: dlopen, dlsym and C calls through purego, structs read
// by the offsets in layout.go. Buffers handed to a plugin are []uint64
// (8-byte aligned, and holding no Go pointers, so a plugin writing C
// pointers into them cannot confuse the garbage collector), kept alive
// across each call with runtime.KeepAlive.

import (
	"bytes"
	"runtime"
	"unsafe"

	"github.com/ebitengine/purego"
)

// supported is true where the child can load plugins.
const supported = true

// cmem reads the child's own memory: addresses a plugin handed back.
//
// Not inlined: inlined into inspectPJRT, its copy from the converted
// address crashes the go1.26.8 compiler ("disjointTypes: one of arguments
// is not a pointer" while lowering the memmove).
//
//go:noinline
func cmem(addr uintptr, n int) ([]byte, error) {
	if addr == 0 {
		return nil, errNullPointer
	}
	// addr is C memory the Go heap does not own, so the conversion is
	// valid; it goes through a pointer so vet's unsafeptr check, which
	// cannot know where addr came from, does not flag it.
	p := *(*unsafe.Pointer)(unsafe.Pointer(&addr))
	return bytes.Clone(unsafe.Slice((*byte)(p), n)), nil
}

// cbuf is a zeroed C struct of n bytes.
type cbuf []uint64

func newCbuf(n int) cbuf { return make(cbuf, (n+7)/8) }

func (c cbuf) bytes() []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(&c[0])), len(c)*8)
}
func (c cbuf) addr() uintptr           { return uintptr(unsafe.Pointer(&c[0])) }
func (c cbuf) u64(off int) uint64      { return le64(c.bytes(), off) }
func (c cbuf) u32(off int) uint32      { return le32(c.bytes(), off) }
func (c cbuf) put64(off int, v uint64) { c[off/8] = v }
func (c cbuf) put32(off int, v uint32) {
	b := c.bytes()
	b[off], b[off+1], b[off+2], b[off+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}

// call calls the C function fn with the given arguments and returns its
// integer or pointer result; bufs stay alive until it returns.
func call(fn uintptr, bufs []cbuf, args ...uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn, args...)
	runtime.KeepAlive(bufs)
	return r
}

func childInspect(req request, w *childWriter) childResult {
	res := childResult{Symbols: map[string]bool{}}
	for _, p := range req.Preload {
		w.stage("preloading " + p)
		if _, err := purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_GLOBAL); err != nil {
			res.PreloadErrors = append(res.PreloadErrors, err.Error())
		}
	}
	w.stage("dlopen")
	// RTLD_LAZY: a PluggableDevice plugin calls into TensorFlow
	// (TF_SetStatus, ...), which is not loaded here; binding those at
	// first call lets every other check run.
	h, err := purego.Dlopen(req.Path, purego.RTLD_LAZY|purego.RTLD_LOCAL)
	if err != nil {
		res.DlopenError = err.Error()
		return res
	}
	sym := map[string]uintptr{}
	for _, name := range []string{"GetPjrtApi", "SE_InitPlugin", "TF_InitGraph", "TF_InitKernel"} {
		if p, err := purego.Dlsym(h, name); err == nil && p != 0 {
			sym[name] = p
			res.Symbols[name] = true
		} else {
			res.Symbols[name] = false
		}
	}
	if fn := sym["GetPjrtApi"]; fn != 0 {
		inspectPJRT(&res, w, fn, req.Init)
	}
	st := newStatus(h)
	res.StatusReadable = st.readable()
	if fn := sym["SE_InitPlugin"]; fn != 0 {
		inspectSE(&res, w, fn, st, req.PlatformSize)
		res.Device.InitKernel = sym["TF_InitKernel"] != 0
	}
	if fn := sym["TF_InitGraph"]; fn != 0 {
		inspectGraph(&res, w, fn, st)
	}
	return res
}

func inspectPJRT(res *childResult, w *childWriter, getAPI uintptr, init bool) {
	w.stage("calling GetPjrtApi")
	api := call(getAPI, nil)
	if api == 0 {
		res.APINull = true
		return
	}
	w.stage("reading PJRT_Api")
	head, _ := cmem(api, 8)
	info := &PJRTInfo{HeaderStructSize: pjrtAPIStructSize, StructSize: int(min(le64(head, 0), 1<<30))}
	res.PJRT = info
	if info.StructSize < pjrtFirstFnOff {
		return
	}
	v, _ := cmem(api, pjrtFirstFnOff)
	info.VersionStructSize = int(min(le64(v, pjrtAPIVersionOff), 1<<30))
	info.Major = int(int32(le32(v, pjrtVersionMajorOff)))
	info.Minor = int(int32(le32(v, pjrtVersionMinorOff)))
	n := (info.StructSize - pjrtFirstFnOff) / 8
	info.Fields = n
	// Read no further than the header's fields plus a margin: a larger
	// struct_size is judged implausible without touching what lies past.
	n = min(n, len(pjrtFields)+pjrtExtraFields)
	fns, _ := cmem(api+pjrtFirstFnOff, n*8)
	ptr := func(name string) uintptr {
		for i, f := range pjrtFields[:min(n, len(pjrtFields))] {
			if f == name {
				return uintptr(le64(fns, i*8))
			}
		}
		return 0
	}
	for i := range n {
		if le64(fns, i*8) == 0 {
			info.Null = append(info.Null, pjrtFieldName(i))
		}
	}
	if !init {
		return
	}
	errs := pjrtErrors{message: ptr("PJRT_Error_Message"), code: ptr("PJRT_Error_GetCode"), destroy: ptr("PJRT_Error_Destroy")}
	if fn := ptr("PJRT_Plugin_Initialize"); fn != 0 {
		w.stage("calling PJRT_Plugin_Initialize")
		args := newCbuf(pjrtPluginInitializeArgsSize)
		args.put64(0, pjrtPluginInitializeArgsSize)
		info.Initialize = errs.result(w, call(fn, []cbuf{args}, args.addr()))
	}
	if fn := ptr("PJRT_Plugin_Attributes"); fn != 0 {
		w.stage("calling PJRT_Plugin_Attributes")
		args := newCbuf(pjrtPluginAttributesArgsSize)
		args.put64(0, pjrtPluginAttributesArgsSize)
		info.AttributesCall = errs.result(w, call(fn, []cbuf{args}, args.addr()))
		if info.AttributesCall.Error == "" && info.AttributesCall.Code == 0 {
			w.stage("reading the plugin attributes")
			attrs, err := decodeAttributes(cmem, uintptr(args.u64(pjrtPluginAttributesPtrOff)), args.u64(pjrtPluginAttributesNumOff))
			info.Attributes = attrs
			if err != nil {
				res.AttrError = err.Error()
			}
		}
	}
}

// pjrtErrors turns a PJRT_Error* into a CallResult through the plugin's
// own error functions.
type pjrtErrors struct{ message, code, destroy uintptr }

func (e pjrtErrors) result(w *childWriter, perr uintptr) *CallResult {
	r := &CallResult{Called: true}
	if perr == 0 {
		return r
	}
	r.Error = "(error not readable: PJRT_Error_Message is NULL)"
	if e.message != 0 {
		w.stage("calling PJRT_Error_Message")
		args := newCbuf(pjrtErrorMessageArgsSize)
		args.put64(0, pjrtErrorMessageArgsSize)
		args.put64(16, uint64(perr))
		call(e.message, []cbuf{args}, args.addr())
		msg, err := readSized(cmem, uintptr(args.u64(pjrtErrorMessageMsgOff)), args.u64(pjrtErrorMessageLenOff), "message")
		if err != nil {
			r.Error = "(error message not readable: " + err.Error() + ")"
		} else {
			r.Error = cleanString(msg, false)
		}
	}
	if r.Error == "" {
		r.Error = "(empty error message)"
	}
	if e.code != 0 {
		w.stage("calling PJRT_Error_GetCode")
		args := newCbuf(pjrtErrorGetCodeArgsSize)
		args.put64(0, pjrtErrorGetCodeArgsSize)
		args.put64(16, uint64(perr))
		if call(e.code, []cbuf{args}, args.addr()) == 0 {
			r.Code = int(int32(args.u32(pjrtErrorGetCodeCodeOff)))
		}
	}
	if e.destroy != 0 {
		w.stage("calling PJRT_Error_Destroy")
		args := newCbuf(pjrtErrorDestroyArgsSize)
		args.put64(0, pjrtErrorDestroyArgsSize)
		args.put64(16, uint64(perr))
		call(e.destroy, []cbuf{args}, args.addr())
	}
	return r
}

// tfStatus is a TF_Status for SE_InitPlugin and TF_InitGraph: TensorFlow's
// own when the plugin pulled TensorFlow in (its TF_NewStatus is reachable
// through the plugin's handle), else a zeroed block the plugin must not
// touch (were it to call TF_SetStatus, that symbol is not there and the
// child ends with the loader's error, which the report shows).
type tfStatus struct {
	newFn, codeFn, msgFn uintptr
	ptr                  uintptr
	block                cbuf
}

func newStatus(h uintptr) *tfStatus {
	s := &tfStatus{}
	s.newFn, _ = purego.Dlsym(h, "TF_NewStatus")
	s.codeFn, _ = purego.Dlsym(h, "TF_GetCode")
	s.msgFn, _ = purego.Dlsym(h, "TF_Message")
	return s
}

func (s *tfStatus) readable() bool { return s.newFn != 0 && s.codeFn != 0 && s.msgFn != 0 }

// fresh returns a TF_Status* for one call.
func (s *tfStatus) fresh() uintptr {
	if s.readable() {
		s.ptr = call(s.newFn, nil)
		return s.ptr
	}
	s.block = newCbuf(256)
	return s.block.addr()
}

func (s *tfStatus) result() *CallResult {
	r := &CallResult{Called: true}
	if !s.readable() || s.ptr == 0 {
		return r
	}
	if code := int(int32(call(s.codeFn, nil, s.ptr))); code != 0 {
		r.Code = code
		msg, _ := readCString(cmem, call(s.msgFn, nil, s.ptr))
		r.Error = cleanString(msg, false)
		if r.Error == "" {
			r.Error = "(empty status message)"
		}
	}
	return r
}

func inspectSE(res *childResult, w *childWriter, initFn uintptr, st *tfStatus, platformSize int) {
	params := newCbuf(seParamsSize)
	platform := newCbuf(spPlatformBuf)
	fns := newCbuf(spPlatformFnsSize)
	params.put64(0, seParamsSize)
	params.put32(seParamsMajorOff, 0) // SE_MAJOR.SE_MINOR.SE_PATCH = 0.0.1 (tfcompat.SEMajor...)
	params.put32(seParamsMinorOff, 0)
	params.put32(seParamsPatchOff, 1)
	params.put64(seParamsPlatformOff, uint64(platform.addr()))
	params.put64(seParamsFnsOff, uint64(fns.addr()))
	platform.put64(0, uint64(platformSize))
	fns.put64(0, spPlatformFnsSize)
	status := st.fresh()
	w.stage("calling SE_InitPlugin")
	call(initFn, []cbuf{params, platform, fns}, params.addr(), status)
	w.stage("reading what SE_InitPlugin filled in")
	d := &DeviceInfo{
		Status:                st.result(),
		ParamsStructSize:      int(min(params.u64(0), 1<<30)),
		PlatformStructSize:    int(min(platform.u64(0), 1<<30)),
		PlatformFnsStructSize: int(min(fns.u64(0), 1<<30)),
		SupportsUnifiedMemory: platform.bytes()[spPlatformUMOff] != 0,
	}
	res.Device = d
	// The plugin may have pointed params.platform elsewhere; TensorFlow
	// reads its own struct, so this does too.
	res.NameRaw, d.Name, res.NameNull = readName(uintptr(platform.u64(spPlatformNameOff)))
	res.TypeRaw, d.Type, res.TypeNull = readName(uintptr(platform.u64(spPlatformTypeOff)))
	for i, name := range spPlatformFns {
		if fns.u64(spPlatformFnsFirstOff+8*i) == 0 {
			d.Null = append(d.Null, "SP_PlatformFns."+name)
		}
	}
	if params.u64(seParamsDestroyPOff) == 0 {
		d.Null = append(d.Null, "SE_PlatformRegistrationParams.destroy_platform")
	}
	if params.u64(seParamsDestroyFnOff) == 0 {
		d.Null = append(d.Null, "SE_PlatformRegistrationParams.destroy_platform_fns")
	}
}

func inspectGraph(res *childResult, w *childWriter, initFn uintptr, st *tfStatus) {
	params := newCbuf(tpParamsSize)
	configs := newCbuf(tpConfigsSize)
	opt := newCbuf(tpOptimizerSize)
	params.put64(0, tpParamsSize)
	params.put32(tpParamsMajorOff, goMajor)
	params.put32(tpParamsMinorOff, goMinor)
	params.put32(tpParamsPatchOff, goPatch)
	params.put64(tpParamsConfigsOff, uint64(configs.addr()))
	params.put64(tpParamsOptOff, uint64(opt.addr()))
	configs.put64(0, tpConfigsSize)
	opt.put64(0, tpOptimizerSize)
	status := st.fresh()
	w.stage("calling TF_InitGraph")
	call(initFn, []cbuf{params, configs, opt}, params.addr(), status)
	w.stage("reading what TF_InitGraph filled in")
	g := &GraphInfo{
		Status:              st.result(),
		ParamsStructSize:    int(min(params.u64(0), 1<<30)),
		OptimizerStructSize: int(min(opt.u64(0), 1<<30)),
		ConfigsStructSize:   int(min(configs.u64(0), 1<<30)),
	}
	res.Graph = g
	res.DeviceTypeRaw, g.DeviceType, res.DeviceTypeNull = readName(uintptr(params.u64(tpParamsDeviceOff)))
	for _, cb := range []struct {
		name string
		off  int
	}{{"create_func", tpOptimizerCreateOff}, {"optimize_func", tpOptimizerOptOff}, {"destroy_func", tpOptimizerDestroyOff}} {
		if opt.u64(cb.off) != 0 {
			g.Callbacks = append(g.Callbacks, cb.name)
		}
	}
}

// readName reads the C string a plugin pointed a name field at: its
// bytes as they are and cleaned for display, or null when the pointer is
// NULL.
func readName(p uintptr) (raw []byte, clean string, null bool) {
	if p == 0 {
		return nil, "", true
	}
	raw, _ = readCString(cmem, p)
	return raw, cleanString(raw, false), false
}
