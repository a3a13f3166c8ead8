#include "parallel/rank_messages.h"

#include <cstring>

#include "util/error.h"

namespace oscar {
namespace {

constexpr uint32_t kFrameMagic = 0x5054534f;  // "OSTP"
// No frame is larger: a longer length is a stream out of step or another program.
constexpr uint64_t kMaxPayloadBytes = uint64_t(1) << 32;

struct FrameHeader {
  uint32_t magic = kFrameMagic;
  uint32_t type = 0;
  uint64_t payload_bytes = 0;
};

}  // namespace

const char* to_string(FrameType type) {
  switch (type) {
    case FrameType::hello:
      return "hello";
    case FrameType::welcome:
      return "welcome";
    case FrameType::step:
      return "step";
    case FrameType::step_done:
      return "step_done";
    case FrameType::failure:
      return "failure";
    case FrameType::shutdown:
      return "shutdown";
    case FrameType::collective:
      return "collective";
  }
  return "unknown";
}

void send_frame(TcpSocket& socket, FrameType type, std::span<const std::byte> payload,
                Deadline deadline, const std::string& peer) {
  const FrameHeader header{kFrameMagic, uint32_t(type), payload.size()};
  socket.send_all(std::as_bytes(std::span(&header, 1)), deadline, peer);
  socket.send_all(payload, deadline, peer);
}

Frame receive_frame(TcpSocket& socket, Deadline deadline, const std::string& peer) {
  FrameHeader header;
  socket.receive_all(std::as_writable_bytes(std::span(&header, 1)), deadline, peer);
  require(header.magic == kFrameMagic, "{}: sent bytes that are not an oscar rank frame", peer);
  require(
      header.type >= uint32_t(FrameType::hello) && header.type <= uint32_t(FrameType::collective),
      "{}: unknown frame type {}", peer, header.type);
  require(header.payload_bytes <= kMaxPayloadBytes, "{}: a frame of {} bytes", peer,
          header.payload_bytes);
  Frame frame;
  frame.type = FrameType(header.type);
  frame.payload.resize(header.payload_bytes);
  socket.receive_all(frame.payload, deadline, peer);
  return frame;
}

Frame receive_expected(TcpSocket& socket, FrameType expected, Deadline deadline,
                       const std::string& peer) {
  Frame frame = receive_frame(socket, deadline, peer);
  if (frame.type == FrameType::failure) {
    fail("{} failed: {}", peer,
         std::string(reinterpret_cast<const char*>(frame.payload.data()), frame.payload.size()));
  }
  require(frame.type == expected, "{}: expected a {} frame, got {}", peer, to_string(expected),
          to_string(frame.type));
  return frame;
}

void ByteWriter::put_bytes(std::span<const std::byte> data) {
  bytes.insert(bytes.end(), data.begin(), data.end());
}

void ByteWriter::put_string(const std::string& text) {
  put(uint64_t(text.size()));
  put_bytes(std::as_bytes(std::span(text.data(), text.size())));
}

std::string ByteReader::get_string() {
  const auto size = get<uint64_t>();
  require(size <= bytes_.size() - offset_, "{}: a string of {} bytes past the end", what_, size);
  std::string text(size, '\0');
  take(text.data(), size);
  return text;
}

void ByteReader::expect_end() const {
  require(offset_ == bytes_.size(), "{}: {} bytes left over", what_, bytes_.size() - offset_);
}

void ByteReader::take(void* out, size_t count) {
  require(count <= bytes_.size() - offset_, "{}: ends after {} bytes, {} more expected", what_,
          bytes_.size(), count);
  std::memcpy(out, bytes_.data() + offset_, count);
  offset_ += count;
}

bool PlannedSequence::operator==(const PlannedSequence& b) const {
  const PlannedSequence& a = *this;
  if (a.pages.size() != b.pages.size()) return false;
  for (size_t i = 0; i < a.pages.size(); ++i) {
    const LogicalPage &x = a.pages[i], &y = b.pages[i];
    if (x.full != y.full || x.quantized != y.quantized || x.band != y.band) return false;
  }
  return a.tokens == b.tokens && a.cached_tokens == b.cached_tokens &&
         a.full_precision_until == b.full_precision_until && a.all_logits == b.all_logits;
}

std::vector<std::byte> encode_step_plan(const StepPlan& plan) {
  ByteWriter out;
  out.put(plan.step_index);
  out.put(uint64_t(plan.sequences.size()));
  for (const PlannedSequence& sequence : plan.sequences) {
    out.put(uint64_t(sequence.tokens.size()));
    out.put_bytes(std::as_bytes(std::span(sequence.tokens)));
    out.put(uint64_t(sequence.pages.size()));
    for (const LogicalPage& page : sequence.pages) {
      out.put(page.full);
      out.put(page.quantized);
      out.put(page.band);
    }
    out.put(sequence.cached_tokens);
    out.put(sequence.full_precision_until);
    out.put(uint8_t(sequence.all_logits));
  }
  return std::move(out.bytes);
}

StepPlan decode_step_plan(std::span<const std::byte> bytes) {
  ByteReader in(bytes, "step plan");
  StepPlan plan;
  plan.step_index = in.get<int64_t>();
  const auto count = in.get<uint64_t>();
  require(count <= bytes.size(), "step plan: {} sequences in {} bytes", count, bytes.size());
  plan.sequences.resize(count);
  for (PlannedSequence& sequence : plan.sequences) {
    const auto tokens = in.get<uint64_t>();
    require(tokens <= bytes.size() / sizeof(int32_t), "step plan: {} tokens in {} bytes", tokens,
            bytes.size());
    sequence.tokens.resize(tokens);
    in.get_bytes(std::as_writable_bytes(std::span(sequence.tokens)));
    const auto pages = in.get<uint64_t>();
    require(pages <= bytes.size(), "step plan: {} pages in {} bytes", pages, bytes.size());
    sequence.pages.resize(pages);
    for (LogicalPage& page : sequence.pages) {
      page.full = in.get<int32_t>();
      page.quantized = in.get<int32_t>();
      page.band = in.get<int32_t>();
    }
    sequence.cached_tokens = in.get<int64_t>();
    sequence.full_precision_until = in.get<int64_t>();
    sequence.all_logits = in.get<uint8_t>() != 0;
  }
  in.expect_end();
  return plan;
}

}  // namespace oscar
