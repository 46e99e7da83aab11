#ifndef REDLOCK_TEST_CLI_TOOL_PROCESS_HPP
#define REDLOCK_TEST_CLI_TOOL_PROCESS_HPP

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

namespace redlock::test {

// How one run of the redlock tool ended.
struct tool_result {
  int exit_code = -1;  // as a shell reports it: 128 + N when killed by signal N
  std::string out;
  std::string err;
  std::chrono::milliseconds took{0};
};

// The redlock tool (REDLOCK_CLI_PATH) running as a child of the test: stdin from /dev/null,
// stdout and stderr into files of `scratch`, REDLOCK_NODES set to `nodes` (removed when empty).
// The destructor kills and reaps a run that is still going, so a failed assertion never leaves a
// process behind.
class tool_process {
 public:
  tool_process(const std::vector<std::string>& args, const std::string& nodes,
               const std::filesystem::path& scratch);
  ~tool_process();
  tool_process(const tool_process&) = delete;
  tool_process& operator=(const tool_process&) = delete;

  pid_t pid() const noexcept { return pid_; }
  void signal(int number) const;

  // Reaps the run if it has ended. True while it is still going.
  bool running();

  // Waits for the end, at most `limit`; throws std::runtime_error (after killing the run) when it
  // does not end in time.
  tool_result wait(std::chrono::milliseconds limit);

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
  std::filesystem::path out_path_;
  std::filesystem::path err_path_;
  std::chrono::steady_clock::time_point started_;
  std::chrono::steady_clock::time_point ended_;
};

// Runs the tool to its end (at most `limit`).
tool_result run_tool(const std::vector<std::string>& args, const std::string& nodes,
                     const std::filesystem::path& scratch,
                     std::chrono::milliseconds limit = std::chrono::seconds(20));

// A fresh empty directory under the system's temporary directory, removed by the destructor.
class scratch_dir {
 public:
  scratch_dir();
  ~scratch_dir();
  scratch_dir(const scratch_dir&) = delete;
  scratch_dir& operator=(const scratch_dir&) = delete;

  const std::filesystem::path& path() const noexcept { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

}  // namespace redlock::test

#endif
