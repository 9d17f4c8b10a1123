// A deliberately register-starved kernel: 32 live floats under a 16-VGPR cap must spill.
#define __global__ __attribute__((global))
extern "C" __global__ __attribute__((amdgpu_num_vgpr(16))) void starved(const float* __restrict__ x, float* __restrict__ y) {
  int i = __builtin_amdgcn_workitem_id_x();
  float v[32];
#pragma unroll
  for (int k = 0; k < 32; ++k) v[k] = x[i + 256 * k];
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < 32; ++k) s += v[k] * v[31 - k];
#pragma unroll
  for (int k = 0; k < 32; ++k) y[i + 256 * k] = v[k] * s;
}
struct __attribute__((aligned(16))) f4 { float x, y, z, w; };
extern "C" __global__ void sum4(const f4* __restrict__ p, f4* __restrict__ out) {
  int i = __builtin_amdgcn_workgroup_id_x() * 256 + __builtin_amdgcn_workitem_id_x();
  f4 a = p[i], b = p[i + 65536];
  out[i] = f4{a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w};
}
