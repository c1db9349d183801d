// Gate reports: JSON for machines, Markdown for people, HTML + PNG plots through scripts/plot_report.py
// (matplotlib). Without python3/matplotlib the HTML is written here, without plots, and says so.
#include <fmt/format.h>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "calico/files.h"
#include "calico/harness.h"
#include "calico/process.h"

namespace calico::harness {
namespace {

using nlohmann::json;

double finite_or(double v, double alt) { return std::isfinite(v) ? v : alt; }

json tensor_json(const TensorDiff& d) {
  json j = {{"tensor", d.tensor},
            {"type", d.type},
            {"a", d.a_label},
            {"b", d.b_label},
            {"shape", d.shape},
            {"equal", d.equal()},
            {"passes", d.passes()},
            {"comparable", d.comparable},
            {"skipped", d.skipped},
            {"note", d.note},
            {"elements", d.elements},
            {"mismatches", d.mismatches},
            {"outside_tolerance", d.outside_tolerance},
            {"max_ulp", d.max_ulp},
            {"max_abs", finite_or(d.max_abs, 1e308)},
            {"max_rel", finite_or(d.max_rel, 1e308)},
            {"rows", d.rows},
            {"columns", d.columns}};
  if (d.has_first) {
    json idx = json::object();
    const auto axes = axis_names(d.tensor, d.first_index.size());
    for (size_t i = 0; i < axes.size(); ++i) idx[axes[i]] = d.first_index[i];
    j["first_mismatch"] = {{"run", d.run_b},
                           {"run_a", d.run_a},
                           {"rank", d.first_rank},
                           {"index", idx},
                           {"location", d.location()},
                           {"bits_a", fmt::format("{:#x}", d.first_bits_a)},
                           {"bits_b", fmt::format("{:#x}", d.first_bits_b)}};
    json hist = json::array();
    for (int b = 0; b < kUlpBins; ++b)
      if (d.ulp_histogram[b]) hist.push_back({{"bin", b}, {"label", ulp_bin_label(b)}, {"count", d.ulp_histogram[b]}});
    j["ulp_histogram"] = hist;
    json rows = json::array(), cols = json::array(), sample = json::array();
    for (auto [k, v] : d.by_row) rows.push_back({k, v});
    for (auto [k, v] : d.by_column) cols.push_back({k, v});
    for (size_t i = 0; i < d.sample.size() && i < 512; ++i) sample.push_back({d.sample[i].first, d.sample[i].second});
    j["mismatch_by_row"] = rows;
    j["mismatch_by_column"] = cols;
    j["mismatch_sample"] = sample;
  }
  return j;
}

json result_json(const GateResult& r) {
  const auto& o = r.options;
  const auto& p = r.provenance;
  json j;
  j["tool"] = "calico gate";
  j["passed"] = r.passed();
  j["provenance"] = {{"calico_version", p.calico_version},
                     {"git_commit", p.git_commit},
                     {"host", p.host},
                     {"cpu", p.cpu},
                     {"device", p.device},
                     {"compiler", p.compiler},
                     {"hdf5_version", p.hdf5_version},
                     {"command_line", p.command_line},
                     {"created_utc", p.created_utc}};
  j["options"] = {{"preset", o.preset},
                  {"tokens", o.tokens},
                  {"runs", o.runs},
                  {"routing", o.routing},
                  {"seed", o.seed},
                  {"baseline", o.baseline},
                  {"tolerance", o.tolerance.describe()},
                  {"backward", o.backward}};
  j["configs"] = json::array();
  for (const auto& e : r.entries)
    j["configs"].push_back({{"label", e.config.label()},
                            {"backend", e.config.backend},
                            {"ranks", e.config.ranks},
                            {"dtype", to_string(e.config.dtype)},
                            {"minibatch", e.config.minibatch},
                            {"comm_sms", e.config.comm_sms},
                            {"threads", e.config.threads},
                            {"dispatch", to_string(e.config.dispatch)},
                            {"combine", to_string(e.config.combine)},
                            {"trace", e.trace_path},
                            {"seconds", e.seconds},
                            {"error", e.error},
                            {"ok", e.error.empty()}});
  j["comparisons"] = json::array();
  j["failures"] = json::array();
  for (size_t i = 0; i < r.comparisons.size(); ++i) {
    const auto& c = r.comparisons[i];
    json diffs = json::array(), status = json::object();
    int64_t equal = 0, skipped = 0;
    for (const auto& d : c.diff.tensors) {
      // Worst status per tensor name over runs and ranks: different > within > equal > skipped.
      const std::string st = d.skipped ? "skipped" : d.equal() ? "equal" : d.passes() ? "within" : "different";
      auto rank_of = [](const std::string& x) {
        return x == "different" ? 3 : x == "within" ? 2 : x == "equal" ? 1 : 0;
      };
      if (!status.contains(d.tensor) || rank_of(st) > rank_of(status[d.tensor].get<std::string>()))
        status[d.tensor] = st;
      equal += d.equal() && !d.skipped;
      skipped += d.skipped;
      if (!d.equal()) diffs.push_back(tensor_json(d));
      if (!d.passes())
        j["failures"].push_back({{"comparison", i},
                                 {"kind", c.kind},
                                 {"a", c.a},
                                 {"b", c.b},
                                 {"tensor", d.tensor},
                                 {"location", d.has_first ? d.location() : d.note},
                                 {"mismatches", d.mismatches},
                                 {"max_ulp", d.max_ulp}});
    }
    j["comparisons"].push_back({{"kind", c.kind},
                                {"a", c.a},
                                {"b", c.b},
                                {"equal", c.diff.equal()},
                                {"passes", c.diff.passes()},
                                {"tensors_compared", c.diff.tensors.size()},
                                {"tensors_equal", equal},
                                {"tensors_skipped", skipped},
                                {"tensor_status", status},
                                {"differences", diffs}});
  }
  j["notes"] = r.notes;
  return j;
}

std::string markdown(const GateResult& r, const std::vector<std::string>& plots) {
  const auto& o = r.options;
  const auto& p = r.provenance;
  std::ostringstream s;
  s << "# Calico determinism gate: " << (r.passed() ? "PASSED" : "FAILED") << "\n\n";
  s << fmt::format("- date (UTC): {}\n- git commit: {}\n- host: {}; cpu: {}\n- device: {}\n- compiler: {}; HDF5 {}\n",
                   p.created_utc, p.git_commit, p.host, p.cpu, p.device, p.compiler, p.hdf5_version);
  s << fmt::format(
      "- preset `{}`, {} global tokens, routing `{}`, seed {}, {} runs per config, baseline `{}`, "
      "tolerance {}\n",
      o.preset, o.tokens, o.routing, o.seed, o.runs, o.baseline, o.tolerance.describe());
  if (!p.command_line.empty()) s << "- command: `" << p.command_line << "`\n";
  s << "\n## Configs\n\n| config | status | seconds | trace |\n|---|---|---|---|\n";
  for (const auto& e : r.entries)
    s << fmt::format("| {} | {} | {:.2f} | `{}` |\n", e.config.label(), e.error.empty() ? "ran" : "ERROR: " + e.error,
                     e.seconds, e.trace_path);
  s << "\n## Comparisons\n\n| kind | A | B | tensors | differing | verdict |\n|---|---|---|---|---|---|\n";
  for (const auto& c : r.comparisons)
    s << fmt::format("| {} | {} | {} | {} | {} | {} |\n", c.kind, c.a, c.b, c.diff.tensors.size(),
                     c.diff.mismatching_tensors(),
                     c.diff.equal() ? "bitwise equal" : (c.diff.passes() ? "within tolerance" : "**DIFFERENT**"));
  bool any = false;
  for (const auto& c : r.comparisons)
    for (const auto& d : c.diff.tensors) {
      if (d.equal()) continue;
      if (!any) s << "\n## Differences\n\n";
      any = true;
      s << fmt::format("### `{}`: {} vs {} ({} {} vs {})\n\n", d.tensor, c.a, c.b, c.kind, d.a_label, d.b_label);
      if (!d.comparable) {
        s << "Not comparable: " << d.note << "\n\n";
        continue;
      }
      s << fmt::format(
          "- {} of {} elements differ ({} outside the tolerance); max ULP {}, max abs {:.4g}, max rel "
          "{:.4g}\n",
          d.mismatches, d.elements, d.outside_tolerance, d.max_ulp, d.max_abs, d.max_rel);
      s << fmt::format("- first mismatch: **{}**, bits {:#x} vs {:#x}\n", d.location(), d.first_bits_a, d.first_bits_b);
      s << "- ULP histogram:";
      for (int b = 0; b < kUlpBins; ++b)
        if (d.ulp_histogram[b]) s << fmt::format(" [{}]: {};", ulp_bin_label(b), d.ulp_histogram[b]);
      s << "\n\n";
    }
  if (!r.notes.empty()) {
    s << "\n## Notes\n\n";
    for (const auto& n : r.notes) s << "- " << n << "\n";
  }
  if (!plots.empty()) {
    s << "\n## Plots\n\n";
    for (const auto& f : plots)
      s << fmt::format("![{}]({})\n\n", std::filesystem::path(f).stem().string(),
                       std::filesystem::path(f).filename().string());
  }
  return s.str();
}

void write_file(const std::string& path, const std::string& text) { write_text_file(path, text, "--report-dir"); }

std::string html_escape(const std::string& s) {
  std::string o;
  for (char c : s) o += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : std::string(1, c);
  return o;
}

}  // namespace

void write_gate_reports(GateResult& r) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(r.options.report_dir, ec);
  require(fs::is_directory(r.options.report_dir), "--report-dir: cannot create the folder '{}'{}",
          r.options.report_dir, ec ? ": " + ec.message() : "");
  std::string name = r.options.name;
  if (name.empty()) {
    const std::time_t now = std::time(nullptr);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y-%m-%d-%H%M%S", std::gmtime(&now));
    name = stamp;
  }
  const std::string stem = (fs::path(r.options.report_dir) / ("gate-" + name)).string();
  r.json_path = stem + ".json";
  r.markdown_path = stem + ".md";
  r.html_path = stem + ".html";
  json j = result_json(r);
  j["files"] = {{"json", r.json_path}, {"markdown", r.markdown_path}, {"html", r.html_path}};
  write_file(r.json_path, j.dump(1));

  std::vector<std::string> plots;
  std::string plot_note;
  if (r.options.plots) {
    const std::string script =
        r.options.plot_script.empty() ? scripts_dir() + "/plot_report.py" : r.options.plot_script;
    // An argument vector, never a shell line: the report folder and name are data (issue 9).
    const ProcessResult res = run_process({"/usr/bin/python3", script, r.json_path});
    std::istringstream lines(res.output);
    for (std::string line; std::getline(lines, line);)
      if (line.rfind("plot: ", 0) == 0) plots.push_back(line.substr(6));
    if (!res.ok()) plot_note = "plot script failed: " + (res.error.empty() ? res.output : res.error);
  } else {
    plot_note = "plots disabled (--no-plots)";
  }
  r.plot_paths = plots;
  if (!plot_note.empty()) r.notes.push_back(plot_note);
  write_file(r.markdown_path, markdown(r, plots));
  if (!fs::exists(r.html_path) || plots.empty()) {
    // Fallback: the Markdown in a <pre>, so the HTML exists even without python3/matplotlib.
    write_file(r.html_path, "<!doctype html><meta charset=utf-8><title>Calico gate</title><pre>" +
                                html_escape(markdown(r, plots)) + "</pre>\n");
  }
  j["files"]["plots"] = plots;
  j["notes"] = r.notes;
  write_file(r.json_path, j.dump(1));
}

}  // namespace calico::harness
