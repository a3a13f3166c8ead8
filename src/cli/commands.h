#pragma once
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace oscar::cli {

// Each subcommand lives in its own file and registers itself here; its callback runs the command
// and records the exit code (errors inside callbacks are oscar::Error, reported by main).
void register_commands(CLI::App& app);
void register_generate(CLI::App& app);
void register_bench(CLI::App& app);
void register_eval(CLI::App& app);
void register_eval_ppl(CLI::App& eval);
void register_eval_niah(CLI::App& eval);
void register_eval_attention_error(CLI::App& eval);
void register_calibrate(CLI::App& app);
void register_serve(CLI::App& app);
void register_bench_cpu(CLI::App& bench);
void register_bench_serve(CLI::App& bench);
void register_bench_calibrate(CLI::App& bench);
void register_bench_decode_attention(CLI::App& bench);   // GPU
void register_bench_all_reduce(CLI::App& bench);         // GPU
void register_bench_decode_step(CLI::App& bench);        // GPU
void register_bench_linear(CLI::App& bench);             // GPU
void register_bench_prefill(CLI::App& bench);            // GPU
void register_bench_prefill_attention(CLI::App& bench);  // GPU
// The program as the user ran it (argv[0]), for the commands that messages tell them to run.
void set_program_path(const char* path);
const std::string& program_path();
// Every argument (argv[0] first), for the tensor-parallel ranks oscar starts as itself.
void set_program_arguments(int argc, char** argv);
const std::vector<std::string>& program_arguments();
int exit_code();
int omp_threads();  // threads the CPU backend uses by default
void set_exit_code(int code);

}  // namespace oscar::cli
