// oscar: one program, one subcommand per task (generate, calibrate, eval, bench, serve).
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/run_record.h"
#include "cli/tensor_parallel_options.h"
#include "util/error.h"

int main(int argc, char** argv) {
  CLI::App app{"oscar: LLM inference with a 2-bit OSCAR KV cache"};
  app.require_subcommand(1);
  app.set_version_flag("--version",
                       std::string("oscar 0.1.0 (") + oscar::cli::source_version() + ")");
  oscar::cli::set_program_path(argv[0]);
  oscar::cli::set_program_arguments(argc, argv);
  oscar::cli::register_commands(app);
  std::vector<std::string> arguments = oscar::cli::expand_tensor_parallel_alias(argc, argv);
  std::vector<char*> pointers;
  for (std::string& argument : arguments) pointers.push_back(argument.data());
  try {
    app.parse(int(pointers.size()), pointers.data());
  } catch (const CLI::ParseError& error) {
    return app.exit(error);
  } catch (const oscar::Error& error) {
    fmt::print(stderr, "oscar: error: {}\n", error.what());
    return 1;
  } catch (const std::exception& error) {
    // Not an anticipated failure (out of memory, a library error): still one line, never a crash.
    fmt::print(stderr, "oscar: internal error: {}\n", error.what());
    return 2;
  }
  return oscar::cli::exit_code();
}
