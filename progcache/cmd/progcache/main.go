// Command progcache inspects and maintains a progcache cache: a filestream
// directory or a progcache/bolt file, through progcache.Admin.
//
//	progcache [--json] [--mac-key-file F] stats  PATH
//	progcache [--json] [--mac-key-file F] ls     PATH
//	progcache [--json] [--mac-key-file F] verify [--fix] PATH
//	progcache [--json] [--mac-key-file F] prune --max-size SIZE PATH
//	progcache [--json] [--mac-key-file F] clear  PATH
//	progcache help
//
// PATH is a directory (filestream) or a file (bolt). SIZE takes a byte
// count with an optional unit: 500MB, 2GiB, 64KiB. stats, ls and verify
// without --fix open the cache read-only and change nothing on disk; prune,
// clear and verify --fix work on an existing cache only, and never make a
// cache of a path that is not one (an empty file or directory, another
// application's bbolt file).
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
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/bolt"
	"github.com/accelkit/accelkit/progcache/filestream"
	"github.com/accelkit/accelkit/progcache/internal/fsmode"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage: progcache [--json] [--mac-key-file FILE] COMMAND [--fix] [--max-size SIZE] PATH

commands:
  stats    entries, size, and hit, miss, eviction and corrupt counts of every session
  ls       list entries, least recently used first
  verify   check every entry and report corrupt, foreign and unreadable ones;
           with --fix, remove the corrupt ones and move foreign files to aside/
  prune    evict least recently used entries down to --max-size
  clear    remove every entry
  help     print this text

PATH is a cache directory (filestream) or a bolt file. stats, ls and verify
without --fix open the cache read-only and change nothing; prune, clear and
verify --fix need an existing cache and never create one. An entry sealed
with another MAC key (or none) is unreadable, not corrupt: it is reported
and never removed; give the cache's key with --mac-key-file to check it.
Flags may come before or after the command and PATH.

flags:
  --json               print JSON
  --mac-key-file FILE  file holding the cache's MAC key (16 to 64 bytes)
  --fix                verify: remove corrupt entries, set foreign files aside
  --max-size SIZE      prune: target size, e.g. 500MB or 2GiB

Exit status: 0 on success (and for -h and help), 1 on an error or when
verify without --fix finds corrupt entries or foreign files, 2 on a usage
error.
`

// commands are the valid commands, in the order the usage lists them.
var commands = []string{"stats", "ls", "verify", "prune", "clear", "help"}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("progcache", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "print JSON")
	macFile := fs.String("mac-key-file", "", "file holding the cache's MAC key (16 to 64 bytes)")
	maxSize := fs.String("max-size", "", "prune: target size, e.g. 500MB or 2GiB")
	fix := fs.Bool("fix", false, "verify: remove corrupt entries and set foreign files aside")
	// Flags may come before or after the command and path.
	var pos []string
	for rest := args; ; {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprint(stdout, usage)
				return 0
			}
			fmt.Fprintf(stderr, "progcache: %v\n\n%s", err, usage)
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	valid := "valid commands: " + strings.Join(commands, ", ")
	if len(pos) == 0 {
		fmt.Fprintf(stderr, "progcache: no command given; %s\n\n%s", valid, usage)
		return 2
	}
	cmd := pos[0]
	if !slices.Contains(commands, cmd) {
		fmt.Fprintf(stderr, "progcache: unknown command %q; %s (run progcache -h for usage)\n", cmd, valid)
		return 2
	}
	if cmd == "help" {
		fmt.Fprint(stdout, usage)
		return 0
	}
	switch {
	case len(pos) == 1:
		fmt.Fprintf(stderr, "progcache: %s needs a cache PATH: a cache directory or a bolt file\n\n%s", cmd, usage)
		return 2
	case len(pos) > 2:
		fmt.Fprintf(stderr, "progcache: unexpected argument %q after PATH %q: %s takes one PATH\n", pos[2], pos[1], cmd)
		return 2
	}
	path := pos[1]
	if *fix && cmd != "verify" {
		fmt.Fprintf(stderr, "progcache: --fix goes with verify, not %s\n", cmd)
		return 2
	}
	if *maxSize != "" && cmd != "prune" {
		fmt.Fprintf(stderr, "progcache: --max-size goes with prune, not %s\n", cmd)
		return 2
	}
	var limit int64
	if cmd == "prune" {
		if *maxSize == "" {
			fmt.Fprintln(stderr, "progcache: prune needs --max-size SIZE, the size to prune down to, e.g. 500MB or 2GiB")
			return 2
		}
		n, err := parseSize(*maxSize)
		if err != nil {
			fmt.Fprintln(stderr, "progcache: --max-size:", err)
			return 2
		}
		limit = n
	}
	var rec progcache.RecordOptions
	if *macFile != "" {
		k, err := os.ReadFile(*macFile)
		if err != nil {
			fmt.Fprintf(stderr, "progcache: --mac-key-file: %v (want a file holding the cache's MAC key, 16 to 64 bytes)\n", err)
			return 1
		}
		if len(k) < progcache.MinMACKeyLen || len(k) > progcache.MaxMACKeyLen {
			// Said in the flag's terms: the user set no RecordOptions.
			fmt.Fprintf(stderr, "progcache: --mac-key-file %s holds %d bytes: want the cache's MAC key, %d to %d bytes\n", *macFile, len(k), progcache.MinMACKeyLen, progcache.MaxMACKeyLen)
			return 1
		}
		rec.MACKey = k
	}
	// Only prune, clear and verify --fix change the cache.
	readOnly := cmd == "stats" || cmd == "ls" || (cmd == "verify" && !*fix)
	c, err := open(path, rec, readOnly)
	if err != nil {
		printErr(stderr, err)
		return 1
	}
	defer c.Close()
	out := &printer{w: stdout, json: *asJSON}
	code, err := do(context.Background(), cmd, c, limit, *fix, out)
	if err != nil {
		printErr(stderr, err)
		return 1
	}
	return code
}

const prefix = "progcache: "

// printErr prints err after the program's name, once: the library's
// errors already begin with it.
func printErr(w io.Writer, err error) {
	fmt.Fprintln(w, prefix+strings.TrimPrefix(err.Error(), prefix))
}

// libPrefixes begin the errors of the library: progcache's and its
// backends' (each names its package).
var libPrefixes = []string{prefix, "filestream: ", "bolt: "}

// reason is an entry's error as a verify line gives it, after the key:
// without the library's prefix, which the line does not need.
func reason(msg string) string {
	for _, p := range libPrefixes {
		if s, ok := strings.CutPrefix(msg, p); ok {
			return s
		}
	}
	return msg
}

func open(path string, rec progcache.RecordOptions, readOnly bool) (progcache.Admin, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("progcache: %w (want a cache directory or a bolt file)", err)
	}
	if fi.IsDir() {
		// Refuse a directory that is neither empty nor a cache, rather than
		// create the cache layout inside it.
		if ents, _ := os.ReadDir(path); len(ents) > 0 {
			if st, err := os.Lstat(filepath.Join(path, "entries")); err != nil || !st.IsDir() {
				what := "no entries/ directory"
				if err == nil {
					what = "an entries that is " + fsmode.Describe(st.Mode()) + ", not a directory"
				}
				return nil, fmt.Errorf("progcache: %s holds files but %s, so it is not a progcache cache directory; give the cache's own directory or a bolt file", path, what)
			}
		}
		return filestream.Open(path, filestream.Options{Record: rec, ReadOnly: readOnly, NoCreate: true})
	}
	return bolt.Open(path, bolt.Options{Record: rec, ReadOnly: readOnly, NoCreate: true})
}

type printer struct {
	w    io.Writer
	json bool
}

// emit prints v as JSON, or through human. A JSON write that fails (a
// closed pipe, a full disk) is an error, so a script reading the output
// does not take a truncated document for the answer.
func (p *printer) emit(v any, human func(w io.Writer)) error {
	if p.json {
		e := json.NewEncoder(p.w)
		e.SetIndent("", "  ")
		if err := e.Encode(v); err != nil {
			return fmt.Errorf("progcache: write JSON output: %w", err)
		}
		return nil
	}
	human(p.w)
	return nil
}

// do runs cmd and returns the exit code: 1 when verify without --fix
// found something to fix.
func do(ctx context.Context, cmd string, c progcache.Admin, limit int64, fix bool, out *printer) (int, error) {
	switch cmd {
	case "stats":
		s, err := c.Totals(ctx)
		if err != nil {
			return 1, err
		}
		return exit(out.emit(s, func(w io.Writer) {
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
			fmt.Fprintf(tw, "corrupt entries\t%d\n", s.Corrupt)
			fmt.Fprintf(tw, "unreadable (other configuration)\t%d\n", s.Unreadable)
			tw.Flush()
		}))
	case "ls", "verify":
		es, err := c.Entries(ctx, cmd == "verify" && fix)
		if err != nil {
			return 1, err
		}
		if cmd == "verify" {
			return report(es, fix, out)
		}
		return exit(out.emit(es, func(w io.Writer) {
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "KEY\tSIZE\tUSED\tKIND\tNAME")
			for _, e := range es {
				kind, name := e.Kind, e.Name
				switch {
				case e.Foreign:
					kind, name = "FOREIGN", e.Path
				case e.Unreadable:
					kind = "UNREADABLE"
				case e.Err != "":
					kind = "CORRUPT"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Key, formatSize(e.Size), e.Used.Format(time.RFC3339), kind, name)
			}
			tw.Flush()
		}))
	case "prune":
		n, err := c.Prune(ctx, limit)
		if err != nil {
			return 1, err
		}
		s := c.Stats()
		return exit(out.emit(struct {
			Evicted int   `json:"evicted"`
			Bytes   int64 `json:"bytes"`
			Entries int64 `json:"entries"`
		}{n, s.Bytes, s.Entries}, func(w io.Writer) {
			fmt.Fprintf(w, "evicted %d entries; %d entries, %s left\n", n, s.Entries, formatSize(s.Bytes))
		}))
	case "clear":
		n, err := c.Len(ctx)
		if err != nil {
			return 1, err
		}
		if err := c.Clear(ctx); err != nil {
			return 1, err
		}
		return exit(out.emit(struct {
			Removed int `json:"removed"`
		}{n}, func(w io.Writer) { fmt.Fprintf(w, "removed %d entries\n", n) }))
	}
	return 0, nil
}

// exit is the exit code and error of a command whose last step, printing
// its result, gave err.
func exit(err error) (int, error) {
	if err != nil {
		return 1, err
	}
	return 0, nil
}

// report prints verify's findings and returns the exit code: 1 when
// corrupt entries or foreign files were found and left (no --fix), or the
// findings could not be printed.
// Unreadable entries are another configuration's, not damage: they never
// fail verify.
func report(es []progcache.EntryInfo, fix bool, out *printer) (int, error) {
	var v struct {
		Checked    int                   `json:"checked"`
		Corrupt    int                   `json:"corrupt"`
		Removed    int                   `json:"removed"`
		Foreign    int                   `json:"foreign"`
		MovedAside int                   `json:"moved_aside"`
		Unreadable int                   `json:"unreadable"`
		Bad        []progcache.EntryInfo `json:"bad"`
	}
	v.Bad = []progcache.EntryInfo{}
	for _, e := range es {
		switch {
		case e.Foreign:
			v.Foreign++
			if e.MovedTo != "" {
				v.MovedAside++
			}
		case e.Unreadable:
			v.Unreadable++
		case e.Err != "":
			v.Corrupt++
			if fix {
				v.Removed++
			}
		default:
			v.Checked++
			continue
		}
		v.Checked++
		v.Bad = append(v.Bad, e)
	}
	err := out.emit(v, func(w io.Writer) {
		for _, e := range v.Bad {
			switch {
			case e.Foreign && e.MovedTo != "":
				fmt.Fprintf(w, "foreign %s: moved to %s\n", e.Path, e.MovedTo)
			case e.Foreign:
				fmt.Fprintf(w, "foreign %s: %s\n", e.Path, reason(e.Err))
			case e.Unreadable:
				fmt.Fprintf(w, "unreadable %s (kept): %s\n", e.Key, reason(e.Err))
			case fix:
				fmt.Fprintf(w, "removed %s: %s\n", e.Key, reason(e.Err))
			default:
				fmt.Fprintf(w, "corrupt %s: %s\n", e.Key, reason(e.Err))
			}
		}
		fmt.Fprintf(w, "%d entries checked: %d corrupt (%d removed), %d foreign (%d moved aside), %d unreadable with this configuration (kept)\n",
			v.Checked, v.Corrupt, v.Removed, v.Foreign, v.MovedAside, v.Unreadable)
		if !fix && v.Corrupt+v.Foreign > 0 {
			fmt.Fprintln(w, "run progcache verify --fix to remove the corrupt entries and move foreign files to aside/")
		}
		if v.Unreadable > 0 {
			fmt.Fprintln(w, "unreadable entries were sealed by another configuration (another MAC key, or none): give the cache's key with --mac-key-file to check them")
		}
	})
	if err != nil {
		return 1, err
	}
	if !fix && v.Corrupt+v.Foreign > 0 {
		return 1, nil
	}
	return 0, nil
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
