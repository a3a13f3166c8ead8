#include "server/api_error.h"

#include <nlohmann/json.hpp>

namespace oscar {

std::string ApiError::to_json() const {
  nlohmann::json error = {{"message", what()}, {"type", type_}, {"code", status_}};
  error["param"] = param_.empty() ? nlohmann::json() : nlohmann::json(param_);
  return nlohmann::json({{"error", error}})
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace oscar
