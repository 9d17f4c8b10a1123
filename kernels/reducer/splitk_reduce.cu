// Split-K reduction: out[m, n] = bf16_rne(p[0][m][n] + p[1][m][n] + ... + p[S-1][m][n]).
//
// partials: fp32 (S, M, N), contiguous. out: bf16 (M, N), unit column stride, row stride ldo.
// The sum runs in fp32 in split order 0..S-1 (left to right, no FMA, no reassociation), so it is
// bit-identical to the torch reference and to the Triton twin (kernels/_reduce_kernel.py).
//
// One source for nvcc (sm_90), hipcc (gfx950) and a host C++ compiler (the CPU tests run these
// very kernels and launcher one emulated thread at a time); compat.h holds every difference.
// Paths (chosen by the host launcher below):
//   vec4   : each thread loads 16 bytes (4 floats) from each of the S planes and stores 8 bytes
//            (4 bf16). Needs every plane 16-byte aligned (M*N % 4 == 0, partials 16-byte
//            aligned) and out 8-byte aligned with rows of whole vectors (contiguous out, or
//            N % 4 == 0 and ldo % 4 == 0).
//   scalar : one element per thread, for everything else (odd M*N, odd strides).
// Split counts 2, 3, 4, 7, 8, 14 and 16 are compile-time specialisations (loads fully unrolled, all
// S loads in flight before the adds): 2, 4, 7 and 14 are in the tuned config tables today, 3, 8
// and 16 are common choices of the occupancy model's 1..16 range. Any other S takes the generic
// runtime loop (same results). kernels/reducer/native.py lists them (SPECIALISED_SPLITS).
#include "compat.h"

namespace mxfp4_splitk {

constexpr int kThreads = 256;

// fp32 -> bf16 bits, round to nearest even, in integer ops so that every vendor gives the same
// bits. Every NaN becomes the one canonical quiet NaN 0x7FC0: the sign and payload of an fp32 sum
// that meets a NaN are the vendor's (an NVIDIA add returns 0x7FFFFFFF, x86 and AMD keep a quieted
// operand), so only a canonical NaN is the same on every backend. +-Inf stays Inf; finite values
// that round past the largest bf16 become Inf, exactly as RNE prescribes.
__device__ __forceinline__ unsigned bf16_rne_bits(float f) {
  const unsigned u = mx_float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0u;
  return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

// Offset of flat element e of the (M, N) output in memory.
__device__ __forceinline__ unsigned long long out_offset(unsigned e, unsigned n, unsigned ldo,
                                                         bool contiguous) {
  if (contiguous) return e;
  const unsigned row = e / n;
  return (unsigned long long)row * ldo + (e - row * n);
}

// kS > 0: split count fixed at compile time; kS == 0: runtime count `s`.
template <int kS>
__global__ void __launch_bounds__(kThreads)
reduce_vec4(const float* __restrict__ partials, unsigned short* __restrict__ out, int s,
            unsigned mn, unsigned n, unsigned ldo, bool contiguous) {
  const unsigned e = (mx_block_x() * kThreads + mx_thread_x()) * 4u;
  if (e >= mn) return;
  const int splits = kS > 0 ? kS : s;
  const mx_float4* src = reinterpret_cast<const mx_float4*>(partials + e);
  const unsigned long long plane = mn / 4u;  // float4s per partial plane
  // Plain float accumulators: the same code for CUDA's float4 struct, HIP's vector class and
  // clang's ext_vector_type, which differ in what their members' operators allow.
  const mx_float4 first = src[0];
  float a0 = first.x, a1 = first.y, a2 = first.z, a3 = first.w;
#pragma unroll
  for (int i = 1; i < splits; ++i) {
    const mx_float4 x = src[i * plane];
    a0 += x.x;
    a1 += x.y;
    a2 += x.z;
    a3 += x.w;
  }
  mx_uint2 packed;
  packed.x = bf16_rne_bits(a0) | (bf16_rne_bits(a1) << 16);  // element 0 in the low half
  packed.y = bf16_rne_bits(a2) | (bf16_rne_bits(a3) << 16);
  *reinterpret_cast<mx_uint2*>(out + out_offset(e, n, ldo, contiguous)) = packed;
}

__global__ void __launch_bounds__(kThreads)
reduce_scalar(const float* __restrict__ partials, unsigned short* __restrict__ out, int s,
              unsigned mn, unsigned n, unsigned ldo) {
  const unsigned e = mx_block_x() * kThreads + mx_thread_x();
  if (e >= mn) return;
  float acc = partials[e];
  for (int i = 1; i < s; ++i) acc += partials[e + (unsigned long long)i * mn];
  out[out_offset(e, n, ldo, false)] = (unsigned short)bf16_rne_bits(acc);
}

// Every specialisation, instantiated here rather than only by the launcher, so that a
// device-only compile (the static ISA gate, MXFP4_DEVICE_ONLY) sees the same kernels.
template __global__ void reduce_vec4<0>(const float*, unsigned short*, int, unsigned, unsigned,
                                        unsigned, bool);
template __global__ void reduce_vec4<2>(const float*, unsigned short*, int, unsigned, unsigned,
                                        unsigned, bool);
template __global__ void reduce_vec4<3>(const float*, unsigned short*, int, unsigned, unsigned,
                                        unsigned, bool);
template __global__ void reduce_vec4<4>(const float*, unsigned short*, int, unsigned, unsigned,
                                        unsigned, bool);
template __global__ void reduce_vec4<7>(const float*, unsigned short*, int, unsigned, unsigned,
                                        unsigned, bool);
template __global__ void reduce_vec4<8>(const float*, unsigned short*, int, unsigned, unsigned,
                                        unsigned, bool);
template __global__ void reduce_vec4<14>(const float*, unsigned short*, int, unsigned, unsigned,
                                         unsigned, bool);
template __global__ void reduce_vec4<16>(const float*, unsigned short*, int, unsigned, unsigned,
                                         unsigned, bool);

}  // namespace mxfp4_splitk

#if !defined(MXFP4_DEVICE_ONLY)
// ---- host side: a C ABI for ctypes (kernels/reducer/native.py) ----
namespace {

using namespace mxfp4_splitk;

// Error codes below zero are argument errors; above zero they are the runtime's error codes.
constexpr int kErrSizes = -1;     // S < 1, M/N/ldo negative, ldo < N, or M*N >= 2^31
constexpr int kErrPointers = -2;  // null pointer with a non-empty problem

template <int kS>
void launch_vec4(const float* p, unsigned short* out, int s, unsigned mn, unsigned n,
                 unsigned ldo, bool contiguous, mx_stream_t stream) {
  const unsigned vectors = mn / 4u;
  const unsigned blocks = (vectors + kThreads - 1) / kThreads;
  mx_launch(reduce_vec4<kS>, blocks, kThreads, stream, p, out, s, mn, n, ldo, contiguous);
}

}  // namespace

extern "C" {

int mxfp4_splitk_abi_version() { return 2; }

const char* mxfp4_splitk_error_string(int code) {
  if (code == kErrSizes) return "invalid sizes (need S >= 1, 0 <= N <= ldo, M*N < 2^31)";
  if (code == kErrPointers) return "null pointer";
  if (code > 0) return mx_error_string(static_cast<mx_error_t>(code));
  return "success";
}

// Launches the reduction on `stream`; returns 0 or an error code (see above).
int mxfp4_splitk_reduce(const float* partials, unsigned short* out, int s, long long m,
                        long long n, long long ldo, void* stream_ptr) {
  if (s < 1 || m < 0 || n < 0 || ldo < n || m * n >= (1LL << 31) || ldo >= (1LL << 31))
    return kErrSizes;
  if (m == 0 || n == 0) return 0;
  if (partials == nullptr || out == nullptr) return kErrPointers;
  mx_stream_t stream = static_cast<mx_stream_t>(stream_ptr);
  const unsigned mn = static_cast<unsigned>(m * n);
  const bool contiguous = (ldo == n) || (m == 1);
  const bool planes_aligned =
      mn % 4u == 0 && reinterpret_cast<unsigned long long>(partials) % 16u == 0;
  const bool out_aligned = reinterpret_cast<unsigned long long>(out) % 8u == 0;
  const bool rows_whole = contiguous || (n % 4 == 0 && ldo % 4 == 0);
  if (planes_aligned && out_aligned && rows_whole) {
    const unsigned un = static_cast<unsigned>(n), uldo = static_cast<unsigned>(ldo);
    switch (s) {
      case 2: launch_vec4<2>(partials, out, s, mn, un, uldo, contiguous, stream); break;
      case 3: launch_vec4<3>(partials, out, s, mn, un, uldo, contiguous, stream); break;
      case 4: launch_vec4<4>(partials, out, s, mn, un, uldo, contiguous, stream); break;
      case 7: launch_vec4<7>(partials, out, s, mn, un, uldo, contiguous, stream); break;
      case 8: launch_vec4<8>(partials, out, s, mn, un, uldo, contiguous, stream); break;
      case 14: launch_vec4<14>(partials, out, s, mn, un, uldo, contiguous, stream); break;
      case 16: launch_vec4<16>(partials, out, s, mn, un, uldo, contiguous, stream); break;
      default: launch_vec4<0>(partials, out, s, mn, un, uldo, contiguous, stream); break;
    }
  } else {
    const unsigned blocks = (mn + kThreads - 1) / kThreads;
    mx_launch(reduce_scalar, blocks, kThreads, stream, partials, out, s, mn,
              static_cast<unsigned>(n), static_cast<unsigned>(ldo));
  }
  const mx_error_t err = mx_last_error();
  return err == mx_success ? 0 : static_cast<int>(err);
}

// Everything of a reduction but its output, fixed once: the GEMM launcher reuses one workspace
// per stream, so only `out` changes between its calls, and ctypes converts two arguments
// instead of seven on the hot path (kernels/reducer/native.py keeps the same layout).
struct mxfp4_splitk_plan {
  const float* partials;
  long long m;
  long long n;
  long long ldo;
  void* stream;
  int s;
};

int mxfp4_splitk_reduce_planned(const mxfp4_splitk_plan* plan, unsigned short* out) {
  if (plan == nullptr) return kErrPointers;
  return mxfp4_splitk_reduce(plan->partials, out, plan->s, plan->m, plan->n, plan->ldo,
                             plan->stream);
}

}  // extern "C"
#endif  // !MXFP4_DEVICE_ONLY
