// Package tools pins the developer tools of the accelkit workspace as tool
// directives in its go.mod (go-task, run as `go tool task`). It is part of
// the workspace and never released, so its requirements never reach a
// library module's go.mod.
package tools
