#pragma once
// Running the real `oscar` program as a user does: to completion, or in the background (a server).
#include <sys/types.h>

#include <chrono>
#include <string>

namespace oscar::testing {

struct CommandResult {
  int exit_code = -1;
  std::string stdout_text;
  std::string stderr_text;
};

// The oscar program of this build tree.
std::string oscar_program();
// A shell command line, run to completion.
CommandResult run_command(const std::string& command_line);
// `arguments` go through the shell.
CommandResult run_oscar(const std::string& arguments);

// `oscar ARGUMENTS` in the background, its stderr in a file; SIGTERM and reaped on destruction.
class BackgroundOscar {
 public:
  explicit BackgroundOscar(const std::string& arguments);
  ~BackgroundOscar();
  BackgroundOscar(const BackgroundOscar&) = delete;
  BackgroundOscar& operator=(const BackgroundOscar&) = delete;

  // The first stderr line holding `fragment`, waiting up to `timeout`; empty when none came.
  std::string wait_for_stderr_line(const std::string& fragment, std::chrono::seconds timeout);
  std::string stderr_text() const;
  // Waits up to `timeout` for it to end by itself: its exit code, or -1 when it is still running
  // (the destructor then ends it) or a signal ended it.
  int wait_for_exit(std::chrono::seconds timeout);
  // Sends SIGTERM and returns the exit code (-1 when it did not exit within `timeout`).
  int terminate(std::chrono::seconds timeout);
  pid_t pid() const { return pid_; }

 private:
  std::string stderr_path_;
  pid_t pid_ = -1;
};

}  // namespace oscar::testing
