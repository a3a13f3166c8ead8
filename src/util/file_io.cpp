#include "util/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "util/error.h"

namespace oscar {

std::string read_file(const std::string& path) {
  // POSIX reads rather than an ifstream: an ifstream "opens" a directory and then reads nothing,
  // which would hand back an empty string instead of an error.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("{}: cannot open: {}", path, std::strerror(errno));
  struct stat info {};
  if (::fstat(fd, &info) != 0 || S_ISDIR(info.st_mode)) {
    ::close(fd);
    fail("{}: cannot read: not a file", path);
  }
  std::string contents;
  if (S_ISREG(info.st_mode)) contents.reserve(size_t(info.st_size));
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int saved = errno;
      ::close(fd);
      fail("{}: read error: {}", path, std::strerror(saved));
    }
    contents.append(buffer, size_t(n));
  }
  ::close(fd);
  return contents;
}

void write_file_atomically(const std::string& path, std::span<const std::byte> bytes) {
  // A name unique to this call (process id and a per-process counter), so that two threads
  // writing the same path never share, truncate or rename each other's temporary file.
  static std::atomic<uint64_t> next_temporary{0};
  const std::string temporary =
      fmt::format("{}.tmp.{}.{}", path, ::getpid(), next_temporary.fetch_add(1));
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("{}: cannot create: {}", temporary, std::strerror(errno));
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int saved = errno;
      ::close(fd);
      ::unlink(temporary.c_str());
      fail("{}: write failed: {}", temporary, std::strerror(saved));
    }
    written += size_t(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(temporary.c_str());
    fail("{}: cannot flush to disk", temporary);
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    const int saved = errno;
    ::unlink(temporary.c_str());
    fail("{}: cannot move into place: {}", path, std::strerror(saved));
  }
}

void write_file_atomically(const std::string& path, std::string_view text) {
  write_file_atomically(path, std::as_bytes(std::span(text.data(), text.size())));
}

bool file_exists(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0;
}

}  // namespace oscar
