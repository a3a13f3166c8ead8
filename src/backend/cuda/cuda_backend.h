#pragma once
// The CUDA backend (Hopper, sm_90a): the same model, cache formats and decode rule as the CPU
// reference, with the KV cache and weights in GPU memory.
#include <cstdint>
#include <memory>

#include "backend/backend.h"
#include "parallel/gpu_group.h"

namespace oscar {

struct ModelWeights;
struct KvRotations;

int cuda_device_count();  // 0 when no driver or device is present
// The calling thread's device: `index` of cuda_device_count(), or Error naming it.
void use_cuda_device(int index);
// A tensor-parallel group's NCCL unique id (rank 0 makes it; Error when built without NCCL).
UniqueId make_cuda_group_id();
int64_t cuda_free_bytes();  // free memory of the current device

std::unique_ptr<Backend> make_cuda_backend(const ModelWeights& weights,
                                           const BackendOptions& options,
                                           const KvRotations* rotations);

// Benchmarks only: fills every KV page of a CUDA backend with random finite contents (bf16 values
// in [-1, 1]; random codes with plausible parameters), so that decode steps can be timed at long
// contexts without prefilling them. Throws when `backend` is not a CUDA backend.
void fill_kv_cache_with_noise(Backend& backend, uint64_t seed);

// GPU time of one forward's phases, in milliseconds, from CUDA events around their launches.
struct ForwardPhaseTimes {
  // Every launch of the step, from the embedding to the logits on the host.
  double total_ms = 0;
  // enqueue_attention: the decode and prefill attention kernels and the combine.
  double attention_ms = 0;
  // The new tokens' K/V written to pages, and the tokens leaving the window migrated.
  double kv_write_ms = 0;
  // The q|k|v, o, gate|up (+ SwiGLU) and down products; the LM head and its logits' copy.
  double linear_ms = 0;
  // Parts of the above: of kv_write_ms, the quantization of the tokens leaving the window (error
  // feedback, the band's copies); of attention_ms, the quantized and band pages dequantized into
  // the prefill kernel's bf16 scratch pages.
  double kv_quantize_ms = 0;
  double dequantize_ms = 0;

  ForwardPhaseTimes& operator+=(const ForwardPhaseTimes& o) {
    total_ms += o.total_ms;
    attention_ms += o.attention_ms;
    kv_write_ms += o.kv_write_ms;
    linear_ms += o.linear_ms;
    kv_quantize_ms += o.kv_quantize_ms;
    dequantize_ms += o.dequantize_ms;
    return *this;
  }
};

// What set_forward_phase_timing records of each forward: nothing, its total alone (one pair of
// events, so that a timed run's GPU time can be told from its wall time), or every phase.
enum class PhaseTiming { off, total, phases };
// Benchmarks only: times each later forward of a CUDA backend (off by default, and free when off).
// A decode step replayed from a CUDA graph is not timed. Throws when `backend` is not a CUDA
// backend.
void set_forward_phase_timing(Backend& backend, PhaseTiming timing);
// The phases of the last forward (zeros for those not timed).
ForwardPhaseTimes forward_phase_times(const Backend& backend);

}  // namespace oscar
