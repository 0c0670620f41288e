// Command memviz turns a devalloc snapshot JSON file into a self-contained
// HTML page: memviz snapshot.json > snapshot.html.
package main

import (
	"fmt"
	"os"

	"github.com/accelkit/accelkit/devalloc"
	"github.com/accelkit/accelkit/devalloc/memviz"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: memviz snapshot.json > page.html")
		os.Exit(2)
	}
	f, err := os.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "memviz:", err)
		os.Exit(1)
	}
	defer f.Close()
	snap, err := devalloc.ReadSnapshot(f)
	if err != nil {
		fmt.Fprintln(os.Stderr, "memviz:", err)
		os.Exit(1)
	}
	if err := memviz.Render(os.Stdout, snap); err != nil {
		fmt.Fprintln(os.Stderr, "memviz:", err)
		os.Exit(1)
	}
}
