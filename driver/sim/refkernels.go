package sim

import (
	"errors"

	"github.com/accelkit/accelkit/driver"
)

// The reference kernels every accelkit backend runs under the same names
// (drivertest.KernelPTX and drivertest.KernelSource hold their PTX and
// CUDA C++). Each Go function does per block what the block's threads do,
// thread i = blockIdx.x*blockDim.x + threadIdx.x, 1-D as the kernels are.

func init() {
	for _, k := range []struct {
		name   string
		params []uint32
		fn     KernelFunc
	}{
		{"accelkit_vector_add", []uint32{8, 8, 8, 4}, vectorAdd},
		{"accelkit_scale", []uint32{8, 4, 4}, scale},
		{"accelkit_reduce_sum", []uint32{8, 8, 4}, reduceSum},
		{"accelkit_fault", []uint32{8}, faultKernel},
	} {
		if err := RegisterKernel(k.name, k.params, k.fn); err != nil {
			panic(err)
		}
	}
}

// span returns the first index the block's threads handle and how many of
// them pass the kernels' guard i < n.
func span(b *Block, n int32) (first uint64, count int) {
	first = uint64(b.BlockIdx().X) * uint64(b.BlockDim().X)
	if n <= 0 || first >= uint64(n) {
		return first, 0
	}
	return first, int(min(uint64(b.BlockDim().X), uint64(n)-first))
}

// at is p advanced by i float32 elements.
func at(p driver.Ptr, i uint64) driver.Ptr { return p + driver.Ptr(4*i) }

// vectorAdd is accelkit_vector_add(const float* a, const float* b, float* c,
// int n): c[i] = a[i] + b[i] for i < n.
func vectorAdd(b *Block) error {
	first, count := span(b, b.Int32(3))
	if count == 0 {
		return nil
	}
	x, err := b.Float32s(at(b.Ptr(0), first), count)
	if err != nil {
		return err
	}
	y, err := b.Float32s(at(b.Ptr(1), first), count)
	if err != nil {
		return err
	}
	z, err := b.Float32s(at(b.Ptr(2), first), count)
	if err != nil {
		return err
	}
	for i := range z {
		z[i] = x[i] + y[i]
	}
	return nil
}

// scale is accelkit_scale(float* x, float s, int n): x[i] *= s for i < n.
func scale(b *Block) error {
	first, count := span(b, b.Int32(2))
	if count == 0 {
		return nil
	}
	x, err := b.Float32s(at(b.Ptr(0), first), count)
	if err != nil {
		return err
	}
	s := b.Float32(1)
	for i := range x {
		x[i] *= s
	}
	return nil
}

// reduceSum is accelkit_reduce_sum(const float* x, float* out, int n):
// atomicAdd(out, x[i]) for i < n. The block adds its partial sum with one
// atomic add: floating-point atomics run in no fixed order on a GPU
// either, so any order of the additions is the kernel's.
func reduceSum(b *Block) error {
	first, count := span(b, b.Int32(2))
	if count == 0 {
		return nil
	}
	x, err := b.Float32s(at(b.Ptr(0), first), count)
	if err != nil {
		return err
	}
	var sum float32
	for _, v := range x {
		sum += v
	}
	_, err = b.AtomicAddFloat32(b.Ptr(1), sum)
	return err
}

// faultKernel is accelkit_fault(float* x): PTX trap, a fault whatever x.
func faultKernel(*Block) error {
	return errors.New("accelkit_fault executed trap")
}
