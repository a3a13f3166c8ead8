#pragma once
// The safetensors format (https://huggingface.co/docs/safetensors): an 8-byte little-endian
// header length, a JSON header naming each tensor's dtype, shape and byte range, then the data.
// The reader trusts nothing in the header: every range, size and dtype is checked against the
// file before a view is handed out.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "format/tensor.h"
#include "util/mapped_file.h"

namespace oscar {

class SafetensorsFile {
 public:
  // Maps and validates `path`; throws Error naming the file and the offending tensor.
  static std::unique_ptr<SafetensorsFile> open(const std::string& path);

  const std::string& path() const { return file_.path(); }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::vector<TensorView>& tensors() const { return tensors_; }
  const TensorView* find(const std::string& name) const;  // nullptr when absent
  const TensorView& get(const std::string& name) const;   // throws when absent

 private:
  explicit SafetensorsFile(MappedFile file) : file_(std::move(file)) {}
  void parse();

  MappedFile file_;
  std::map<std::string, std::string> metadata_;
  std::vector<TensorView> tensors_;
  std::map<std::string, size_t> index_;
};

struct TensorToWrite {
  std::string name;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  std::vector<std::byte> data;
};

TensorToWrite make_f32_tensor(std::string name, std::vector<int64_t> shape,
                              const std::vector<float>& values);

// Writes tensors in the given order (so equal inputs give byte-identical files), atomically.
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata);

}  // namespace oscar
