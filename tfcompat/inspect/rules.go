package inspect

// The rules: raw facts from the child in, findings out. Each Fail says
// the rule that decided it and what to do.

import (
	"fmt"
	"strings"
	"time"

	"github.com/accelkit/accelkit/tfcompat"
)

func judge(r *Report, res *childResult, opts Options, timeout time.Duration) {
	c := r.Child
	stage := stageText(c.Stage)
	switch {
	case c.TimedOut:
		r.add(Fail, "child", "no answer within %s while %s; the child was killed. A framework loading this plugin would hang there too", timeout, stage)
		return
	case c.Signal != "":
		r.add(Fail, "child", "the plugin crashed the process (%s) while %s; a framework loading it would crash the same way", c.Signal, stage)
		return
	case res == nil && c.ExitCode != 0:
		r.add(Fail, "child", "the plugin ended the process with exit code %d while %s; a framework loading it would exit too", c.ExitCode, stage)
		return
	case res == nil:
		r.add(Fail, "child", "the child exited while %s without reporting", stage)
		return
	}
	for _, e := range res.PreloadErrors {
		r.add(Warn, "preload", "%s", e)
	}
	if res.DlopenError != "" {
		r.add(Fail, "dlopen", "%s; a framework's dlopen fails the same way (a missing dependency: set LD_LIBRARY_PATH, or Preload it)", res.DlopenError)
		return
	}
	r.Symbols = res.Symbols
	pjrt, se := res.Symbols["GetPjrtApi"], res.Symbols["SE_InitPlugin"]
	switch {
	case pjrt:
		r.Kind = KindPJRT
	case se:
		r.Kind = KindPluggable
	}
	if !pjrt && !se {
		r.add(Fail, "symbols", "exports neither GetPjrtApi (a PJRT plugin) nor SE_InitPlugin (a PluggableDevice plugin): jax and TensorFlow look plugins up by these names; check the library is the plugin and that the entry point is extern \"C\" and visible")
		if res.Symbols["TF_InitGraph"] || res.Symbols["TF_InitKernel"] {
			r.Kind = KindPluggable
		}
	}
	if pjrt {
		judgePJRT(r, res, opts)
	}
	if se {
		judgeSE(r, res, opts)
	}
	if res.Symbols["TF_InitGraph"] {
		judgeGraph(r, res)
	}
}

func judgePJRT(r *Report, res *childResult, opts Options) {
	if res.APINull {
		r.add(Fail, "pjrt.api", "GetPjrtApi returned NULL: frameworks dereference it at once")
		return
	}
	p := res.PJRT
	r.PJRT = p
	if p.StructSize < pjrtFirstFnOff {
		r.add(Fail, "pjrt.struct_size", "PJRT_Api struct_size %d is too small to hold pjrt_api_version (%d bytes with struct_size and extension_start): the plugin does not set it, or its PJRT_Api is not the header's", p.StructSize, pjrtFirstFnOff)
		return
	}
	if (p.StructSize-pjrtFirstFnOff)%8 != 0 {
		r.add(Fail, "pjrt.struct_size", "PJRT_Api struct_size %d does not end at a function pointer (%d + 8n): the plugin's PJRT_Api is not laid out as pjrt_c_api.h's", p.StructSize, pjrtFirstFnOff)
		return
	}
	if p.Fields > len(pjrtFields)+pjrtExtraFields {
		r.add(Fail, "pjrt.struct_size", "PJRT_Api struct_size %d claims %d function pointers, over %d past the 0.%d header's %d: not a plausible PJRT_Api", p.StructSize, p.Fields, pjrtExtraFields, PJRTHeaderMinor, len(pjrtFields))
		return
	}
	if err := tfcompat.CheckStructSize("PJRT_Api_Version", p.VersionStructSize, pjrtVersionStructSize); err != nil {
		r.add(Fail, "pjrt.version", "%v", err)
	}
	plugin := tfcompat.APIVersion{Major: p.Major, Minor: p.Minor}
	r.add(Info, "pjrt.version", "built against PJRT C API %s; PJRT_Api struct_size %d covers %d function pointers", plugin, p.StructSize, p.Fields)
	switch {
	case p.Fields > len(pjrtFields):
		r.add(Info, "pjrt.fields", "%d function pointers past the 0.%d header this inspector reads: the plugin is newer; those are named by position", p.Fields-len(pjrtFields), PJRTHeaderMinor)
	case p.Fields > pjrtAgreedFields:
		r.add(Info, "pjrt.fields", "function pointers past %s are named as in the 0.%d header; older headers (0.33) had others there", pjrtFields[pjrtAgreedFields-1], PJRTHeaderMinor)
	}
	judgeFramework(r, plugin, opts)
	for _, name := range p.Null {
		if why, ok := pjrtRequired[name]; ok {
			r.add(Fail, "pjrt.null", "%s is NULL: %s", name, why)
		} else {
			r.add(Warn, "pjrt.null", "%s is NULL: a framework that calls it without first checking crashes", name)
		}
	}
	if !opts.Init {
		r.add(Info, "pjrt.init", "PJRT_Plugin_Initialize and PJRT_Plugin_Attributes not called (ask with -init: a real plugin may touch its device there)")
		return
	}
	judgeCall(r, "pjrt.initialize", "PJRT_Plugin_Initialize", p.Initialize)
	if c := p.AttributesCall; c != nil && c.Error != "" && c.Code == pjrtErrorCodeUnimplemented {
		r.add(Fail, "pjrt.attributes", "PJRT_Plugin_Attributes is unimplemented (UNIMPLEMENTED: %s): %s", c.Error, pjrtRequired["PJRT_Plugin_Attributes"])
	} else {
		judgeCall(r, "pjrt.attributes", "PJRT_Plugin_Attributes", c)
	}
	if res.AttrError != "" {
		r.add(Fail, "pjrt.attributes", "the attributes PJRT_Plugin_Attributes returned are malformed: %s", res.AttrError)
	}
}

func judgeCall(r *Report, check, fn string, c *CallResult) {
	switch {
	case c == nil:
		// NULL: reported with the other NULL entries.
	case c.Error != "":
		r.add(Fail, check, "%s failed (code %d): %s", fn, c.Code, c.Error)
	default:
		r.add(OK, check, "%s succeeded", fn)
	}
}

// judgeFramework applies tfcompat's PJRT version rule.
func judgeFramework(r *Report, plugin tfcompat.APIVersion, opts Options) {
	if opts.Framework == nil {
		r.add(Info, "pjrt.framework", "no framework version given (-framework MAJOR.MINOR, e.g. the PJRT C API version jaxlib reports): compatibility not judged")
		return
	}
	fw := *opts.Framework
	minMinor := opts.MinCompatMinor
	if minMinor == 0 {
		minMinor = tfcompat.PJRTMinCompatMinor
	}
	err := tfcompat.CheckPJRTMin(fw, plugin, !opts.Strict, minMinor)
	if err == nil {
		mode := fmt.Sprintf("compatibility mode: equal majors, plugin minor >= %d", minMinor)
		if opts.Strict {
			mode = "strict: equal major and minor"
		}
		r.add(OK, "pjrt.framework", "a framework at PJRT C API %s accepts plugin %s (%s)", fw, plugin, mode)
		return
	}
	var advice string
	switch {
	case plugin.Major != fw.Major:
		advice = "majors never mix: install a plugin release built for the framework's major version"
	case opts.Strict:
		advice = fmt.Sprintf("the framework will refuse it with \"Mismatched PJRT plugin PJRT API version (%s) and framework PJRT API version %s\"; install the plugin release built for %s, or enable compatibility mode (ENABLE_PJRT_COMPATIBILITY=true) if the framework has it", plugin, fw, fw)
	default:
		advice = fmt.Sprintf("the plugin is older than the framework's compatibility window (minor %d and up): upgrade the plugin, or use a framework release from the plugin's time", minMinor)
	}
	r.add(Fail, "pjrt.framework", "%v; %s", err, advice)
}

func judgeSE(r *Report, res *childResult, opts Options) {
	d := res.Device
	r.Device = d
	if !res.StatusReadable {
		r.add(Info, "se.status", "TensorFlow's TF_Status functions are not reachable from the plugin, so SE_InitPlugin's status was not read (Preload libtensorflow_framework.so.2 to read it)")
	} else if d.Status != nil && d.Status.Error != "" {
		r.add(Fail, "se.status", "SE_InitPlugin set an error status (code %d): %s", d.Status.Code, d.Status.Error)
	}
	want := opts.platformSize()
	for _, s := range []struct {
		name       string
		got, known int
	}{
		{"SE_PlatformRegistrationParams", d.ParamsStructSize, seParamsSize},
		{"SP_Platform", d.PlatformStructSize, spPlatformSizeV0},
		{"SP_PlatformFns", d.PlatformFnsStructSize, spPlatformFnsSize},
	} {
		if err := tfcompat.CheckStructSize(s.name, s.got, s.known); err != nil {
			r.add(Fail, "se.struct_size", "%v", err)
		} else {
			r.add(OK, "se.struct_size", "%s struct_size %d (at least %d)", s.name, s.got, s.known)
		}
	}
	if d.PlatformStructSize >= spPlatformSizeV0 && d.PlatformStructSize < want {
		r.add(Warn, "se.struct_size", "SP_Platform struct_size %d < %d, TensorFlow's in the release judged: the plugin was built against an older stream_executor.h, so TensorFlow sees the members past %d (use_bfc_allocator, force_memory_growth) as unset", d.PlatformStructSize, want, d.PlatformStructSize)
	}
	for _, f := range []struct {
		what string
		null bool
		raw  []byte
		show string
	}{{"name", res.NameNull, res.NameRaw, d.Name}, {"type", res.TypeNull, res.TypeRaw, d.Type}} {
		switch {
		case f.null:
			r.add(Fail, "se.platform", "SP_Platform.%s is NULL: TensorFlow refuses the plugin (ValidateSPPlatform)", f.what)
		case !validDeviceType(f.raw):
			r.add(Fail, "se.platform", "SP_Platform.%s %q is not a valid device type: TensorFlow requires a capital letter followed by capital letters and underscores (ValidateDeviceType)", f.what, f.show)
		}
	}
	for _, n := range d.Null {
		field := strings.TrimPrefix(strings.TrimPrefix(n, "SP_PlatformFns."), "SE_PlatformRegistrationParams.")
		switch {
		case spPlatformFnsRequired[field] || strings.HasPrefix(n, "SE_PlatformRegistrationParams."):
			r.add(Fail, "se.null", "%s is NULL: TensorFlow refuses the plugin after SE_InitPlugin (ValidateSPPlatformFns / ValidateSEPlatformRegistrationParams)", n)
		case field == "get_device_count":
			r.add(Fail, "se.null", "%s is NULL: TensorFlow calls it unchecked when it creates the first executor", n)
		default:
			r.add(Info, "se.null", "%s is NULL (TensorFlow does not check or call it at load)", n)
		}
	}
	if d.InitKernel {
		r.add(Info, "se.kernels", "TF_InitKernel is exported (not called: it registers kernels through TensorFlow itself)")
	}
}

func judgeGraph(r *Report, res *childResult) {
	g := res.Graph
	r.Graph = g
	if g.Status != nil && g.Status.Error != "" {
		r.add(Fail, "graph.status", "TF_InitGraph set an error status (code %d): %s", g.Status.Code, g.Status.Error)
	}
	for _, s := range []struct {
		name       string
		got, known int
	}{
		{"TP_OptimizerRegistrationParams", g.ParamsStructSize, tpParamsSize},
		{"TP_Optimizer", g.OptimizerStructSize, tpOptimizerSize},
		{"TP_OptimizerConfigs", g.ConfigsStructSize, tpConfigsSize},
	} {
		if err := tfcompat.CheckStructSize(s.name, s.got, s.known); err != nil {
			r.add(Fail, "graph.struct_size", "%v", err)
		}
	}
	has := map[string]bool{}
	for _, c := range g.Callbacks {
		has[c] = true
	}
	before := len(r.Findings)
	switch {
	case res.DeviceTypeNull:
		r.add(Fail, "graph.device_type", "TP_OptimizerRegistrationParams.device_type is NULL: the optimizer is registered for no device")
	case !validDeviceType(res.DeviceTypeRaw):
		r.add(Fail, "graph.device_type", "device_type %q is not a valid device type (a capital letter followed by capital letters and underscores)", g.DeviceType)
	}
	if !has["optimize_func"] {
		r.add(Fail, "graph.null", "TP_Optimizer.optimize_func is NULL: grappler.h requires it (\"Plugin authors must provide an optimize function\")")
	}
	if has["create_func"] && !has["destroy_func"] {
		r.add(Fail, "graph.null", "TP_Optimizer.create_func is set but destroy_func is NULL: grappler.h requires destroy_func with create_func")
	}
	if len(r.Findings) == before {
		r.add(OK, "graph", "graph optimizer registered for %q (%s)", g.DeviceType, strings.Join(g.Callbacks, ", "))
	}
}
