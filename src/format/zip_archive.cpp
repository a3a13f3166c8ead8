#include "format/zip_archive.h"

#include <zip.h>

#include "util/error.h"

namespace oscar {
namespace {

std::string error_text(int code) {
  zip_error_t error;
  zip_error_init_with_code(&error, code);
  std::string text = zip_error_strerror(&error);
  zip_error_fini(&error);
  return text;
}

}  // namespace

ZipArchive::ZipArchive(zip_t* archive, std::string name,
                       std::shared_ptr<std::vector<std::byte>> bytes)
    : archive_(archive), name_(std::move(name)), bytes_(std::move(bytes)) {}

ZipArchive::ZipArchive(ZipArchive&& other) noexcept
    : archive_(other.archive_), name_(std::move(other.name_)), bytes_(std::move(other.bytes_)) {
  other.archive_ = nullptr;
}

ZipArchive& ZipArchive::operator=(ZipArchive&& other) noexcept {
  if (this != &other) {
    if (archive_ != nullptr) zip_discard(archive_);
    archive_ = other.archive_;
    name_ = std::move(other.name_);
    bytes_ = std::move(other.bytes_);
    other.archive_ = nullptr;
  }
  return *this;
}

ZipArchive::~ZipArchive() {
  if (archive_ != nullptr) zip_discard(archive_);
}

ZipArchive ZipArchive::open(const std::string& path) {
  int code = 0;
  zip_t* archive = zip_open(path.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &code);
  require(archive != nullptr, "{}: not a readable zip archive ({})", path, error_text(code));
  return ZipArchive(archive, path, nullptr);
}

ZipArchive ZipArchive::from_bytes(std::vector<std::byte> bytes, const std::string& name) {
  auto buffer = std::make_shared<std::vector<std::byte>>(std::move(bytes));
  zip_error_t error;
  zip_error_init(&error);
  zip_source_t* source = zip_source_buffer_create(buffer->data(), buffer->size(), 0, &error);
  require(source != nullptr, "{}: {}", name, zip_error_strerror(&error));
  zip_t* archive = zip_open_from_source(source, ZIP_RDONLY | ZIP_CHECKCONS, &error);
  if (archive == nullptr) {
    zip_source_free(source);
    const std::string text = zip_error_strerror(&error);
    zip_error_fini(&error);
    fail("{}: not a readable zip archive ({})", name, text);
  }
  zip_error_fini(&error);
  return ZipArchive(archive, name, std::move(buffer));
}

std::vector<std::string> ZipArchive::entry_names() const {
  std::vector<std::string> names;
  const zip_int64_t count = zip_get_num_entries(archive_, 0);
  for (zip_int64_t i = 0; i < count; ++i) {
    if (const char* entry = zip_get_name(archive_, zip_uint64_t(i), 0)) names.emplace_back(entry);
  }
  return names;
}

bool ZipArchive::contains(const std::string& entry) const {
  return zip_name_locate(archive_, entry.c_str(), 0) >= 0;
}

std::vector<std::byte> ZipArchive::read(const std::string& entry, uint64_t max_bytes) const {
  zip_stat_t stat;
  zip_stat_init(&stat);
  require(zip_stat(archive_, entry.c_str(), 0, &stat) == 0 && (stat.valid & ZIP_STAT_SIZE) != 0,
          "{}: no entry {}", name_, entry);
  require(stat.size <= max_bytes, "{}: entry {} holds {} bytes, more than the {} allowed", name_,
          entry, stat.size, max_bytes);
  zip_file_t* file = zip_fopen(archive_, entry.c_str(), 0);
  require(file != nullptr, "{}: entry {} cannot be opened ({})", name_, entry,
          zip_strerror(archive_));
  std::vector<std::byte> bytes(size_t(stat.size));
  const zip_int64_t got = zip_fread(file, bytes.data(), stat.size);
  // One more byte must not be there; a short or failed read (bad CRC, truncated data) is an error.
  std::byte extra{};
  const zip_int64_t beyond = got == zip_int64_t(stat.size) ? zip_fread(file, &extra, 1) : -1;
  const std::string file_error = zip_error_strerror(zip_file_get_error(file));
  zip_fclose(file);
  require(got == zip_int64_t(stat.size) && beyond == 0,
          "{}: entry {}: read {} of its {} bytes ({})", name_, entry, got, stat.size, file_error);
  return bytes;
}

}  // namespace oscar
