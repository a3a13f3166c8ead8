#include "cli/commands.h"

#include <omp.h>

namespace oscar::cli {
namespace {
int g_exit_code = 0;
}  // namespace

void register_commands(CLI::App& app) {
  register_generate(app);
  register_calibrate(app);
  register_eval(app);
  register_serve(app);
  register_bench(app);
}

int omp_threads() { return omp_get_max_threads(); }

int exit_code() { return g_exit_code; }
void set_exit_code(int code) { g_exit_code = code; }

}  // namespace oscar::cli
