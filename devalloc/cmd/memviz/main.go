// Command memviz turns a devalloc snapshot JSON file into a self-contained
// HTML page: memviz snapshot.json > snapshot.html.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/accelkit/accelkit/devalloc"
	"github.com/accelkit/accelkit/devalloc/memviz"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the process: it returns the exit status (2 for bad
// usage, 1 for an unreadable snapshot or a failed write).
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: memviz snapshot.json > page.html")
		return 2
	}
	f, err := os.Open(args[0])
	if err != nil {
		fmt.Fprintln(stderr, "memviz:", err)
		return 1
	}
	defer f.Close()
	snap, err := devalloc.ReadSnapshot(f)
	if err != nil {
		fmt.Fprintf(stderr, "memviz: %s: %v\n", args[0], err)
		return 1
	}
	if err := memviz.Render(stdout, snap); err != nil {
		fmt.Fprintln(stderr, "memviz:", err)
		return 1
	}
	return 0
}
