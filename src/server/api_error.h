#pragma once
// An error the HTTP API reports to the client as OpenAI-style error JSON with an HTTP status.
#include <stdexcept>
#include <string>

namespace oscar {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string type, const std::string& message, std::string param = {})
      : std::runtime_error(message),
        status_(status),
        type_(std::move(type)),
        param_(std::move(param)) {}

  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::string& param() const { return param_; }

  // {"error": {"message", "type", "param", "code"}}
  std::string to_json() const;

 private:
  int status_;
  std::string type_;
  std::string param_;
};

inline ApiError invalid_request(const std::string& message, const std::string& param = {}) {
  return ApiError(400, "invalid_request_error", message, param);
}

}  // namespace oscar
