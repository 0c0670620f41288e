//go:build simportable

package sim

// wantBacking is the file name VMM mappings show in /proc/self/maps.
const wantBacking = "/accelkit-sim-vmm-"
