package accbench

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/accelkit/accelkit/bench/report"
)

// procLoadavg is where Linux publishes the load average.
const procLoadavg = "/proc/loadavg"

// sampleLoad reads the load average from path (procLoadavg unless a test
// says otherwise) with the CPU count and GOMAXPROCS now. Without one it
// returns why: only Linux has /proc/loadavg.
func sampleLoad(path string) (*report.LoadSample, string) {
	if path == "" {
		if runtime.GOOS != "linux" {
			return nil, "not available on " + runtime.GOOS + ": accbench reads it from /proc/loadavg, which only Linux has"
		}
		path = procLoadavg
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err.Error()
	}
	l1, l5, l15, err := parseLoadavg(string(data))
	if err != nil {
		return nil, fmt.Sprintf("%s: %v", path, err)
	}
	return &report.LoadSample{Load1: l1, Load5: l5, Load15: l15, CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0)}, ""
}

// parseLoadavg reads the three load averages that open /proc/loadavg
// ("0.52 0.58 0.59 1/467 12345").
func parseLoadavg(s string) (l1, l5, l15 float64, err error) {
	f := strings.Fields(s)
	if len(f) < 3 {
		return 0, 0, 0, fmt.Errorf("%q: want three load averages first (\"0.52 0.58 0.59 ...\")", clip(s, 60))
	}
	var v [3]float64
	for i := range v {
		x, err := strconv.ParseFloat(f[i], 64)
		if err != nil || x < 0 || math.IsNaN(x) || x > 1e9 {
			return 0, 0, 0, fmt.Errorf("load average %q: want a non-negative number", clip(f[i], 30))
		}
		v[i] = x
	}
	return v[0], v[1], v[2], nil
}

// recordLoad puts a sample into load as its start (or, once it has one,
// its end), and warns on stderr when the sample shows a busy machine.
func recordLoad(load *report.Load, path string, warn func(string)) {
	s, why := sampleLoad(path)
	switch {
	case s == nil:
		if load.Start == nil {
			load.Unavailable = why
		}
	case load.Start == nil:
		load.Start = s
	default:
		load.End = s
	}
	load.Judge()
	if s.Busy() {
		warn(fmt.Sprintf("busy machine: load average %s (%s); timed figures move and verdicts near a goal can flip between runs",
			s, report.BusyRule))
	}
}
