// Deterministic data (DESIGN 1): a counter-based generator, the routing generators (uniform, Zipf, adversarial,
// HDF5 replay) and random bf16 tensors. Every value is a function of (seed, stream, global index) only, so the
// global batch is the same for every EP size R, thread count and run.
//
// Portability: only integer hashing and IEEE +,*,/ (plus calico_exp from numerics.h) are used, never libm,
// so the same seed gives the same bits with any compiler or C library. The one exception is Zipf's
// popularity table, which calls std::pow in double once per expert (documented at make_zipf).
#include "calico/data.h"

#include <hdf5.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "calico/error.h"
#include "calico/files.h"

namespace calico {

// ---------------------------------------------------------------------------------------------------------
// Counter-based generator
// ---------------------------------------------------------------------------------------------------------
namespace {

uint64_t hash_at(uint64_t seed, uint64_t stream, uint64_t index) { return mix64(stream_key(seed, stream) ^ index); }

double unit_double(uint64_t h) { return static_cast<double>(h >> 11) * 0x1.0p-53; }  // [0, 1)

// Streams of the routing generators (the layer's tensors use other streams, see reference/).
constexpr uint64_t kStreamRouteChoice = 0x524F555445ull;    // "ROUTE"
constexpr uint64_t kStreamRouteLogits = 0x4C4F474954ull;    // "LOGIT"
constexpr uint64_t kStreamZipfPermutation = 0x5A495046ull;  // "ZIPF"

}  // namespace

float uniform_at(uint64_t seed, uint64_t stream, uint64_t index) {
  return static_cast<float>(hash_at(seed, stream, index) >> 40) * 0x1.0p-24f;  // 24 bits: exact in float
}

float normal_at(uint64_t seed, uint64_t stream, uint64_t index) {
  return normal_with_key(stream_key(seed, stream), index);
}

std::vector<uint16_t> random_bf16(uint64_t seed, uint64_t stream, int64_t rows, int64_t cols, float scale) {
  std::vector<uint16_t> v(static_cast<size_t>(rows * cols));
  const uint64_t key = stream_key(seed, stream);
  for (int64_t i = 0; i < rows * cols; ++i) v[i] = f32_to_bf16(normal_with_key(key, i) * scale);
  return v;
}

// ---------------------------------------------------------------------------------------------------------
// RoutingSource
// ---------------------------------------------------------------------------------------------------------
RoutingSource RoutingSource::parse(const std::string& text) {
  RoutingSource src;
  if (text == "uniform") return src;
  if (text == "adversarial") {
    src.kind = Kind::adversarial;
    return src;
  }
  if (text.rfind("zipf", 0) == 0) {
    src.kind = Kind::zipf;
    require(text.size() > 5 && text[4] == ':', "--routing zipf needs an exponent, as zipf:S with S > 0, got '{}'",
            text);
    const std::string num = text.substr(5);
    size_t used = 0;
    double s = 0;
    try {
      s = std::stod(num, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    require(used == num.size() && used > 0, "--routing zipf:S needs a number S, got '{}'", text);
    require(std::isfinite(s) && s > 0 && s <= 64, "--routing zipf:S needs S in (0, 64], got {}", s);
    src.zipf_s = s;
    return src;
  }
  const bool looks_like_file = text.find('/') != std::string::npos || text.find('.') != std::string::npos;
  require(looks_like_file,
          "--routing must be uniform, zipf:S (S > 0), adversarial or a path to an HDF5 routing file, got '{}'", text);
  src.kind = Kind::file;
  src.path = text;
  require(std::filesystem::exists(src.path), "--routing file '{}' does not exist", src.path);
  return src;
}

std::string RoutingSource::describe() const {
  switch (kind) {
    case Kind::uniform: return "uniform";
    case Kind::zipf: return fmt::format("zipf:{}", zipf_s);
    case Kind::adversarial: return "adversarial";
    case Kind::file: return "file:" + path;
  }
  return "?";
}

// ---------------------------------------------------------------------------------------------------------
// Routing generators
// ---------------------------------------------------------------------------------------------------------
namespace {

// Router weights: softmax over the token's K chosen experts of standard-normal logits, in fp32 with the
// portable exp, summed in ascending k. A function of (seed, g) only.
void fill_router_weights(Routing& r, uint64_t seed) {
  const int K = r.top_k;
  for (int64_t g = 0; g < r.tokens; ++g) {
    float e[64];
    float m = -INFINITY;
    for (int k = 0; k < K; ++k) m = std::max(m, normal_at(seed, kStreamRouteLogits, g * K + k));
    float sum = 0.0f;
    for (int k = 0; k < K; ++k) {
      e[k] = calico_exp(normal_at(seed, kStreamRouteLogits, g * K + k) - m);
      sum += e[k];
    }
    for (int k = 0; k < K; ++k) r.router_weights[g * K + k] = e[k] / sum;
  }
}

Routing empty_routing(const LayerSpec& spec, int64_t tokens) {
  Routing r;
  r.tokens = tokens;
  r.top_k = spec.top_k;
  r.topk_experts.resize(static_cast<size_t>(tokens * spec.top_k));
  r.router_weights.resize(static_cast<size_t>(tokens * spec.top_k));
  return r;
}

// Uniform: K distinct experts per token, each draw uniform over E, redrawing duplicates. Draw j of token g is
// hash (g, j), so the result depends on (seed, g) only.
void make_uniform(Routing& r, int E, uint64_t seed) {
  const int K = r.top_k;
  for (int64_t g = 0; g < r.tokens; ++g) {
    int32_t* out = &r.topk_experts[g * K];
    uint64_t draw = 0;
    for (int k = 0; k < K; ++k) {
      for (;;) {
        const uint64_t h = hash_at(seed, kStreamRouteChoice, (static_cast<uint64_t>(g) << 20) + draw++);
        const auto e = static_cast<int32_t>(((h >> 32) * static_cast<uint64_t>(E)) >> 32);
        if (std::find(out, out + k, e) == out + k) {
          out[k] = e;
          break;
        }
      }
    }
  }
}

// Zipf(S): the expert of popularity rank i (0-based) has weight (i+1)^-S; popularity ranks are a seeded
// permutation of the experts, so hot experts land on arbitrary ranks. The K experts are drawn without
// replacement: draw k picks among the unchosen experts in proportion to their weight, scanning ascending
// popularity rank. NOTE: the weight table uses std::pow once per expert (double); everything after it is
// IEEE +,*.
void make_zipf(Routing& r, int E, double s, uint64_t seed) {
  std::vector<int32_t> perm(E);
  for (int i = 0; i < E; ++i) perm[i] = i;
  for (int i = E - 1; i > 0; --i) {  // Fisher-Yates with counter-based draws
    const uint64_t h = hash_at(seed, kStreamZipfPermutation, static_cast<uint64_t>(i));
    std::swap(perm[i], perm[((h >> 32) * static_cast<uint64_t>(i + 1)) >> 32]);
  }
  std::vector<double> weight(E);
  for (int i = 0; i < E; ++i) weight[i] = std::pow(static_cast<double>(i + 1), -s);
  const int K = r.top_k;
  for (int64_t g = 0; g < r.tokens; ++g) {
    bool chosen_rank[4096] = {};  // popularity ranks taken (E <= 4096 checked below)
    for (int k = 0; k < K; ++k) {
      double remaining = 0.0;
      for (int i = 0; i < E; ++i)
        if (!chosen_rank[i]) remaining += weight[i];
      const double target = unit_double(hash_at(seed, kStreamRouteChoice, static_cast<uint64_t>(g) * 64 + k)) *
                            remaining;
      double acc = 0.0;
      int pick = -1;
      for (int i = 0; i < E; ++i) {
        if (chosen_rank[i]) continue;
        pick = i;  // the last unchosen expert absorbs rounding at the top end
        acc += weight[i];
        if (target < acc) break;
      }
      chosen_rank[pick] = true;
      r.topk_experts[g * K + k] = perm[pick];
    }
  }
}

// Adversarial: every token sends slot k to expert k (k = 0..K-1), the lowest-numbered experts. For any R
// those are rank 0's experts, or when K > E/R the first ceil(K / (E/R)) ranks' (as close to "one rank" as K
// allows); slot 0 always goes to expert 0. Independent of R, so the global batch is the same for every R.
void make_adversarial(Routing& r) {
  for (int64_t g = 0; g < r.tokens; ++g)
    for (int k = 0; k < r.top_k; ++k) r.topk_experts[g * r.top_k + k] = k;
}

}  // namespace

Routing make_routing(const LayerSpec& spec, int64_t tokens, const RoutingSource& source, uint64_t seed) {
  spec.validate();
  require(tokens >= 1, "tokens (ranks * tokens per rank) must be >= 1, got {}", tokens);
  require(spec.top_k <= 64, "top_k (K) must be <= 64 for the routing generators, got {}", spec.top_k);
  if (source.kind == RoutingSource::Kind::file) {
    Routing file = read_routing_h5(source.path);
    require(file.top_k == spec.top_k, "--routing file '{}' has K={} but the layer has top_k={}", source.path,
            file.top_k, spec.top_k);
    require(file.tokens >= tokens, "--routing file '{}' has {} tokens, the run needs {} (ranks * tokens per rank)",
            source.path, file.tokens, tokens);
    file.tokens = tokens;  // replay the first `tokens` rows
    file.topk_experts.resize(static_cast<size_t>(tokens * spec.top_k));
    file.router_weights.resize(static_cast<size_t>(tokens * spec.top_k));
    file.validate(spec);
    return file;
  }
  Routing r = empty_routing(spec, tokens);
  switch (source.kind) {
    case RoutingSource::Kind::uniform: make_uniform(r, spec.experts, seed); break;
    case RoutingSource::Kind::zipf:
      require(source.zipf_s > 0 && std::isfinite(source.zipf_s), "--routing zipf:S needs S > 0, got {}",
              source.zipf_s);
      require(spec.experts <= 4096, "--routing zipf supports at most 4096 experts, got E={}", spec.experts);
      make_zipf(r, spec.experts, source.zipf_s, seed);
      break;
    case RoutingSource::Kind::adversarial: make_adversarial(r); break;
    case RoutingSource::Kind::file: break;
  }
  fill_router_weights(r, seed);
  return r;
}

// ---------------------------------------------------------------------------------------------------------
// HDF5 routing traces
// ---------------------------------------------------------------------------------------------------------
namespace {

// Closes an HDF5 handle on scope exit.
struct H5Handle {
  hid_t id;
  herr_t (*close)(hid_t);
  ~H5Handle() {
    if (id >= 0) close(id);
  }
};

void silence_hdf5_errors() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

// Reads a 2-D dataset, returning its dims; the HDF5 library converts the stored type to `mem_type`.
template <typename T>
std::vector<T> read_2d(hid_t file, const std::string& path, const char* dataset, hid_t mem_type, H5T_class_t want,
                       hsize_t dims[2]) {
  require(H5Lexists(file, "/routing", H5P_DEFAULT) > 0 && H5Lexists(file, dataset, H5P_DEFAULT) > 0,
          "--routing file '{}' has no dataset {}", path, dataset);
  H5Handle ds{H5Dopen2(file, dataset, H5P_DEFAULT), H5Dclose};
  require(ds.id >= 0, "--routing file '{}': cannot open dataset {}", path, dataset);
  H5Handle space{H5Dget_space(ds.id), H5Sclose};
  const int ndims = H5Sget_simple_extent_ndims(space.id);
  require(ndims == 2, "--routing file '{}': dataset {} must be 2-D [tokens, K], got {} dimensions", path, dataset,
          ndims);
  H5Sget_simple_extent_dims(space.id, dims, nullptr);
  H5Handle type{H5Dget_type(ds.id), H5Tclose};
  require(H5Tget_class(type.id) == want, "--routing file '{}': dataset {} must be {}", path, dataset,
          want == H5T_INTEGER ? "an integer type (int32)" : "a floating-point type (float32)");
  // Bounded allocation (issue 9): the claimed shape is checked against documented limits and against the
  // file's size (with room for a compression ratio of 1024) before any memory is allocated.
  require(dims[0] >= 1 && dims[1] >= 1 && dims[0] <= kMaxRoutingTokens && dims[1] <= kMaxRoutingTopK &&
              dims[0] * dims[1] <= kMaxRoutingEntries,
          "--routing file '{}': dataset {} claims [{}, {}]; at most [{}, {}] with {} entries in all", path, dataset,
          dims[0], dims[1], kMaxRoutingTokens, kMaxRoutingTopK, kMaxRoutingEntries);
  std::error_code ec;
  const uintmax_t file_bytes = std::filesystem::file_size(path, ec);
  require(!ec && dims[0] * dims[1] * sizeof(T) <= file_bytes * 1024 + (1u << 20),
          "--routing file '{}': dataset {} claims [{}, {}] ({} bytes) but the file has only {} bytes", path, dataset,
          dims[0], dims[1], dims[0] * dims[1] * sizeof(T), file_bytes);
  std::vector<T> v(static_cast<size_t>(dims[0] * dims[1]));
  require(H5Dread(ds.id, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) >= 0,
          "--routing file '{}': reading dataset {} failed", path, dataset);
  return v;
}

}  // namespace

Routing read_routing_h5(const std::string& path) {
  require(std::filesystem::exists(path), "--routing file '{}' does not exist", path);
  silence_hdf5_errors();
  H5Handle file{H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose};
  require(file.id >= 0, "--routing file '{}' is not a readable HDF5 file", path);
  hsize_t de[2] = {0, 0}, dw[2] = {0, 0};
  Routing r;
  r.topk_experts = read_2d<int32_t>(file.id, path, "/routing/topk_experts", H5T_NATIVE_INT32, H5T_INTEGER, de);
  r.router_weights = read_2d<float>(file.id, path, "/routing/router_weights", H5T_NATIVE_FLOAT, H5T_FLOAT, dw);
  require(de[0] == dw[0] && de[1] == dw[1],
          "--routing file '{}': /routing/topk_experts is [{}, {}] but /routing/router_weights is [{}, {}]; the "
          "shapes must match",
          path, de[0], de[1], dw[0], dw[1]);
  require(de[0] >= 1 && de[1] >= 1, "--routing file '{}': routing datasets must be non-empty, got [{}, {}]", path,
          de[0], de[1]);
  r.tokens = static_cast<int64_t>(de[0]);
  r.top_k = static_cast<int>(de[1]);
  return r;
}

void write_routing_h5(const std::string& path, const Routing& routing) {
  const size_t n = static_cast<size_t>(routing.tokens) * static_cast<size_t>(routing.top_k);
  require(routing.tokens >= 1 && routing.top_k >= 1 && routing.topk_experts.size() == n &&
              routing.router_weights.size() == n,
          "write_routing_h5: routing must be non-empty with tokens*K = {} entries, got {} experts and {} weights", n,
          routing.topk_experts.size(), routing.router_weights.size());
  silence_hdf5_errors();
  // Written whole to a temporary file, then renamed; removed on error and on SIGINT/SIGTERM.
  OutputFile out(path, "routing file");
  const std::string& tmp = out.temp_path();
  {
    H5Handle file{H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose};
    require(file.id >= 0, "cannot create HDF5 file '{}'", tmp);
    H5Handle group{H5Gcreate2(file.id, "/routing", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose};
    const hsize_t dims[2] = {static_cast<hsize_t>(routing.tokens), static_cast<hsize_t>(routing.top_k)};
    H5Handle space{H5Screate_simple(2, dims, nullptr), H5Sclose};
    auto write = [&](const char* name, hid_t file_type, hid_t mem_type, const void* data) {
      H5Handle ds{H5Dcreate2(file.id, name, file_type, space.id, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose};
      require(ds.id >= 0 && H5Dwrite(ds.id, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0,
              "writing {} to '{}' failed", name, tmp);
    };
    write("/routing/topk_experts", H5T_STD_I32LE, H5T_NATIVE_INT32, routing.topk_experts.data());
    write("/routing/router_weights", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, routing.router_weights.data());
  }
  out.commit();
}

}  // namespace calico
