// Child processes without a shell: the program and its arguments go to posix_spawnp as an argument vector,
// so file names and JSON strings are always data, never code (no std::system, no popen anywhere).
#pragma once

#include <string>
#include <vector>

namespace calico {

struct ProcessResult {
  int exit_code = -1;  // the child's exit status; 128 + N when it was killed by signal N; -1: could not start
  std::string output;  // stdout and stderr together (when captured)
  std::string error;   // why it could not start (exit_code == -1)
  bool ok() const { return exit_code == 0; }
};

// Runs argv[0] (searched on PATH when it has no '/') with argv as its arguments and waits for it. With
// capture, stdout and stderr are collected into `output`; without, the child inherits them. stdin is
// /dev/null.
ProcessResult run_process(const std::vector<std::string>& argv, bool capture = true);

}  // namespace calico
