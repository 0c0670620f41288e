package accbench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/accelkit/accelkit/bench/peers"
	"github.com/accelkit/accelkit/bench/report"
	"github.com/accelkit/accelkit/driver/drivertest"
)

// peerRecord is one line a peer harness prints.
type peerRecord struct {
	Peer    string  `json:"peer"`
	Version string  `json:"version"`
	Case    string  `json:"case"`
	Value   float64 `json:"value"`
	Unit    string  `json:"unit"`
	Size    int     `json:"size"`
	Bytes   int     `json:"bytes"`
	Source  int     `json:"source_bytes"`
	Trace   string  `json:"trace"`
	Config  string  `json:"config"`
	Ratio   float64 `json:"ratio"`
	Error   string  `json:"error"`
	// Path names the way the peer did it where it has more than one
	// (cudacore_kernels.py: Program.compile(cache=), or the key and cache
	// lookup of an older cuda.core); the suite's notes say which.
	Path string `json:"path"`
}

// runPeers writes the embedded harnesses to out/peers, runs them with
// python, and puts each figure beside ours: as the baseline of the matching
// row, or in a "peers" suite when no row matches.
func runPeers(env *Env, python string, res *report.Results) error {
	dir := filepath.Join(env.Out, "peers")
	if err := env.out.mkdir("peers"); err != nil {
		return err
	}
	entries, err := peers.Scripts.ReadDir(".")
	if err != nil {
		return err
	}
	var files []outFile
	for _, e := range entries {
		data, err := peers.Scripts.ReadFile(e.Name())
		if err != nil {
			return err
		}
		files = append(files, outFile{"peers/" + e.Name(), 0o644, func(w io.Writer) error {
			_, err := w.Write(data)
			return err
		}})
	}
	// The reference kernels, for cudacore_kernels.py: the source the
	// kernels suite compiles.
	files = append(files, outFile{"peers/kernels.cu", 0o644, func(w io.Writer) error {
		_, err := io.WriteString(w, drivertest.KernelSource)
		return err
	}})
	if err := env.out.writeFiles(files...); err != nil {
		return err
	}
	var recs []peerRecord
	run := func(script string, args ...string) {
		env.Step("%s %s", script, strings.Join(args, " "))
		cmd := exec.CommandContext(env.Ctx, python, append([]string{filepath.Join(dir, script)}, args...)...)
		cmd.Env = append(os.Environ(), "PYTHONUNBUFFERED=1", "ACCELKIT_PEER_BUILD="+filepath.Join(dir, "build"))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			var r peerRecord
			if json.Unmarshal(sc.Bytes(), &r) == nil && r.Peer != "" {
				recs = append(recs, r)
			}
		}
		if err != nil {
			recs = append(recs, peerRecord{Peer: script, Error: fmt.Sprintf("%v: %s", err, lastLines(stderr.String(), 5))})
		}
	}
	quick := []string{}
	if env.Quick {
		quick = []string{"--quick"}
	}
	run("torch_alloc.py", quick...)
	traces, _ := filepath.Glob(filepath.Join(env.Out, "traces", "*.csv"))
	if len(traces) > 0 {
		run("torch_trace.py", traces...)
	}
	run("cudacore_cache.py", quick...)
	run("cudacore_kernels.py", append([]string{filepath.Join(dir, "kernels.cu")}, quick...)...)
	mergePeers(res, recs)
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// peerTarget says where a peer figure goes: the suite and case of our
// row, and the goal judged on the ratio to the peer.
type peerTarget struct {
	suite, ours string
	goal        Goal
}

// gpuOnly says the goal is about a GPU's figures (the kernels suite's):
// it is not judged on the sim, where unmeasuredGPUGoals lists it instead.
func (t peerTarget) gpuOnly() bool { return t.suite == "kernels" }

func targetFor(r peerRecord) (peerTarget, bool) {
	switch {
	case r.Peer == "torch" && r.Case == "device_pool":
		return peerTarget{"devalloc", hitPathCase, goalHitPathVsTorch}, true
	case r.Peer == "torch" && r.Case == "device_warm":
		return peerTarget{"devalloc", warmCase(uint64(r.Size)), Goal{}}, true
	case r.Peer == "torch" && r.Case == "host_pair":
		return peerTarget{"hostpin", "alloc+free " + sizeName(r.Size), goalHostpinVsTorch}, true
	case r.Peer == "torch" && r.Case == "trace":
		mode := "plain"
		if r.Config == "expandable" {
			mode = "expandable"
		}
		name := strings.TrimSuffix(r.Trace, ".csv")
		t := peerTarget{"replay", fragCase(name, mode), Goal{}}
		if name == "shapes" && mode == "plain" { // issue 27: at most 0.8x PyTorch's default
			t.goal = goalShapesVsTorch
		}
		return t, true
	case r.Peer == "cuda.core":
		switch r.Case {
		case "inmemory_put":
			return peerTarget{"progcache", "memory put 64 KiB", Goal{}}, true
		case "inmemory_get":
			return peerTarget{"progcache", "memory get hit 64 KiB", Goal{}}, true
		case "filestream_put":
			return peerTarget{"progcache", "filestream put 64 KiB", goalFilestreamCC}, true
		case "filestream_get":
			return peerTarget{"progcache", "filestream get hit 64 KiB", goalFilestreamCC}, true
		case "make_program_cache_key":
			return peerTarget{"progcache", "MakeKey " + sizeName(r.Source) + " source, vs cuda.core", Goal{}}, true
		case "kernels_warm_path":
			return peerTarget{"kernels", kernelsWarmCase, goalKernelsWarmVsCC}, true
		}
	}
	return peerTarget{}, false
}

// peerGoals are the goals judged only against a peer measured in the same
// run; without one the verdict lists them as not measurable here. A stored
// figure from another machine (the progcache rows' cuda.core anchors) is
// never judged against.
var peerGoals = []struct {
	peerTarget
	against string
}{
	{peerTarget{"devalloc", hitPathCase, goalHitPathVsTorch}, "PyTorch"},
	{peerTarget{"hostpin", "alloc+free 64 KiB", goalHostpinVsTorch}, "PyTorch"},
	{peerTarget{"hostpin", "alloc+free 1 MiB", goalHostpinVsTorch}, "PyTorch"},
	{peerTarget{"hostpin", "alloc+free 64 MiB", goalHostpinVsTorch}, "PyTorch"},
	{peerTarget{"replay", fragCase("shapes", "plain"), goalShapesVsTorch}, "PyTorch"},
	{peerTarget{"progcache", "filestream put 64 KiB", goalFilestreamCC}, "cuda.core"},
	{peerTarget{"progcache", "filestream get hit 64 KiB", goalFilestreamCC}, "cuda.core"},
	{peerTarget{"kernels", kernelsWarmCase, goalKernelsWarmVsCC}, "cuda.core"},
}

// unmeasuredPeerGoals lists the peer goals of the suites that ran whose
// row got no peer baseline, and why.
func unmeasuredPeerGoals(res *report.Results, peersRan bool) []report.Unmeasured {
	var out []report.Unmeasured
	for _, g := range peerGoals {
		ran := false
		for _, s := range res.Suites {
			ran = ran || s.Name == g.suite && s.Error == "" && s.Skipped == ""
		}
		row := findRow(res, g.suite, g.ours)
		// A case skipped here is in the verdict with its reason; a GPU's
		// goal on the sim is in unmeasuredGPUGoals.
		if !ran || row != nil && (row.Peer || row.Skipped != "") || g.gpuOnly() && res.Simulated {
			continue
		}
		reason := g.against + " not run: it runs with -peers PYTHON (torch and cuda.core) on a CUDA machine"
		if peersRan {
			reason = "the " + g.against + " peer gave no figure for it (see the peers suite's notes)"
		}
		out = append(out, report.Unmeasured{Suite: g.suite, Case: g.ours, Goal: g.goal.Text(unitOf(row)) + " " + g.against, Reason: reason})
	}
	return out
}

func unitOf(row *report.Row) string {
	if row == nil {
		return ""
	}
	return row.Unit
}

func mergePeers(res *report.Results, recs []peerRecord) {
	extra := report.Suite{Name: "peers", Title: "peer harness figures with no matching accelkit row"}
	for _, r := range recs {
		if r.Error != "" {
			extra.Notes = append(extra.Notes, fmt.Sprintf("%s failed: %s", r.Peer, r.Error))
			continue
		}
		label := r.Peer
		if r.Version != "" {
			label += " " + r.Version
		}
		t, ok := targetFor(r)
		var row *report.Row
		if ok {
			row = findRow(res, t.suite, t.ours)
		}
		if row != nil && row.Skipped != "" {
			row = nil // no figure of ours to set it beside
		}
		if row == nil {
			c := r.Case
			if r.Trace != "" {
				c += " " + r.Trace + " " + r.Config
				c += " fragmentation"
				r.Value, r.Unit = r.Ratio, "x"
			}
			if r.Size > 0 {
				c += " " + sizeName(r.Size)
			}
			extra.Rows = append(extra.Rows, report.Row{Case: label + " " + c, Unit: r.Unit, Ours: report.NewStat(r.Value)})
			continue
		}
		v := r.Value
		if r.Case == "trace" { // the figure a trace replay compares is its fragmentation ratio
			v = r.Ratio
		}
		st := report.NewStat(v)
		row.Base, row.BaseName, row.Peer = &st, label, true
		if r.Path != "" {
			for i := range res.Suites {
				if res.Suites[i].Name == t.suite {
					res.Suites[i].Notes = append(res.Suites[i].Notes, fmt.Sprintf("%s beside %q: %s", label, row.Case, r.Path))
				}
			}
		}
		row.ComputeRatio()
		if !t.goal.IsZero() && !(t.gpuOnly() && res.Simulated) {
			ok := t.goal.Met(*row)
			row.Goal, row.GoalMet = t.goal.Text(row.Unit), &ok
		}
	}
	if len(extra.Rows) > 0 || len(extra.Notes) > 0 {
		res.Suites = append(res.Suites, extra)
	}
}

func findRow(res *report.Results, suite, c string) *report.Row {
	for i := range res.Suites {
		if res.Suites[i].Name != suite {
			continue
		}
		for j := range res.Suites[i].Rows {
			if res.Suites[i].Rows[j].Case == c {
				return &res.Suites[i].Rows[j]
			}
		}
	}
	return nil
}
