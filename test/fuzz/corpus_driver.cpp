// Replays files through LLVMFuzzerTestOneInput, for compilers without libFuzzer: the fuzz target
// keeps building everywhere and its corpus runs as a regression test.
//
// Usage: resp_fuzz FILE_OR_DIRECTORY...   (directories are walked recursively)
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

bool read_file(const std::filesystem::path& path, std::vector<std::uint8_t>& out) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  out.clear();
  std::uint8_t block[4096];
  std::size_t n = 0;
  while ((n = std::fread(block, 1, sizeof block, f)) > 0)
    out.insert(out.end(), block, block + n);
  const bool ok = std::ferror(f) == 0;
  std::fclose(f);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::filesystem::path> files;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path arg = argv[i];
    std::error_code ec;
    if (std::filesystem::is_directory(arg, ec)) {
      for (const auto& entry : std::filesystem::recursive_directory_iterator(arg, ec)) {
        if (entry.is_regular_file()) files.push_back(entry.path());
      }
    } else if (std::filesystem::is_regular_file(arg, ec)) {
      files.push_back(arg);
    } else {
      std::fprintf(stderr, "resp_fuzz: skipping %s: not a file or directory\n", argv[i]);
    }
  }
  std::sort(files.begin(), files.end());  // a stable order makes a failing input easy to spot

  std::size_t ran = 0;
  std::vector<std::uint8_t> data;
  for (const std::filesystem::path& path : files) {
    if (!read_file(path, data)) {
      std::fprintf(stderr, "resp_fuzz: cannot read %s\n", path.c_str());
      return 1;
    }
    // An empty vector's data() may be null; the fuzzer contract never passes null.
    static const std::uint8_t empty = 0;
    LLVMFuzzerTestOneInput(data.empty() ? &empty : data.data(), data.size());
    ++ran;
  }
  std::printf("%zu inputs ran\n", ran);
  return ran == 0 ? 1 : 0;
}
