#pragma once
// Text corpora for calibration and evaluation. Accepted forms, by file name:
//   *.xz     documents separated by the byte 0x1e (as in models/testbed/calib.xz), xz-compressed;
//   *.jsonl  one JSON object per line with a string field "text";
//   other    plain UTF-8 text, split into documents at 0x1e bytes when it has any.
#include <string>
#include <vector>

namespace oscar {

std::vector<std::string> read_documents(const std::string& path);

}  // namespace oscar
