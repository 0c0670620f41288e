// Package bench is the root of accelkit's benchmark module: accbench, the
// headline program (cmd/accbench, implemented in package accbench), which
// measures every accelkit module side by side with the baseline it
// replaces and writes results.json and a self-contained report.html.
//
// Sub-packages: trace reads, writes, generates and replays allocation
// traces in RAPIDS RMM's logging CSV format; report holds the results model
// and renders the table and the HTML report; peers embeds the Python/C++
// harnesses that measure PyTorch's allocators and cuda.core's program
// caches on a GPU machine. bench/sqlitepeer is a separate, never released
// module that adds a SQLite program cache to the progcache suite.
package bench
