// The few runtime names splitk_reduce.cu needs, mapped to clang builtins, so the device code
// compiles with a plain clang (`clang -x hip --offload-arch=gfx950 --cuda-device-only -nogpulib
// -nogpuinc`, e.g. the one in the `ziglang` wheel) without any ROCm installation.
// Only the device code is compiled in this mode (MXFP4_DEVICE_ONLY): there is no runtime to launch.
#pragma once

#define MXFP4_DEVICE_ONLY 1
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(n) __attribute__((amdgpu_flat_work_group_size(1, n)))

// Same size and alignment as HIP's float4 / uint2 (an ext_vector_type has .x .y .z .w).
typedef float mx_float4 __attribute__((ext_vector_type(4)));
typedef unsigned mx_uint2 __attribute__((ext_vector_type(2)));

__device__ __forceinline__ unsigned mx_float_bits(float f) { return __builtin_bit_cast(unsigned, f); }
__device__ __forceinline__ unsigned mx_thread_x() { return __builtin_amdgcn_workitem_id_x(); }
__device__ __forceinline__ unsigned mx_block_x() { return __builtin_amdgcn_workgroup_id_x(); }
