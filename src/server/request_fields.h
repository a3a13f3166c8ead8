#pragma once
// Reading one field of a request body (nlohmann::json, or ordered_json where key order matters):
// absent and null are alike, and a value of the wrong type is a 400 naming the field.
#include <fmt/format.h>

#include "server/api_error.h"

namespace oscar {

template <typename Json>
const Json* field(const Json& body, const char* key) {
  const auto it = body.find(key);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

template <typename Json>
bool boolean(const Json& body, const char* key, bool fallback) {
  const Json* value = field(body, key);
  if (value == nullptr) return fallback;
  if (!value->is_boolean())
    throw invalid_request(fmt::format("'{}' must be true or false", key), key);
  return value->template get<bool>();
}

}  // namespace oscar
