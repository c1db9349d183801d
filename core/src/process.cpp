// run_process: posix_spawnp with an argument vector (calico/process.h).
#include "calico/process.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "calico/error.h"

extern char** environ;

namespace calico {

ProcessResult run_process(const std::vector<std::string>& argv, bool capture) {
  require(!argv.empty() && !argv[0].empty(), "run_process: empty command");
  ProcessResult res;
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int fds[2] = {-1, -1};
  if (capture && pipe2(fds, O_CLOEXEC) != 0) {
    res.error = fmt::format("pipe: {}", std::strerror(errno));
    return res;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  if (capture) {
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  }
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (capture) close(fds[1]);
  if (rc != 0) {
    if (capture) close(fds[0]);
    res.error = fmt::format("cannot start '{}': {}", argv[0], std::strerror(rc));
    return res;
  }
  if (capture) {
    char buf[4096];
    for (;;) {
      const ssize_t n = read(fds[0], buf, sizeof buf);
      if (n > 0) {
        if (res.output.size() < (16u << 20)) res.output.append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        break;
      }
    }
    close(fds[0]);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) {
      res.error = fmt::format("waitpid: {}", std::strerror(errno));
      return res;
    }
  if (WIFEXITED(status))
    res.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    res.exit_code = 128 + WTERMSIG(status);
  // posix_spawnp reports a missing program as exit 127 from the child on glibc; say so.
  if (res.exit_code == 127 && res.output.empty()) res.error = fmt::format("cannot start '{}'", argv[0]);
  return res;
}

}  // namespace calico
