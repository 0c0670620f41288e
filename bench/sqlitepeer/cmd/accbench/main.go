// Command accbench is bench/cmd/accbench with a SQLite backend added to the
// progcache suite, so bbolt and filestream are measured beside SQLite on the
// same workload:
//
//	go run ./bench/sqlitepeer/cmd/accbench -suite progcache
package main

import (
	"os"
	"path/filepath"

	"github.com/accelkit/accelkit/bench/accbench"
	"github.com/accelkit/accelkit/bench/sqlitepeer"
	_ "github.com/accelkit/accelkit/driver/cuda"
	_ "github.com/accelkit/accelkit/driver/sim"
	"github.com/accelkit/accelkit/progcache"
)

func main() {
	extra := accbench.Extra{ProgcacheBackends: []accbench.NamedCache{{
		Name: "sqlite",
		Open: func(dir string) (progcache.Cache, error) {
			return sqlitepeer.Open(filepath.Join(dir, "cache.db"), sqlitepeer.Options{})
		},
	}}}
	os.Exit(accbench.Main(os.Args[1:], os.Stdout, os.Stderr, extra))
}
