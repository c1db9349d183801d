// Subcommand registry of the `calico` CLI. Each cli/cmd_*.cpp registers itself with a static Registrar:
// its setup function adds options to the CLI11 subcommand and returns the function that runs it.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace calico::cli {

using Runner = std::function<int()>;                 // returns the process exit code
using Setup = std::function<Runner(CLI::App& sub)>;  // adds options to `sub`, returns the runner

struct CommandInfo {
  std::string name, description;
  Setup setup;
};

std::vector<CommandInfo>& registry();

struct Registrar {
  Registrar(std::string name, std::string description, Setup setup) {
    registry().push_back({std::move(name), std::move(description), std::move(setup)});
  }
};

}  // namespace calico::cli
