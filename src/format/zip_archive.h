#pragma once
// Read access to the entries of a zip archive, through libzip (Debian's libzip-dev). Sizes come
// from the archive's directory and are checked against the caller's limit before any entry is
// read, so a hostile archive cannot make a reader allocate more than it allows; libzip checks each
// entry's CRC as it is read.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

typedef struct zip zip_t;

namespace oscar {

class ZipArchive {
 public:
  // Opens the archive at `path`; throws Error naming the file.
  static ZipArchive open(const std::string& path);
  // An archive held in memory; `name` names it in errors.
  static ZipArchive from_bytes(std::vector<std::byte> bytes, const std::string& name);

  ZipArchive(ZipArchive&&) noexcept;
  ZipArchive& operator=(ZipArchive&&) noexcept;
  ~ZipArchive();

  const std::string& name() const { return name_; }
  std::vector<std::string> entry_names() const;
  bool contains(const std::string& entry) const;
  // The entry's bytes; throws Error when it is absent, larger than `max_bytes`, or unreadable.
  std::vector<std::byte> read(const std::string& entry, uint64_t max_bytes) const;

 private:
  ZipArchive(zip_t* archive, std::string name, std::shared_ptr<std::vector<std::byte>> bytes);
  zip_t* archive_ = nullptr;
  std::string name_;
  std::shared_ptr<std::vector<std::byte>> bytes_;  // from_bytes: the buffer libzip reads
};

}  // namespace oscar
