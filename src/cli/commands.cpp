#include "cli/commands.h"

namespace oscar::cli {
namespace {
int g_exit_code = 0;
}  // namespace

void register_commands(CLI::App& app) {
  register_generate(app);
}

int exit_code() { return g_exit_code; }
void set_exit_code(int code) { g_exit_code = code; }

}  // namespace oscar::cli
