#include "cli/commands.h"

#include <omp.h>

namespace oscar::cli {
namespace {
int g_exit_code = 0;
std::string g_program_path = "oscar";
std::vector<std::string> g_program_arguments;
}  // namespace

void register_commands(CLI::App& app) {
  register_generate(app);
  register_calibrate(app);
  register_eval(app);
  register_serve(app);
  register_bench(app);
}

int omp_threads() {
  return omp_get_max_threads();
}

void set_program_path(const char* path) {
  if (path != nullptr && *path != '\0') g_program_path = path;
}
void set_program_arguments(int argc, char** argv) {
  g_program_arguments.assign(argv, argv + argc);
}

const std::vector<std::string>& program_arguments() {
  return g_program_arguments;
}

const std::string& program_path() {
  return g_program_path;
}

int exit_code() {
  return g_exit_code;
}
void set_exit_code(int code) {
  g_exit_code = code;
}

}  // namespace oscar::cli
