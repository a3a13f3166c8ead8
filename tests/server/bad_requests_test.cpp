// Bad requests get the right 4xx status with an OpenAI-style error object naming the parameter at
// fault, and the server goes on serving.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server_fixture.h"

namespace oscar::testing {
namespace {

using nlohmann::json;

struct BadRequest {
  const char* name;
  const char* method;
  const char* path;
  std::string body;
  int status;
  const char* param;  // expected "param" of the error ("": null)
};

// Sends `request` whole in one write over a fresh loopback connection and returns everything the
// server answers until it closes (the side that sends is left open: httplib drops a connection
// whose peer has shut it down before it answers). A client library that writes a body
// piece by piece can find the connection closed by a server that refused the request on its
// headers, and never read the refusal; here the server has the request whole before it answers.
std::string raw_exchange(int port, const std::string& request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_GE(fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(uint16_t(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string reply;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0 &&
      ::send(fd, request.data(), request.size(), 0) == ssize_t(request.size())) {
    char buffer[4096];
    for (ssize_t n; (n = ::recv(fd, buffer, sizeof(buffer), 0)) > 0;)
      reply.append(buffer, size_t(n));
  }
  ::close(fd);
  return reply;
}

std::string repeated(const std::string& word, int times) {
  std::string text;
  for (int i = 0; i < times; ++i) text += word;
  return text;
}

// The fixture serves a context of 512 tokens.
const std::vector<BadRequest> kBadRequests = {
    {"malformed JSON", "POST", "/v1/completions", R"({"prompt": "hi", "max_tokens": )", 400, ""},
    {"not an object", "POST", "/v1/completions", R"(["hi"])", 400, ""},
    {"max_tokens a string", "POST", "/v1/completions", R"({"prompt": "hi", "max_tokens": "ten"})",
     400, "max_tokens"},
    {"temperature a string", "POST", "/v1/completions", R"({"prompt": "hi", "temperature": "hot"})",
     400, "temperature"},
    {"messages a number", "POST", "/v1/chat/completions", R"({"messages": 3})", 400, "messages"},
    {"message without role", "POST", "/v1/chat/completions", R"({"messages": [{"content": "hi"}]})",
     400, "messages"},
    {"stream not a boolean", "POST", "/v1/completions", R"({"prompt": "hi", "stream": "yes"})", 400,
     "stream"},
    {"invalid UTF-8 in the prompt", "POST", "/v1/completions", "{\"prompt\": \"abc\xff\xfe\"}", 400,
     ""},
    {"lone surrogate in the prompt", "POST", "/v1/completions", R"({"prompt": "abc\udc80"})", 400,
     ""},
    {"empty prompt", "POST", "/v1/completions", R"({"prompt": ""})", 400, "prompt"},
    {"missing prompt", "POST", "/v1/completions", R"({"max_tokens": 4})", 400, "prompt"},
    {"token id outside the vocabulary", "POST", "/v1/completions",
     R"({"prompt": [1, 2, 99999999]})", 400, "prompt"},
    {"empty prompt list", "POST", "/v1/completions", R"({"prompt": []})", 400, "prompt"},
    {"prompt list of numbers and strings", "POST", "/v1/completions", R"({"prompt": [1, "a"]})",
     400, "prompt"},
    {"prompt list holding a list of strings", "POST", "/v1/completions", R"({"prompt": [["a"]]})",
     400, "prompt"},
    {"prompt list holding an empty prompt", "POST", "/v1/completions", R"({"prompt": ["hi", ""]})",
     400, "prompt"},
    {"prompt list of 257", "POST", "/v1/completions",
     json({{"prompt", std::vector<std::string>(257, "hi")}}).dump(), 400, "prompt"},
    {"prompt longer than the context", "POST", "/v1/completions",
     json({{"prompt", repeated("word ", 600)}}).dump(), 400, "prompt"},
    {"max_tokens 0", "POST", "/v1/completions", R"({"prompt": "hi", "max_tokens": 0})", 400,
     "max_tokens"},
    {"max_tokens negative", "POST", "/v1/completions", R"({"prompt": "hi", "max_tokens": -5})", 400,
     "max_tokens"},
    {"max_tokens beyond the context", "POST", "/v1/completions",
     R"({"prompt": "hi", "max_tokens": 10000})", 400, "max_tokens"},
    {"temperature negative", "POST", "/v1/completions", R"({"prompt": "hi", "temperature": -1})",
     400, "temperature"},
    {"n 0", "POST", "/v1/completions", R"({"prompt": "hi", "n": 0})", 400, "n"},
    {"n above 16", "POST", "/v1/chat/completions",
     R"({"messages": [{"role": "user", "content": "hi"}], "n": 17})", 400, "n"},
    {"prompts times n above 256", "POST", "/v1/completions",
     json({{"prompt", std::vector<std::string>(20, "hi")}, {"n", 16}}).dump(), 400, "n"},
    {"wrong model", "POST", "/v1/completions", R"({"model": "gpt-4", "prompt": "hi"})", 404,
     "model"},
    {"logprobs above 5", "POST", "/v1/completions", R"({"prompt": "hi", "logprobs": 6})", 400,
     "logprobs"},
    {"logprobs negative", "POST", "/v1/completions", R"({"prompt": "hi", "logprobs": -1})", 400,
     "logprobs"},
    {"top_logprobs above 20", "POST", "/v1/chat/completions",
     R"({"messages": [{"role": "user", "content": "hi"}], "logprobs": true, "top_logprobs": 21})",
     400, "top_logprobs"},
    {"top_logprobs without logprobs", "POST", "/v1/chat/completions",
     R"({"messages": [{"role": "user", "content": "hi"}], "top_logprobs": 2})", 400,
     "top_logprobs"},
    {"logit_bias not an object", "POST", "/v1/completions",
     R"({"prompt": "hi", "logit_bias": [1]})", 400, "logit_bias"},
    {"logit_bias key not a token id", "POST", "/v1/completions",
     R"({"prompt": "hi", "logit_bias": {"the": 5}})", 400, "logit_bias"},
    {"logit_bias key outside the vocabulary", "POST", "/v1/completions",
     R"({"prompt": "hi", "logit_bias": {"99999999": 5}})", 400, "logit_bias"},
    {"logit_bias value above 100", "POST", "/v1/completions",
     R"({"prompt": "hi", "logit_bias": {"5": 101}})", 400, "logit_bias"},
    {"best_of above 1", "POST", "/v1/completions", R"({"prompt": "hi", "best_of": 3})", 400,
     "best_of"},
    {"frequency_penalty above 2", "POST", "/v1/completions",
     R"({"prompt": "hi", "frequency_penalty": 2.5})", 400, "frequency_penalty"},
    {"presence_penalty a string", "POST", "/v1/chat/completions",
     R"({"messages": [{"role": "user", "content": "hi"}], "presence_penalty": "high"})", 400,
     "presence_penalty"},
    {"truncate_prompt_tokens 0", "POST", "/v1/completions",
     R"({"prompt": "hi", "truncate_prompt_tokens": 0})", 400, "truncate_prompt_tokens"},
    {"min_tokens negative", "POST", "/v1/completions", R"({"prompt": "hi", "min_tokens": -1})", 400,
     "min_tokens"},
    {"min_tokens above max_tokens", "POST", "/v1/completions",
     R"({"prompt": "hi", "max_tokens": 4, "min_tokens": 5})", 400, "min_tokens"},
    {"stop_token_ids not a list", "POST", "/v1/completions",
     R"({"prompt": "hi", "stop_token_ids": 7})", 400, "stop_token_ids"},
    {"stop_token_ids outside the vocabulary", "POST", "/v1/completions",
     R"({"prompt": "hi", "stop_token_ids": [7, 99999999]})", 400, "stop_token_ids"},
    {"suffix", "POST", "/v1/completions", R"({"prompt": "hi", "suffix": " end"})", 400, "suffix"},
    {"response_format json_schema", "POST", "/v1/chat/completions",
     R"({"messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "json_schema"}})",
     400, "response_format"},
    {"response_format a string", "POST", "/v1/completions",
     R"({"prompt": "hi", "response_format": "json"})", 400, "response_format"},
    {"tools", "POST", "/v1/chat/completions",
     R"({"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "function": {"name": "f"}}]})",
     400, "tools"},
    {"unknown route", "POST", "/v1/embeddings", R"({"input": "hi"})", 404, ""},
    {"tokenize without a prompt", "POST", "/tokenize", R"({"text": "hi"})", 400, "prompt"},
    {"detokenize without tokens", "POST", "/detokenize", R"({"tokens": "hi"})", 400, "tokens"},
    {"tokenize for another model", "POST", "/tokenize", R"({"model": "gpt-4", "prompt": "hi"})",
     404, "model"},
    {"unknown page", "GET", "/v2/models", "", 404, ""},
    {"body over the size limit", "POST", "/v1/completions",
     json({{"prompt", repeated("x", 70 * 1024)}}).dump(), 413, ""},
};

void expect_error_object(const std::string& body, int status, const std::string& param,
                         const std::string& label) {
  const json reply = json::parse(body, nullptr, false);
  ASSERT_TRUE(reply.is_object() && reply.contains("error") && reply["error"].is_object())
      << label << ": " << body;
  const json& error = reply["error"];
  ASSERT_TRUE(error.contains("message") && error["message"].is_string()) << label << ": " << body;
  EXPECT_FALSE(error["message"].get<std::string>().empty()) << label;
  ASSERT_TRUE(error.contains("type") && error["type"].is_string()) << label << ": " << body;
  ASSERT_TRUE(error.contains("param")) << label << ": " << body;
  ASSERT_TRUE(error.contains("code")) << label << ": " << body;
  EXPECT_EQ(error["code"], status) << label;
  if (param.empty()) {
    EXPECT_TRUE(error["param"].is_null()) << label << ": " << body;
  } else {
    EXPECT_EQ(error["param"], param) << label << ": " << body;
  }
}

TEST(BadRequests, GetTheRightStatusAndAnErrorObject) {
  TestServerOptions options;
  options.max_request_bytes = 64 * 1024;
  TestServer server(options);
  httplib::Client client = server.client();
  for (const BadRequest& bad : kBadRequests) {
    const httplib::Result result = std::string(bad.method) == "GET"
                                       ? client.Get(bad.path)
                                       : client.Post(bad.path, bad.body, "application/json");
    ASSERT_TRUE(result) << bad.name << ": " << httplib::to_string(result.error());
    EXPECT_EQ(result->status, bad.status) << bad.name << ": " << result->body;
    expect_error_object(result->body, bad.status, bad.param, bad.name);
  }
  const StreamedResponse after = server.stream("The quick brown fox", 8);
  EXPECT_TRUE(after.ok()) << after.error;
  EXPECT_EQ(server.idle_snapshot().full_pages_used, 0);
}

TEST(BadRequests, ChunkedBodiesAreRefusedUnread) {
  TestServerOptions options;
  options.max_request_bytes = 64 * 1024;
  TestServer server(options);
  // A small chunked body, sent whole: the 411 reply with its error object.
  const std::string body = greedy_body("hi", 4).dump();
  const std::string reply = raw_exchange(
      server.port(),
      fmt::format(
          "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
          "Transfer-Encoding: chunked\r\n\r\n{:x}\r\n{}\r\n0\r\n\r\n",
          body.size(), body));
  ASSERT_TRUE(reply.starts_with("HTTP/1.1 411")) << reply;
  const size_t reply_body = reply.find("\r\n\r\n");
  ASSERT_NE(reply_body, std::string::npos) << reply;
  expect_error_object(reply.substr(reply_body + 4), 411, "", "chunked body");
  // A chunked body in `chunks` pieces of `chunk`, without a Content-Length, as a client library
  // streams it.
  auto post_chunked = [&](const std::string& chunk, int chunks) {
    int sent = 0;
    return server.client().Post(
        "/v1/completions",
        [&](size_t, httplib::DataSink& sink) {
          if (sent++ < chunks) return sink.write(chunk.data(), chunk.size());
          sink.done();
          return true;
        },
        "application/json");
  };
  // Four times the size limit: refused before it is read. The server may close the connection
  // before the client has sent it all, leaving no reply to read.
  const httplib::Result large = post_chunked(std::string(64 * 1024, ' '), 4);
  if (large) {
    EXPECT_EQ(large->status, 411) << large->body;
  }
  const StreamedResponse after = server.stream("The quick brown fox", 8);
  EXPECT_TRUE(after.ok()) << after.error;
}

TEST(BadRequests, ApiKeyIsRequiredWhenConfigured) {
  TestServerOptions options;
  options.api_key = "sesame";
  TestServer server(options);
  const std::string body = greedy_body("hi", 4).dump();
  for (const char* header : {"", "Bearer wrong", "sesame", "Basic c2VzYW1l"}) {
    httplib::Client anonymous(server.connection().url);
    httplib::Headers headers;
    if (*header != '\0') headers.emplace("Authorization", header);
    for (const char* path : {"/v1/completions", "/v1/chat/completions"}) {
      const httplib::Result result = anonymous.Post(path, headers, body, "application/json");
      ASSERT_TRUE(result);
      EXPECT_EQ(result->status, 401) << path << " with '" << header << "'";
      expect_error_object(result->body, 401, "", header);
    }
    const httplib::Result models = anonymous.Get("/v1/models", headers);
    ASSERT_TRUE(models);
    EXPECT_EQ(models->status, 401);
  }
  const StreamedResponse refused =
      stream_completion({server.connection().url, ""}, "/v1/completions", greedy_body("hi", 4));
  EXPECT_EQ(refused.http_status, 401);
  EXPECT_NE(refused.error.find("authentication_error"), std::string::npos) << refused.error;
  const StreamedResponse keyed = server.stream("hi", 4);  // the fixture sends the key
  EXPECT_TRUE(keyed.ok()) << keyed.error;
  // Probes stay open: load balancers and Prometheus carry no key.
  httplib::Client anonymous(server.connection().url);
  EXPECT_EQ(anonymous.Get("/health")->status, 200);
  EXPECT_EQ(anonymous.Get("/metrics")->status, 200);
}

}  // namespace
}  // namespace oscar::testing
