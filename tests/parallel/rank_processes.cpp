#include "rank_processes.h"

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <thread>

#include "util/error.h"

namespace oscar::testing {

RankProcess start_rank(const std::function<void()>& body) {
  int fds[2];
  require(::pipe(fds) == 0, "pipe failed");
  const pid_t pid = ::fork();
  require(pid >= 0, "fork failed");
  if (pid == 0) {
    ::close(fds[0]);
    int code = 0;
    std::string message;
    try {
      body();
    } catch (const std::exception& e) {
      message = e.what();
      code = 1;
    }
    if (!message.empty()) {
      [[maybe_unused]] const ssize_t written = ::write(fds[1], message.data(), message.size());
    }
    ::_exit(code);  // no gtest teardown, no static destructors in the child
  }
  ::close(fds[1]);
  return {pid, fds[0]};
}

RankOutcome finish_rank(const RankProcess& process, std::chrono::steady_clock::time_point limit) {
  RankOutcome outcome;
  int status = 0;
  while (::waitpid(process.pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > limit) {
      outcome.hung = true;
      ::kill(process.pid, SIGKILL);
      ::waitpid(process.pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (WIFEXITED(status)) outcome.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) outcome.signal = WTERMSIG(status);
  char buffer[4096];
  ssize_t n = 0;
  while ((n = ::read(process.message_fd, buffer, sizeof(buffer))) > 0) {
    outcome.message.append(buffer, size_t(n));
  }
  ::close(process.message_fd);
  return outcome;
}

}  // namespace oscar::testing
