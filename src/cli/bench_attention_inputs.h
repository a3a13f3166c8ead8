#pragma once
// What the attention-kernel benchmarks (decode-attention, prefill-attention) give the kernels:
// random queries on the device, and one layer's AttentionArgs over a page arena. CUDA builds only.
#ifdef OSCAR_HAVE_CUDA
#include <cstdint>

#include "backend/cuda/attention_args.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/device_kv_pages.h"
#include "backend/cuda/device_step.h"
#include "kvcache/kv_cache_config.h"
#include "model/model_config.h"

namespace oscar::cli {

// `count` queries uniform in [-2, 2), never all zero.
cuda::DeviceBuffer<float> random_device_queries(int64_t count);

// Layer 0 of `pages` read through `step`'s work records at `model`'s KV shape.
cuda::AttentionArgs layer_attention_args(const ModelConfig& model, const KvCacheConfig& kv,
                                         const PageLayout& layout, const PageLayout& band_layout,
                                         const cuda::DeviceKvPages& pages,
                                         const cuda::DeviceStep& step, const float* queries,
                                         float* partials, const float* q8_scales);

}  // namespace oscar::cli
#endif
