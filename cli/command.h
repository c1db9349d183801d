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

// For unsigned options (seeds, limits): CLI11 would wrap "-1" to 2^64-1; this refuses any sign.
inline CLI::Validator unsigned_value() {
  return CLI::Validator(
      [](std::string& s) {
        const auto p = s.find_first_not_of(" \t");
        return p != std::string::npos && (s[p] == '-' || s[p] == '+')
                   ? std::string("must be a non-negative integer without a sign, got '") + s + "'"
                   : std::string();
      },
      "UINT");
}

struct Registrar {
  Registrar(std::string name, std::string description, Setup setup) {
    registry().push_back({std::move(name), std::move(description), std::move(setup)});
  }
};

}  // namespace calico::cli
