// HDF5 trace writer and reader (layout: harness/TRACE_FORMAT.md). The writer goes through a temporary file
// and a rename; the reader validates everything it touches and turns any problem into a calico::Error.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "calico/files.h"
#include "calico/harness.h"
#include "h5.h"
#include "schema.h"

namespace calico::harness {
namespace {

constexpr int kMaxDims = 8;
constexpr size_t kMaxTensorsPerRank = 64;
constexpr int64_t kMaxRuns = 1 << 16;

hid_t file_type_of(ElemType t) {
  switch (t) {
    case ElemType::bf16:
      return H5T_STD_U16LE;  // bf16 bit patterns; attribute dtype says "bf16"
    case ElemType::f32:
      return H5T_IEEE_F32LE;
    case ElemType::f64:
      return H5T_IEEE_F64LE;
    case ElemType::i32:
      return H5T_STD_I32LE;
    case ElemType::u8:
      return H5T_STD_U8LE;
  }
  return H5T_STD_U8LE;
}

hid_t mem_type_of(ElemType t) {
  switch (t) {
    case ElemType::bf16:
      return H5T_NATIVE_UINT16;
    case ElemType::f32:
      return H5T_NATIVE_FLOAT;
    case ElemType::f64:
      return H5T_NATIVE_DOUBLE;
    case ElemType::i32:
      return H5T_NATIVE_INT32;
    case ElemType::u8:
      return H5T_NATIVE_UINT8;
  }
  return H5T_NATIVE_UINT8;
}

std::optional<ElemType> parse_elem_type(const std::string& s) {
  for (auto t : {ElemType::bf16, ElemType::f32, ElemType::f64, ElemType::i32, ElemType::u8})
    if (s == to_string(t)) return t;
  return std::nullopt;
}

std::string hex64(uint64_t v) { return fmt::format("{:016x}", v); }

void write_dataset(hid_t parent, const Tensor& t) {
  require(static_cast<int64_t>(t.bytes.size()) == t.numel() * elem_size(t.type),
          "write_trace: tensor '{}' holds {} bytes, its shape needs {}", t.name, t.bytes.size(),
          t.numel() * elem_size(t.type));
  require(!t.shape.empty() && t.shape.size() <= kMaxDims, "write_trace: tensor '{}' must have 1..{} dims, got {}",
          t.name, kMaxDims, t.shape.size());
  std::vector<hsize_t> dims(t.shape.begin(), t.shape.end());
  h5::Id space(h5::check(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), "dataspace " + t.name),
               H5Sclose);
  h5::Id ds(
      h5::check(H5Dcreate2(parent, t.name.c_str(), file_type_of(t.type), space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                "create dataset " + t.name),
      H5Dclose);
  if (t.numel() > 0)
    h5::check(H5Dwrite(ds, mem_type_of(t.type), H5S_ALL, H5S_ALL, H5P_DEFAULT, t.bytes.data()),
              "write dataset " + t.name);
  h5::write_attr(ds, "dtype", std::string(to_string(t.type)));
  h5::write_attr(ds, "role", std::string(is_input_tensor(t.name) ? "input" : "output"));
  h5::write_attr_u64(ds, "digest", digest(t));
  h5::write_attr(ds, "digest_hex", hex64(digest(t)));
}

void write_matrix(hid_t parent, const std::string& name, ElemType type, int64_t rows, int64_t cols, const void* data) {
  Tensor t{name, type, {rows, cols}, {}};
  t.bytes.resize(static_cast<size_t>(rows * cols * elem_size(type)));
  if (!t.bytes.empty()) std::memcpy(t.bytes.data(), data, t.bytes.size());
  write_dataset(parent, t);
}

void write_spec(hid_t file, const LayerSpec& s) {
  h5::Id g = h5::create_group(file, "spec");
  h5::write_attr(g, "name", s.name);
  h5::write_attr(g, "hidden", int64_t{s.hidden});
  h5::write_attr(g, "intermediate", int64_t{s.intermediate});
  h5::write_attr(g, "experts", int64_t{s.experts});
  h5::write_attr(g, "top_k", int64_t{s.top_k});
  h5::write_attr(g, "shared_intermediate", int64_t{s.shared_intermediate});
  if (s.swiglu_limit) h5::write_attr(g, "swiglu_limit", double{*s.swiglu_limit});
  h5::write_attr(g, "dtype", std::string(to_string(s.dtype)));
  h5::write_attr(g, "scale_rule", std::string(to_string(s.scale_rule)));
  h5::write_attr(g, "mma", std::string(to_string(s.mma)));
}

void write_config(hid_t file, const RunConfig& c) {
  h5::Id g = h5::create_group(file, "config");
  h5::write_attr(g, "ranks", int64_t{c.ranks});
  h5::write_attr(g, "tokens_per_rank", int64_t{c.tokens_per_rank});
  h5::write_attr(g, "minibatch", int64_t{c.minibatch});
  h5::write_attr(g, "macrobatch", int64_t{c.macrobatch});
  h5::write_attr(g, "comm_sms_forward", int64_t{c.comm_sms_forward});
  h5::write_attr(g, "comm_sms_backward", int64_t{c.comm_sms_backward});
  h5::write_attr(g, "dispatch_forward", std::string(to_string(c.dispatch_forward)));
  h5::write_attr(g, "combine_forward", std::string(to_string(c.combine_forward)));
  h5::write_attr(g, "dispatch_backward", std::string(to_string(c.dispatch_backward)));
  h5::write_attr(g, "combine_backward", std::string(to_string(c.combine_backward)));
  h5::write_attr(g, "capacity_factor", c.capacity_factor);
  h5::write_attr_u64(g, "seed", c.seed);
  h5::write_attr(g, "weight_grads", std::string(c.overwrite_weight_grads ? "overwrite" : "accumulate"));
}

void write_provenance(hid_t file, const Trace& t) {
  const Provenance& p = t.provenance;
  h5::write_attr(file, "format", std::string("calico-trace"));
  h5::write_attr(file, "format_version", int64_t{kTraceFormatVersion});
  h5::write_attr(file, "backend", t.backend);
  h5::write_attr(file, "routing_source", t.routing_source);
  h5::write_attr(file, "backward", int64_t{t.backward ? 1 : 0});
  h5::write_attr(file, "runs", static_cast<int64_t>(t.runs.size()));
  h5::write_attr(file, "ranks", int64_t{t.config.ranks});
  h5::write_attr_u64(file, "seed", t.config.seed);
  h5::write_attr(file, "spec_description", t.spec.describe());
  h5::write_attr(file, "config_description", t.config.describe());
  const std::pair<const char*, const std::string*> fields[] = {{"calico_version", &p.calico_version},
                                                               {"git_commit", &p.git_commit},
                                                               {"host", &p.host},
                                                               {"cpu", &p.cpu},
                                                               {"device", &p.device},
                                                               {"compiler", &p.compiler},
                                                               {"hdf5_version", &p.hdf5_version},
                                                               {"fmt_version", &p.fmt_version},
                                                               {"json_version", &p.json_version},
                                                               {"command_line", &p.command_line},
                                                               {"created_utc", &p.created_utc}};
  for (const auto& [name, value] : fields) h5::write_attr(file, name, *value);
}

void write_body(hid_t file, const Trace& t) {
  write_provenance(file, t);
  write_spec(file, t.spec);
  write_config(file, t.config);
  {
    h5::Id g = h5::create_group(file, "routing");
    write_matrix(g, "topk_experts", ElemType::i32, t.routing.tokens, t.routing.top_k, t.routing.topk_experts.data());
    write_matrix(g, "router_weights", ElemType::f32, t.routing.tokens, t.routing.top_k,
                 t.routing.router_weights.data());
  }
  h5::Id runs = h5::create_group(file, "runs");
  for (size_t r = 0; r < t.runs.size(); ++r) {
    require(static_cast<int>(t.runs[r].ranks.size()) == t.config.ranks,
            "write_trace: run {} has {} ranks, config says R={}", r, t.runs[r].ranks.size(), t.config.ranks);
    h5::Id rg = h5::create_group(runs, fmt::format("run_{:03d}", r));
    for (size_t k = 0; k < t.runs[r].ranks.size(); ++k) {
      h5::Id kg = h5::create_group(rg, fmt::format("rank_{:03d}", k));
      for (const auto& tensor : t.runs[r].ranks[k].tensors) write_dataset(kg, tensor);
    }
  }
}

// ---- reading ----

// A non-negative integer attribute that must fit the spec's and config's int fields.
int read_count_attr(hid_t object, const char* name, const std::string& where) {
  const int64_t v = h5::read_int_attr(object, name, where);
  require(v >= 0 && v <= (1 << 24), "{}: attribute {} must be in [0, {}], got {}", where, name, 1 << 24, v);
  return static_cast<int>(v);
}

struct Reader {
  std::string origin;
  int64_t byte_budget;  // no dataset may claim more bytes than the file has (we never compress)

  Tensor read_dataset(hid_t parent, const std::string& name, const std::string& where) {
    const std::string at = where + "/" + name;
    H5O_info_t info;
    require(H5Oget_info_by_name(parent, name.c_str(), &info, H5P_DEFAULT) >= 0 && info.type == H5O_TYPE_DATASET,
            "{}: not a dataset", at);
    h5::Id ds(H5Dopen2(parent, name.c_str(), H5P_DEFAULT), H5Dclose);
    require(ds.get() >= 0, "{}: cannot open dataset", at);
    const std::string dtype = h5::read_string_attr(ds, "dtype", at);
    auto type = parse_elem_type(dtype);
    require(type.has_value(), "{}: attribute dtype must be bf16, f32, f64, i32 or u8, got '{}'", at, dtype);
    h5::Id ftype(H5Dget_type(ds), H5Tclose);
    require(ftype.get() >= 0, "{}: cannot read the stored type", at);
    const H5T_class_t cls = H5Tget_class(ftype);
    const bool is_float = *type == ElemType::f32 || *type == ElemType::f64;
    require(cls == (is_float ? H5T_FLOAT : H5T_INTEGER) && H5Tget_size(ftype) == static_cast<size_t>(elem_size(*type)),
            "{}: stored type does not match dtype '{}'", at, dtype);
    h5::Id space(H5Dget_space(ds), H5Sclose);
    require(space.get() >= 0 && H5Sget_simple_extent_type(space) == H5S_SIMPLE, "{}: needs a simple dataspace", at);
    const int nd = H5Sget_simple_extent_ndims(space);
    require(nd >= 1 && nd <= kMaxDims, "{}: must have 1..{} dimensions, got {}", at, kMaxDims, nd);
    std::vector<hsize_t> dims(static_cast<size_t>(nd));
    require(H5Sget_simple_extent_dims(space, dims.data(), nullptr) == nd, "{}: cannot read the shape", at);
    Tensor t{name, *type, {}, {}};
    int64_t bytes = elem_size(*type);
    for (hsize_t d : dims) {
      require(d <= static_cast<hsize_t>(byte_budget), "{}: dimension {} is larger than the file", at, d);
      t.shape.push_back(static_cast<int64_t>(d));
      bytes = d == 0 ? 0 : (bytes > byte_budget / static_cast<int64_t>(d) ? byte_budget + 1 : bytes * int64_t(d));
    }
    require(bytes <= byte_budget, "{}: claims more data than the file holds", at);
    t.bytes.resize(static_cast<size_t>(bytes));
    if (bytes > 0)
      require(H5Dread(ds, mem_type_of(*type), H5S_ALL, H5S_ALL, H5P_DEFAULT, t.bytes.data()) >= 0,
              "{}: cannot read the data (truncated or corrupt file?)", at);
    const uint64_t want = h5::read_u64_attr(ds, "digest", at);
    require(digest(t) == want, "{}: digest mismatch: stored {}, data gives {} (corrupt file)", at, hex64(want),
            hex64(digest(t)));
    return t;
  }

  LayerSpec read_spec(hid_t file) {
    const std::string w = origin + ": /spec";
    h5::Id g = h5::open_group(file, "spec", origin);
    LayerSpec s;
    s.name = h5::read_string_attr(g, "name", w);
    auto int_field = [&](const char* n) { return read_count_attr(g, n, w); };
    s.hidden = int_field("hidden");
    s.intermediate = int_field("intermediate");
    s.experts = int_field("experts");
    s.top_k = int_field("top_k");
    s.shared_intermediate = int_field("shared_intermediate");
    if (h5::has_attr(g, "swiglu_limit"))
      s.swiglu_limit = static_cast<float>(h5::read_double_attr(g, "swiglu_limit", w));
    s.dtype = parse_dtype(h5::read_string_attr(g, "dtype", w));
    s.scale_rule = parse_scale_rule(h5::read_string_attr(g, "scale_rule", w));
    s.mma = parse_mma_model(h5::read_string_attr(g, "mma", w));
    s.validate();
    return s;
  }

  RunConfig read_config(hid_t file, const LayerSpec& spec) {
    const std::string w = origin + ": /config";
    h5::Id g = h5::open_group(file, "config", origin);
    RunConfig c;
    auto int_field = [&](const char* n) { return read_count_attr(g, n, w); };
    c.ranks = int_field("ranks");
    c.tokens_per_rank = int_field("tokens_per_rank");
    c.minibatch = int_field("minibatch");
    c.macrobatch = int_field("macrobatch");
    c.comm_sms_forward = int_field("comm_sms_forward");
    c.comm_sms_backward = int_field("comm_sms_backward");
    c.dispatch_forward = parse_direction(h5::read_string_attr(g, "dispatch_forward", w));
    c.combine_forward = parse_direction(h5::read_string_attr(g, "combine_forward", w));
    c.dispatch_backward = parse_direction(h5::read_string_attr(g, "dispatch_backward", w));
    c.combine_backward = parse_direction(h5::read_string_attr(g, "combine_backward", w));
    c.capacity_factor = h5::read_double_attr(g, "capacity_factor", w);
    c.seed = h5::read_u64_attr(g, "seed", w);
    if (h5::has_attr(g, "weight_grads")) {  // absent in traces written before 2026-12-02: accumulate
      const std::string m = h5::read_string_attr(g, "weight_grads", w);
      require(m == "accumulate" || m == "overwrite", "{}: weight_grads must be accumulate or overwrite, got '{}'", w, m);
      c.overwrite_weight_grads = m == "overwrite";
    }
    c.validate(spec);
    return c;
  }

  Routing read_routing(hid_t file, const LayerSpec& spec, const RunConfig& config) {
    const std::string w = origin + ": /routing";
    h5::Id g = h5::open_group(file, "routing", origin);
    Tensor e = read_dataset(g, "topk_experts", w), wt = read_dataset(g, "router_weights", w);
    const std::vector<int64_t> want{config.total_tokens(), spec.top_k};
    require(e.type == ElemType::i32 && e.shape == want, "{}/topk_experts: must be i32 [{}, {}]", w, want[0], want[1]);
    require(wt.type == ElemType::f32 && wt.shape == want, "{}/router_weights: must be f32 [{}, {}]", w, want[0],
            want[1]);
    Routing r;
    r.tokens = want[0];
    r.top_k = spec.top_k;
    r.topk_experts.assign(e.data<int32_t>(), e.data<int32_t>() + e.numel());
    r.router_weights.assign(wt.data<float>(), wt.data<float>() + wt.numel());
    r.validate(spec);
    return r;
  }

  Trace read(hid_t file) {
    Trace t;
    const std::string format = h5::read_string_attr(file, "format", origin);
    require(format == "calico-trace", "{}: attribute format must be 'calico-trace', got '{}' (not a Calico trace)",
            origin, format);
    const int64_t version = h5::read_int_attr(file, "format_version", origin);
    require(version == kTraceFormatVersion, "{}: format_version {} is not supported (this build reads {})", origin,
            version, kTraceFormatVersion);
    t.backend = h5::read_string_attr(file, "backend", origin);
    t.routing_source = h5::read_string_attr(file, "routing_source", origin);
    t.backward = h5::read_int_attr(file, "backward", origin) != 0;
    Provenance& p = t.provenance;
    const std::pair<const char*, std::string*> fields[] = {{"calico_version", &p.calico_version},
                                                           {"git_commit", &p.git_commit},
                                                           {"host", &p.host},
                                                           {"cpu", &p.cpu},
                                                           {"device", &p.device},
                                                           {"compiler", &p.compiler},
                                                           {"hdf5_version", &p.hdf5_version},
                                                           {"fmt_version", &p.fmt_version},
                                                           {"json_version", &p.json_version},
                                                           {"command_line", &p.command_line},
                                                           {"created_utc", &p.created_utc}};
    for (const auto& [name, value] : fields) *value = h5::read_string_attr(file, name, origin);
    t.spec = read_spec(file);
    t.config = read_config(file, t.spec);
    t.routing = read_routing(file, t.spec, t.config);
    const int64_t runs = h5::read_int_attr(file, "runs", origin);
    require(runs >= 1 && runs <= kMaxRuns, "{}: attribute runs must be in [1, {}], got {}", origin, kMaxRuns, runs);
    require(h5::read_int_attr(file, "ranks", origin) == t.config.ranks, "{}: attribute ranks disagrees with /config",
            origin);
    h5::Id rg = h5::open_group(file, "runs", origin);
    require(h5::list_names(rg, origin + ": /runs").size() == static_cast<size_t>(runs),
            "{}: /runs must hold exactly {} groups", origin, runs);
    for (int64_t r = 0; r < runs; ++r) t.runs.push_back(read_run(rg, r, t));
    return t;
  }

  RunResult read_run(hid_t runs, int64_t r, const Trace& t) {
    const std::string name = fmt::format("run_{:03d}", r), w = origin + ": /runs/" + name;
    h5::Id g = h5::open_group(runs, name, origin + ": /runs");
    require(h5::list_names(g, w).size() == static_cast<size_t>(t.config.ranks), "{}: must hold exactly {} rank groups",
            w, t.config.ranks);
    RunResult result;
    for (int k = 0; k < t.config.ranks; ++k) {
      const std::string kname = fmt::format("rank_{:03d}", k), kw = w + "/" + kname;
      h5::Id kg = h5::open_group(g, kname, w);
      TensorSet set;
      for (const auto& tn : h5::list_names(kg, kw, kMaxTensorsPerRank)) {
        Tensor tensor = read_dataset(kg, tn, kw);
        check_tensor_schema(tensor, t.spec, t.config, kw);
        set.add(std::move(tensor));
      }
      result.ranks.push_back(std::move(set));
    }
    return result;
  }
};

// ---- the sealed header (user block) ----
//
// NOTE: HDF5 1.10's parsers are not safe on corrupt input (the fuzz target found a heap-use-after-free in
// H5O__msg_iterate_real and a wild read in H5HG_read). So every trace starts with a 512-byte HDF5 user
// block (HDF5, h5py and h5dump skip it) holding a checksum of everything after it, and the reader checks
// it before HDF5 parses a byte: a truncated or corrupted trace is rejected by our code, not by HDF5's.

constexpr char kMagic[] = "CALICO-TRACE\n";

uint64_t fnv1a(uint64_t h, const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}
constexpr uint64_t kFnvBasis = 0xcbf29ce484222325ull;

std::string make_header(uint64_t bytes, uint64_t sum) {
  std::string h =
      fmt::format("{}format_version {}\nbytes {}\nfnv1a64 {:016x}\n", kMagic, kTraceFormatVersion, bytes, sum);
  h.resize(kTraceHeaderBytes, '\0');
  return h;
}

// Checks the header of a trace whose total size is `size`; `sum_rest` hashes the bytes after the header.
template <typename HashRest>
void verify_header(const uint8_t* header, uint64_t size, const std::string& origin, HashRest sum_rest) {
  require(size >= kTraceHeaderBytes && std::memcmp(header, kMagic, sizeof kMagic - 1) == 0,
          "{}: not a Calico trace (no CALICO-TRACE header block; see harness/TRACE_FORMAT.md)", origin);
  std::string text(reinterpret_cast<const char*>(header), kTraceHeaderBytes);
  text.resize(std::min(text.find('\0'), text.size()));
  unsigned long long version = 0, bytes = 0, sum = 0;
  require(std::sscanf(text.c_str() + sizeof kMagic - 1, "format_version %llu\nbytes %llu\nfnv1a64 %llx", &version,
                      &bytes, &sum) == 3,
          "{}: unreadable CALICO-TRACE header block", origin);
  require(version == kTraceFormatVersion, "{}: format_version {} is not supported (this build reads {})", origin,
          version, kTraceFormatVersion);
  // The block must be byte for byte what make_header writes: a flip in its padding or a lenient parse
  // (hex case, leading zeros) must not pass unnoticed.
  require(std::memcmp(header, make_header(bytes, sum).data(), kTraceHeaderBytes) == 0,
          "{}: the CALICO-TRACE header block is corrupt", origin);
  require(size - kTraceHeaderBytes == bytes,
          "{}: truncated or extended: the header says {} bytes follow it, the file has {}", origin, bytes,
          size - kTraceHeaderBytes);
  const uint64_t got = sum_rest();
  require(got == sum, "{}: checksum mismatch (header {:016x}, data {:016x}): the file is corrupt", origin,
          static_cast<uint64_t>(sum), got);
}

}  // namespace

void seal_trace_image(std::vector<uint8_t>& image) {
  require(image.size() >= kTraceHeaderBytes, "seal_trace_image: {} bytes, a trace has at least {}", image.size(),
          kTraceHeaderBytes);
  const std::string header =
      make_header(image.size() - kTraceHeaderBytes,
                  fnv1a(kFnvBasis, image.data() + kTraceHeaderBytes, image.size() - kTraceHeaderBytes));
  std::memcpy(image.data(), header.data(), kTraceHeaderBytes);
}

void seal_trace_file(const std::string& path) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  require(static_cast<bool>(f), "seal_trace_file: cannot open '{}'", path);
  f.seekg(kTraceHeaderBytes);
  uint64_t sum = kFnvBasis, bytes = 0;
  std::vector<char> buf(1 << 20);
  while (f.read(buf.data(), static_cast<std::streamsize>(buf.size())) || f.gcount() > 0) {
    sum = fnv1a(sum, reinterpret_cast<const uint8_t*>(buf.data()), static_cast<size_t>(f.gcount()));
    bytes += static_cast<uint64_t>(f.gcount());
  }
  f.clear();
  f.seekp(0);
  const std::string header = make_header(bytes, sum);
  f.write(header.data(), static_cast<std::streamsize>(header.size()));
  require(static_cast<bool>(f.flush()), "seal_trace_file: cannot write '{}'", path);
}

void write_trace(const std::string& path, const Trace& trace) {
  h5::silence_errors();
  // A temporary file beside the target, renamed at the end; removed on error and on SIGINT/SIGTERM (issue 9).
  OutputFile out(path, "trace");
  const std::string& tmp = out.temp_path();
  {
    h5::Id fcpl(h5::check(H5Pcreate(H5P_FILE_CREATE), "create file creation list"), H5Pclose);
    h5::check(H5Pset_userblock(fcpl, kTraceHeaderBytes), "reserve the header block");
    h5::Id file(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, fcpl, H5P_DEFAULT), H5Fclose);
    require(file.get() >= 0, "write_trace: cannot create '{}' (is its folder writable?)", path);
    write_body(file, trace);
    h5::check(H5Fflush(file, H5F_SCOPE_GLOBAL), "flush " + tmp);
  }
  seal_trace_file(tmp);
  out.commit();
}

Trace read_trace(const std::string& path) {
  h5::silence_errors();
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  require(!ec, "trace '{}': cannot read the file ({})", path, ec.message());
  {
    std::ifstream in(path, std::ios::binary);
    std::vector<uint8_t> header(kTraceHeaderBytes, 0);
    in.read(reinterpret_cast<char*>(header.data()), kTraceHeaderBytes);
    require(H5Fis_hdf5(path.c_str()) > 0 || in.gcount() == kTraceHeaderBytes,
            "trace '{}': not an HDF5 file (or truncated before its superblock)", path);
    verify_header(header.data(), size, "trace '" + path + "'", [&] {
      uint64_t sum = kFnvBasis;
      std::vector<char> buf(1 << 20);
      while (in.read(buf.data(), static_cast<std::streamsize>(buf.size())) || in.gcount() > 0)
        sum = fnv1a(sum, reinterpret_cast<const uint8_t*>(buf.data()), static_cast<size_t>(in.gcount()));
      return sum;
    });
  }
  h5::Id file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  require(file.get() >= 0, "trace '{}': HDF5 cannot open it (truncated or corrupt file?)", path);
  return Reader{"trace '" + path + "'", static_cast<int64_t>(size)}.read(file);
}

Trace read_trace_image(const void* data, size_t size, const std::string& origin) {
  h5::silence_errors();
  require(data != nullptr && size >= 8, "trace {}: only {} bytes, not an HDF5 file", origin, size);
  const auto* bytes = static_cast<const uint8_t*>(data);
  verify_header(bytes, size, "trace " + origin,
                [&] { return fnv1a(kFnvBasis, bytes + kTraceHeaderBytes, size - kTraceHeaderBytes); });
  h5::Id fapl(h5::check(H5Pcreate(H5P_FILE_ACCESS), "create file access list"), H5Pclose);
  h5::check(H5Pset_fapl_core(fapl, 1 << 16, 0), "select the core driver");
  h5::check(H5Pset_file_image(fapl, const_cast<void*>(data), size), "set the file image");
  h5::Id file(H5Fopen(origin.c_str(), H5F_ACC_RDONLY, fapl), H5Fclose);
  require(file.get() >= 0, "trace {}: HDF5 cannot open it (not HDF5, truncated or corrupt)", origin);
  return Reader{"trace " + origin, static_cast<int64_t>(size)}.read(file);
}

}  // namespace calico::harness
