module github.com/accelkit/accelkit/tfcompat/inspect

go 1.26

require (
	github.com/accelkit/accelkit/tfcompat v0.1.0
	github.com/ebitengine/purego v0.11.3
)
