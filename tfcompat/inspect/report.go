package inspect

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Severity grades a Finding.
type Severity string

// Severities, from harmless to fatal. A Report's Verdict is its worst
// Finding's.
const (
	OK   Severity = "ok"   // a fact checked and found in order
	Info Severity = "info" // a fact reported, nothing judged
	Warn Severity = "warn" // loads, but a framework may trip on it later
	Fail Severity = "fail" // a framework refuses the plugin or crashes on it
)

func (s Severity) rank() int {
	switch s {
	case Warn:
		return 2
	case Fail:
		return 3
	case OK, Info:
		return 1
	}
	return 0
}

// Finding is one check and its outcome.
type Finding struct {
	Severity Severity `json:"severity"`
	// Check names what was checked, e.g. "pjrt.version" or
	// "se.platform.struct_size".
	Check string `json:"check"`
	// Message says what was found and, for Warn and Fail, the rule that
	// decided it and what to do.
	Message string `json:"message"`
}

// Kind is what a plugin turned out to be.
type Kind string

// Kinds of plugin.
const (
	KindUnknown   Kind = "unknown"
	KindPJRT      Kind = "pjrt"
	KindPluggable Kind = "pluggable_device"
)

// Report is what Inspect found about one plugin.
type Report struct {
	Name     string    `json:"name,omitempty"`   // from PJRT_NAMES_AND_LIBRARY_PATHS, if given there
	Path     string    `json:"path"`             // the shared library
	Config   string    `json:"config,omitempty"` // the JSON plugin config that named Path, if any
	Kind     Kind      `json:"kind"`
	Verdict  Severity  `json:"verdict"`
	Findings []Finding `json:"findings"`
	// Symbols are the entry points looked up, and whether each is
	// exported.
	Symbols map[string]bool `json:"symbols,omitempty"`
	PJRT    *PJRTInfo       `json:"pjrt,omitempty"`
	Device  *DeviceInfo     `json:"pluggable_device,omitempty"`
	Graph   *GraphInfo      `json:"graph_optimizer,omitempty"`
	Child   ChildInfo       `json:"child"`
}

// ChildInfo is how the child process that loaded the plugin ended.
type ChildInfo struct {
	ExitCode int    `json:"exit_code"`        // -1 when killed by a signal
	Signal   string `json:"signal,omitempty"` // e.g. "segmentation fault"
	TimedOut bool   `json:"timed_out,omitempty"`
	// Stage is the last step the child announced before it ended, e.g.
	// "calling GetPjrtApi".
	Stage string `json:"stage,omitempty"`
	// Stderr is the end of what the plugin (and the child) wrote to
	// standard error, at most stderrKeep bytes.
	Stderr string `json:"stderr,omitempty"`
}

// PJRTInfo are the facts read from a PJRT plugin's PJRT_Api.
type PJRTInfo struct {
	StructSize int `json:"struct_size"`
	// HeaderStructSize is PJRT_Api_STRUCT_SIZE of the header the field
	// names come from (PJRTHeaderMinor).
	HeaderStructSize  int `json:"header_struct_size"`
	VersionStructSize int `json:"version_struct_size"`
	Major             int `json:"major"`
	Minor             int `json:"minor"`
	// Fields is how many function pointers struct_size covers.
	Fields int `json:"fields"`
	// Null are the covered function pointers that are NULL, by name (or
	// "field N" past the header's last).
	Null []string `json:"null,omitempty"`
	// Initialize and Attributes are the results of PJRT_Plugin_Initialize
	// and PJRT_Plugin_Attributes, when Options.Init asked for them.
	Initialize     *CallResult `json:"initialize,omitempty"`
	AttributesCall *CallResult `json:"attributes_call,omitempty"`
	Attributes     []Attribute `json:"attributes,omitempty"`
}

// CallResult is the outcome of one call into a plugin.
type CallResult struct {
	Called bool `json:"called"`
	// Error is the PJRT_Error's message (PJRT_Error_Message) or the
	// TF_Status message; empty on success.
	Error string `json:"error,omitempty"`
	Code  int    `json:"code,omitempty"` // PJRT_Error_Code or TF_Code
}

// Attribute is one PJRT_NamedValue of PJRT_Plugin_Attributes, its value
// rendered as text (lists as [a b c]).
type Attribute struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Value string `json:"value"`
}

// DeviceInfo are the facts SE_InitPlugin filled in.
type DeviceInfo struct {
	Status *CallResult `json:"status,omitempty"`
	// ParamsStructSize is SE_PlatformRegistrationParams.struct_size after
	// the call (the plugin sets it).
	ParamsStructSize      int    `json:"params_struct_size"`
	PlatformStructSize    int    `json:"platform_struct_size"`
	PlatformFnsStructSize int    `json:"platform_fns_struct_size"`
	Name                  string `json:"name"`
	Type                  string `json:"type"`
	SupportsUnifiedMemory bool   `json:"supports_unified_memory"`
	// Null are the SP_PlatformFns callbacks and the params' destroy_*
	// members left NULL.
	Null []string `json:"null,omitempty"`
	// InitKernel is true when TF_InitKernel is exported (it is not
	// called: it registers kernels through TensorFlow itself).
	InitKernel bool `json:"init_kernel"`
}

// GraphInfo are the facts TF_InitGraph filled in.
type GraphInfo struct {
	Status                    *CallResult `json:"status,omitempty"`
	ParamsStructSize          int         `json:"params_struct_size"`
	OptimizerStructSize       int         `json:"optimizer_struct_size"`
	ConfigsStructSize         int         `json:"configs_struct_size"`
	DeviceType                string      `json:"device_type"`
	Create, Optimize, Destroy bool        `json:"-"`
	Callbacks                 []string    `json:"callbacks"` // the non-NULL TP_Optimizer callbacks
}

func (r *Report) add(sev Severity, check, format string, args ...any) {
	r.Findings = append(r.Findings, Finding{Severity: sev, Check: check, Message: fmt.Sprintf(format, args...)})
	if sev.rank() > r.Verdict.rank() {
		r.Verdict = sev
	}
}

// WriteText writes reports as the command prints them: one block per
// plugin, the verdict first.
func WriteText(w io.Writer, reports []Report) error {
	var b strings.Builder
	for i, r := range reports {
		if i > 0 {
			b.WriteByte('\n')
		}
		name := r.Path
		if r.Name != "" {
			name = r.Name + " (" + r.Path + ")"
		}
		fmt.Fprintf(&b, "%s: %s [%s]\n", strings.ToUpper(string(r.Verdict)), name, r.Kind)
		if r.Config != "" {
			fmt.Fprintf(&b, "  config: %s\n", r.Config)
		}
		if p := r.PJRT; p != nil {
			fmt.Fprintf(&b, "  PJRT C API %d.%d, struct_size %d (%d function pointers; the 0.%d header has %d, struct_size %d)\n",
				p.Major, p.Minor, p.StructSize, p.Fields, PJRTHeaderMinor, len(pjrtFields), p.HeaderStructSize)
			for _, a := range p.Attributes {
				fmt.Fprintf(&b, "  attribute %s (%s) = %s\n", a.Name, a.Type, a.Value)
			}
		}
		if d := r.Device; d != nil {
			fmt.Fprintf(&b, "  platform %q type %q, struct_size params %d platform %d platform_fns %d\n",
				d.Name, d.Type, d.ParamsStructSize, d.PlatformStructSize, d.PlatformFnsStructSize)
		}
		if g := r.Graph; g != nil {
			fmt.Fprintf(&b, "  graph optimizer for %q: %s\n", g.DeviceType, strings.Join(g.Callbacks, ", "))
		}
		for _, f := range r.Findings {
			fmt.Fprintf(&b, "  %-4s %s: %s\n", f.Severity, f.Check, f.Message)
		}
		if r.Child.Stderr != "" && r.Verdict == Fail {
			fmt.Fprintf(&b, "  child stderr (end):\n")
			for _, l := range strings.Split(strings.TrimRight(r.Child.Stderr, "\n"), "\n") {
				fmt.Fprintf(&b, "    %s\n", l)
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSON writes reports as one indented JSON array.
func WriteJSON(w io.Writer, reports []Report) error {
	if reports == nil {
		reports = []Report{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(reports)
}

// Worst is the worst verdict among reports (OK for none).
func Worst(reports []Report) Severity {
	v := OK
	for _, r := range reports {
		if r.Verdict.rank() > v.rank() {
			v = r.Verdict
		}
	}
	return v
}
