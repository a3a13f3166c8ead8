#include "format/documents.h"

#include <sstream>

#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/file_io.h"
#include "util/xz.h"

namespace oscar {
namespace {

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::vector<std::string> split_records(const std::string& text) {
  std::vector<std::string> documents;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\x1e', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) documents.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return documents;
}

std::vector<std::string> parse_jsonl(const std::string& text, const std::string& path) {
  std::vector<std::string> documents;
  std::istringstream lines(text);
  std::string line;
  int line_number = 0;
  while (std::getline(lines, line)) {
    ++line_number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json record;
    try {
      record = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& error) {
      fail("{}:{}: not valid JSON: {}", path, line_number, error.what());
    }
    const auto field = record.is_object() ? record.find("text") : record.end();
    require(record.is_object() && field != record.end() && field->is_string(),
            "{}:{}: expected an object with a string field \"text\"", path, line_number);
    documents.push_back(field->get<std::string>());
  }
  return documents;
}

}  // namespace

std::vector<std::string> read_documents(const std::string& path) {
  const std::string raw = read_file(path);
  std::vector<std::string> documents;
  if (ends_with(path, ".xz")) {
    documents = split_records(decompress_xz(raw, path));
  } else if (ends_with(path, ".jsonl")) {
    documents = parse_jsonl(raw, path);
  } else {
    documents = split_records(raw);
  }
  require(!documents.empty(), "{}: holds no text", path);
  return documents;
}

}  // namespace oscar
