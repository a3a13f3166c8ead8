#include "oscar_command.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "support/test_paths.h"

namespace oscar::testing {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

std::string oscar_program() {
  return std::string(OSCAR_BINARY_DIR) + "/src/cli/oscar";
}

CommandResult run_oscar(const std::string& arguments) {
  return run_command(oscar_program() + " " + arguments);
}

CommandResult run_command(const std::string& command_line) {
  const std::string err_path = make_temp_dir("cli") + "/stderr";
  const std::string command = command_line + " 2>" + err_path;
  CommandResult result;
  FILE* pipe = popen(command.c_str(), "r");
  std::array<char, 4096> buffer{};
  size_t n = 0;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    result.stdout_text.append(buffer.data(), n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.stderr_text = read_text(err_path);
  return result;
}

BackgroundOscar::BackgroundOscar(const std::string& arguments)
    : stderr_path_(make_temp_dir("background") + "/stderr") {
  // exec replaces the shell, so that the signal reaches oscar itself.
  const std::string command =
      "exec " + oscar_program() + " " + arguments + " >/dev/null 2>" + stderr_path_;
  pid_ = fork();
  if (pid_ == 0) {
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
}

BackgroundOscar::~BackgroundOscar() {
  if (pid_ > 0) terminate(std::chrono::seconds(30));
}

std::string BackgroundOscar::stderr_text() const {
  return read_text(stderr_path_);
}

std::string BackgroundOscar::wait_for_stderr_line(const std::string& fragment,
                                                  std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    std::istringstream lines(stderr_text());
    std::string line;
    while (std::getline(lines, line)) {
      if (line.find(fragment) != std::string::npos) return line;
    }
    if (waitpid(pid_, nullptr, WNOHANG) == pid_) {  // it exited: the line will not come
      pid_ = -1;
      return {};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return {};
}

int BackgroundOscar::wait_for_exit(std::chrono::seconds timeout) {
  if (pid_ <= 0) return -1;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (waitpid(pid_, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int BackgroundOscar::terminate(std::chrono::seconds timeout) {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (waitpid(pid_, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      pid_ = -1;
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace oscar::testing
