#pragma once
// Hopper's warpgroup matrix multiply-accumulate (wgmma, sm_90a) for bf16 operands and float32
// accumulators, m64n128k16, and the shared-memory descriptors its operands are read through.
//
// Operand tiles in shared memory use the 128-byte swizzle: rows of 64 bf16 (128 bytes), the 16-byte
// chunk c of row r stored at chunk c ^ (r % 8), in 1024-byte-aligned atoms of 8 rows (PTX ISA,
// "Shared Memory Matrix Layout"). A row of 128 channels is two such tiles ("halves"), one after
// the other.
//
// Register fragments (each of the warpgroup's four warps owns 16 rows; g = lane / 4, q = lane % 4):
// the accumulator of an m64nN product holds, for each 8-column block b, d[4b + 0, 1] at row g,
// columns 8b + 2q + {0, 1}, and d[4b + 2, 3] at row g + 8. An A operand from registers (m64k16)
// holds a[0] = row g, columns 2q + {0, 1}; a[1] = row g + 8, the same; a[2], a[3] the same at
// columns + 8: the accumulator's blocks 2k and 2k + 1, packed to bf16, are the A operand of k-step
// k.
#include <cuda_bf16.h>

#include <cstdint>

namespace oscar::cuda::wgmma {

// Byte offset of 16-byte chunk `chunk` (0..7) of row `row` in a swizzled tile of 64-channel rows.
__device__ __forceinline__ uint32_t swizzled_chunk(int row, int chunk) {
  return uint32_t(row) * 128u + (uint32_t(chunk ^ (row & 7)) << 4);
}

// A shared-memory matrix descriptor with the 128-byte swizzle. K-major operands (rows of the
// reduction dimension, Q and K in Q K^T): `leading_bytes` is unused, `stride_bytes` = 1024 (from
// one group of 8 rows to the next). MN-major operands (V in P V, rows of keys whose 128 channels
// are the N dimension): `leading_bytes` = from one 64-column half to the next, `stride_bytes` =
// 1024 (from one group of 8 keys to the next).
__device__ __forceinline__ uint64_t descriptor(uint32_t address, uint32_t leading_bytes,
                                               uint32_t stride_bytes) {
  return uint64_t((address & 0x3ffffu) >> 4) | (uint64_t((leading_bytes >> 4) & 0x3fffu) << 16) |
         (uint64_t((stride_bytes >> 4) & 0x3fffu) << 32) | (uint64_t(1) << 62);
}

// Orders the warpgroup's register and shared-memory accesses before its next wgmma.
__device__ __forceinline__ void fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int Pending>
__device__ __forceinline__ void wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(Pending) : "memory");
}

// wait<Pending>() that stays after the instructions computing `value`, which must not be negative
// (so that every thread of the warpgroup takes the branch). ptxas moves a plain wait up to where
// the in-flight products' registers first allow it, ahead of independent work placed before it
// in the source; a branch on `value` keeps it there.
template <int Pending>
__device__ __forceinline__ void wait_after(float value) {
  if (!(value < 0.0f)) wait<Pending>();
  wait<Pending>();
}

// Keeps the compiler from moving accesses of the accumulators across an asynchronous wgmma.
template <int N>
__device__ __forceinline__ void fence_operands(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

#define OSCAR_WGMMA_D64                                                                         \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, "                                                                        \
  "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, "  \
  "%42, %43, %44, %45, "                                                                        \
  "%46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define OSCAR_WGMMA_D64_OPERANDS(d)                                                               \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),    \
      "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),  \
      "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),  \
      "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),  \
      "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]),  \
      "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),  \
      "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),  \
      "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

// d[64 x 128] (+)= A[64 x 16] B[16 x 128], A and B in shared memory, both K-major.
__device__ __forceinline__ void mma_m64n128k16_ss(float (&d)[64], uint64_t a, uint64_t b,
                                                  bool accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " OSCAR_WGMMA_D64
      ", %64, %65, p, 1, 1, 0, 0;\n}\n"
      : OSCAR_WGMMA_D64_OPERANDS(d)
      : "l"(a), "l"(b), "r"(int(accumulate)));
}

// d[64 x 128] += A[64 x 16] B[16 x 128], A from registers (bf16 pairs), B in shared memory
// MN-major.
__device__ __forceinline__ void mma_m64n128k16_rs_mn(float (&d)[64], const uint32_t (&a)[4],
                                                     uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " OSCAR_WGMMA_D64
      ", {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
      : OSCAR_WGMMA_D64_OPERANDS(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
}

#undef OSCAR_WGMMA_D64
#undef OSCAR_WGMMA_D64_OPERANDS

}  // namespace oscar::cuda::wgmma
