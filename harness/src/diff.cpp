// Bitwise diff of tensors, runs, ranks and traces: equal or not, mismatch count, max ULP distance, max abs/rel
// error, first mismatch located as (run, rank, index), a ULP histogram and where mismatches sit.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "calico/harness.h"
#include "calico/numerics.h"

namespace calico::harness {
namespace {

constexpr size_t kSampleCap = 4096;

// One element decoded for comparison: raw bits, an integer whose order matches the value order (for the ULP
// distance), the value as double, and whether it is NaN.
struct Elem {
  uint64_t bits;
  __int128 ordered;
  double value;
  bool nan;
};

Elem decode(ElemType t, const uint8_t* p) {
  auto sign_magnitude = [](uint64_t bits, int width) -> __int128 {
    const uint64_t sign = bits >> (width - 1) & 1, mag = bits & ((uint64_t{1} << (width - 1)) - 1);
    return sign ? -static_cast<__int128>(mag) : static_cast<__int128>(mag);
  };
  switch (t) {
    case ElemType::bf16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      const float f = bf16_to_f32(v);
      return {v, sign_magnitude(v, 16), f, std::isnan(f)};
    }
    case ElemType::f32: {
      uint32_t v;
      std::memcpy(&v, p, 4);
      const float f = bits_f32(v);
      return {v, sign_magnitude(v, 32), f, std::isnan(f)};
    }
    case ElemType::f64: {
      uint64_t v;
      double d;
      std::memcpy(&v, p, 8);
      std::memcpy(&d, p, 8);
      return {v, sign_magnitude(v, 64), d, std::isnan(d)};
    }
    case ElemType::i32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return {static_cast<uint32_t>(v), v, static_cast<double>(v), false};
    }
    case ElemType::u8:
      return {p[0], p[0], static_cast<double>(p[0]), false};
  }
  return {0, 0, 0, false};
}

int ulp_bin(uint64_t ulp) { return ulp == 0 ? 0 : 64 - __builtin_clzll(ulp); }

bool is_float(ElemType t) { return t == ElemType::bf16 || t == ElemType::f32 || t == ElemType::f64; }

// Global tensor of one run: ranks concatenated along axis 0 (sharded and partial) or rank 0's copy
// (replicated). `partition` receives rows of axis 0 per rank, for locating mismatches.
std::optional<Tensor> global_tensor(const RunResult& run, const std::string& name, std::vector<int64_t>* partition) {
  const Placement pl = placement_of(name);
  Tensor g;
  for (size_t r = 0; r < run.ranks.size(); ++r) {
    const Tensor* t = run.ranks[r].find(name);
    if (!t) return std::nullopt;
    if (r == 0) {
      g = *t;
      if (partition) *partition = {t->shape.empty() ? 1 : t->shape[0]};
      if (pl == Placement::replicated) return g;
      continue;
    }
    if (t->type != g.type || t->shape.size() != g.shape.size() ||
        !std::equal(t->shape.begin() + 1, t->shape.end(), g.shape.begin() + 1))
      return std::nullopt;
    g.shape[0] += t->shape[0];
    g.bytes.insert(g.bytes.end(), t->bytes.begin(), t->bytes.end());
    if (partition) partition->push_back(t->shape[0]);
  }
  return g;
}

std::vector<std::string> tensor_names(const Trace& t) {
  std::vector<std::string> names;
  if (t.runs.empty() || t.runs[0].ranks.empty()) return names;
  for (const auto& x : t.runs[0].ranks[0].tensors) names.push_back(x.name);
  return names;
}

TensorDiff not_comparable(const std::string& name, const std::string& note) {
  TensorDiff d;
  d.tensor = name;
  d.comparable = false;
  d.note = note;
  return d;
}

}  // namespace

Tolerance Tolerance::parse(const std::string& text) {
  Tolerance t;
  if (text.empty() || text == "exact") return t;
  const auto colon = text.find(':');
  const std::string kind = text.substr(0, colon), value = colon == std::string::npos ? "" : text.substr(colon + 1);
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  const bool number = !value.empty() && end && *end == '\0' && std::isfinite(v) && v >= 0;
  if (kind == "ulp") {
    require(number && v == std::floor(v), "--tolerance ulp:N needs an integer N >= 0, got '{}'", text);
    t.kind = Kind::ulp;
  } else if (kind == "rel") {
    require(number, "--tolerance rel:X needs a number X >= 0, got '{}'", text);
    t.kind = Kind::rel;
  } else {
    throw Error(fmt::format("--tolerance must be exact, ulp:N or rel:X, got '{}'", text));
  }
  t.value = v;
  return t;
}

std::string Tolerance::describe() const {
  switch (kind) {
    case Kind::exact:
      return "exact (bitwise)";
    case Kind::ulp:
      return fmt::format("ulp:{}", value);
    case Kind::rel:
      return fmt::format("rel:{}", value);
  }
  return "?";
}

std::string ulp_bin_label(int bin) {
  if (bin == 0) return "0";
  if (bin == kUlpBins - 1) return "NaN";
  if (bin == 1) return "1";
  return fmt::format("{}-{}", uint64_t{1} << (bin - 1),
                     bin >= 64 ? std::string("max") : fmt::format("{}", (uint64_t{1} << bin) - 1));
}

std::string TensorDiff::location() const {
  if (!has_first) return "";
  std::string s = fmt::format("run {}, rank {}", run_b, first_rank);
  const auto axes = axis_names(tensor, first_index.size());
  for (size_t i = 0; i < first_index.size(); ++i) s += fmt::format(", {} {}", axes[i], first_index[i]);
  return s;
}

TensorDiff compare_tensors(const Tensor& a, const Tensor& b, const Tolerance& tol,
                           const std::vector<int64_t>& partition) {
  TensorDiff d;
  d.tensor = a.name;
  d.type = to_string(a.type);
  d.shape = a.shape;
  if (a.type != b.type || a.shape != b.shape || a.bytes.size() != b.bytes.size()) {
    d.comparable = false;
    d.note = fmt::format("A is {} [{}], B is {} [{}]", to_string(a.type), fmt::join(a.shape, ","), to_string(b.type),
                         fmt::join(b.shape, ","));
    return d;
  }
  const int es = elem_size(a.type);
  d.elements = a.numel();
  d.columns = a.shape.empty() ? 1 : a.shape.back();
  d.rows = d.columns ? d.elements / d.columns : 0;
  if (a.bytes == b.bytes) return d;  // the common case, at memcmp speed
  const bool fp = is_float(a.type);
  for (int64_t i = 0; i < d.elements; ++i) {
    if (std::memcmp(&a.bytes[i * es], &b.bytes[i * es], es) == 0) continue;
    const Elem x = decode(a.type, &a.bytes[i * es]), y = decode(b.type, &b.bytes[i * es]);
    ++d.mismatches;
    const bool nan = x.nan || y.nan;
    const __int128 diff = x.ordered > y.ordered ? x.ordered - y.ordered : y.ordered - x.ordered;
    const uint64_t ulp = diff > static_cast<__int128>(std::numeric_limits<uint64_t>::max())
                             ? std::numeric_limits<uint64_t>::max()
                             : static_cast<uint64_t>(diff);
    double abs_err = 0, rel_err = 0;
    if (!nan) {
      abs_err = std::fabs(x.value - y.value);
      rel_err = x.value != 0 ? abs_err / std::fabs(x.value) : (abs_err > 0 ? INFINITY : 0.0);
      if (!(abs_err == abs_err)) abs_err = INFINITY;  // inf - inf
      d.max_ulp = std::max(d.max_ulp, ulp);
      d.max_abs = std::max(d.max_abs, abs_err);
      d.max_rel = std::max(d.max_rel, rel_err);
    }
    d.ulp_histogram[nan ? kUlpBins - 1 : ulp_bin(ulp)]++;
    bool ok = false;
    if (fp && !nan && tol.kind == Tolerance::Kind::ulp) ok = static_cast<double>(ulp) <= tol.value;
    if (fp && !nan && tol.kind == Tolerance::Kind::rel) ok = rel_err <= tol.value;
    if (!ok) ++d.outside_tolerance;
    const int64_t row = i / d.columns, col = i % d.columns;
    d.by_row[row]++;
    d.by_column[col]++;
    if (d.sample.size() < kSampleCap) d.sample.emplace_back(row, col);
    if (!d.has_first) {
      d.has_first = true;
      d.first_bits_a = x.bits;
      d.first_bits_b = y.bits;
      // Unravel i, then map axis 0 to (rank, local index) through A's partition.
      std::vector<int64_t> idx(a.shape.size());
      int64_t rem = i;
      for (size_t k = a.shape.size(); k-- > 0;) {
        idx[k] = a.shape[k] ? rem % a.shape[k] : 0;
        rem = a.shape[k] ? rem / a.shape[k] : 0;
      }
      int rank = 0;
      for (int64_t rows0 : partition) {
        if (idx.empty() || idx[0] < rows0) break;
        idx[0] -= rows0;
        ++rank;
      }
      d.first_rank = rank;
      d.first_index = idx;
    }
  }
  return d;
}

bool DiffReport::equal() const {
  return std::all_of(tensors.begin(), tensors.end(), [](const TensorDiff& d) { return d.equal(); });
}
bool DiffReport::passes() const {
  return std::all_of(tensors.begin(), tensors.end(), [](const TensorDiff& d) { return d.passes(); });
}
int64_t DiffReport::mismatching_tensors() const {
  return std::count_if(tensors.begin(), tensors.end(), [](const TensorDiff& d) { return !d.equal(); });
}

DiffReport diff_traces(const Trace& a, const Trace& b, const Tolerance& tol, int run_a, int run_b) {
  DiffReport rep;
  rep.a_name = "A";
  rep.b_name = "B";
  rep.tolerance = tol;
  const size_t runs = std::min(a.runs.size(), b.runs.size());
  auto names_a = tensor_names(a), names_b = tensor_names(b);
  for (const auto& n : names_b)
    if (std::find(names_a.begin(), names_a.end(), n) == names_a.end())
      rep.tensors.push_back(not_comparable(n, "only in B"));
  for (size_t i = 0; i < runs; ++i) {
    const size_t ra = run_a >= 0 ? run_a : i, rb = run_b >= 0 ? run_b : i;
    require(ra < a.runs.size() && rb < b.runs.size(), "diff: run index out of range (A has {}, B has {} runs)",
            a.runs.size(), b.runs.size());
    for (const auto& n : names_a) {
      if (std::find(names_b.begin(), names_b.end(), n) == names_b.end()) {
        if (i == 0) rep.tensors.push_back(not_comparable(n, "only in A"));
        continue;
      }
      TensorDiff d;
      if (placement_of(n) == Placement::partial && a.config.ranks != b.config.ranks) {
        d.tensor = n;
        d.skipped = true;
        d.note = fmt::format("per-rank partial sum; R differs ({} vs {}), not comparable by definition", a.config.ranks,
                             b.config.ranks);
      } else {
        std::vector<int64_t> partition;
        // Mismatches are located in B's partition: B is the trace under test (the gate's config).
        auto ga = global_tensor(a.runs[ra], n, nullptr), gb = global_tensor(b.runs[rb], n, &partition);
        d = ga && gb ? compare_tensors(*ga, *gb, tol, partition)
                     : not_comparable(n, "missing on a rank or inconsistent across ranks");
      }
      d.run_a = static_cast<int>(ra);
      d.run_b = static_cast<int>(rb);
      d.a_label = fmt::format("A run {}", ra);
      d.b_label = fmt::format("B run {}", rb);
      rep.tensors.push_back(std::move(d));
    }
    if (run_a >= 0 || run_b >= 0) break;
  }
  if (a.runs.size() != b.runs.size() && run_a < 0) {
    // Not a difference in any tensor: only the common runs were compared. Listed so nobody is misled.
    TensorDiff d = not_comparable(
        "(runs)", fmt::format("A has {} runs, B has {}: compared runs 0..{}", a.runs.size(), b.runs.size(), runs - 1));
    d.comparable = true;
    d.skipped = true;
    rep.tensors.push_back(d);
  }
  return rep;
}

DiffReport diff_within(const Trace& a, const Tolerance& tol) {
  DiffReport rep;
  rep.a_name = rep.b_name = "A";
  rep.tolerance = tol;
  for (size_t i = 1; i < a.runs.size(); ++i) {
    DiffReport one = diff_traces(a, a, tol, 0, static_cast<int>(i));
    for (auto& d : one.tensors) {
      d.a_label = "run 0";
      d.b_label = fmt::format("run {}", i);
      rep.tensors.push_back(std::move(d));
    }
  }
  // Replicated tensors must be the same on every rank.
  for (size_t i = 0; i < a.runs.size(); ++i)
    for (const auto& t0 : a.runs[i].ranks.empty() ? std::vector<Tensor>{} : a.runs[i].ranks[0].tensors) {
      if (placement_of(t0.name) != Placement::replicated) continue;
      for (size_t r = 1; r < a.runs[i].ranks.size(); ++r) {
        const Tensor* t = a.runs[i].ranks[r].find(t0.name);
        TensorDiff d = t ? compare_tensors(t0, *t, tol, {}) : not_comparable(t0.name, "missing on a rank");
        d.run_a = d.run_b = static_cast<int>(i);
        d.first_rank = static_cast<int>(r);
        d.a_label = fmt::format("run {} rank 0", i);
        d.b_label = fmt::format("run {} rank {}", i, r);
        rep.tensors.push_back(std::move(d));
      }
    }
  return rep;
}

std::string format_diff(const DiffReport& rep, bool verbose) {
  std::string s;
  for (const auto& d : rep.tensors) {
    const std::string who = d.a_label.empty() ? d.tensor : fmt::format("{} ({} vs {})", d.tensor, d.a_label, d.b_label);
    if (d.skipped) {
      if (verbose) s += fmt::format("skip   {}: {}\n", who, d.note);
    } else if (!d.comparable) {
      s += fmt::format("DIFF   {}: not comparable: {}\n", who, d.note);
    } else if (d.mismatches == 0) {
      if (verbose) s += fmt::format("equal  {}: {} elements bitwise equal\n", who, d.elements);
    } else {
      s +=
          fmt::format("{} {}: {} of {} elements differ; max ulp {}, max abs {:.3g}, max rel {:.3g}\n",
                      d.passes() ? "within" : "DIFF  ", who, d.mismatches, d.elements, d.max_ulp, d.max_abs, d.max_rel);
      s += fmt::format("       first mismatch: {} (bits {:#x} vs {:#x})\n", d.location(), d.first_bits_a,
                       d.first_bits_b);
      std::string hist;
      for (int b = 0; b < kUlpBins; ++b)
        if (d.ulp_histogram[b]) hist += fmt::format(" [{}]:{}", ulp_bin_label(b), d.ulp_histogram[b]);
      s += fmt::format("       ulp histogram:{}\n", hist);
    }
  }
  const int64_t bad = rep.mismatching_tensors();
  s += fmt::format("{}: {} tensor comparisons, {} differ; tolerance {}\n",
                   rep.equal() ? "EQUAL" : (rep.passes() ? "WITHIN TOLERANCE" : "DIFFERENT"), rep.tensors.size(), bad,
                   rep.tolerance.describe());
  return s;
}

}  // namespace calico::harness
