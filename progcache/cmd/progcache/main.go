// Command progcache inspects and maintains a progcache cache: a FileStream
// directory or a Bolt file.
//
//	progcache [--json] [--mac-key-file F] stats  PATH
//	progcache [--json] [--mac-key-file F] ls     PATH
//	progcache [--json] [--mac-key-file F] verify PATH
//	progcache [--json] [--mac-key-file F] prune --max-size SIZE PATH
//	progcache [--json] [--mac-key-file F] clear  PATH
//
// PATH is a directory (FileStream) or a file (Bolt). SIZE takes a byte
// count with an optional unit: 500MB, 2GiB, 64KiB.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/accelkit/accelkit/progcache"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// admin is what both backends offer the CLI.
type admin interface {
	progcache.Cache
	Entries(ctx context.Context, verify bool) ([]progcache.EntryInfo, error)
	Prune(ctx context.Context, maxBytes int64) (int, error)
	Totals(ctx context.Context) (progcache.Stats, error)
}

const usage = `usage: progcache [--json] [--mac-key-file FILE] COMMAND [--max-size SIZE] PATH

commands:
  stats    entries, size, and (bolt) hit, miss, eviction and corrupt counts
  ls       list entries, least recently used first
  verify   check every entry; corrupt, foreign or tampered ones are removed
  prune    evict least recently used entries down to --max-size
  clear    remove every entry

PATH is a cache directory (filestream) or a bolt file.
`

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("progcache", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	asJSON := fs.Bool("json", false, "print JSON")
	macFile := fs.String("mac-key-file", "", "file holding the cache's MAC key (16 to 64 bytes)")
	maxSize := fs.String("max-size", "", "prune: target size, e.g. 500MB or 2GiB")
	// Flags may come before or after the command and path.
	var pos []string
	for rest := args; ; {
		if err := fs.Parse(rest); err != nil {
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if len(pos) != 2 {
		fs.Usage()
		return 2
	}
	cmd, path := pos[0], pos[1]
	var rec progcache.RecordOptions
	if *macFile != "" {
		k, err := os.ReadFile(*macFile)
		if err != nil {
			fmt.Fprintln(stderr, "progcache:", err)
			return 1
		}
		rec.MACKey = k
	}
	var limit int64
	if cmd == "prune" {
		n, err := parseSize(*maxSize)
		if err != nil {
			fmt.Fprintln(stderr, "progcache: --max-size:", err)
			return 2
		}
		limit = n
	}
	switch cmd {
	case "stats", "ls", "verify", "prune", "clear":
	default:
		fmt.Fprintf(stderr, "progcache: unknown command %q: want stats, ls, verify, prune or clear\n", cmd)
		return 2
	}
	c, err := open(path, rec)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer c.Close()
	out := &printer{w: stdout, json: *asJSON}
	if err := do(context.Background(), cmd, c, limit, out); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

func open(path string, rec progcache.RecordOptions) (admin, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("progcache: %w", err)
	}
	if fi.IsDir() {
		// Refuse a directory that is neither empty nor a cache, rather than
		// create the cache layout inside it.
		if ents, _ := os.ReadDir(path); len(ents) > 0 {
			if st, err := os.Stat(filepath.Join(path, "entries")); err != nil || !st.IsDir() {
				return nil, fmt.Errorf("progcache: %s is not a progcache directory (no entries/ inside)", path)
			}
		}
		return progcache.OpenFileStream(path, progcache.FileStreamOptions{Record: rec})
	}
	return progcache.OpenBolt(path, progcache.BoltOptions{Record: rec})
}

type printer struct {
	w    io.Writer
	json bool
}

func (p *printer) emit(v any, human func(w io.Writer)) {
	if p.json {
		e := json.NewEncoder(p.w)
		e.SetIndent("", "  ")
		e.Encode(v)
		return
	}
	human(p.w)
}

func do(ctx context.Context, cmd string, c admin, limit int64, out *printer) error {
	switch cmd {
	case "stats":
		s, err := c.Totals(ctx)
		if err != nil {
			return err
		}
		out.emit(s, func(w io.Writer) {
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintf(tw, "entries\t%d\n", s.Entries)
			fmt.Fprintf(tw, "cache size\t%s\n", formatSize(s.Bytes))
			total := s.Hits + s.Misses
			rate := 0.0
			if total > 0 {
				rate = 100 * float64(s.Hits) / float64(total)
			}
			fmt.Fprintf(tw, "hits\t%d\t(%.2f %%)\n", s.Hits, rate)
			fmt.Fprintf(tw, "misses\t%d\n", s.Misses)
			fmt.Fprintf(tw, "puts\t%d\n", s.Puts)
			fmt.Fprintf(tw, "evictions\t%d\n", s.Evictions)
			fmt.Fprintf(tw, "too large\t%d\n", s.TooLarge)
			fmt.Fprintf(tw, "corrupt entries removed\t%d\n", s.Corrupt)
			tw.Flush()
		})
	case "ls", "verify":
		es, err := c.Entries(ctx, cmd == "verify")
		if err != nil {
			return err
		}
		if cmd == "verify" {
			bad := 0
			for _, e := range es {
				if e.Err != "" {
					bad++
				}
			}
			out.emit(struct {
				Checked int                   `json:"checked"`
				Removed int                   `json:"removed"`
				Bad     []progcache.EntryInfo `json:"bad"`
			}{len(es), bad, onlyBad(es)}, func(w io.Writer) {
				for _, e := range onlyBad(es) {
					fmt.Fprintf(w, "removed %s: %s\n", e.Key, e.Err)
				}
				fmt.Fprintf(w, "%d entries checked, %d removed\n", len(es), bad)
			})
			return nil
		}
		out.emit(es, func(w io.Writer) {
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "KEY\tSIZE\tUSED\tKIND\tNAME")
			for _, e := range es {
				kind := e.Kind
				if e.Err != "" {
					kind = "CORRUPT"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Key, formatSize(e.Size), e.Used.Format(time.RFC3339), kind, e.Name)
			}
			tw.Flush()
		})
	case "prune":
		n, err := c.Prune(ctx, limit)
		if err != nil {
			return err
		}
		s := c.Stats()
		out.emit(struct {
			Evicted int   `json:"evicted"`
			Bytes   int64 `json:"bytes"`
			Entries int64 `json:"entries"`
		}{n, s.Bytes, s.Entries}, func(w io.Writer) {
			fmt.Fprintf(w, "evicted %d entries; %d entries, %s left\n", n, s.Entries, formatSize(s.Bytes))
		})
	case "clear":
		n, err := c.Len(ctx)
		if err != nil {
			return err
		}
		if err := c.Clear(ctx); err != nil {
			return err
		}
		out.emit(struct {
			Removed int `json:"removed"`
		}{n}, func(w io.Writer) { fmt.Fprintf(w, "removed %d entries\n", n) })
	}
	return nil
}

func onlyBad(es []progcache.EntryInfo) []progcache.EntryInfo {
	bad := []progcache.EntryInfo{}
	for _, e := range es {
		if e.Err != "" {
			bad = append(bad, e)
		}
	}
	return bad
}

var errSize = errors.New("want a byte count with an optional unit: B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024), e.g. 500MB")

// parseSize parses "123", "64KiB", "1.5GB". It rejects negative, empty and
// overflowing sizes.
func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("empty size: %w", errSize)
	}
	units := []struct {
		suffix string
		mul    float64
	}{
		{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1},
	}
	mul := 1.0
	num := s
	for _, u := range units {
		if strings.HasSuffix(strings.ToLower(s), strings.ToLower(u.suffix)) {
			num, mul = strings.TrimSpace(s[:len(s)-len(u.suffix)]), u.mul
			break
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 || v != v {
		return 0, fmt.Errorf("size %q: %w", s, errSize)
	}
	b := v * mul
	if b >= 1<<63 {
		return 0, fmt.Errorf("size %q overflows: %w", s, errSize)
	}
	return int64(b), nil
}

func formatSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
