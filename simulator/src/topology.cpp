// Topologies as data: data/topologies/NAME.json, one object per parameter {"value": v, "source": "..."}, so
// every number states where it comes from (a datasheet, our measurements, or the calibration fit).
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "calico/error.h"
#include "calico/json_fields.h"
#include "calico/simulator.h"

namespace calico::sim {

namespace {

// The parameters in file order: name, pointer to a double field (ints go through the int table).
struct DoubleField {
  const char* name;
  double Topology::*field;
};
struct IntField {
  const char* name;
  int Topology::*field;
};
constexpr IntField kIntFields[] = {{"max_gpus", &Topology::max_gpus}, {"sms", &Topology::sms},
                                   {"hops", &Topology::hops},         {"tile_m", &Topology::tile_m},
                                   {"tile_n", &Topology::tile_n}};
constexpr double kMaxTopologyValue = 1e9, kMinTopologyRate = 1e-2;
constexpr DoubleField kDoubleFields[] = {
    {"link_gbps", &Topology::link_gbps},
    {"link_efficiency", &Topology::link_efficiency},
    {"reverse_overhead", &Topology::reverse_overhead},
    {"hop_latency_ns", &Topology::hop_latency_ns},
    {"fence_ns", &Topology::fence_ns},
    {"flag_write_ns", &Topology::flag_write_ns},
    {"poll_ns", &Topology::poll_ns},
    {"push_store_gbps_per_sm", &Topology::push_store_gbps_per_sm},
    {"pull_bytes_in_flight_per_sm", &Topology::pull_bytes_in_flight_per_sm},
    {"remote_mem_latency_ns", &Topology::remote_mem_latency_ns},
    {"hbm_gbps", &Topology::hbm_gbps},
    {"local_copy_gbps", &Topology::local_copy_gbps},
    {"bf16_tflops", &Topology::bf16_tflops},
    {"gemm_efficiency", &Topology::gemm_efficiency},
    {"mxfp8_speedup", &Topology::mxfp8_speedup},
    {"task_overhead_ns", &Topology::task_overhead_ns},
    {"kernel_launch_ns", &Topology::kernel_launch_ns},
    {"nccl_launch_ns", &Topology::nccl_launch_ns},
    {"nccl_channel_bytes", &Topology::nccl_channel_bytes},
    {"nccl_channel_gbps", &Topology::nccl_channel_gbps},
};
// Second-cut parameters (issue 11): optional, so older topology files still load; a missing one keeps the
// Topology default and says so in `sources`.
constexpr DoubleField kOptionalFields[] = {
    {"lsu_issue_ns", &Topology::lsu_issue_ns},
    {"tma_push_gbps_per_sm", &Topology::tma_push_gbps_per_sm},
    {"tma_pull_bytes_in_flight_per_sm", &Topology::tma_pull_bytes_in_flight_per_sm},
    {"tma_issue_ns", &Topology::tma_issue_ns},
    {"tma_completion_ns", &Topology::tma_completion_ns},
    {"ce_gbps", &Topology::ce_gbps},
    {"ce_launch_ns", &Topology::ce_launch_ns},
    {"stage_fixed_ns", &Topology::stage_fixed_ns},
    {"sm_peer_overhead", &Topology::sm_peer_overhead},
    {"port_peer_overhead", &Topology::port_peer_overhead},
    {"poll_lanes", &Topology::poll_lanes},
    {"epilogue_store_gbps_per_sm", &Topology::epilogue_store_gbps_per_sm},
};

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  require(bool(in), "cannot open {}", p.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

void Topology::validate() const {
  require(max_gpus >= 1 && max_gpus <= 4096, "topology {}: max_gpus must be in [1, 4096], got {}", name, max_gpus);
  require(sms >= 2 && sms <= 1024, "topology {}: sms must be in [2, 1024], got {}", name, sms);
  require(hops >= 1 && hops <= 8, "topology {}: hops must be in [1, 8], got {}", name, hops);
  require(tile_m >= 1 && tile_n >= 1, "topology {}: tile_m and tile_n must be >= 1, got {} and {}", name, tile_m,
          tile_n);
  // Bounded above so that no stage time or bandwidth can overflow (issue 9): 1e9 is a second in ns, 1e9 GB/s.
  for (const auto& f : kDoubleFields)
    require(this->*f.field >= 0 && this->*f.field <= kMaxTopologyValue && std::isfinite(this->*f.field),
            "topology {}: {} must be finite and in [0, {}], got {}", name, f.name, kMaxTopologyValue, this->*f.field);
  for (const auto& f : kOptionalFields)
    require(this->*f.field >= 0 && this->*f.field <= kMaxTopologyValue && std::isfinite(this->*f.field),
            "topology {}: {} must be finite and in [0, {}], got {}", name, f.name, kMaxTopologyValue, this->*f.field);
  require(tma_push_gbps_per_sm > 0 && tma_pull_bytes_in_flight_per_sm > 0 && ce_gbps > 0 && poll_lanes >= 1,
          "topology {}: tma_push_gbps_per_sm, tma_pull_bytes_in_flight_per_sm and ce_gbps must be > 0, poll_lanes "
          ">= 1", name);
  require(link_gbps > 0 && link_efficiency > 0 && link_efficiency <= 1.0,
          "topology {}: link_gbps must be > 0 and link_efficiency in (0, 1], got {} and {}", name, link_gbps,
          link_efficiency);
  require(push_store_gbps_per_sm >= kMinTopologyRate && pull_bytes_in_flight_per_sm >= kMinTopologyRate &&
              hbm_gbps >= kMinTopologyRate && local_copy_gbps >= kMinTopologyRate &&
              bf16_tflops >= kMinTopologyRate && gemm_efficiency > 0 && gemm_efficiency <= 1.0 &&
              nccl_channel_bytes >= kMinTopologyRate && nccl_channel_gbps >= kMinTopologyRate &&
              link_gbps >= kMinTopologyRate && mxfp8_speedup >= kMinTopologyRate,
          "topology {}: rates, in-flight bytes and nccl_channel_bytes must be >= {} and gemm_efficiency in (0, 1]",
          name, kMinTopologyRate);
}

Topology parse_topology_json(const std::string& json_text, const std::string& origin) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json_text);
  } catch (const std::exception& e) {
    throw Error(fmt::format("{}: not valid JSON: {}", origin, e.what()));
  }
  // Checked fields (issue 9): integers integral and in range, every number finite, unknown keys an error.
  Topology t;
  JsonFields top(j, origin);
  t.name = top.string("name", origin);
  t.description = top.string("description", "");
  t.gpu = top.string("gpu", "");
  const auto& p = top.object("params");
  top.finish();
  JsonFields params(p, origin + ": params");
  auto read = [&](const char* name) -> JsonFields {
    JsonFields v(params.object(name), params.path(name));
    t.sources[name] = v.string("source");
    return v;
  };
  for (const auto& f : kIntFields) {
    JsonFields v = read(f.name);
    t.*f.field = static_cast<int>(v.integer("value", 0, 1 << 20));
    v.finish();
  }
  for (const auto& f : kDoubleFields) {
    JsonFields v = read(f.name);
    t.*f.field = v.number("value", 0.0, kMaxTopologyValue);
    v.finish();
  }
  for (const auto& f : kOptionalFields) {  // the second cut's parameters: the struct's defaults when absent
    if (!params.has(f.name)) {
      t.sources[f.name] = "default of calico::sim::Topology (not in the topology file)";
      continue;
    }
    JsonFields v = read(f.name);
    t.*f.field = v.number("value", 0.0, kMaxTopologyValue);
    v.finish();
  }
  params.finish();
  t.validate();
  return t;
}

std::string topology_to_json(const Topology& t) {
  nlohmann::ordered_json j;
  j["name"] = t.name;
  j["description"] = t.description;
  j["gpu"] = t.gpu;
  auto& p = j["params"];
  auto src = [&](const char* n) { auto it = t.sources.find(n); return it == t.sources.end() ? "" : it->second; };
  for (const auto& f : kIntFields) p[f.name] = {{"value", t.*f.field}, {"source", src(f.name)}};
  for (const auto& f : kDoubleFields) p[f.name] = {{"value", t.*f.field}, {"source", src(f.name)}};
  for (const auto& f : kOptionalFields) p[f.name] = {{"value", t.*f.field}, {"source", src(f.name)}};
  return j.dump(2) + "\n";
}

std::vector<std::string> topology_names() {
  std::vector<std::string> names;
  const auto dir = std::filesystem::path(data_dir()) / "topologies";
  if (std::filesystem::is_directory(dir))
    for (const auto& e : std::filesystem::directory_iterator(dir))
      if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

Topology load_topology(const std::string& name_or_path) {
  std::filesystem::path p = name_or_path;
  if (!std::filesystem::exists(p) || std::filesystem::is_directory(p))
    p = std::filesystem::path(data_dir()) / "topologies" / (name_or_path + ".json");
  if (!std::filesystem::exists(p)) {
    std::string known;
    for (const auto& n : topology_names()) known += (known.empty() ? "" : ", ") + n;
    throw Error(fmt::format("--topology: unknown topology '{}' (no file {}); known: {}", name_or_path, p.string(),
                            known));
  }
  return parse_topology_json(read_file(p), p.string());
}

}  // namespace calico::sim
