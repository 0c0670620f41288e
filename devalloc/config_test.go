package devalloc

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/accelkit/accelkit/driver/drivertest"
)

func TestParseConfig(t *testing.T) {
	ones := func(lo, hi int, v uint64, arr *[RoundupIntervals]uint64) {
		for i := lo; i <= hi; i++ {
			arr[i] = v
		}
	}
	var list [RoundupIntervals]uint64
	ones(0, 8, 1, &list) // 256 MiB is interval 8; the first entry fills below
	list[9] = 2          // 512 MiB
	ones(10, 15, 8, &list)
	var all4 [RoundupIntervals]uint64
	ones(0, 15, 4, &all4)

	for _, tc := range []struct {
		in   string
		want Config
	}{
		{"", Config{}},
		{" ", Config{}},
		{"expandable_segments:true", Config{ExpandableSegments: true}},
		{"expandable_segments:False", Config{}},
		{"max_split_size_mb:128", Config{MaxSplitSize: 128 << 20}},
		{"max_non_split_rounding_mb:64", Config{MaxNonSplitRounding: 64 << 20}},
		{"garbage_collection_threshold:0.8", Config{GarbageCollectionThreshold: 0.8}},
		{"roundup_power2_divisions:4", Config{RoundupPower2Divisions: all4}},
		{"roundup_power2_divisions:[256:1,512:2,>:8]", Config{RoundupPower2Divisions: list}},
		{"backend:passthrough", Config{Backend: BackendPassthrough}},
		{"backend:native,cross_stream_reuse:true", Config{CrossStreamReuse: true}},
		{"history_entries:1000,history_stacks:true,snapshot_on_oom:/tmp/x.json", Config{HistoryEntries: 1000, HistoryStacks: true, SnapshotOnOOM: "/tmp/x.json"}},
		{"expandable_segments:true, max_split_size_mb:200 ,garbage_collection_threshold:0.6",
			Config{ExpandableSegments: true, MaxSplitSize: 200 << 20, GarbageCollectionThreshold: 0.6}},
	} {
		got, err := ParseConfig(tc.in)
		if err != nil {
			t.Errorf("ParseConfig(%q): %v", tc.in, err)
			continue
		}
		if got != tc.want {
			t.Errorf("ParseConfig(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
		back, err := ParseConfig(got.String())
		if err != nil || back != got {
			t.Errorf("round trip of %q via %q = %+v, %v", tc.in, got.String(), back, err)
		}
	}
}

func TestParseConfigErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"foo:1", `unknown key "foo" (valid keys: backend, expandable_segments`},
		{"expandable_segments", "not key:value"},
		{"expandable_segments:maybe", "want true or false"},
		{"max_split_size_mb:20", "max_split_size_mb \"20\": want an integer in [21,"},
		{"max_split_size_mb:-5", "max_split_size_mb"},
		{"max_non_split_rounding_mb:0", "want an integer in [1,"},
		{"garbage_collection_threshold:1", "open interval (0, 1)"},
		{"garbage_collection_threshold:NaN", "open interval (0, 1)"},
		{"roundup_power2_divisions:3", "power of two"},
		{"roundup_power2_divisions:[300:2]", "power of two in MiB"},
		{"roundup_power2_divisions:[512:2,256:4]", "intervals must increase"},
		{"roundup_power2_divisions:[256:2", "is never closed"},
		{"roundup_power2_divisions:[]", "want a power of two or a list"},
		{"backend:cuda", "want native or passthrough"},
		{"history_entries:-1", "history_entries"},
		{"expandable_segments:true,expandable_segments:false", "given twice"},
	} {
		_, err := ParseConfig(tc.in)
		if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseConfig(%q) error %v, want ErrConfig mentioning %q", tc.in, err, tc.want)
		}
	}
}

// TestParseConfigBrackets: a stray bracket is refused with its position.
// Brackets used to only count depth, so a ']' in a value, or a '[' never
// closed, made the commas after it part of that value and the keys after
// it vanished: a memory cap lost without a word.
func TestParseConfigBrackets(t *testing.T) {
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil))) // the ignored key's warning
	defer slog.SetDefault(prev)
	for _, tc := range []struct{ in, want string }{
		{"snapshot_on_oom:snaps/a]b,max_split_size_mb:128", `']' at byte 24 ("snapshot_on_oom:snaps/a]") closes no '['`},
		{"pinned_free_catch_all:[,max_split_size_mb:128", `'[' at byte 23 ("pinned_free_catch_all:[") is never closed`},
		{"max_split_size_mb:128]", "']' at byte 22"},
		{"expandable_segments:true,]", "']' at byte 26"},
		{"snapshot_on_oom:run[1].json", "'[' at byte 20 (\"snapshot_on_oom:run[\") does not start a value"},
		{"[,]:", "'[' at byte 1"},
		{"roundup_power2_divisions:[256:1,[512:2]]", "'[' at byte 33 (\"...oundup_power2_divisions:[256:1,[\") opens a list inside the list opened at byte 26"},
		{"roundup_power2_divisions:[256:1]x,max_split_size_mb:128", "'x' at byte 33"},
		{"roundup_power2_divisions:[256:2", "'[' at byte 26"},
		{"a" + strings.Repeat("b", 60) + ":x]", `at byte 64 ("...` + strings.Repeat("b", 29) + `:x]")`},
	} {
		c, err := ParseConfig(tc.in)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "roundup_power2_divisions:[256:1,512:2,>:8]") {
			t.Errorf("ParseConfig(%q) = %+v, %v; want ErrConfig saying %s and what is valid", tc.in, c, err, tc.want)
		}
	}
	// A list where PyTorch has one, with spaces around it, and a list
	// value of an ignored key, still parse, and the keys after them count.
	c, err := ParseConfig(" roundup_power2_divisions : [256:1, 512:2 ,>:8] ,max_split_size_mb:128,pinned_reserve_segment_size_mb:[1,2],history_entries:5")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := ParseConfig("roundup_power2_divisions:[256:1,512:2,>:8]")
	if c.RoundupPower2Divisions != want.RoundupPower2Divisions || c.MaxSplitSize != 128<<20 || c.HistoryEntries != 5 ||
		c.Ignored != "pinned_reserve_segment_size_mb:[1,2]" {
		t.Errorf("lists with later keys: %+v", c)
	}
	if keys := c.IgnoredKeys(); len(keys) != 1 || keys[0].Value != "[1,2]" {
		t.Errorf("IgnoredKeys = %+v, want the one list value", keys)
	}
	dev, _ := drivertest.OpenDevice(t, "sim", "")
	if _, err := New(dev, Config{Ignored: "pinned_free_catch_all:[,release_lock_on_cudamalloc:True"}); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "never closed") {
		t.Errorf("New with an unclosed '[' in Ignored = %v, want ErrConfig", err)
	}
}

func TestConfigFromEnv(t *testing.T) {
	t.Setenv(EnvConfig, "expandable_segments:true")
	c, err := ConfigFromEnv()
	if err != nil || !c.ExpandableSegments {
		t.Errorf("ConfigFromEnv = %+v, %v", c, err)
	}
	t.Setenv(EnvConfig, "nope:1")
	if _, err := ConfigFromEnv(); err == nil || !strings.Contains(err.Error(), EnvConfig) {
		t.Errorf("bad env: err = %v, want it to name %s", err, EnvConfig)
	}
}

func TestNewValidates(t *testing.T) {
	dev, _ := drivertest.OpenDevice(t, "sim", "")
	for _, c := range []Config{
		{MaxSplitSize: 1 << 20},
		{GarbageCollectionThreshold: 1.5},
		{Backend: 7},
		{HistoryEntries: -1},
		{RoundupPower2Divisions: [RoundupIntervals]uint64{3}},
	} {
		if _, err := New(dev, c); !errors.Is(err, ErrConfig) {
			t.Errorf("New(%+v) = %v, want ErrConfig", c, err)
		}
	}
}

func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{"", "expandable_segments:true,max_split_size_mb:128",
		"roundup_power2_divisions:[256:1,512:2,>:8]", "roundup_power2_divisions:4",
		"garbage_collection_threshold:0.8", "backend:passthrough", "cross_stream_reuse:1,history_entries:10",
		"max_non_split_rounding_mb:30", "[,]:", "a:b:c",
		"backend:cudaMallocAsync,release_lock_on_cudamalloc:True,per_process_memory_fraction:0.5",
		"pinned_use_cuda_host_register:True,pinned_num_register_threads:8,release_before_grow:false",
		// Stray brackets (issue 36): each took the keys after it.
		"snapshot_on_oom:snaps/a]b,max_split_size_mb:128", "pinned_free_catch_all:[,max_split_size_mb:128",
		"roundup_power2_divisions:[256:1]x,max_split_size_mb:128", "roundup_power2_divisions:[1:2,[2:4]],history_entries:3",
		"pinned_reserve_segment_size_mb:[1,2],per_process_memory_fraction:0.5", "max_split_size_mb:128]", "]]],[[,per_process_memory_fraction:0.5"} {
		f.Add(s)
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil))) // ignored keys' warnings; the fuzz process ends after
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseConfig(s)
		if err != nil {
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("error %v does not wrap ErrConfig", err)
			}
			return
		}
		keysAppearAndNoneDropped(t, s, c)
		if err := c.validate(); err != nil {
			t.Fatalf("ParseConfig(%q) accepted a config New rejects: %v", s, err)
		}
		back, err := ParseConfig(c.String())
		if err != nil || back != c {
			t.Fatalf("round trip %q -> %q -> %+v, %v", s, c.String(), back, err)
		}
	})
}

// keysAppearAndNoneDropped checks a successful parse of s: every key c
// holds appears in s, and every key written in s outside a list was taken
// (giving it again is refused as given twice), so no entry was swallowed.
// "Outside a list" is judged from the text alone: the last bracket before
// the key is not a '[' with a ']' after the key.
func keysAppearAndNoneDropped(t *testing.T, s string, c Config) {
	t.Helper()
	parts, err := splitEntries(c.String())
	if err != nil {
		t.Fatalf("String() of ParseConfig(%q) = %q does not split: %v", s, c.String(), err)
	}
	for _, p := range parts {
		if k, _, _ := strings.Cut(p, ":"); k != "" && !strings.Contains(s, k) {
			t.Fatalf("ParseConfig(%q) holds key %q, which the input does not name", s, k)
		}
	}
	known := append(slices.Clone(configKeys), slices.Collect(maps.Keys(pytorchOnly))...)
	for _, k := range known {
		for i := 0; ; {
			j := strings.Index(s[i:], k)
			if j < 0 {
				break
			}
			at := i + j
			i = at + len(k)
			before := strings.TrimRight(s[:at], " \t\n\r\v\f")
			after := strings.TrimLeft(s[i:], " \t\n\r\v\f")
			if before != "" && !strings.HasSuffix(before, ",") || !strings.HasPrefix(after, ":") {
				continue // part of another word, or a value
			}
			if b := strings.LastIndexAny(s[:at], "[]"); b >= 0 && s[b] == '[' && strings.Contains(s[i:], "]") {
				continue // inside a list value
			}
			if _, err := ParseConfig(s + "," + k + ":1"); err == nil || !strings.Contains(err.Error(), "given twice") {
				t.Fatalf("ParseConfig(%q) dropped the key %q at byte %d: giving it again gives %v", s, k, at+1, err)
			}
		}
	}
}

// TestPyTorchOnlyKeys checks that a PYTORCH_CUDA_ALLOC_CONF copied from a
// PyTorch job parses: the keys devalloc implements take effect, the others
// are kept in Config.Ignored with what devalloc does instead, and each is
// warned about once per process through log/slog.
func TestPyTorchOnlyKeys(t *testing.T) {
	var logged bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logged, nil)))
	defer slog.SetDefault(prev)
	warned.Clear()
	defer warned.Clear()

	const conf = "backend:cudaMallocAsync,expandable_segments:True,release_lock_on_cudamalloc:True," +
		"pinned_use_cuda_host_register:True,pinned_num_register_threads:8,max_split_size_mb:512,per_process_memory_fraction:0.5"
	for range 2 {
		c, err := ParseConfig(conf)
		if err != nil {
			t.Fatalf("ParseConfig(%q): %v", conf, err)
		}
		if !c.ExpandableSegments || c.MaxSplitSize != 512<<20 || c.MemoryFraction != 0.5 || c.Backend != BackendNative {
			t.Errorf("implemented keys: %+v", c)
		}
		keys := c.IgnoredKeys()
		var names []string
		for _, k := range keys {
			names = append(names, k.Key+":"+k.Value)
			if k.Instead == "" {
				t.Errorf("ignored key %s says nothing about what devalloc does instead", k.Key)
			}
		}
		want := "backend:cudaMallocAsync release_lock_on_cudamalloc:True pinned_use_cuda_host_register:True pinned_num_register_threads:8"
		if got := strings.Join(names, " "); got != want {
			t.Errorf("IgnoredKeys = %s, want %s", got, want)
		}
		if back, err := ParseConfig(c.String()); err != nil || back != c {
			t.Errorf("round trip %q: %+v, %v", c.String(), back, err)
		}
	}
	out := logged.String()
	for _, k := range []string{"backend:cudaMallocAsync", "release_lock_on_cudamalloc:True", "pinned_use_cuda_host_register:True", "pinned_num_register_threads:8"} {
		if n := strings.Count(out, "key "+k+" is accepted but not implemented"); n != 1 {
			t.Errorf("warning for %s logged %d times, want once:\n%s", k, n, out)
		}
	}
	if strings.Contains(out, "expandable_segments") || strings.Contains(out, "max_split_size_mb") {
		t.Errorf("a warning for an implemented key:\n%s", out)
	}

	for _, tc := range []struct{ in, want string }{
		{"release_lock_on_cudamalloc:", "no value"},
		{"pinned_num_register_threads:4,pinned_num_register_threads:8", "given twice"},
		{"backend:cudaMallocAsync,backend:native", "given twice"},
		{"backend:tcmalloc", "want native or passthrough"},
		{"per_process_memory_fraction:0", "(0, 1]"},
		{"per_process_memory_fraction:1.5", "(0, 1]"},
		{"pinned_use_everything:True", "accepted from PyTorch and ignored: graph_capture_record_stream_reuse"},
	} {
		if _, err := ParseConfig(tc.in); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseConfig(%q) = %v, want ErrConfig mentioning %q", tc.in, err, tc.want)
		}
	}
	dev, _ := drivertest.OpenDevice(t, "sim", "")
	for _, bad := range []Config{{MemoryFraction: 2}, {Ignored: "max_split_size_mb:64"}, {Ignored: "release_lock_on_cudamalloc"}} {
		if _, err := New(dev, bad); !errors.Is(err, ErrConfig) {
			t.Errorf("New(%+v) = %v, want ErrConfig", bad, err)
		}
	}
}

func TestMemoryFractionKey(t *testing.T) {
	dev, _ := drivertest.OpenDevice(t, "sim", "capacity=1GiB")
	a := newAlloc(t, dev, "per_process_memory_fraction:0.25")
	if got := a.Limit(); got != 256<<20 {
		t.Fatalf("Limit() = %d, want a quarter of 1 GiB", got)
	}
	if _, err := a.Alloc(300<<20, nil); !IsOOM(err) {
		t.Fatalf("Alloc past the fraction: %v, want an OOM", err)
	}
}
