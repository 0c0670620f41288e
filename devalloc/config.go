package devalloc

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"math/bits"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/accelkit/accelkit/driver"
)

// EnvConfig names the environment variable ConfigFromEnv reads; its value
// uses the ParseConfig syntax, like PYTORCH_CUDA_ALLOC_CONF.
const EnvConfig = "ACCELKIT_ALLOC_CONF"

// ErrConfig is wrapped by every ParseConfig error.
var ErrConfig = errors.New("devalloc: bad allocator config")

// Backend selects the resource Open builds.
type Backend int

const (
	// BackendNative is the caching allocator (the zero value).
	BackendNative Backend = iota
	// BackendPassthrough is Passthrough, which calls the device's Malloc
	// and Free for every request, with no caching: the baseline for A/B
	// runs. New refuses it; Open and NewPassthrough build it.
	BackendPassthrough
)

func (b Backend) String() string {
	if b == BackendPassthrough {
		return "passthrough"
	}
	return "native"
}

// Config tunes an Allocator. The zero value is PyTorch's default behaviour
// (no power-of-two rounding, no max split size, no garbage collection,
// plain segments, caching backend, no history) but for one thing: before a
// miss grows the pool, cached whole segments of the large pool are
// released (see KeepCacheOnGrow).
type Config struct {
	// Backend: native caching (default) or passthrough.
	Backend Backend
	// ExpandableSegments maps memory page by page into reserved virtual
	// ranges per (stream, pool) on devices with driver.VMM; without VMM the allocator falls back to
	// plain segments and Stats reports it.
	ExpandableSegments bool
	// MaxSplitSize: blocks of plain segments of at least this many bytes
	// are never split and small requests never take them. 0 means no
	// limit. Expandable ranges ignore it: their free blocks are split and
	// merged like any other (unlike PyTorch, see pytorch/pytorch#123548).
	MaxSplitSize uint64
	// MaxNonSplitRounding bounds how much larger than the request an
	// oversize cached block may be and still serve it. 0 means
	// kLargeBuffer (20 MiB), PyTorch's default.
	MaxNonSplitRounding uint64
	// RoundupPower2Divisions gives, per power-of-two size interval starting
	// at 1 MiB (index i covers [2^i MiB, 2^(i+1) MiB); the last covers
	// everything above), how many divisions each power of two is split
	// into when rounding a request. 0 or 1 means plain 512 B rounding.
	RoundupPower2Divisions [RoundupIntervals]uint64
	// GarbageCollectionThreshold in (0, 1): before growing the pool, when
	// reserved memory would exceed this fraction of the limit (SetLimit or
	// SetMemoryFraction, else the device total), cached whole segments are
	// released oldest-unused first. 0 disables.
	GarbageCollectionThreshold float64
	// CrossStreamReuse lets a stream whose pool has no fit take a fitting
	// free block cached for another stream, ordered by an event (no host
	// synchronisation).
	CrossStreamReuse bool
	// HistoryEntries is the size of the trace ring buffer that Snapshot
	// reports. 0 disables history.
	HistoryEntries int
	// HistoryStacks records the caller's stack frames with each trace entry
	// (costly; for debugging).
	HistoryStacks bool
	// SnapshotOnOOM, when not empty, is a file the allocator writes a JSON
	// snapshot to whenever it reports an OOMError.
	SnapshotOnOOM string
	// KeepCacheOnGrow keeps cached whole segments when a miss grows the
	// pool, releasing them only when an allocation fails, as PyTorch does
	// (release_before_grow:false). The zero value releases before growing:
	// a miss that needs a new plain segment first gives back cached whole
	// segments of the large pool, oldest freed first, until they cover it.
	KeepCacheOnGrow bool
	// MemoryFraction in (0, 1] caps reserved memory at that fraction of
	// the device total from the start, as PyTorch's
	// per_process_memory_fraction key and SetMemoryFraction do. 0: no cap.
	MemoryFraction float64
	// Ignored holds the PyTorch keys ParseConfig accepted without
	// implementing them, as comma-separated key:value pairs in the order
	// given (see IgnoredKeys); String writes them back.
	Ignored string
}

// IgnoredKey is a PYTORCH_CUDA_ALLOC_CONF key devalloc accepts, so that a
// configuration copied from a PyTorch job parses, but does not implement.
type IgnoredKey struct {
	Key, Value string
	// Instead says what devalloc does in its place.
	Instead string
}

// pytorchOnly maps the PyTorch keys devalloc accepts without implementing
// them to what it does instead. The pinned-memory keys belong to
// PyTorch's host allocator, which accelkit's hostpin replaces.
var pytorchOnly = map[string]string{
	"release_lock_on_cudamalloc":        "devalloc always drops its lock around the driver's Malloc of a plain segment; expandable segments map pages under it",
	"release_lock_on_hipmalloc":         "devalloc always drops its lock around the driver's Malloc of a plain segment; expandable segments map pages under it",
	"pinned_use_cuda_host_register":     "pinned host memory is hostpin's: its Allocator allocates with the driver's HostAlloc, and Stager.Register registers existing memory",
	"pinned_use_hip_host_register":      "pinned host memory is hostpin's: its Allocator allocates with the driver's HostAlloc, and Stager.Register registers existing memory",
	"pinned_num_register_threads":       "pinned host memory is hostpin's, which registers from the calling goroutine",
	"pinned_use_background_threads":     "pinned host memory is hostpin's, whose frees are polled by its Allocator, no background thread",
	"pinned_reserve_segment_size_mb":    "pinned host memory is hostpin's, which reserves nothing up front",
	"pinned_free_catch_all":             "pinned host memory is hostpin's",
	"graph_capture_record_stream_reuse": "devalloc has no CUDA graph capture pools; blocks are reused in stream order",
	"throw_on_cudamalloc_oom":           "devalloc releases its cache and retries once, then returns an *OOMError",
	"large_segment_size_mb":             "large-pool segments for requests under 10 MiB are 20 MiB, as PyTorch's default",
}

// asyncBackend is PyTorch's cudaMallocAsync backend and its ROCm name.
var asyncBackend = map[string]bool{"cudaMallocAsync": true, "hipMallocAsync": true}

const asyncInstead = "devalloc's native caching allocator is used; a stream-ordered driver pool (cudaMallocAsync) is not implemented"

// IgnoredKeys returns the keys of c.Ignored, each with what devalloc does
// instead.
func (c Config) IgnoredKeys() []IgnoredKey {
	var out []IgnoredKey
	parts, _ := splitEntries(c.Ignored) // none when c.Ignored is malformed, which New refuses
	for _, part := range parts {
		k, v, ok := strings.Cut(part, ":")
		if !ok {
			continue
		}
		instead := pytorchOnly[k]
		if k == "backend" {
			instead = asyncInstead
		}
		out = append(out, IgnoredKey{Key: k, Value: v, Instead: instead})
	}
	return out
}

// warned holds the ignored keys already warned about: each once per
// process, as PyTorch's TORCH_WARN_ONCE.
var warned sync.Map

// warnIgnored logs, once per key and process, that key is accepted but
// not implemented, through log/slog's default logger.
func warnIgnored(k, v, instead string) {
	if _, dup := warned.LoadOrStore(k, true); dup {
		return
	}
	slog.Warn(fmt.Sprintf("devalloc: PyTorch allocator key %s:%s is accepted but not implemented: %s", k, v, instead),
		"key", k, "value", v)
}

// RoundupIntervals is the number of power-of-two size intervals of
// Config.RoundupPower2Divisions: 1 MiB up to 64 GiB, as in PyTorch.
const RoundupIntervals = 16

// Config keys, in the order README lists them.
var configKeys = []string{
	"backend", "expandable_segments", "max_split_size_mb", "max_non_split_rounding_mb",
	"roundup_power2_divisions", "garbage_collection_threshold", "cross_stream_reuse",
	"history_entries", "history_stacks", "snapshot_on_oom", "release_before_grow",
	"per_process_memory_fraction",
}

// maxSizeMB bounds the MiB-valued keys so that bytes never overflow.
const maxSizeMB = math.MaxUint64 >> 20

// maxHistoryEntries bounds the ring buffer (each entry is ~100 bytes).
const maxHistoryEntries = 1 << 24

// ParseConfig parses PyTorch's allocator config syntax:
// comma-separated key:value pairs, for example
//
//	expandable_segments:true,max_split_size_mb:128,garbage_collection_threshold:0.8
//
// roundup_power2_divisions takes a single power of two or a list such as
// [256:1,512:2,>:8] (keys in MiB, powers of two; ">" sets all larger
// intervals). Unknown keys and bad values are errors (wrapping ErrConfig)
// that name the key and what is valid. Brackets are PyTorch's: a list is
// a whole value, unnested; a bracket anywhere else, a path included, is
// an error naming its byte position. Empty input gives the zero Config.
func ParseConfig(s string) (Config, error) {
	var c Config
	seen := map[string]bool{}
	parts, err := splitEntries(s)
	if err != nil {
		return Config{}, err
	}
	for _, part := range parts {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, ":")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok {
			return Config{}, fmt.Errorf("%w: entry %q is not key:value (valid keys: %s)", ErrConfig, part, strings.Join(configKeys, ", "))
		}
		if instead, ok := pytorchOnly[k]; ok || k == "backend" && asyncBackend[v] {
			if !ok {
				instead = asyncInstead
			}
			if v == "" {
				return Config{}, fmt.Errorf("%w: key %q has no value", ErrConfig, k)
			}
			if seen[k] {
				return Config{}, fmt.Errorf("%w: key %q given twice", ErrConfig, k)
			}
			seen[k] = true
			if c.Ignored != "" {
				c.Ignored += ","
			}
			c.Ignored += k + ":" + v
			warnIgnored(k, v, instead)
			continue
		}
		if !slices.Contains(configKeys, k) {
			return Config{}, fmt.Errorf("%w: unknown key %q (valid keys: %s; accepted from PyTorch and ignored: %s)",
				ErrConfig, k, strings.Join(configKeys, ", "), strings.Join(slices.Sorted(maps.Keys(pytorchOnly)), ", "))
		}
		if seen[k] {
			return Config{}, fmt.Errorf("%w: key %q given twice", ErrConfig, k)
		}
		seen[k] = true
		var err error
		switch k {
		case "backend":
			switch v {
			case "native":
				c.Backend = BackendNative
			case "passthrough":
				c.Backend = BackendPassthrough
			default:
				err = fmt.Errorf("backend %q: want native or passthrough (cudaMallocAsync is accepted and ignored)", v)
			}
		case "expandable_segments":
			c.ExpandableSegments, err = parseBool(k, v)
		case "cross_stream_reuse":
			c.CrossStreamReuse, err = parseBool(k, v)
		case "history_stacks":
			c.HistoryStacks, err = parseBool(k, v)
		case "release_before_grow":
			var release bool
			release, err = parseBool(k, v)
			c.KeepCacheOnGrow = !release
		case "max_split_size_mb":
			var mb uint64
			mb, err = strconv.ParseUint(v, 10, 64)
			// PyTorch: must exceed kLargeBuffer so that split 20 MiB
			// segments stay splittable.
			if err != nil || mb <= kLargeBuffer>>20 || mb > maxSizeMB {
				err = fmt.Errorf("max_split_size_mb %q: want an integer in [%d, %d]", v, kLargeBuffer>>20+1, uint64(maxSizeMB))
			} else {
				c.MaxSplitSize = mb << 20
			}
		case "max_non_split_rounding_mb":
			var mb uint64
			mb, err = strconv.ParseUint(v, 10, 64)
			if err != nil || mb == 0 || mb > maxSizeMB {
				err = fmt.Errorf("max_non_split_rounding_mb %q: want an integer in [1, %d]", v, uint64(maxSizeMB))
			} else {
				c.MaxNonSplitRounding = mb << 20
			}
		case "roundup_power2_divisions":
			c.RoundupPower2Divisions, err = parseRoundup(v)
		case "garbage_collection_threshold":
			var f float64
			f, err = strconv.ParseFloat(v, 64)
			if err != nil || !(f > 0 && f < 1) {
				err = fmt.Errorf("garbage_collection_threshold %q: want a number in the open interval (0, 1)", v)
			} else {
				c.GarbageCollectionThreshold = f
			}
		case "per_process_memory_fraction":
			var f float64
			f, err = strconv.ParseFloat(v, 64)
			if err != nil || !(f > 0 && f <= 1) {
				err = fmt.Errorf("per_process_memory_fraction %q: want a number in (0, 1]", v)
			} else {
				c.MemoryFraction = f
			}
		case "history_entries":
			var n int
			n, err = strconv.Atoi(v)
			if err != nil || n < 0 || n > maxHistoryEntries {
				err = fmt.Errorf("history_entries %q: want an integer in [0, %d]", v, maxHistoryEntries)
			} else {
				c.HistoryEntries = n
			}
		case "snapshot_on_oom":
			if v == "" {
				err = fmt.Errorf("snapshot_on_oom: want a file path")
			}
			c.SnapshotOnOOM = v
		}
		if err != nil {
			return Config{}, fmt.Errorf("%w: %w", ErrConfig, err)
		}
	}
	return c, nil
}

// ConfigFromEnv parses ACCELKIT_ALLOC_CONF; unset or empty gives the zero
// Config.
func ConfigFromEnv() (Config, error) {
	c, err := ParseConfig(os.Getenv(EnvConfig))
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", EnvConfig, err)
	}
	return c, nil
}

// String renders c in ParseConfig syntax (non-default keys only), so
// ParseConfig(c.String()) == c.
func (c Config) String() string {
	var parts []string
	if c.Backend != BackendNative {
		parts = append(parts, "backend:"+c.Backend.String())
	}
	if c.ExpandableSegments {
		parts = append(parts, "expandable_segments:true")
	}
	if c.MaxSplitSize != 0 {
		parts = append(parts, fmt.Sprintf("max_split_size_mb:%d", c.MaxSplitSize>>20))
	}
	if c.MaxNonSplitRounding != 0 {
		parts = append(parts, fmt.Sprintf("max_non_split_rounding_mb:%d", c.MaxNonSplitRounding>>20))
	}
	if c.RoundupPower2Divisions != ([RoundupIntervals]uint64{}) {
		var l []string
		for i, d := range c.RoundupPower2Divisions {
			l = append(l, fmt.Sprintf("%d:%d", 1<<i, max(d, 1)))
		}
		parts = append(parts, "roundup_power2_divisions:["+strings.Join(l, ",")+"]")
	}
	if c.GarbageCollectionThreshold != 0 {
		parts = append(parts, "garbage_collection_threshold:"+strconv.FormatFloat(c.GarbageCollectionThreshold, 'g', -1, 64))
	}
	if c.CrossStreamReuse {
		parts = append(parts, "cross_stream_reuse:true")
	}
	if c.HistoryEntries != 0 {
		parts = append(parts, fmt.Sprintf("history_entries:%d", c.HistoryEntries))
	}
	if c.HistoryStacks {
		parts = append(parts, "history_stacks:true")
	}
	if c.SnapshotOnOOM != "" {
		parts = append(parts, "snapshot_on_oom:"+c.SnapshotOnOOM)
	}
	if c.KeepCacheOnGrow {
		parts = append(parts, "release_before_grow:false")
	}
	if c.MemoryFraction != 0 {
		parts = append(parts, "per_process_memory_fraction:"+strconv.FormatFloat(c.MemoryFraction, 'g', -1, 64))
	}
	if c.Ignored != "" {
		parts = append(parts, c.Ignored)
	}
	return strings.Join(parts, ",")
}

// validate checks a Config built in code (ParseConfig output is valid).
func (c Config) validate() error {
	switch {
	case c.Backend != BackendNative && c.Backend != BackendPassthrough:
		return fmt.Errorf("%w: backend %d: want BackendNative or BackendPassthrough", ErrConfig, c.Backend)
	case c.MaxSplitSize != 0 && c.MaxSplitSize <= kLargeBuffer:
		return fmt.Errorf("%w: MaxSplitSize %d: want 0 or more than %d bytes", ErrConfig, c.MaxSplitSize, uint64(kLargeBuffer))
	case !(c.GarbageCollectionThreshold >= 0 && c.GarbageCollectionThreshold < 1):
		return fmt.Errorf("%w: GarbageCollectionThreshold %v: want 0 (off) or a number in (0, 1)", ErrConfig, c.GarbageCollectionThreshold)
	case !(c.MemoryFraction >= 0 && c.MemoryFraction <= 1):
		return fmt.Errorf("%w: MemoryFraction %v: want 0 (no cap) or a number in (0, 1]", ErrConfig, c.MemoryFraction)
	case c.HistoryEntries < 0 || c.HistoryEntries > maxHistoryEntries:
		return fmt.Errorf("%w: HistoryEntries %d: want [0, %d]", ErrConfig, c.HistoryEntries, maxHistoryEntries)
	}
	parts, err := splitEntries(c.Ignored)
	if err != nil {
		return fmt.Errorf("%w (in Config.Ignored)", err)
	}
	for _, part := range parts {
		if c.Ignored == "" {
			break
		}
		k, v, ok := strings.Cut(part, ":")
		_, known := pytorchOnly[k]
		if !ok || v == "" || !known && (k != "backend" || !asyncBackend[v]) {
			return fmt.Errorf("%w: Ignored entry %q: want key:value of a PyTorch key devalloc accepts and ignores (%s, backend:cudaMallocAsync)",
				ErrConfig, part, strings.Join(slices.Sorted(maps.Keys(pytorchOnly)), ", "))
		}
	}
	for i, d := range c.RoundupPower2Divisions {
		if d > 1 && d&(d-1) != 0 || d > maxDivisions {
			return fmt.Errorf("%w: RoundupPower2Divisions[%d] = %d: want 0, 1 or a power of two up to %d", ErrConfig, i, d, maxDivisions)
		}
	}
	return nil
}

// maxDivisions bounds roundup_power2_divisions: a division of a 1 MiB
// interval finer than 512 B would be below the rounding unit.
const maxDivisions = 1 << 11

func parseBool(k, v string) (bool, error) {
	switch strings.ToLower(v) {
	case "true", "1":
		return true, nil
	case "false", "0":
		return false, nil
	}
	return false, fmt.Errorf("%s %q: want true or false", k, v)
}

// listExample is what the bracket errors show as valid.
const listExample = "a bracket may only enclose a whole value, a list such as roundup_power2_divisions:[256:1,512:2,>:8]"

// splitEntries splits s into its comma-separated entries, keeping the
// commas of a list value. Brackets follow PyTorch's tokenizer
// (ConfigTokenizer in c10/core/AllocatorConfig.h), for which '[', ']', ','
// and ':' are always tokens: a list is a whole value (key:[a,b]), does not
// nest, and is followed by ',' or the end. Any other bracket is refused,
// with its position (bytes counted from 1): a stray ']' or an unclosed '['
// would otherwise take the commas after it, and the keys with them.
func splitEntries(s string) ([]string, error) {
	var out []string
	start := 0
	open, closed := -1, -1 // offsets of the '[' of an unclosed list, and of the ']' that ended the entry's list
	colon, valued := false, false
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if open >= 0 {
			switch ch {
			case '[':
				return nil, bracketError(s, i, fmt.Sprintf("opens a list inside the list opened at byte %d; lists do not nest", open+1))
			case ']':
				open, closed = -1, i
			}
			continue
		}
		switch {
		case ch == ',':
			out = append(out, s[start:i])
			start = i + 1
			colon, valued, closed = false, false, -1
		case isSpaceByte(ch):
		case closed >= 0:
			return nil, bracketError(s, i, fmt.Sprintf("follows the list closed at byte %d; want ',' or the end there", closed+1))
		case ch == '[':
			if !colon || valued {
				return nil, bracketError(s, i, "does not start a value")
			}
			open, valued = i, true
		case ch == ']':
			return nil, bracketError(s, i, "closes no '['")
		case ch == ':' && !colon:
			colon = true
		case colon:
			valued = true
		}
	}
	if open >= 0 {
		return nil, bracketError(s, open, "is never closed")
	}
	return append(out, s[start:]), nil
}

// bracketError is splitEntries' error about the byte at offset i of s,
// shown with the text before it.
func bracketError(s string, i int, what string) error {
	from := max(0, i-31)
	lead := ""
	if from > 0 {
		lead = "..."
	}
	return fmt.Errorf("%w: %q at byte %d (%q) %s: %s", ErrConfig, s[i], i+1, lead+s[from:i+1], what, listExample)
}

func isSpaceByte(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

func parseDivisions(v string) (uint64, error) {
	d, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
	if err != nil || d == 0 || d&(d-1) != 0 || d > maxDivisions {
		return 0, fmt.Errorf("roundup_power2_divisions: divisions %q: want a power of two in [1, %d]", v, maxDivisions)
	}
	return d, nil
}

// parseRoundup follows PyTorch: a single value applies to every interval;
// in the list form the first entry also fills the intervals below it and
// ">" fills every interval above the previous entry.
func parseRoundup(v string) ([RoundupIntervals]uint64, error) {
	var out [RoundupIntervals]uint64
	if !strings.HasPrefix(v, "[") {
		d, err := parseDivisions(v)
		if err != nil {
			return out, err
		}
		for i := range out {
			out[i] = d
		}
		return out, nil
	}
	if !strings.HasSuffix(v, "]") || len(v) < 3 {
		return out, fmt.Errorf("roundup_power2_divisions %q: want a power of two or a list such as [256:1,512:2,>:8]", v)
	}
	first, last := true, -1
	for _, e := range strings.Split(v[1:len(v)-1], ",") {
		ks, vs, ok := strings.Cut(strings.TrimSpace(e), ":")
		if !ok {
			return out, fmt.Errorf("roundup_power2_divisions entry %q: want size_mb:divisions or >:divisions", e)
		}
		d, err := parseDivisions(vs)
		if err != nil {
			return out, err
		}
		ks = strings.TrimSpace(ks)
		if ks == ">" {
			for i := last + 1; i < RoundupIntervals; i++ {
				out[i] = d
			}
			last = RoundupIntervals - 1
			continue
		}
		mb, err := strconv.ParseUint(ks, 10, 64)
		if err != nil || mb == 0 || mb&(mb-1) != 0 {
			return out, fmt.Errorf("roundup_power2_divisions entry %q: interval %q: want a power of two in MiB or \">\"", e, ks)
		}
		idx := min(bits.Len64(mb)-1, RoundupIntervals-1)
		if idx <= last {
			return out, fmt.Errorf("roundup_power2_divisions entry %q: intervals must increase", e)
		}
		if first {
			for i := 0; i < idx; i++ {
				out[i] = d
			}
			first = false
		}
		out[idx] = d
		last = idx
	}
	// Intervals no entry covered get plain rounding; 1 (not 0) so that
	// String round-trips.
	for i, d := range out {
		if d == 0 {
			out[i] = 1
		}
	}
	return out, nil
}

// errSize is the error of a request over maxRequest; it wraps
// driver.ErrInvalidValue.
func errSize(size uint64) error {
	return fmt.Errorf("devalloc: size %d bytes exceeds the largest request %d: %w", size, uint64(maxRequest), driver.ErrInvalidValue)
}
