// Package bench holds accbench, the headline program that measures every
// accelkit module side by side with its baseline and writes a report.
package bench
