// The names splitk_reduce.cu needs, for a plain host C++ compiler (g++, clang++, `zig c++`):
// the same kernels and the same C launcher run on the CPU, one emulated GPU thread after another,
// so that the CPU test suite checks the reducer's arithmetic and its path choice bit for bit
// (kernels/reducer/host.py builds it; tests/test_reducer_native.py runs it).
// The kernels share nothing between threads (no shared memory, no barriers, no atomics), so a
// sequential walk over the grid computes exactly what the GPU computes.
#pragma once

#include <cstring>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(n)

typedef void* mx_stream_t;
typedef int mx_error_t;
#define mx_success 0
inline mx_error_t mx_last_error() { return mx_success; }
inline const char* mx_error_string(mx_error_t) { return "host emulation error"; }

// Same size and alignment as CUDA's float4 / uint2, so the 16- and 8-byte paths are the same.
struct alignas(16) mx_float4 {
  float x, y, z, w;
};
struct alignas(8) mx_uint2 {
  unsigned x, y;
};

inline unsigned mx_float_bits(float f) {
  unsigned u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// The emulated thread's coordinates, read by the kernels through mx_block_x / mx_thread_x.
struct MxHostGrid {
  unsigned block, thread;
};
inline MxHostGrid mx_host_grid;
inline unsigned mx_thread_x() { return mx_host_grid.thread; }
inline unsigned mx_block_x() { return mx_host_grid.block; }

#define mx_launch(kernel, blocks, threads, stream, ...)                                   \
  do {                                                                                     \
    (void)(stream);                                                                        \
    for (unsigned mx_b = 0; mx_b < (blocks); ++mx_b)                                       \
      for (unsigned mx_t = 0; mx_t < (threads); ++mx_t) {                                  \
        mx_host_grid = MxHostGrid{mx_b, mx_t};                                             \
        kernel(__VA_ARGS__);                                                               \
      }                                                                                    \
  } while (0)
