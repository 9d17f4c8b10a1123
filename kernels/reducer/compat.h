// Vendor compatibility for splitk_reduce.cu.
//
// The kernel source uses only the mx_* names below; this header is the one place that knows
// whether it is being compiled by nvcc (CUDA), hipcc (ROCm), by a bare clang for the static
// ISA gate (MXFP4_BARE_DEVICE, see bare_amdgcn.h) or by a host C++ compiler for the CPU tests
// (MXFP4_HOST_GRID, see host_grid.h). Each branch is a flat list of the same names.
#pragma once

#if defined(MXFP4_BARE_DEVICE)
#include "bare_amdgcn.h"
#elif defined(MXFP4_HOST_GRID)
#include "host_grid.h"
#elif defined(__HIPCC__)
#include <hip/hip_runtime.h>
typedef hipStream_t mx_stream_t;
typedef hipError_t mx_error_t;
#define mx_success hipSuccess
#define mx_last_error hipGetLastError
#define mx_error_string hipGetErrorString
#else
#include <cuda_runtime.h>
typedef cudaStream_t mx_stream_t;
typedef cudaError_t mx_error_t;
#define mx_success cudaSuccess
#define mx_last_error cudaGetLastError
#define mx_error_string cudaGetErrorString
#endif

#if !defined(MXFP4_BARE_DEVICE) && !defined(MXFP4_HOST_GRID)
// Both runtimes ship float4 / uint2 (16- and 8-byte aligned) and __float_as_uint.
typedef float4 mx_float4;
typedef uint2 mx_uint2;
__device__ __forceinline__ unsigned mx_float_bits(float f) { return __float_as_uint(f); }
__device__ __forceinline__ unsigned mx_thread_x() { return threadIdx.x; }
__device__ __forceinline__ unsigned mx_block_x() { return blockIdx.x; }
// A launch; host_grid.h defines the same name as a loop over the grid.
#define mx_launch(kernel, blocks, threads, stream, ...) \
  kernel<<<(blocks), (threads), 0, (stream)>>>(__VA_ARGS__)
#endif
