package trace

import (
	"fmt"
	"math/rand/v2"
	"slices"
)

// The generators write traces shaped like real workloads, deterministically:
// the same parameters and seed give the same bytes on every machine, so
// figures from different runs and machines replay the same requests.

// TrainingParams shape a transformer-training trace: parameters, gradients
// and optimizer state allocated once; each step allocates activations layer
// by layer in the forward pass (some kept for backward, some freed at once),
// frees them in reverse in the backward pass while gradient temporaries come
// and go, then runs an optimizer step. The batch shape varies per step,
// which is what fragments a caching allocator.
type TrainingParams struct {
	Seed      uint64
	Steps     int
	Layers    int
	Hidden    int   // model width
	Heads     int   // attention heads
	Batches   []int // batch sizes drawn per step
	SeqLens   []int // sequence lengths drawn per step
	ElemBytes int   // bytes per activation element (2: fp16/bf16)
	// TokenBudget, when not zero, sets each step's batch to TokenBudget /
	// sequence length (at least 1) instead of drawing it from Batches:
	// token-budget batching, as length-bucketing data loaders do. The
	// tokens x hidden activations then keep about the same size from step
	// to step while the attention probabilities (batch x heads x seq x seq)
	// grow and shrink with the sequence length.
	TokenBudget int
	// SeqWarmup draws step i's sequence length from the first
	// 2 + i*len(SeqLens)/Steps entries of SeqLens (in increasing order)
	// rather than from all of them, never the previous step's length:
	// sequence-length warmup, as curriculum schedules raise the longest
	// sequence over training, with the shape changing every step.
	SeqWarmup bool
}

// DefaultTraining is the built-in training trace ("training" in accbench):
// about 5,100 events and 2.0 GiB peak live.
var DefaultTraining = TrainingParams{
	Seed: 1, Steps: 12, Layers: 8, Hidden: 1024, Heads: 16,
	Batches: []int{2, 3, 4, 6}, SeqLens: []int{128, 192, 256, 384, 512},
	ElemBytes: 2,
}

// DefaultShapes is the built-in shape-changing training trace ("shapes" in
// accbench): the training model of DefaultTraining fed by a
// length-bucketing loader with a budget of 4,096 tokens a step (batch =
// 4096 / sequence length) and sequence-length warmup over buckets of
// 128..2,048, so that the shapes change every step and the attention
// probabilities saved for backward (batch x heads x seq x seq, 16..256 MiB
// a layer) are cut anew for each new length while the tokens x hidden
// activations keep their size. About 5,100 events and 4.3 GiB peak live;
// PyTorch's caching policy reserves about 1.5x that.
var DefaultShapes = TrainingParams{
	Seed: 1, Steps: 12, Layers: 8, Hidden: 1024, Heads: 16,
	SeqLens:     []int{128, 256, 384, 512, 768, 1024, 1536, 2048},
	TokenBudget: 4096, SeqWarmup: true,
	ElemBytes: 2,
}

// InferenceParams shape an LLM-serving trace: weights allocated once;
// requests with varying prompt lengths join a continuous batch, their KV
// cache grows by reallocation (allocate the larger block, free the old one)
// every BlockTokens generated tokens, and per-step temporaries (logits,
// attention workspace) come and go.
type InferenceParams struct {
	Seed        uint64
	Requests    int
	MaxBatch    int // requests decoding at once
	Layers      int
	Hidden      int
	Vocab       int
	PromptMin   int
	PromptMax   int
	GenMin      int
	GenMax      int
	BlockTokens int // KV cache grows in steps of this many tokens
	ElemBytes   int
}

// DefaultInference is the built-in inference trace ("inference" in
// accbench): about 8,000 events and 0.44 GiB peak live.
var DefaultInference = InferenceParams{
	Seed: 2, Requests: 48, MaxBatch: 8, Layers: 8, Hidden: 1024, Vocab: 32000,
	PromptMin: 32, PromptMax: 1024, GenMin: 16, GenMax: 256, BlockTokens: 64,
	ElemBytes: 2,
}

// recorder hands out fake addresses and timestamps as a trace is generated.
type recorder struct {
	events []Event
	next   uint64
	t      float64
	live   map[uint64]uint64 // ptr -> size
}

func newRecorder() *recorder {
	return &recorder{next: 0x7f0000000000, t: 1.7e9, live: map[uint64]uint64{}}
}

func (r *recorder) alloc(size uint64, stream uint64) uint64 {
	p := r.next
	r.next += (size + 511) &^ 511
	r.t += 1e-6
	r.live[p] = size
	r.events = append(r.events, Event{Thread: 1, Time: r.t, Action: Alloc, Ptr: p, Size: size, Stream: stream})
	return p
}

func (r *recorder) free(p uint64, stream uint64) {
	size, ok := r.live[p]
	if !ok {
		panic(fmt.Sprintf("trace generator frees unknown pointer 0x%x", p)) // a generator bug, not input
	}
	delete(r.live, p)
	r.t += 1e-6
	r.events = append(r.events, Event{Thread: 1, Time: r.t, Action: Free, Ptr: p, Size: size, Stream: stream})
}

func pick[T any](rng *rand.Rand, xs []T) T { return xs[rng.IntN(len(xs))] }

// shape draws step's batch size and sequence length; prev is the previous
// step's sequence length.
func (p *TrainingParams) shape(rng *rand.Rand, step int, prev uint64) (batch, seq uint64) {
	if p.TokenBudget == 0 && !p.SeqWarmup {
		return uint64(pick(rng, p.Batches)), uint64(pick(rng, p.SeqLens))
	}
	seqs := p.SeqLens
	if p.SeqWarmup {
		seqs = seqs[:min(len(seqs), 2+step*len(seqs)/p.Steps)]
	}
	seq = uint64(pick(rng, seqs))
	for p.SeqWarmup && seq == prev && len(seqs) > 1 {
		seq = uint64(pick(rng, seqs))
	}
	if p.TokenBudget > 0 {
		return max(uint64(p.TokenBudget)/seq, 1), seq
	}
	return uint64(pick(rng, p.Batches)), seq
}

// Training generates the trace p describes.
func Training(p TrainingParams) []Event {
	rng := rand.New(rand.NewPCG(p.Seed, 0x7261696e))
	r := newRecorder()
	const stream = 0
	h := uint64(p.Hidden)
	eb := uint64(p.ElemBytes)
	// Weights per layer: fused QKV, attention output, two MLP matrices,
	// layer-norm weights and biases. fp32 master weights are not modelled;
	// Adam keeps two fp32 moments per weight.
	layerShapes := []uint64{3 * h * h, h * h, 4 * h * h, 4 * h * h, h, h, 3 * h, h, 4 * h, h}
	var weights, grads, moments []uint64
	for range p.Layers {
		for _, n := range layerShapes {
			weights = append(weights, r.alloc(n*eb, stream))
		}
	}
	gradSizes := []uint64{}
	for range p.Layers {
		for _, n := range layerShapes {
			gradSizes = append(gradSizes, n*eb)
		}
	}
	var s uint64
	for step := range p.Steps {
		var b uint64
		b, s = p.shape(rng, step, s)
		tok := b * s
		type saved struct{ ptrs []uint64 }
		var stack []saved
		// Forward.
		for range p.Layers {
			var keep []uint64
			ln := r.alloc(tok*h*eb, stream)
			keep = append(keep, ln)
			qkv := r.alloc(3*tok*h*eb, stream)
			keep = append(keep, qkv)
			scores := r.alloc(b*uint64(p.Heads)*s*s*eb, stream)
			probs := r.alloc(b*uint64(p.Heads)*s*s*eb, stream)
			r.free(scores, stream) // softmax output replaces the scores
			keep = append(keep, probs)
			ctx := r.alloc(tok*h*eb, stream)
			keep = append(keep, ctx)
			out := r.alloc(tok*h*eb, stream)
			mlp1 := r.alloc(4*tok*h*eb, stream)
			act := r.alloc(4*tok*h*eb, stream)
			keep = append(keep, out, mlp1, act)
			mlp2 := r.alloc(tok*h*eb, stream)
			keep = append(keep, mlp2)
			mask := r.alloc(tok*h, stream) // dropout mask, one byte per element
			keep = append(keep, mask)
			stack = append(stack, saved{keep})
		}
		logits := r.alloc(tok*32000*eb, stream)
		loss := r.alloc(512, stream)
		r.free(logits, stream)
		// Backward, in reverse: gradient temporaries of the layer's size
		// come and go while its saved activations are freed.
		gi := len(gradSizes)
		for l := p.Layers - 1; l >= 0; l-- {
			dOut := r.alloc(tok*h*eb, stream)
			dMLP := r.alloc(4*tok*h*eb, stream)
			for _, ptr := range slices.Backward(stack[l].ptrs) {
				r.free(ptr, stream)
			}
			dAttn := r.alloc(b*uint64(p.Heads)*s*s*eb, stream)
			r.free(dMLP, stream)
			r.free(dAttn, stream)
			r.free(dOut, stream)
			gi -= len(layerShapes)
			if step == 0 { // gradients persist from the first backward on
				for _, n := range gradSizes[gi : gi+len(layerShapes)] {
					grads = append(grads, r.alloc(n, stream))
				}
			}
		}
		r.free(loss, stream)
		// Optimizer: moments allocated on the first step; a temporary per
		// parameter tensor.
		for _, n := range gradSizes {
			if step == 0 {
				moments = append(moments, r.alloc(2*n, stream), r.alloc(2*n, stream))
			}
			r.free(r.alloc(2*n, stream), stream)
		}
	}
	for _, ptrs := range [][]uint64{moments, grads, weights} {
		for _, ptr := range ptrs {
			r.free(ptr, stream)
		}
	}
	return r.events
}

// Inference generates the trace p describes.
func Inference(p InferenceParams) []Event {
	rng := rand.New(rand.NewPCG(p.Seed, 0x696e6665))
	r := newRecorder()
	const stream = 0
	h, eb := uint64(p.Hidden), uint64(p.ElemBytes)
	var weights []uint64
	for range p.Layers {
		for _, n := range []uint64{3 * h * h, h * h, 4 * h * h, 4 * h * h} {
			weights = append(weights, r.alloc(n*eb, stream))
		}
	}
	emb := r.alloc(uint64(p.Vocab)*h*eb, stream)
	type request struct {
		tokens, remaining int
		kv                []uint64 // one K+V block per layer
		capTokens         int
	}
	kvBytes := func(tokens int) uint64 { return 2 * uint64(tokens) * h * eb }
	roundUp := func(n int) int { return (n + p.BlockTokens - 1) / p.BlockTokens * p.BlockTokens }
	var active []*request
	admitted := 0
	for admitted < p.Requests || len(active) > 0 {
		for len(active) < p.MaxBatch && admitted < p.Requests {
			prompt := p.PromptMin + rng.IntN(p.PromptMax-p.PromptMin+1)
			req := &request{tokens: prompt, remaining: p.GenMin + rng.IntN(p.GenMax-p.GenMin+1), capTokens: roundUp(prompt + 1)}
			// Prefill: activations for the whole prompt, freed after.
			act := r.alloc(uint64(prompt)*h*eb, stream)
			mlp := r.alloc(4*uint64(prompt)*h*eb, stream)
			for range p.Layers {
				req.kv = append(req.kv, r.alloc(kvBytes(req.capTokens), stream))
			}
			r.free(mlp, stream)
			r.free(act, stream)
			active = append(active, req)
			admitted++
		}
		// One decode step for the batch.
		bsz := uint64(len(active))
		hidden := r.alloc(bsz*h*eb, stream)
		work := r.alloc(bsz*4*h*eb, stream)
		logits := r.alloc(bsz*uint64(p.Vocab)*eb, stream)
		r.free(work, stream)
		r.free(logits, stream)
		r.free(hidden, stream)
		kept := active[:0]
		for _, req := range active {
			req.tokens++
			req.remaining--
			if req.remaining == 0 {
				for _, ptr := range req.kv {
					r.free(ptr, stream)
				}
				continue
			}
			if req.tokens >= req.capTokens { // grow the cache: new block, then drop the old
				req.capTokens += p.BlockTokens
				for i, old := range req.kv {
					req.kv[i] = r.alloc(kvBytes(req.capTokens), stream)
					r.free(old, stream)
				}
			}
			kept = append(kept, req)
		}
		active = kept
	}
	r.free(emb, stream)
	for _, w := range weights {
		r.free(w, stream)
	}
	return r.events
}

// StreamsParams shape a trace with a stream per request, as RMM logs of
// programs that allocate on per-thread or per-request streams look:
// Streams streams each allocate Size bytes once. With Keep every block
// stays live to the end (so on a device smaller than Streams segments the
// later requests fail); without, each is freed before the next stream
// allocates (so each stream leaves a cached segment behind).
type StreamsParams struct {
	Streams int
	Size    uint64
	Keep    bool
}

// ManyStreams generates the trace p describes. Stream ids are distinct
// and non-zero (0 is the default stream).
func ManyStreams(p StreamsParams) []Event {
	r := newRecorder()
	var kept []uint64
	for i := range p.Streams {
		stream := 0x7f0000001000 + uint64(i)*0x10
		ptr := r.alloc(p.Size, stream)
		if p.Keep {
			kept = append(kept, ptr)
			continue
		}
		r.free(ptr, stream)
	}
	for i, ptr := range kept {
		r.free(ptr, 0x7f0000001000+uint64(i)*0x10)
	}
	return r.events
}

// Summary describes a trace: its events and the peak of live requested
// bytes (no allocator overhead: the floor any allocator's peak sits on).
type Summary struct {
	Events, Allocs, Frees, Failures int
	Streams                         int // distinct stream ids
	PeakLive                        uint64
	MaxSize                         uint64
}

// Summarize computes s for events. Frees of pointers never allocated in the
// trace are ignored, as a replay ignores them.
func Summarize(events []Event) Summary {
	s := Summary{Events: len(events)}
	live := map[uint64]uint64{}
	streams := map[uint64]struct{}{}
	var cur uint64
	for _, ev := range events {
		streams[ev.Stream] = struct{}{}
		switch ev.Action {
		case Alloc:
			s.Allocs++
			live[ev.Ptr] = ev.Size
			cur += ev.Size
			s.PeakLive = max(s.PeakLive, cur)
			s.MaxSize = max(s.MaxSize, ev.Size)
		case Free:
			s.Frees++
			if n, ok := live[ev.Ptr]; ok {
				cur -= n
				delete(live, ev.Ptr)
			}
		case AllocFailed:
			s.Failures++
		}
	}
	s.Streams = len(streams)
	return s
}
