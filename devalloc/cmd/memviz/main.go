// Command memviz turns a devalloc snapshot JSON file into a self-contained
// HTML page: memviz snapshot.json > snapshot.html; or, with -pickle, into
// PyTorch's pickle form for its memory viewer: memviz -pickle
// snapshot.json > snapshot.pickle. It reads a snapshot of up to 1 GiB;
// -max-bytes N sets another limit.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/accelkit/accelkit/devalloc/memsnap"
	"github.com/accelkit/accelkit/devalloc/memviz"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage: memviz snapshot.json > page.html
       memviz -pickle snapshot.json > snapshot.pickle
       (either with -max-bytes N before the file)

Renders a devalloc snapshot (the JSON file Allocator.WriteSnapshot writes)
as one self-contained HTML page on stdout: a segment map with every block
coloured by state, and allocated and reserved memory over the snapshot's
trace.

-pickle writes the snapshot in PyTorch's pickle form instead
(Snapshot.WritePickle), for https://pytorch.org/memory_viz and
python -m torch.cuda._memory_viz; for JSON files written before
WriteSnapshot wrote the pickle beside them.

-max-bytes N reads a snapshot of up to N bytes (default 1073741824,
1 GiB: memsnap.DefaultReadLimit); a longer file is refused.
Decoding takes several times the file's size in memory.

Exit status: 0 on success (and for -h), 1 when the snapshot cannot be read
or the page cannot be written, 2 on a usage error.
`

// run is main without the process: it returns the exit status (2 for bad
// usage, 1 for an unreadable snapshot or a failed write).
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("memviz", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors and usage are printed below
	pickle := fs.Bool("pickle", false, "write PyTorch's pickle form instead of the page")
	maxBytes := fs.Int64("max-bytes", memsnap.DefaultReadLimit, "read a snapshot of up to this many bytes")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage)
			return 0
		}
		fmt.Fprintf(stderr, "memviz: %v (memviz takes no flags but -pickle, -max-bytes N and -h)\n\n%s", err, usage)
		return 2
	}
	if *maxBytes <= 0 {
		fmt.Fprintf(stderr, "memviz: -max-bytes %d: want a positive number of bytes\n\n%s", *maxBytes, usage)
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "memviz: want one snapshot file, got %d arguments\n\n%s", fs.NArg(), usage)
		return 2
	}
	path := fs.Arg(0)
	f, err := os.Open(path)
	if err != nil {
		fmt.Fprintf(stderr, "memviz: %v (want a snapshot JSON file written by devalloc's Allocator.WriteSnapshot)\n", err)
		return 1
	}
	defer f.Close()
	snap, err := memsnap.ReadLimit(f, *maxBytes)
	if err != nil {
		fmt.Fprintf(stderr, "memviz: %s: %v (want a snapshot JSON file written by devalloc's Allocator.WriteSnapshot)\n", path, err)
		return 1
	}
	if *pickle {
		if err := snap.WritePickle(stdout); err != nil {
			fmt.Fprintln(stderr, "memviz: write the pickle:", err)
			return 1
		}
		return 0
	}
	if err := memviz.Render(stdout, snap); err != nil {
		fmt.Fprintln(stderr, "memviz: write the page:", err)
		return 1
	}
	return 0
}
