// oscar bench linear: the decode step's matrix products alone at a model's shapes (q|k|v, o,
// gate|up, down, LM head) for a few rows, through the backend's Gemm (skinny_linear.h up to 32
// rows, cuBLAS beyond) and through cuBLAS for every row count, the peer. gate_up_swiglu is the
// gate|up product as the decode step runs it, with SwiGLU (Gemm::linear_swiglu: applied by the
// product itself up to 32 rows), against cuBLAS's product followed by the SwiGLU kernel. Each row
// reports the time per product, its weight bytes, the achieved GB/s and the fraction of the copy
// bandwidth measured in the same run. The weights (a constant bf16 pattern: the time does not
// depend on the values) are cycled over enough copies that L2 never serves a repeat, as in a decode
// step.
#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "cli/bench_gpu_common.h"
#include "cli/commands.h"
#include "util/error.h"

#ifdef OSCAR_HAVE_CUDA
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/skinny_linear.h"
#endif

namespace oscar::cli {
namespace {

struct BenchLinearOptions {
  std::string model = "qwen3-8b";
  std::string rows = "1,2,4,8,16,32";
  int iterations = 40;
  std::string json_path;
};

#ifdef OSCAR_HAVE_CUDA
using namespace oscar::cuda;

struct Product {
  const char* name;
  int64_t outputs;
  int64_t inputs;
  bool swiglu = false;  // the gate|up product with SwiGLU, into bf16 activations
};

void run_bench_linear(const BenchLinearOptions& o) {
  const ModelConfig c = hf_config(o.model);
  const GpuDescription gpu = describe_gpu();
  fmt::print("{} ({}), copy bandwidth {:.0f} GB/s; {} products\n", gpu.name, gpu.driver,
             gpu.copy_gbps, o.model);
  const std::vector<Product> products = {
      {"qkv", c.q_dim() + 2 * c.kv_dim(), c.hidden_size},
      {"o", c.hidden_size, c.q_dim()},
      {"gate_up", 2 * c.intermediate_size, c.hidden_size},
      {"gate_up_swiglu", 2 * c.intermediate_size, c.hidden_size, true},
      {"down", c.hidden_size, c.intermediate_size},
      {"lm_head", c.vocab_size, c.hidden_size}};
  const std::vector<int64_t> row_counts = parse_int_list(o.rows);
  int64_t widest = 0, most_rows = 1;
  for (const Product& p : products) widest = std::max({widest, p.inputs, p.outputs});
  for (const int64_t r : row_counts) {
    require(r >= 1 && r <= 4096, "--rows: {} is not a row count between 1 and 4096", r);
    most_rows = std::max(most_rows, r);
  }
  DeviceBuffer<__nv_bfloat16> x(size_t(most_rows * widest));
  DeviceBuffer<float> y(size_t(most_rows * widest));
  DeviceBuffer<__nv_bfloat16> activation(size_t(most_rows * c.intermediate_size));
  check(cudaMemset(x.data(), 0x3c, x.bytes()), "cudaMemset");
  cudaStream_t stream = nullptr;
  Gemm gemm(stream);
  std::vector<nlohmann::json> rows;
  fmt::print("{:>14} {:>5} {:>8} {:>6} {:>8} {:>10} {:>7} {:>10} {:>7}\n", "product", "rows",
             "outputs", "inputs", "path", "ours_us", "bw", "cublas_us", "bw");
  for (const Product& p : products) {
    const int64_t bytes = p.outputs * p.inputs * 2;
    const int copies = int(std::max<int64_t>(2, (int64_t(256) << 20) / bytes + 1));
    std::vector<DeviceBuffer<__nv_bfloat16>> weights(static_cast<size_t>(copies));
    for (auto& w : weights) {
      w.resize(size_t(p.outputs * p.inputs));
      check(cudaMemset(w.data(), 0x3c, w.bytes()), "cudaMemset");
    }
    for (const int64_t r : row_counts) {
      auto weight = [&](int i) { return weights[size_t(i % copies)].data(); };
      const int64_t inner = p.outputs / 2;
      // The product as the decode step runs it (Gemm's choice of path), or through cuBLAS.
      auto product = [&](int i, bool through_cublas) {
        if (p.swiglu && through_cublas) {
          gemm.cublas_linear_swiglu(x.data(), r, weight(i), inner, p.inputs, y.data(),
                                    activation.data());
        } else if (p.swiglu) {
          gemm.linear_swiglu(x.data(), r, weight(i), inner, p.inputs, y.data(), activation.data());
        } else if (through_cublas) {
          gemm.cublas_linear(x.data(), r, weight(i), p.outputs, p.inputs, y.data());
        } else {
          gemm.linear(x.data(), r, weight(i), p.outputs, p.inputs, y.data());
        }
      };
      const double ours = median_launch_us([&](int i) { product(i, false); }, o.iterations);
      const double cublas = median_launch_us([&](int i) { product(i, true); }, o.iterations);
      const double gbps = double(bytes) / (ours * 1e-6) / 1e9,
                   cublas_gbps = double(bytes) / (cublas * 1e-6) / 1e9;
      const char* path = skinny_linear_supports(r, p.inputs) ? "skinny" : "cublas";
      fmt::print("{:>14} {:>5} {:>8} {:>6} {:>8} {:>10.1f} {:>6.0f}% {:>10.1f} {:>6.0f}%\n", p.name,
                 r, p.outputs, p.inputs, path, ours, 100.0 * gbps / gpu.copy_gbps, cublas,
                 100.0 * cublas_gbps / gpu.copy_gbps);
      rows.push_back({{"kernel", "linear"},
                      {"product", p.name},
                      {"model", o.model},
                      {"rows", r},
                      {"outputs", p.outputs},
                      {"inputs", p.inputs},
                      {"path", path},
                      {"time_us", ours},
                      {"bytes", bytes},
                      {"gbps", gbps},
                      {"bw_fraction", gbps / gpu.copy_gbps},
                      {"cublas_time_us", cublas},
                      {"cublas_bw_fraction", cublas_gbps / gpu.copy_gbps}});
    }
  }
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  write_rows(o.json_path, gpu, rows);
}
#else
void run_bench_linear(const BenchLinearOptions&) {
  fail("oscar bench linear: this oscar was built without the CUDA backend");
}
#endif

}  // namespace

void register_bench_linear(CLI::App& bench) {
  auto options = std::make_shared<BenchLinearOptions>();
  CLI::App* command =
      bench.add_subcommand("linear", "GPU matrix products of a few rows: ours vs cuBLAS");
  command->add_option("--model", options->model, "a models/hf-configs name")->capture_default_str();
  command->add_option("--rows", options->rows, "comma-separated row counts (the decode batch)")
      ->capture_default_str();
  command->add_option("--iterations", options->iterations)->capture_default_str();
  command->add_option("--json", options->json_path, "write the rows as JSON");
  command->callback([options] { run_bench_linear(*options); });
}

}  // namespace oscar::cli
