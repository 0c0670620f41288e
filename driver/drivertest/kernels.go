package drivertest

// The reference kernels: the same four names in every backend, as PTX that
// any CUDA driver since 11.0 JIT-compiles for any GPU of compute
// capability 5.0 or later (no NVRTC needed), and as the CUDA C++ they come
// from. The sim runs them as Go functions registered under these names;
// the fake libcuda and libnvrtc know them too.

// Names of the reference kernels in KernelPTX and KernelSource.
const (
	// KernelVectorAdd is vector_add(const float* a, const float* b,
	// float* c, int n): c[i] = a[i] + b[i] for i < n. Parameters: 8, 8, 8, 4
	// bytes.
	KernelVectorAdd = "accelkit_vector_add"
	// KernelScale is scale(float* x, float s, int n): x[i] *= s for i < n,
	// in place. Parameters: 8, 4, 4 bytes.
	KernelScale = "accelkit_scale"
	// KernelReduceSum is reduce_sum(const float* x, float* out, int n):
	// atomicAdd(out, x[i]) for i < n; the caller zeroes *out. Parameters: 8,
	// 8, 4 bytes.
	KernelReduceSum = "accelkit_reduce_sum"
	// KernelFault is fault(float* x): it executes trap, so its launch fails
	// when it runs and the device is lost (CUDA_ERROR_LAUNCH_FAILED leaves
	// the context unusable). Parameters: 8 bytes.
	KernelFault = "accelkit_fault"
)

// KernelPTX is the reference kernels as PTX 7.0 for sm_50 (64-bit
// addresses), written as nvcc emits them: every thread computes
// i = blockIdx.x*blockDim.x + threadIdx.x and returns unless i < n.
const KernelPTX = `//
// accelkit reference kernels (driver/drivertest.KernelPTX)
//
.version 7.0
.target sm_50
.address_size 64

	// .globl	accelkit_vector_add
.visible .entry accelkit_vector_add(
	.param .u64 accelkit_vector_add_param_0,
	.param .u64 accelkit_vector_add_param_1,
	.param .u64 accelkit_vector_add_param_2,
	.param .u32 accelkit_vector_add_param_3
)
{
	.reg .pred 	%p<2>;
	.reg .f32 	%f<4>;
	.reg .b32 	%r<6>;
	.reg .b64 	%rd<11>;

	ld.param.u64 	%rd1, [accelkit_vector_add_param_0];
	ld.param.u64 	%rd2, [accelkit_vector_add_param_1];
	ld.param.u64 	%rd3, [accelkit_vector_add_param_2];
	ld.param.u32 	%r2, [accelkit_vector_add_param_3];
	mov.u32 	%r3, %ctaid.x;
	mov.u32 	%r4, %ntid.x;
	mov.u32 	%r5, %tid.x;
	mad.lo.s32 	%r1, %r3, %r4, %r5;
	setp.ge.s32 	%p1, %r1, %r2;
	@%p1 bra 	$L__add_done;

	cvta.to.global.u64 	%rd4, %rd1;
	mul.wide.s32 	%rd5, %r1, 4;
	add.s64 	%rd6, %rd4, %rd5;
	cvta.to.global.u64 	%rd7, %rd2;
	add.s64 	%rd8, %rd7, %rd5;
	ld.global.f32 	%f1, [%rd6];
	ld.global.f32 	%f2, [%rd8];
	add.f32 	%f3, %f1, %f2;
	cvta.to.global.u64 	%rd9, %rd3;
	add.s64 	%rd10, %rd9, %rd5;
	st.global.f32 	[%rd10], %f3;

$L__add_done:
	ret;

}
	// .globl	accelkit_scale
.visible .entry accelkit_scale(
	.param .u64 accelkit_scale_param_0,
	.param .f32 accelkit_scale_param_1,
	.param .u32 accelkit_scale_param_2
)
{
	.reg .pred 	%p<2>;
	.reg .f32 	%f<4>;
	.reg .b32 	%r<6>;
	.reg .b64 	%rd<5>;

	ld.param.u64 	%rd1, [accelkit_scale_param_0];
	ld.param.f32 	%f1, [accelkit_scale_param_1];
	ld.param.u32 	%r2, [accelkit_scale_param_2];
	mov.u32 	%r3, %ctaid.x;
	mov.u32 	%r4, %ntid.x;
	mov.u32 	%r5, %tid.x;
	mad.lo.s32 	%r1, %r3, %r4, %r5;
	setp.ge.s32 	%p1, %r1, %r2;
	@%p1 bra 	$L__scale_done;

	cvta.to.global.u64 	%rd2, %rd1;
	mul.wide.s32 	%rd3, %r1, 4;
	add.s64 	%rd4, %rd2, %rd3;
	ld.global.f32 	%f2, [%rd4];
	mul.f32 	%f3, %f2, %f1;
	st.global.f32 	[%rd4], %f3;

$L__scale_done:
	ret;

}
	// .globl	accelkit_reduce_sum
.visible .entry accelkit_reduce_sum(
	.param .u64 accelkit_reduce_sum_param_0,
	.param .u64 accelkit_reduce_sum_param_1,
	.param .u32 accelkit_reduce_sum_param_2
)
{
	.reg .pred 	%p<2>;
	.reg .f32 	%f<3>;
	.reg .b32 	%r<6>;
	.reg .b64 	%rd<7>;

	ld.param.u64 	%rd1, [accelkit_reduce_sum_param_0];
	ld.param.u64 	%rd2, [accelkit_reduce_sum_param_1];
	ld.param.u32 	%r2, [accelkit_reduce_sum_param_2];
	mov.u32 	%r3, %ctaid.x;
	mov.u32 	%r4, %ntid.x;
	mov.u32 	%r5, %tid.x;
	mad.lo.s32 	%r1, %r3, %r4, %r5;
	setp.ge.s32 	%p1, %r1, %r2;
	@%p1 bra 	$L__sum_done;

	cvta.to.global.u64 	%rd3, %rd1;
	mul.wide.s32 	%rd4, %r1, 4;
	add.s64 	%rd5, %rd3, %rd4;
	ld.global.f32 	%f1, [%rd5];
	cvta.to.global.u64 	%rd6, %rd2;
	atom.global.add.f32 	%f2, [%rd6], %f1;

$L__sum_done:
	ret;

}
	// .globl	accelkit_fault
.visible .entry accelkit_fault(
	.param .u64 accelkit_fault_param_0
)
{

	trap;
	ret;

}
`

// KernelSource is the reference kernels as CUDA C++, for NVRTC: compiled
// for compute_XX it gives PTX equivalent to KernelPTX, for sm_XX a cubin.
// The kernels are extern "C", so their names in the image are as written.
const KernelSource = `// accelkit reference kernels (driver/drivertest.KernelSource)

extern "C" __global__ void accelkit_vector_add(const float* a, const float* b, float* c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        c[i] = a[i] + b[i];
    }
}

extern "C" __global__ void accelkit_scale(float* x, float s, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        x[i] *= s;
    }
}

extern "C" __global__ void accelkit_reduce_sum(const float* x, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        atomicAdd(out, x[i]);
    }
}

extern "C" __global__ void accelkit_fault(float* x)
{
    (void)x;
    __trap();
}
`
