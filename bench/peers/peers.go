// Package peers embeds the peer harnesses: Python (and C++ through
// torch.utils.cpp_extension.load_inline) programs that measure the systems
// accelkit replaces — PyTorch's device and pinned caching allocators and
// cuda.core's program caches — so accbench -peers runs them in the same run
// as its own suites, and a binary built elsewhere carries them along.
package peers

import "embed"

// Scripts holds torch_alloc.py, torch_trace.py, cudacore_cache.py,
// cudacore_kernels.py and torch_gpt_alloc.py (a GPT training loop on
// PyTorch's allocator and on devalloc/capi's library, run by hand:
// python bench/peers/torch_gpt_alloc.py --compare).
//
//go:embed *.py
var Scripts embed.FS
