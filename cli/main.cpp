// `calico`: one binary, one subcommand per job (run, diff, gate, simulate, sweep, probe-mma, ...).
// Subcommands register themselves (cli/command.h); this file parses and dispatches, and turns a
// calico::Error into a one-line message and exit code 2.
#include <algorithm>
#include <cstdio>
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
    return app.exit(e);
  } catch (const calico::Error& e) {
    std::fprintf(stderr, "calico: error: %s\n", e.what());
    return 2;
  }
  try {
    for (auto* sub : app.get_subcommands()) return runners.at(sub)();
  } catch (const calico::Error& e) {
    std::fprintf(stderr, "calico: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "calico: internal error: %s\n", e.what());
    return 3;
  }
  return 1;
}
