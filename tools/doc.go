// Package tools holds the release tool (cmd/release) and pins the other
// developer tools (actionlint, apidiff, govulncheck) as tool directives in
// its go.mod. It is outside the workspace and runs with GOWORK=off: its
// dependencies (x/tools, x/vuln, ...) would otherwise raise the versions
// every library is built and tested with there. go-task, which must be in
// the workspace for `go tool task`, has a module of its own in tools/task.
// Never released.
package tools
