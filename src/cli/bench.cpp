// oscar bench: performance measurements, one subcommand per kind (cpu, gpu, serve).
#include "cli/commands.h"

namespace oscar::cli {

void register_bench(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "Measure performance");
  bench->require_subcommand(1);
  register_bench_cpu(*bench);
}

}  // namespace oscar::cli
