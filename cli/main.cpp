// `calico`: one binary, one subcommand per job (run, diff, gate, simulate, sweep, probe-mma, ...).
// Subcommands register themselves (cli/command.h); this file parses and dispatches, and holds the one
// exit-code contract (printed by --help): 0 success, 1 a gate or diff that found differences, 2 bad input
// (every parse or validation error, CLI11's included, and paths that cannot be read or written), 3 an
// internal error (a bug).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>

#include "calico/error.h"
#include "command.h"

namespace calico::cli {
std::vector<CommandInfo>& registry() {
  static std::vector<CommandInfo> commands;
  return commands;
}
}  // namespace calico::cli

int main(int argc, char** argv) {
  using namespace calico::cli;
  CLI::App app{"calico: deterministic MoE kernels, their bit-exact CPU reference, simulator and harness"};
  app.require_subcommand(1);
  app.footer(
      "Exit status: 0 success; 1 a gate or diff that found differences; 2 bad input (a parse or validation\n"
      "error, a file that cannot be read or written; the message names the argument or file); 3 an internal\n"
      "error (a bug: please report it).");
  app.set_version_flag("--version", "calico 0.1.0");
  auto commands = registry();
  std::sort(commands.begin(), commands.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  std::map<CLI::App*, Runner> runners;
  for (const auto& c : commands) {
    CLI::App* sub = app.add_subcommand(c.name, c.description);
    runners[sub] = c.setup(*sub);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version are "errors" with exit code 0; every real parse error is bad input: 2.
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const calico::Error& e) {
    std::fprintf(stderr, "calico: error: %s\n", e.what());
    return 2;
  }
  try {
    for (auto* sub : app.get_subcommands()) return runners.at(sub)();
  } catch (const calico::Error& e) {
    std::fprintf(stderr, "calico: error: %s\n", e.what());
    return 2;
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the user gave that cannot be created, read or written: bad input, not a bug.
    std::fprintf(stderr, "calico: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "calico: internal error: %s\n", e.what());
    return 3;
  }
  return 1;
}
