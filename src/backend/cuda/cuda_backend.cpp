// The CUDA Backend: one step = the host builds the work records (step_plan.h) and uploads them,
// then every layer runs on one stream as CpuBackend::forward does on the host:
//   add + RMSNorm -> q|k|v product -> q/k norm + RoPE -> rotate q and k, write K/V pages ->
//   migrate tokens leaving the recent window (and copy those the band reads into band pages) ->
//   attention (decode + prefill kernels, combine) ->
//   o product -> add + RMSNorm -> gate|up product -> SwiGLU -> down product
// (when the tokens leaving the window were all written by earlier steps, as in decode steps, one
// migration launch for all layers comes before the first layer instead)
// and the final norm and LM head for the rows whose logits are returned, the LM head in slices of
// the vocabulary whose logits are copied to the host while the next slice computes
// (enqueue_logits). Decode-only steps replay a CUDA graph per batch size (step_graphs.h).
#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <memory>
#include <optional>
#include <type_traits>

#include "backend/cuda/attention_combine.h"
#include "backend/cuda/decode_attention.h"
#include "backend/cuda/device_kv_pages.h"
#include "backend/cuda/device_step.h"
#include "backend/cuda/device_weights.h"
#include "backend/cuda/float_block_attention.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/host_collectives.h"
#include "backend/cuda/kernel_sizes.h"
#include "backend/cuda/kv_noise.h"
#include "backend/cuda/layer_kernels.h"
#include "backend/cuda/nccl_group.h"
#include "backend/cuda/page_tensor_map.h"
#include "backend/cuda/phase_timer.h"
#include "backend/cuda/prefill_attention.h"
#include "backend/cuda/q8_scale_table.h"
#include "backend/cuda/step_graphs.h"
#include "model/model_weights.h"
#include "model/value_error_feedback.h"
#include "parallel/communicator.h"
#include "parallel/shard_plan.h"
#include "quant/error_feedback.h"
#include "util/error.h"

namespace oscar {
namespace {

using namespace oscar::cuda;

// What the kernels support; anything else is refused at construction with the flag to change.
void check_supported(const ModelConfig& config, const KvCacheConfig& kv) {
  require(config.head_dim == kHeadDim,
          "--device cuda: head_dim {} is not supported (the kernels need {})", config.head_dim,
          kHeadDim);
  require(config.group_size() >= 1 && config.group_size() <= 8,
          "--device cuda: {} query heads per KV head is not supported (1..8)", config.group_size());
  require(config.hidden_size % 4 == 0 && config.hidden_size <= 16384,
          "--device cuda: hidden size {} is not supported (the norm kernel needs a multiple of 4, "
          "at most 16384)",
          config.hidden_size);
  require(kv.dtype != KvDtype::f32,
          "--device cuda: --kv-dtype f32 exists on the CPU reference only");
  require(kv.page_size_tokens % 16 == 0,
          "--device cuda: --kv-page-size must be a multiple of 16, got {}", kv.page_size_tokens);
  if (kv.quantized()) {
    require(kv.group_size == 32 || kv.group_size == 64 || kv.group_size == 128,
            "--device cuda: --kv-group-size must be 32, 64 or 128, got {}", kv.group_size);
  }
}

// This rank's share of the model: an NCCL group's (GpuGroup) or a host communicator's rank, or the
// whole model with neither.
ShardPlan rank_shard_plan(const ModelConfig& config, const BackendOptions& options) {
  require(!(options.gpu_group && options.communicator != nullptr),
          "a CUDA rank joins an NCCL group or a host communicator, not both");
  if (options.gpu_group) {
    return make_shard_plan(config, options.gpu_group->world_size, options.gpu_group->rank);
  }
  if (options.communicator != nullptr) {
    return make_shard_plan(config, options.communicator->world_size(),
                           options.communicator->rank());
  }
  return make_shard_plan(config, 1, 0);
}

// The sizes that fix a step's launches (a decode graph records them once per batch size).
struct LaunchSizes {
  int64_t rows = 0;
  int64_t logit_rows = 0;
  int64_t block_items = 0;  // prefill-kernel items (0: no launch)
  int64_t max_splits = 0;   // bound of a row's partial records (the combine kernel's threads)
  bool decode_items = false;
  int64_t migrate_bound = 0;  // grid bound of the migration kernel (it loops over the device count)
  int64_t band_migrate_bound = 0;  // ... and of its launch for the band's copies
  int64_t key_groups = 0;
  // Migrate for all layers in one launch before the first layer
  // (StepPlan::migrations_read_earlier_steps) instead of one launch per layer after the layer's
  // write.
  bool migrate_first = false;
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(const ModelWeights& weights, const BackendOptions& options,
              const KvRotations* rotations);
  ~CudaBackend() override;

  std::string device_name() const override;
  const ModelConfig& model_config() const override { return config_; }
  const KvCacheConfig& kv_config() const override { return kv_; }
  const PageLayout& page_layout() const override { return layout_; }
  KvPageCounts kv_capacity() const override { return capacity_; }
  void forward(std::span<const SequenceStep> steps, StepLogits& logits,
               ActivationObserver* observer) override;

  void fill_kv_with_noise(uint64_t seed);
  void set_phase_timing(PhaseTiming timing) { phases_.set_timing(timing); }
  const ForwardPhaseTimes& phase_times() const { return phases_.times(); }

 private:
  void enqueue_step(const LaunchSizes& sizes, ActivationObserver* observer);
  void enqueue_logits(int64_t logit_rows);
  void enqueue_gathered_logits(int64_t logit_rows);
  void enqueue_migration(int64_t first_layer, int64_t layers, const LaunchSizes& sizes);
  KvMigrateArgs migration_args(int64_t first_layer, int64_t layers, bool band) const;
  void enqueue_attention(int64_t layer, const LaunchSizes& sizes);
  void observe(int64_t layer, int64_t rows, ActivationObserver& observer);

  void synchronize(const char* what);

  ModelConfig config_;    // the whole model's
  ShardPlan shard_plan_;  // this rank's share (all of the model with one rank)
  ModelConfig shard_;     // the shapes this rank runs: its heads, MLP channels and vocabulary
  std::unique_ptr<DeviceCollectives> group_;  // null with one rank
  // The residual stream and the blocks' outputs of the steps whose all-reduces run faster in the
  // group's reduce window (NCCL's symmetric kernels), in that window; null without one.
  float* reduce_window_ = nullptr;
  static constexpr int64_t kReduceWindowRows = 1024;
  // The row counts where `oscar bench all-reduce` measured the window faster than plain memory, at
  // a decode-size hidden on two GPUs: 1-2 rows and 128-1024, not 4-64 nor a prefill chunk's 8192.
  static bool reduces_in_window(int64_t rows) {
    return rows <= 2 || (rows >= 128 && rows <= kReduceWindowRows);
  }
  KvCacheConfig kv_;
  PageLayout layout_;
  PageLayout band_layout_;  // of the band's pages (bits 0 without a band)
  KvPageCounts capacity_;
  cudaStream_t stream_ = nullptr;
  DeviceWeights weights_;
  std::optional<DeviceKvPages> pages_;
  DeviceBuffer<float> q8_scales_;
  DeviceBuffer<float>
      key_feedback_;  // [layers][kv_heads][D][D], empty without the keys' error feedback
  DeviceBuffer<float> value_feedback_;  // the same for the values'
  // The dequantized 2-bit and band pages a prefill step reads (StepPlan::dequantize), bf16 pages of
  // layout_, reused by every layer and grown to the largest step. Never in a captured graph.
  DeviceBuffer<std::byte> prefill_scratch_;
  // The tensor-core prefill kernel's views of each layer's full-precision arena and of the scratch.
  std::vector<CUtensorMap> full_page_maps_;
  CUtensorMap scratch_page_map_{};
  std::unique_ptr<Gemm> gemm_;
  StepPlan plan_;  // every step's plan, in storage kept from step to step (make_step_plan)
  DeviceStep step_;
  Workspace workspace_;
  // The returned logits: pinned, so that the copy runs at the link's speed (a pageable copy is
  // staged by the driver: INT2 100K x 29, 17.6 MB of logits a step, docs/bench section (b)), and
  // so that a graph can hold the copy.
  PinnedBuffer<float> host_logits_;
  // The logits' copies run here, each after its slice of the LM head (enqueue_logits).
  cudaStream_t copy_stream_ = nullptr;
  static constexpr int kMaxLogitSlices = 4;
  static constexpr int64_t kLogitSliceBytes =
      int64_t(2) << 20;  // a slice's logits at least (below: one slice)
  std::array<cudaEvent_t, kMaxLogitSlices + 1>
      logit_events_{};  // a slice done; the last: copies done
  StepGraphs graphs_;
  PhaseTimer phases_;  // the benchmarks' per-phase GPU time (set_forward_phase_timing)
  StepPlanShape plan_shape_;
  int decode_grid_ = 0;
  int float_block_grid_ = 0;
};

CudaBackend::CudaBackend(const ModelWeights& weights, const BackendOptions& options,
                         const KvRotations* rotations)
    : config_(weights.config),
      shard_plan_(rank_shard_plan(weights.config, options)),
      shard_(shard_config(weights.config, shard_plan_)),
      kv_(options.kv),
      layout_(make_page_layout(options.kv, shard_.num_kv_heads, shard_.head_dim)),
      band_layout_(options.kv.has_band()
                       ? make_band_layout(options.kv, shard_.num_kv_heads, shard_.head_dim)
                       : PageLayout{}),
      capacity_(options.capacity) {
  check_supported(shard_, kv_);
  require(cuda_device_count() > 0, "--device cuda: no CUDA device is present");
  // Joined first: the ranks arrive together, before each spends its time on the weights.
  if (options.gpu_group && shard_plan_.world_size > 1) {
    group_ = std::make_unique<NcclGroup>(*options.gpu_group);
  } else if (shard_plan_.world_size > 1) {
    group_ = std::make_unique<HostCollectives>(*options.communicator);
  }
  if (group_) reduce_window_ = group_->reduce_window(2 * kReduceWindowRows * shard_.hidden_size);
  check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  for (cudaEvent_t& event : logit_events_) {
    check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
  }
  weights_ = upload_weights(weights, rotations, shard_plan_);
  pages_.emplace(layout_, config_.num_layers, capacity_);
  q8_scales_ = make_q8_scale_table();
  require(!(kv_.key_error_feedback || kv_.value_error_feedback) || rotations != nullptr,
          "error feedback needs the oscar method's rotations file");
  if (kv_.key_error_feedback) {
    upload(key_feedback_factors(shard_rotations(*rotations, shard_plan_)), key_feedback_);
  }
  if (kv_.value_error_feedback) {
    upload(value_feedback_factors(weights, *rotations,
                                  {shard_plan_.first_kv_head, shard_plan_.num_kv_heads}),
           value_feedback_);
  }
  gemm_ = std::make_unique<Gemm>(stream_);
  plan_shape_.num_kv_heads = shard_.num_kv_heads;
  plan_shape_.group = shard_.group_size();
  // The decode kernel's tiles hold 16-bit or q8 parameter pairs: f32 parameters (the published
  // serving configuration's) stay on the float kernel, which reads every format.
  plan_shape_.fast_decode = decode_attention_supports(layout_, int(shard_.group_size())) &&
                            layout_.param_format != ParamFormat::f32;
  // KIVI's per-channel keys stay on the float kernel, which also takes the decode rows the decode
  // kernel does not.
  plan_shape_.tensor_core_prefill = plan_shape_.fast_decode && !layout_.keys_per_channel;
  if (plan_shape_.tensor_core_prefill) {
    for (int64_t layer = 0; layer < config_.num_layers; ++layer) {
      full_page_maps_.push_back(make_page_tensor_map(pages_->full(layer), capacity_.full, layout_));
    }
    scratch_page_map_ = full_page_maps_.front();  // until a step needs scratch pages
  }
  decode_grid_ = decode_attention_resident_blocks(layout_);
  float_block_grid_ = float_block_attention_resident_blocks();
  plan_shape_.resident_blocks = decode_grid_;
}

CudaBackend::~CudaBackend() {
  graphs_.clear();
  for (cudaEvent_t event : logit_events_) {
    if (event != nullptr) cudaEventDestroy(event);
  }
  if (copy_stream_ != nullptr) cudaStreamDestroy(copy_stream_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

std::string CudaBackend::device_name() const {
  int device = 0;
  cudaDeviceProp properties{};
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaGetDeviceProperties(&properties, device), "cudaGetDeviceProperties");
  const std::string name =
      fmt::format("cuda ({}, sm_{}{})", properties.name, properties.major, properties.minor);
  if (shard_plan_.world_size == 1) return name;
  return fmt::format("{}, tensor-parallel rank {} of {} on GPU {}", name, shard_plan_.rank,
                     shard_plan_.world_size, device);
}

void CudaBackend::synchronize(const char* what) {
  if (group_) {
    group_->synchronize(stream_, what);
  } else {
    check(cudaStreamSynchronize(stream_), what);
  }
}

void CudaBackend::forward(std::span<const SequenceStep> steps, StepLogits& logits,
                          ActivationObserver* observer) {
  make_step_plan(steps, kv_, plan_shape_, plan_);
  const StepPlan& plan = plan_;
  const int64_t rows = int64_t(plan.rows.size());
  const int64_t logit_rows = int64_t(plan.logit_rows.size());
  bool moved = step_.upload(plan, stream_);
  moved |= workspace_.reserve(
      shard_, rows, logit_rows, config_.vocab_size,
      plan.partial_records * partial_record_floats(int(shard_.group_size()), shard_.head_dim));
  moved |= host_logits_.reserve(
      size_t(logit_rows * config_.vocab_size));  // a graph's copies write there
  if (moved) graphs_.clear();
  const size_t scratch_bytes = size_t(plan.scratch_pages() * layout_.full_page_bytes);
  if (scratch_bytes > prefill_scratch_.size()) {
    prefill_scratch_.resize(scratch_bytes);
    scratch_page_map_ =
        make_page_tensor_map(prefill_scratch_.data(), plan.scratch_pages(), layout_);
  }

  LaunchSizes sizes;
  sizes.rows = rows;
  sizes.logit_rows = logit_rows;
  sizes.block_items = int64_t(plan.block_items.size());
  sizes.max_splits = plan.max_splits();
  sizes.decode_items = !plan.decode_items.empty();
  sizes.migrate_bound = int64_t(plan.migrate.size());
  sizes.band_migrate_bound = int64_t(plan.band_migrate.size());
  sizes.key_groups = int64_t(plan.key_groups.size());
  sizes.migrate_first = plan.migrations_read_earlier_steps;
  const bool graph = observer == nullptr && plan.decode_only && plan_shape_.fast_decode &&
                     (!group_ || group_->capturable());
  phases_.start(!graph);
  if (graph) {
    // The recorded launches must serve every later step of this batch size.
    sizes.block_items = 0;
    sizes.max_splits = INT32_MAX;
    sizes.decode_items = true;
    sizes.migrate_bound = rows;
    sizes.band_migrate_bound = kv_.has_band() ? rows : 0;
    graphs_.run({rows, sizes.migrate_first}, stream_, [&] { enqueue_step(sizes, nullptr); });
  } else {
    enqueue_step(sizes, observer);
  }
  synchronize("cudaStreamSynchronize(forward)");
  phases_.finish();
  logits.values =
      std::span<const float>(host_logits_.data(), size_t(logit_rows * config_.vocab_size));
  logits.rows = logit_rows;
  logits.vocab_size = config_.vocab_size;
}

void CudaBackend::enqueue_step(const LaunchSizes& sizes, ActivationObserver* observer) {
  const ModelConfig& c = shard_;
  const int64_t rows = sizes.rows;
  const int64_t qkv_width = c.q_dim() + 2 * c.kv_dim();
  const float eps = float(c.block.rms_norm_eps);
  Workspace& w = workspace_;
  const bool windowed = reduce_window_ != nullptr && reduces_in_window(rows);
  float* hidden = windowed ? reduce_window_ : w.hidden.data();
  float* delta = windowed ? reduce_window_ + kReduceWindowRows * c.hidden_size : w.delta.data();
  const int step_interval = phases_.begin(ForwardPhase::total, stream_);
  launch_embedding(step_.tokens(), rows, weights_.embedding.data(), shard_plan_.first_vocab,
                   shard_plan_.vocab_size, c.hidden_size, hidden, stream_);
  // Row-parallel outputs (the vocab-parallel embedding, o and down) are partial sums on each rank.
  auto all_reduce = [&](float* values) {
    if (group_) group_->all_reduce_sum(values, rows * c.hidden_size, stream_);
  };
  all_reduce(hidden);
  // One launch instead of one per layer: a small launch per layer was a measurable share of a
  // decode step. (On a second stream beside the first layer's work it made the INT2 steps slower.)
  const int first_migration = phases_.begin(ForwardPhase::kv_write, stream_);
  if (sizes.migrate_first) enqueue_migration(0, c.num_layers, sizes);
  phases_.end(first_migration, stream_);
  for (int64_t layer = 0; layer < c.num_layers; ++layer) {
    const DeviceLayerWeights& lw = weights_.layers[size_t(layer)];
    launch_add_rms_norm(hidden, layer == 0 ? nullptr : delta, nullptr, rows, c.hidden_size,
                        lw.input_norm.data(), eps, w.normed.data(), stream_);
    const int qkv_product = phases_.begin(ForwardPhase::linear, stream_);
    gemm_->linear(w.normed.data(), rows, lw.qkv.data(), qkv_width, c.hidden_size, w.qkv.data());
    phases_.end(qkv_product, stream_);
    QkNormRopeArgs rope;
    rope.qkv = w.qkv.data();
    rope.row_stride = qkv_width;
    rope.num_heads = int(c.num_heads);
    rope.num_kv_heads = int(c.num_kv_heads);
    rope.head_dim = int(c.head_dim);
    rope.rows = step_.rows();
    rope.q_norm = c.block.qk_norm ? lw.q_norm.data() : nullptr;
    rope.k_norm = c.block.qk_norm ? lw.k_norm.data() : nullptr;
    rope.eps = eps;
    rope.inverse_frequencies = weights_.inverse_frequencies.data();
    launch_qk_norm_rope(rope, rows, stream_);
    if (observer != nullptr) observe(layer, rows, *observer);
    KvWriteArgs write;
    write.qkv = w.qkv.data();
    write.row_stride = qkv_width;
    write.num_heads = int(c.num_heads);
    write.num_kv_heads = int(c.num_kv_heads);
    write.rows = step_.rows();
    write.page_table = step_.page_table();
    write.layout = layout_;
    write.full_pages = pages_->full(layer);
    write.key_rotations = lw.key_rotations.size() > 0 ? lw.key_rotations.data() : nullptr;
    write.rotated_queries = w.rotated_queries.data();
    // The tensor-core prefill kernel reads and rotates its queries itself: a step without decode
    // rows needs no rotated copy of them.
    write.write_queries = !(plan_shape_.tensor_core_prefill && !sizes.decode_items);
    const int kv_write = phases_.begin(ForwardPhase::kv_write, stream_);
    launch_kv_write(write, rows, stream_);
    if (!sizes.migrate_first) enqueue_migration(layer, 1, sizes);
    phases_.end(kv_write, stream_);
    const int attention = phases_.begin(ForwardPhase::attention, stream_);
    enqueue_attention(layer, sizes);
    phases_.end(attention, stream_);
    const int o_product = phases_.begin(ForwardPhase::linear, stream_);
    gemm_->linear(w.attention.data(), rows, lw.o.data(), c.hidden_size, c.q_dim(), delta);
    all_reduce(delta);
    phases_.end(o_product, stream_);
    launch_add_rms_norm(hidden, delta, nullptr, rows, c.hidden_size, lw.post_attention_norm.data(),
                        eps, w.normed.data(), stream_);
    const int mlp_products = phases_.begin(ForwardPhase::linear, stream_);
    gemm_->linear_swiglu(w.normed.data(), rows, lw.gate_up.data(), c.intermediate_size,
                         c.hidden_size, w.gate_up.data(), w.activation.data());
    gemm_->linear(w.activation.data(), rows, lw.down.data(), c.hidden_size, c.intermediate_size,
                  delta);
    all_reduce(delta);
    phases_.end(mlp_products, stream_);
  }
  launch_add_rms_norm(hidden, delta, step_.logit_rows(), sizes.logit_rows, c.hidden_size,
                      weights_.final_norm.data(), eps, w.normed_logits.data(), stream_);
  const int lm_head = phases_.begin(ForwardPhase::linear, stream_);
  enqueue_logits(sizes.logit_rows);
  phases_.end(lm_head, stream_);
  phases_.end(step_interval, stream_);
}

// The LM head over slices of the vocabulary, kLogitSliceBytes of logits or more each (up to
// kMaxLogitSlices), each slice's rows copied into their columns of the host's [rows][vocab] on
// copy_stream_ while the next slice computes: in one piece the host copy of a large batch's logits
// waited for the whole product. The device holds the slices one after another, each [rows][its
// width]. stream_ waits for the copies at the end (in a graph, the copy stream's fork joins there).
// The slices run inside the step's graph, not after it (docs/bench/notes/2026-11-27-decode-step.md,
// the LM head's slices).
void CudaBackend::enqueue_logits(int64_t logit_rows) {
  if (logit_rows == 0) return;
  if (group_) {
    enqueue_gathered_logits(logit_rows);
    return;
  }
  const int64_t vocab = config_.vocab_size, hidden = config_.hidden_size;
  const int64_t bytes = logit_rows * vocab * int64_t(sizeof(float));
  const int slices = int(std::clamp<int64_t>(bytes / kLogitSliceBytes, 1, kMaxLogitSlices));
  for (int s = 0; s < slices; ++s) {
    const int64_t begin = s * vocab / slices, width = (s + 1) * vocab / slices - begin;
    float* slice = workspace_.logits.data() + logit_rows * begin;
    gemm_->linear(workspace_.normed_logits.data(), logit_rows,
                  weights_.output_matrix() + begin * hidden, width, hidden, slice);
    check(cudaEventRecord(logit_events_[size_t(s)], stream_), "cudaEventRecord(logits)");
    check(cudaStreamWaitEvent(copy_stream_, logit_events_[size_t(s)]),
          "cudaStreamWaitEvent(logits)");
    check(cudaMemcpy2DAsync(host_logits_.data() + begin, size_t(vocab) * sizeof(float), slice,
                            size_t(width) * sizeof(float), size_t(width) * sizeof(float),
                            size_t(logit_rows), cudaMemcpyDeviceToHost, copy_stream_),
          "cudaMemcpy2DAsync(logits)");
  }
  check(cudaEventRecord(logit_events_[kMaxLogitSlices], copy_stream_), "cudaEventRecord(logits)");
  check(cudaStreamWaitEvent(stream_, logit_events_[kMaxLogitSlices]),
        "cudaStreamWaitEvent(logits)");
}

// Vocab-parallel LM head: each rank computes its slice of the vocabulary into its part of the
// gather buffer, an all-gather joins the parts ([rank][rows][slice]), and each part is copied into
// its columns of the host's [rows][vocab]. Every rank returns the same logits: ranks run as
// threads (tests, benches) each pick the next token themselves.
void CudaBackend::enqueue_gathered_logits(int64_t logit_rows) {
  const int64_t vocab = config_.vocab_size, slice = shard_.vocab_size;
  const int64_t part = logit_rows * slice;
  float* gathered = workspace_.logits.data();
  gemm_->linear(workspace_.normed_logits.data(), logit_rows, weights_.output_matrix(), slice,
                config_.hidden_size, gathered + shard_plan_.rank * part);
  group_->all_gather(gathered, part, stream_);
  for (int r = 0; r < shard_plan_.world_size; ++r) {
    check(cudaMemcpy2DAsync(host_logits_.data() + r * slice, size_t(vocab) * sizeof(float),
                            gathered + r * part, size_t(slice) * sizeof(float),
                            size_t(slice) * sizeof(float), size_t(logit_rows),
                            cudaMemcpyDeviceToHost, stream_),
          "cudaMemcpy2DAsync(logits)");
  }
}

void CudaBackend::enqueue_migration(int64_t first_layer, int64_t layers, const LaunchSizes& sizes) {
  if (!kv_.quantized()) return;
  const int quantize = phases_.begin(ForwardPhase::kv_quantize, stream_);
  launch_kv_migrate(migration_args(first_layer, layers, false), sizes.migrate_bound,
                    sizes.key_groups, stream_);
  if (sizes.band_migrate_bound > 0) {
    launch_kv_migrate(migration_args(first_layer, layers, true), sizes.band_migrate_bound, 0,
                      stream_);
  }
  phases_.end(quantize, stream_);
}

// The band's copies are quantized in its own format (KvCacheConfig::band_config): no clipping,
// nearest rounding.
KvMigrateArgs CudaBackend::migration_args(int64_t first_layer, int64_t layers, bool band) const {
  KvMigrateArgs migrate;
  migrate.layout = band ? band_layout_ : layout_;
  migrate.band = band;
  migrate.full_pages = pages_->full(first_layer);
  migrate.quantized_pages = band ? pages_->band(first_layer) : pages_->quantized(first_layer);
  migrate.num_layers = int(layers);
  migrate.full_layer_bytes = pages_->full_layer_bytes();
  migrate.quantized_layer_bytes =
      band ? pages_->band_layer_bytes() : pages_->quantized_layer_bytes();
  migrate.page_table = step_.page_table();
  migrate.tasks = band ? step_.band_migrate() : step_.migrate();
  migrate.key_groups = step_.key_groups();
  migrate.counts = step_.counts();
  migrate.num_kv_heads = int(shard_.num_kv_heads);
  migrate.q8_scales = q8_scales_.data();
  if (band) return migrate;
  migrate.clip_ratio_k = kv_.clip_ratio_k;
  migrate.clip_ratio_v = kv_.clip_ratio_v;
  migrate.clip_search = kv_.clip_search;
  migrate.clip_mode = kv_.clip_mode;
  migrate.lloyd_max = kv_.lloyd_max;
  const int64_t first_factor =
      first_layer * shard_.num_kv_heads * shard_.head_dim * shard_.head_dim;
  if (key_feedback_.size() > 0) migrate.key_feedback = key_feedback_.data() + first_factor;
  if (value_feedback_.size() > 0) migrate.value_feedback = value_feedback_.data() + first_factor;
  return migrate;
}

void CudaBackend::enqueue_attention(int64_t layer, const LaunchSizes& sizes) {
  const ModelConfig& c = shard_;
  AttentionArgs args;
  args.layout = layout_;
  args.sink_tokens = kv_.sink_tokens;
  args.full_pages = pages_->full(layer);
  args.quantized_pages = pages_->quantized(layer);
  args.band_layout = band_layout_;
  args.band_pages = pages_->band(layer);
  step_.fill_attention_args(args);
  args.queries = workspace_.rotated_queries.data();
  args.partials = workspace_.partials.data();
  args.output = workspace_.attention.data();
  args.num_kv_heads = int(c.num_kv_heads);
  args.group = int(c.group_size());
  args.score_scale = attention_score_scale(c.head_dim);
  args.q8_scales = q8_scales_.data();
  if (sizes.decode_items) launch_decode_attention(args, decode_grid_, stream_);
  if (sizes.block_items > 0 && plan_shape_.tensor_core_prefill) {
    const int dequantize = phases_.begin(ForwardPhase::dequantize, stream_);
    launch_kv_dequantize(layout_, args.quantized_pages, step_.dequantize(),
                         int64_t(plan_.dequantize.size()), args.q8_scales, prefill_scratch_.data(),
                         stream_);
    launch_kv_dequantize(band_layout_, args.band_pages, step_.band_dequantize(),
                         int64_t(plan_.band_dequantize.size()), args.q8_scales,
                         prefill_scratch_.data(), stream_);
    phases_.end(dequantize, stream_);
    args.scratch_pages = prefill_scratch_.data();
    const DeviceBuffer<__nv_bfloat16>& tiles = weights_.layers[size_t(layer)].query_rotation_tiles;
    args.prefill_queries = workspace_.qkv.data();
    args.prefill_query_stride = c.q_dim() + 2 * c.kv_dim();
    args.query_rotation_tiles = tiles.size() > 0 ? tiles.data() : nullptr;
    launch_prefill_attention(args, sizes.block_items, full_page_maps_[size_t(layer)],
                             scratch_page_map_, stream_);
  } else if (sizes.block_items > 0) {
    const int64_t units = sizes.block_items * c.num_kv_heads;
    launch_float_block_attention(args, int(std::min<int64_t>(units, float_block_grid_)), stream_);
  }
  launch_attention_combine(step_.combine(), sizes.rows, sizes.max_splits,
                           workspace_.partials.data(), int(c.num_kv_heads), int(c.group_size()),
                           int(c.head_dim), workspace_.attention.data(), nullptr, stream_);
}

// The observer reads post-RoPE q, k, v before any KV rotation: the q|k|v rows, split per part.
void CudaBackend::observe(int64_t layer, int64_t rows, ActivationObserver& observer) {
  require(shard_plan_.world_size == 1,
          "activation observers (calibration, attention error) run with one rank, not {}",
          shard_plan_.world_size);
  const ModelConfig& c = config_;
  const int64_t pitch = (c.q_dim() + 2 * c.kv_dim()) * int64_t(sizeof(float));
  std::vector<float> q(size_t(rows * c.q_dim())), k(size_t(rows * c.kv_dim())),
      v(size_t(rows * c.kv_dim()));
  const float* source = workspace_.qkv.data();
  auto copy = [&](float* target, int64_t offset, int64_t width) {
    check(cudaMemcpy2DAsync(target, size_t(width) * sizeof(float), source + offset, size_t(pitch),
                            size_t(width) * sizeof(float), size_t(rows), cudaMemcpyDeviceToHost,
                            stream_),
          "cudaMemcpy2DAsync(observed activations)");
  };
  copy(q.data(), 0, c.q_dim());
  copy(k.data(), c.q_dim(), c.kv_dim());
  copy(v.data(), c.q_dim() + c.kv_dim(), c.kv_dim());
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize(observer)");
  observer.observe({layer, rows, q.data(), k.data(), v.data()});
}

void CudaBackend::fill_kv_with_noise(uint64_t seed) {
  for (int64_t layer = 0; layer < shard_.num_layers; ++layer) {
    launch_fill_kv_noise(*pages_, layer, layout_, band_layout_, capacity_, seed + uint64_t(layer),
                         stream_);
  }
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize(fill_kv_with_noise)");
}

}  // namespace

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // no driver or no device: not an error for the caller
    return 0;
  }
  return count;
}

void use_cuda_device(int index) {
  const int count = cuda_device_count();
  require(index >= 0 && index < count,
          "tensor-parallel local rank {} needs GPU {} of this node, which has {} GPU{}", index,
          index, count, count == 1 ? "" : "s");
  check(cudaSetDevice(index), "cudaSetDevice");
}

UniqueId make_cuda_group_id() {
  return make_nccl_unique_id();
}

int64_t cuda_free_bytes() {
  size_t free_bytes = 0, total_bytes = 0;
  check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  return int64_t(free_bytes);
}

std::unique_ptr<Backend> make_cuda_backend(const ModelWeights& weights,
                                           const BackendOptions& options,
                                           const KvRotations* rotations) {
  return std::make_unique<CudaBackend>(weights, options, rotations);
}

namespace {

// The CUDA backend behind `backend` (const or not), for the benchmarks' functions; `what` names
// the caller.
template <typename AnyBackend>
auto& as_cuda_backend(AnyBackend& backend, const char* what) {
  using Cuda = std::conditional_t<std::is_const_v<AnyBackend>, const CudaBackend, CudaBackend>;
  auto* cuda_backend = dynamic_cast<Cuda*>(&backend);
  require(cuda_backend != nullptr, "{}: {} is not a CUDA backend", what, backend.device_name());
  return *cuda_backend;
}

}  // namespace

void fill_kv_cache_with_noise(Backend& backend, uint64_t seed) {
  as_cuda_backend(backend, "fill_kv_cache_with_noise").fill_kv_with_noise(seed);
}

void set_forward_phase_timing(Backend& backend, PhaseTiming timing) {
  as_cuda_backend(backend, "set_forward_phase_timing").set_phase_timing(timing);
}

ForwardPhaseTimes forward_phase_times(const Backend& backend) {
  return as_cuda_backend(backend, "forward_phase_times").phase_times();
}

}  // namespace oscar
