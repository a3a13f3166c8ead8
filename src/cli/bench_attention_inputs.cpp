#include "cli/bench_attention_inputs.h"

#ifdef OSCAR_HAVE_CUDA
#include <random>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/q8_scale_table.h"

namespace oscar::cli {

cuda::DeviceBuffer<float> random_device_queries(int64_t count) {
  std::vector<float> host(static_cast<size_t>(count));
  std::mt19937 generator(5);
  std::uniform_real_distribution<float> uniform(-2.f, 2.f);
  for (float& q : host) q = uniform(generator);
  cuda::DeviceBuffer<float> queries(host.size());
  cuda::check(
      cudaMemcpy(queries.data(), host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice),
      "cudaMemcpy(queries)");
  return queries;
}

cuda::AttentionArgs layer_attention_args(const ModelConfig& model, const KvCacheConfig& kv,
                                         const PageLayout& layout, const PageLayout& band_layout,
                                         const cuda::DeviceKvPages& pages,
                                         const cuda::DeviceStep& step, const float* queries,
                                         float* partials, const float* q8_scales) {
  cuda::AttentionArgs args;
  args.layout = layout;
  args.sink_tokens = kv.sink_tokens;
  args.full_pages = pages.full(0);
  args.quantized_pages = pages.quantized(0);
  args.band_layout = band_layout;
  args.band_pages = pages.band(0);
  step.fill_attention_args(args);
  args.queries = queries;
  args.partials = partials;
  args.num_kv_heads = int(model.num_kv_heads);
  args.group = int(model.group_size());
  args.score_scale = cuda::attention_score_scale(model.head_dim);
  args.q8_scales = q8_scales;
  return args;
}

}  // namespace oscar::cli
#endif
