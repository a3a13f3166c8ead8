#pragma once
// Thin wrappers over the PTX the attention kernels use (sm_80+; built for sm_90a):
//   mma.m16n8k16 with f32 accumulators, ldmatrix (plain and transposed), movmatrix (an 8x8 b16
//   transpose inside a warp), cp.async (16-byte global -> shared copies that bypass registers),
//   lop3 and packed f16 subtraction for unpacking integer codes into exact f16 values, ex2, and
//   griddepcontrol (programmatic dependent launch, sm_90; see chained_launch.cuh).
// Fragment layouts (PTX ISA, "Matrix fragments for mma.m16n8k16"), lane = 4 * g + t:
//   A (16x16): reg0 = (row g, cols 2t, 2t+1), reg1 = (row g+8, same cols),
//              reg2 = (row g, cols 2t+8, 2t+9), reg3 = (row g+8, cols 2t+8, 2t+9);
//   B (16x8):  reg0 = (rows 2t, 2t+1, col g), reg1 = (rows 2t+8, 2t+9, col g);
//   C (16x8):  c0, c1 = (row g, cols 2t, 2t+1), c2, c3 = (row g+8, cols 2t, 2t+1).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace oscar::cuda {

__device__ __forceinline__ uint32_t shared_address(const void* pointer) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(pointer));
}

__device__ __forceinline__ void mma_f16(float (&d)[4], const uint32_t (&a)[4],
                                        const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4],
                                         const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Lanes 8i..8i+7 give the row addresses of matrix i; register i receives matrix i's fragment.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// The lane holding (row g, cols 2t, 2t+1) of an 8x8 b16 matrix receives (row g, cols 2t, 2t+1)
// of its transpose.
__device__ __forceinline__ uint32_t movmatrix_trans(uint32_t value) {
  uint32_t result;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(result) : "r"(value));
  return result;
}

__device__ __forceinline__ void cp_async_16(uint32_t shared, const void* global) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(shared), "l"(global));
}
// The same, reading `source_bytes` (0 or 16) and filling the rest of the 16 bytes with zeros.
__device__ __forceinline__ void cp_async_16_or_zeros(uint32_t shared, const void* global,
                                                     int source_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared), "l"(global),
               "r"(source_bytes));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int Pending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending));
}

// A kernel started by launch_chained (chained_launch.cuh) may run while the kernel before it in
// the stream finishes: before this it may read only what no kernel writes (weights, rotations);
// after it everything earlier kernels wrote is complete and visible. A no-op for a plain launch.
__device__ __forceinline__ void wait_for_producer() {
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
}
// Lets the next chained kernel's blocks be scheduled now (they wait in wait_for_producer until
// this grid has finished). Called after wait_for_producer, so at most one grid waits ahead.
__device__ __forceinline__ void release_consumer() {
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}

// (a & b) | c in one instruction.
__device__ __forceinline__ uint32_t and_or(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t d;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// Two f16 values 1024 + k (k < 1024) minus 1024: the exact integers k, as f16x2.
__device__ __forceinline__ uint32_t minus_1024_f16x2(uint32_t value) {
  uint32_t d;
  asm("sub.f16x2 %0, %1, %2;\n" : "=r"(d) : "r"(value), "r"(0x64006400u));
  return d;
}

__device__ __forceinline__ uint32_t pack_f16x2(float low, float high) {
  const __half2 h = __floats2half2_rn(low, high);
  return *reinterpret_cast<const uint32_t*>(&h);
}
__device__ __forceinline__ uint32_t pack_bf16x2(float low, float high) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(low, high);
  return *reinterpret_cast<const uint32_t*>(&h);
}
__device__ __forceinline__ float2 unpack_f16x2(uint32_t value) {
  return __half22float2(*reinterpret_cast<const __half2*>(&value));
}
__device__ __forceinline__ float2 unpack_bf16x2(uint32_t value) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&value));
}
// Eight bf16 values of one 16-byte load, in order, as floats (a bf16 is a float's top half).
__device__ __forceinline__ void unpack_bf16x8(const uint4 packed, float* out) {
  const uint32_t words[4] = {packed.x, packed.y, packed.z, packed.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    out[2 * i] = __uint_as_float(words[i] << 16);
    out[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
  }
}

// 2^x as one MUFU.EX2: results below 2^-126 flush to zero. exp2f keeps them as denormals with
// three more instructions per call, which the softmax weights (at most 1, summed) never need.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// value = high + low with high the 16-bit rounding of value: two mma passes give ~22 bits.
__device__ __forceinline__ void split_f16x2(float a, float b, uint32_t& high, uint32_t& low) {
  high = pack_f16x2(a, b);
  const float2 h = unpack_f16x2(high);
  low = pack_f16x2(a - h.x, b - h.y);
}
__device__ __forceinline__ void split_bf16x2(float a, float b, uint32_t& high, uint32_t& low) {
  high = pack_bf16x2(a, b);
  const float2 h = unpack_bf16x2(high);
  low = pack_bf16x2(a - h.x, b - h.y);
}

}  // namespace oscar::cuda
