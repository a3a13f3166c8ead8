#include "util/xz.h"

#include <lzma.h>

#include <cstdint>

#include "util/error.h"

namespace oscar {

std::string decompress_xz(std::string_view compressed, const std::string& source_name) {
  lzma_stream stream = LZMA_STREAM_INIT;
  if (lzma_stream_decoder(&stream, UINT64_MAX, LZMA_CONCATENATED) != LZMA_OK) {
    fail("{}: cannot start the xz decoder", source_name);
  }
  std::string output;
  output.resize(compressed.size() * 4 + 4096);
  stream.next_in = reinterpret_cast<const uint8_t*>(compressed.data());
  stream.avail_in = compressed.size();
  size_t produced = 0;
  while (true) {
    if (produced == output.size()) output.resize(output.size() * 2);
    stream.next_out = reinterpret_cast<uint8_t*>(output.data() + produced);
    stream.avail_out = output.size() - produced;
    const lzma_ret status = lzma_code(&stream, LZMA_FINISH);
    produced = output.size() - stream.avail_out;
    if (status == LZMA_STREAM_END) break;
    if (status != LZMA_OK) {
      lzma_end(&stream);
      fail("{}: not a valid xz stream (liblzma error {})", source_name, int(status));
    }
  }
  lzma_end(&stream);
  output.resize(produced);
  return output;
}

}  // namespace oscar
