#pragma once
// What every JSON record of a bench or eval command carries about its run: the command line, the
// source's version (git describe at build time; cmake/SourceVersion.cmake) and the UTC time, so a
// result names its commit and date without anyone transcribing them.
#include <nlohmann/json.hpp>

namespace oscar::cli {

// `git describe --always --dirty` of the tree the program was built from, or "unknown".
const char* source_version();

// {"command": "oscar <arguments>", "commit": source_version(), "date": "YYYY-MM-DDTHH:MM:SSZ"}.
nlohmann::json run_record();

// `root` with run_record()'s keys added (a key of the root's own is kept).
nlohmann::json with_run_record(nlohmann::json root);

}  // namespace oscar::cli
