#include "cli/run_record.h"

#include <fmt/chrono.h>

#include <chrono>
#include <ctime>
#include <string>

#include "cli/commands.h"

namespace oscar::cli {

nlohmann::json run_record() {
  std::string command = "oscar";
  const std::vector<std::string>& arguments = program_arguments();
  for (size_t i = 1; i < arguments.size(); ++i) command += " " + arguments[i];
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  return {{"command", command},
          {"commit", source_version()},
          {"date", fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", fmt::gmtime(now))}};
}

nlohmann::json with_run_record(nlohmann::json root) {
  const nlohmann::json record = run_record();
  for (const auto& [key, value] : record.items()) {
    if (!root.contains(key)) root[key] = value;
  }
  return root;
}

}  // namespace oscar::cli
