#pragma once
// Hopper's bulk tensor copies (TMA, sm_90) from global into shared memory, completing on shared-
// memory barriers (mbarrier) that count arrivals and, with expect_tx, the bytes still to land.
// A barrier's phases alternate; a waiter names the parity of the phase it waits to complete.
#include <cuda.h>

#include <cstdint>

namespace oscar::cuda::bulk {

__device__ __forceinline__ void init_barrier(uint32_t barrier, int arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(barrier), "r"(arrivals)
               : "memory");
}

// Makes initialized barriers visible to the bulk copies (the async proxy).
__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

__device__ __forceinline__ void arrive(uint32_t barrier) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(barrier) : "memory");
}

// Arrives and adds `bytes` to the bytes the current phase waits for.
__device__ __forceinline__ void arrive_expecting(uint32_t barrier, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(barrier), "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void wait(uint32_t barrier, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "wait_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n"
      "}\n" ::"r"(barrier),
      "r"(parity)
      : "memory");
}

// Copies the box at (column, row) of a 2-D tensor map into shared memory at `destination`; the
// bytes count against `barrier`'s expected bytes.
__device__ __forceinline__ void copy_2d(uint32_t destination, const CUtensorMap* map, int column,
                                        int row, uint32_t barrier) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, "
      "%3}], [%4];\n" ::"r"(destination),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(column), "r"(row), "r"(barrier)
      : "memory");
}

// Orders this thread's ordinary shared-memory accesses before later bulk copies or wgmma reads.
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// A warpgroup gives registers back to (dec) or takes them from (inc) the block's pool; the roles
// must be the two branches of one if/else for ptxas to allocate each branch's registers apart.
template <int Registers>
__device__ __forceinline__ void release_registers() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(Registers));
}
template <int Registers>
__device__ __forceinline__ void claim_registers() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(Registers));
}

}  // namespace oscar::cuda::bulk
