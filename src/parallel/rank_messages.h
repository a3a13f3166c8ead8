#pragma once
// The frames ranks exchange over TCP, and the encoding of their payloads. A frame is a header
// {magic, type, payload bytes} and the payload; integers are in the host's byte order (the ranks
// of one job run the same oscar build on the same architecture).
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kvcache/sequence_pages.h"
#include "parallel/tcp_socket.h"

namespace oscar {

enum class FrameType : uint32_t {
  hello = 1,       // follower -> rank 0: who it is
  welcome = 2,     // rank 0 -> follower: the unique id and the rank table
  step = 3,        // rank 0 -> follower: a step plan
  step_done = 4,   // follower -> rank 0: the step ran
  failure = 5,     // either way: the sender failed; the payload is its message
  shutdown = 6,    // rank 0 -> follower: no more steps
  collective = 7,  // a communicator's values (parallel/tcp_communicator.h)
};
const char* to_string(FrameType type);

struct Frame {
  FrameType type = FrameType::failure;
  std::vector<std::byte> payload;
};

void send_frame(TcpSocket& socket, FrameType type, std::span<const std::byte> payload,
                Deadline deadline, const std::string& peer);
// The next frame; Error when it is malformed, the peer closed, or the deadline passed. A failure
// frame is returned like any other (the caller names the rank that sent it).
Frame receive_frame(TcpSocket& socket, Deadline deadline, const std::string& peer);
// The next frame, which must be of `expected` type; a failure frame becomes Error "<peer> failed:
// <its message>".
Frame receive_expected(TcpSocket& socket, FrameType expected, Deadline deadline,
                       const std::string& peer);

// Appends and reads plain values; the reader's Error names `what` when the payload runs short.
class ByteWriter {
 public:
  template <typename T>
  void put(const T& value) {
    const auto* p = reinterpret_cast<const std::byte*>(&value);
    bytes.insert(bytes.end(), p, p + sizeof(T));
  }
  void put_bytes(std::span<const std::byte> data);
  void put_string(const std::string& text);
  std::vector<std::byte> bytes;
};

class ByteReader {
 public:
  ByteReader(std::span<const std::byte> bytes, std::string what)
      : bytes_(bytes), what_(std::move(what)) {}
  template <typename T>
  T get() {
    T value;
    take(&value, sizeof(T));
    return value;
  }
  void get_bytes(std::span<std::byte> out) { take(out.data(), out.size()); }
  std::string get_string();
  void expect_end() const;

 private:
  void take(void* out, size_t count);
  std::span<const std::byte> bytes_;
  size_t offset_ = 0;
  std::string what_;
};

// One sequence of a step as the followers need it: its new tokens and its page table, which rank
// 0's scheduler has already reserved (followers hold no pools of their own).
struct PlannedSequence {
  std::vector<int32_t> tokens;
  std::vector<LogicalPage> pages;
  int64_t cached_tokens = 0;  // positions continue from here
  int64_t full_precision_until = 0;
  bool all_logits = false;
  bool operator==(const PlannedSequence& other) const;
};

struct StepPlan {
  int64_t step_index = 0;
  std::vector<PlannedSequence> sequences;
  bool operator==(const StepPlan&) const = default;
};

std::vector<std::byte> encode_step_plan(const StepPlan& plan);
StepPlan decode_step_plan(std::span<const std::byte> bytes);

}  // namespace oscar
