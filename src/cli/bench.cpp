// oscar bench: performance measurements, one subcommand per kind (cpu, serve, calibrate, and on the
// GPU decode-attention, decode-step, linear, prefill and prefill-attention).
#include "cli/commands.h"

namespace oscar::cli {

void register_bench(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "Measure performance");
  bench->require_subcommand(1);
  register_bench_cpu(*bench);
  register_bench_serve(*bench);
  register_bench_calibrate(*bench);
  register_bench_decode_attention(*bench);
  register_bench_all_reduce(*bench);
  register_bench_decode_step(*bench);
  register_bench_linear(*bench);
  register_bench_prefill(*bench);
  register_bench_prefill_attention(*bench);
}

}  // namespace oscar::cli
