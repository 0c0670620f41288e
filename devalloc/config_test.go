package devalloc

import (
	"errors"
	"strings"
	"testing"
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
		{"roundup_power2_divisions:[256:2", "want a power of two or a list"},
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
	dev, _ := openDev(t, "")
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
		"max_non_split_rounding_mb:30", "[,]:", "a:b:c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseConfig(s)
		if err != nil {
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("error %v does not wrap ErrConfig", err)
			}
			return
		}
		if err := c.validate(); err != nil {
			t.Fatalf("ParseConfig(%q) accepted a config New rejects: %v", s, err)
		}
		back, err := ParseConfig(c.String())
		if err != nil || back != c {
			t.Fatalf("round trip %q -> %q -> %+v, %v", s, c.String(), back, err)
		}
	})
}
