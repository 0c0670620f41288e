package cuda

// The stream handles CUDA reserves for the default streams.
const (
	// StreamLegacy is CU_STREAM_LEGACY (cudaStreamLegacy): the legacy
	// default stream, the one the handle 0 names in a program built
	// without per-thread default streams, as PyTorch is.
	StreamLegacy uintptr = 0x1
	// StreamPerThread is CU_STREAM_PER_THREAD (cudaStreamPerThread): the
	// calling thread's own default stream.
	StreamPerThread uintptr = 0x2
)
