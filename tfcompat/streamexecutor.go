package tfcompat

// StreamExecutor C API facts (tensorflow/c/experimental/stream_executor/
// stream_executor.h).
//
// The header declares SE_MAJOR/SE_MINOR/SE_PATCH and its structs carry a
// struct_size set to TF_OFFSET_OF_END(struct, last member): the versioning
// strategy (tensorflow/community rfcs/20200612-stream-executor-c-api/
// C_API_versioning_strategy.md) says members are only ever appended, never
// removed or reordered, and each side reads only the members that both
// struct sizes cover. SE_MAJOR marks a backwards-incompatible change; the
// plugin receives TF's major in SE_PlatformRegistrationParams and must
// refuse a different one, since TensorFlow does not check the plugin's.
//
// Facts below carry their source and how far they were verified; see the
// README. Where a fact rests on an inference rather than the header of the
// release itself, Source says so.

import (
	"errors"
	"fmt"
)

// SE C API version that every release in the supported range declares.
const (
	SEMajor = 0
	SEMinor = 0
	SEPatch = 1
)

// ErrSEMajorMismatch is returned (wrapped) by CheckSE.
var ErrSEMajorMismatch = errors.New("tfcompat: streamexecutor c api major version mismatch")

// ErrNoFacts is returned (wrapped) by Features for a release outside the
// range the facts cover.
var ErrNoFacts = errors.New("tfcompat: no streamexecutor facts for this release")

// SEFeatures are the StreamExecutor C API facts of one TensorFlow release,
// as feature gates for plugin code that must match the struct layout.
type SEFeatures struct {
	// Major, Minor, Patch are SE_MAJOR/SE_MINOR/SE_PATCH.
	Major, Minor, Patch int
	// UseBFCAllocator: SP_Platform has use_bfc_allocator.
	UseBFCAllocator bool
	// ForceMemoryGrowth: SP_Platform has force_memory_growth.
	ForceMemoryGrowth bool
	// Memset: SP_StreamExecutor has mem_zero, memset and memset32.
	Memset bool
	// HostCallbackAfterMemset: host_callback follows memset32, so its offset
	// differs from releases without the memset members; a plugin built for
	// one layout must not be loaded by the other.
	HostCallbackAfterMemset bool
}

// seFact is one row of the facts table (rendered into the docs).
type seFact struct {
	What   string
	Since  string // first TensorFlow minor with the fact
	Source string
}

var seFacts = []seFact{
	{"SE_MAJOR.SE_MINOR.SE_PATCH = 0.0.1", "2.5",
		"stream_executor.h; read in two header revisions (before and after use_bfc_allocator); that it holds through 2.16 is from the issue, not re-read per release"},
	{"SP_Platform.use_bfc_allocator", "2.5",
		"stream_executor.h revision with the member read; first release (2.5, the PluggableDevice release) not verified against its tag"},
	{"SP_Platform.force_memory_growth", "2.7",
		"added by tensorflow/tensorflow PR 51705 (cited by the DirectML plugin); 2.7 inferred, not verified against the 2.7 header"},
	{"SP_StreamExecutor.mem_zero, memset, memset32", "2.7",
		"plugins gate them on TF_MINOR_VERSION >= 7 (NEC VEDA plugin); not verified against the 2.7 header"},
	{"host_callback offset moves (declared after memset32)", "2.7",
		"member order mem_zero, memset, memset32, host_callback as in plugins mirroring the header; not verified against the header"},
}

var (
	factsMin = MustParseVersion("2.5")
	factsMax = MustParseVersion("2.17")
	since27  = MustParseVersion("2.7")
)

// Features returns the StreamExecutor C API facts for TensorFlow release v.
// Releases outside 2.5 <= v < 2.17 yield an error wrapping ErrNoFacts.
// Pre-releases of a minor count as that minor.
func Features(v Version) (SEFeatures, error) {
	mm := minorOf(v)
	if Compare(mm, factsMin) < 0 || Compare(mm, factsMax) >= 0 {
		return SEFeatures{}, fmt.Errorf("%w: tensorflow %s; facts cover %s to before %s", ErrNoFacts, v, factsMin, factsMax)
	}
	at27 := Compare(mm, since27) >= 0
	return SEFeatures{
		Major: SEMajor, Minor: SEMinor, Patch: SEPatch,
		UseBFCAllocator:         true,
		ForceMemoryGrowth:       at27,
		Memset:                  at27,
		HostCallbackAfterMemset: at27,
	}, nil
}

// minorOf keeps the first two release components, so 2.7.0rc1 counts as 2.7.
func minorOf(v Version) Version {
	r := []int{0, 0}
	copy(r, v.Release)
	return Version{Release: r}
}

// CheckSE applies the versioning strategy's rule for the SE C API major:
// the plugin must reject a framework whose SE_MAJOR differs from the one it
// was built with (TensorFlow itself does not check). It returns nil when
// the majors match, else an error wrapping ErrSEMajorMismatch naming both.
func CheckSE(frameworkMajor, pluginMajor int) error {
	if frameworkMajor == pluginMajor {
		return nil
	}
	return fmt.Errorf("%w: framework SE_MAJOR %d, plugin built for SE_MAJOR %d; a plugin must refuse a different major (minor and patch differences are compatible via struct_size)",
		ErrSEMajorMismatch, frameworkMajor, pluginMajor)
}
