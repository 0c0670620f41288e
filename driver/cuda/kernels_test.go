//go:build linux && cgo

package cuda

// kernelPTX holds the four reference kernels of issue 39 (accelkit_vector_add,
// accelkit_scale, accelkit_reduce_sum, accelkit_fault) as hand-written PTX
// for any GPU of sm_50 or later: the real driver's JIT loads it, and the
// fake libcuda runs the kernels by name.
const kernelPTX = `//
// accelkit reference kernels (driver/cuda tests)
//
.version 7.0
.target sm_50
.address_size 64

	// c[i] = a[i] + b[i] for i < n
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

	// x[i] *= s for i < n
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

	// atomicAdd(out, x[i]) for i < n
.visible .entry accelkit_reduce_sum(
	.param .u64 accelkit_reduce_sum_param_0,
	.param .u64 accelkit_reduce_sum_param_1,
	.param .u32 accelkit_reduce_sum_param_2
)
{
	.reg .pred 	%p<2>;
	.reg .f32 	%f<2>;
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
	@%p1 bra 	$L__reduce_done;
	cvta.to.global.u64 	%rd3, %rd1;
	mul.wide.s32 	%rd4, %r1, 4;
	add.s64 	%rd5, %rd3, %rd4;
	ld.global.f32 	%f1, [%rd5];
	cvta.to.global.u64 	%rd6, %rd2;
	red.global.add.f32 	[%rd6], %f1;
$L__reduce_done:
	ret;
}

	// faults on purpose
.visible .entry accelkit_fault(
	.param .u64 accelkit_fault_param_0
)
{
	trap;
	ret;
}
`
