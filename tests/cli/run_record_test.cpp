// The run record every JSON result of oscar's bench and eval commands carries: the command line,
// the source's version (also in --version) and the UTC time of the run.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/run_record.h"
#include "oscar_command.h"

namespace oscar::cli {
namespace {

using testing::CommandResult;
using testing::run_command;
using testing::run_oscar;

// Seconds between a record's "date" and now.
double seconds_ago(const std::string& date) {
  std::tm parts{};
  EXPECT_TRUE(std::regex_match(date, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)"))) << date;
  std::sscanf(date.c_str(), "%d-%d-%dT%d:%d:%dZ", &parts.tm_year, &parts.tm_mon, &parts.tm_mday,
              &parts.tm_hour, &parts.tm_min, &parts.tm_sec);
  parts.tm_year -= 1900;
  parts.tm_mon -= 1;
  return std::difftime(std::time(nullptr), timegm(&parts));
}

TEST(RunRecord, AddsCommandCommitAndDateAndKeepsTheRootsOwnKeys) {
  const std::vector<std::string> saved = program_arguments();
  char program[] = "/somewhere/oscar", command[] = "bench", option[] = "--json";
  char* argv[] = {program, command, option};
  set_program_arguments(3, argv);
  const nlohmann::json record = with_run_record({{"rows", {1, 2}}, {"date", "given"}});
  std::vector<char*> restored;
  for (const std::string& argument : saved) restored.push_back(const_cast<char*>(argument.c_str()));
  set_program_arguments(int(restored.size()), restored.data());
  EXPECT_EQ(record["rows"], nlohmann::json({1, 2}));
  EXPECT_EQ(record["date"], "given");
  EXPECT_EQ(record["command"], "oscar bench --json");
  EXPECT_EQ(record["commit"], source_version());
  EXPECT_LE(std::abs(seconds_ago(run_record()["date"].get<std::string>())), 5.0);
}

// --version names the commit the program was built from: in a git checkout, HEAD's (with -dirty
// where the tree had changes when it was built).
TEST(RunRecordCommand, VersionNamesTheSourcesCommit) {
  const CommandResult version = run_oscar("--version");
  ASSERT_EQ(version.exit_code, 0) << version.stderr_text;
  std::smatch match;
  ASSERT_TRUE(std::regex_search(version.stdout_text, match, std::regex(R"(oscar \S+ \((\S+)\))")))
      << version.stdout_text;
  const CommandResult head = run_command(std::string("git -C ") + OSCAR_SOURCE_DIR +
                                         " rev-parse --short=7 HEAD 2>/dev/null");
  if (head.exit_code == 0 && !head.stdout_text.empty()) {
    EXPECT_EQ(match[1].str().substr(0, 7), head.stdout_text.substr(0, 7)) << version.stdout_text;
  } else {
    EXPECT_FALSE(match[1].str().empty());
  }
}

TEST(RunRecordCommand, PerplexityJsonNamesItsCommandCommitAndDate) {
  const CommandResult version = run_oscar("--version");
  const CommandResult ppl = run_oscar("eval ppl --windows 1 --context 128 --json");
  ASSERT_EQ(ppl.exit_code, 0) << ppl.stderr_text;
  const nlohmann::json report = nlohmann::json::parse(ppl.stdout_text);
  EXPECT_EQ(report["command"], "oscar eval ppl --windows 1 --context 128 --json");
  EXPECT_NE(version.stdout_text.find("(" + report["commit"].get<std::string>() + ")"),
            std::string::npos)
      << version.stdout_text << report.dump();
  EXPECT_LE(seconds_ago(report["date"].get<std::string>()), 600.0);
}

}  // namespace
}  // namespace oscar::cli
