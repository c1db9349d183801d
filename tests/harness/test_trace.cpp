// Trace tests: round trip, atomic write, clear errors on truncated / corrupted / wrong-schema files, and the
// layout checked independently of our reader (h5dump output and raw HDF5 API calls).
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cstdio>
#include <fstream>
#include <iterator>

#include "harness_test_util.h"

namespace calico::harness {
namespace {

using testing::TempDir;
using testing::toy_trace;

std::vector<char> slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void spit(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Expects read_trace to fail with a calico::Error whose message contains `needle`.
void expect_read_error(const std::string& path, const std::string& needle) {
  try {
    read_trace(path);
    ADD_FAILURE() << "read_trace(" << path << ") succeeded, expected an error containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// The megakernel's weight-gradient path (RunConfig::overwrite_weight_grads) survives the trace, both ways.
TEST(Trace, RoundTripKeepsTheWeightGradientPath) {
  TempDir dir("weight-grads");
  Trace t = toy_trace(1, 1);
  for (bool overwrite : {true, false}) {
    t.config.overwrite_weight_grads = overwrite;
    write_trace(dir.file("t.h5"), t);
    EXPECT_EQ(read_trace(dir.file("t.h5")).config.overwrite_weight_grads, overwrite);
  }
}

TEST(Trace, RoundTripKeepsEveryTensorAndAttribute) {
  TempDir dir("roundtrip");
  const Trace t = toy_trace(2, 2);
  write_trace(dir.file("t.h5"), t);
  const Trace r = read_trace(dir.file("t.h5"));
  EXPECT_EQ(r.backend, "toy");
  EXPECT_EQ(r.spec.describe(), t.spec.describe());
  EXPECT_EQ(r.config.describe(), t.config.describe());
  EXPECT_EQ(r.routing.topk_experts, t.routing.topk_experts);
  EXPECT_EQ(r.routing.router_weights, t.routing.router_weights);
  EXPECT_EQ(r.provenance.git_commit, t.provenance.git_commit);
  EXPECT_FALSE(r.provenance.hdf5_version.empty());
  ASSERT_EQ(r.runs.size(), 2u);
  for (size_t run = 0; run < 2; ++run) {
    ASSERT_EQ(r.runs[run].ranks.size(), 2u);
    for (size_t k = 0; k < 2; ++k) {
      EXPECT_EQ(r.runs[run].ranks[k].tensors.size(), t.runs[run].ranks[k].tensors.size());
      for (const auto& want : t.runs[run].ranks[k].tensors) {
        const Tensor* got = r.runs[run].ranks[k].find(want.name);
        ASSERT_NE(got, nullptr) << want.name;
        EXPECT_EQ(got->type, want.type);
        EXPECT_EQ(got->shape, want.shape);
        EXPECT_EQ(got->bytes, want.bytes) << want.name;
      }
    }
  }
  EXPECT_TRUE(diff_traces(t, r).equal());
}

TEST(Trace, FailedWriteLeavesNoFileAndKeepsThePreviousOne) {
  TempDir dir("atomic");
  Trace bad = toy_trace(1, 1);
  bad.runs[0].ranks[0].tensors.back().bytes.pop_back();  // bytes no longer match the shape: writer throws late
  EXPECT_THROW(write_trace(dir.file("t.h5"), bad), Error);
  EXPECT_FALSE(std::filesystem::exists(dir.file("t.h5")));
  EXPECT_TRUE(std::filesystem::is_empty(dir.path)) << "temporary file left behind";

  const Trace good = toy_trace(1, 1);
  write_trace(dir.file("t.h5"), good);
  const auto before = slurp(dir.file("t.h5"));
  EXPECT_THROW(write_trace(dir.file("t.h5"), bad), Error);
  EXPECT_EQ(slurp(dir.file("t.h5")), before);
  EXPECT_THROW(write_trace(dir.file("no/such/folder/t.h5"), good), Error);
}

TEST(Trace, MissingNonHdf5AndTruncatedFilesGiveClearErrors) {
  TempDir dir("truncated");
  expect_read_error(dir.file("missing.h5"), "cannot read the file");
  spit(dir.file("text.h5"), {'h', 'e', 'l', 'l', 'o'});
  expect_read_error(dir.file("text.h5"), "not an HDF5 file");
  write_trace(dir.file("t.h5"), toy_trace(2, 1));
  const auto bytes = slurp(dir.file("t.h5"));
  for (size_t len : {size_t{0}, size_t{7}, size_t{100}, size_t{1000}, bytes.size() / 2, bytes.size() - 1}) {
    spit(dir.file("cut.h5"), std::vector<char>(bytes.begin(), bytes.begin() + static_cast<long>(len)));
    EXPECT_THROW(read_trace(dir.file("cut.h5")), Error) << "truncated at " << len;
  }
}

// Byte offset in the file of dataset `path`'s contiguous data, through the HDF5 API.
haddr_t data_offset(const std::string& file, const std::string& path) {
  hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t d = H5Dopen2(f, path.c_str(), H5P_DEFAULT);
  const haddr_t off = H5Dget_offset(d);
  H5Dclose(d);
  H5Fclose(f);
  return off;
}

TEST(Trace, CorruptedTensorDataIsCaughtByTheChecksumAndByItsDigest) {
  TempDir dir("corrupt");
  write_trace(dir.file("t.h5"), toy_trace(2, 1));
  const haddr_t off = data_offset(dir.file("t.h5"), "/runs/run_000/rank_001/out");
  ASSERT_NE(off, HADDR_UNDEF);
  auto bytes = slurp(dir.file("t.h5"));
  bytes[off + 5] ^= 0x10;  // H5Dget_offset is a byte offset in the file (user block included)
  spit(dir.file("bad.h5"), bytes);
  expect_read_error(dir.file("bad.h5"), "checksum mismatch");
  // With the header resealed the whole-file checksum passes and the tensor's own digest catches it.
  seal_trace_file(dir.file("bad.h5"));
  expect_read_error(dir.file("bad.h5"), "rank_001/out: digest mismatch");
}

TEST(Trace, HdfFilesWithoutTheCalicoHeaderAreRejected) {
  TempDir dir("plain");
  hid_t f = H5Fcreate(dir.file("plain.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  H5Gclose(H5Gcreate2(f, "runs", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  H5Fclose(f);
  expect_read_error(dir.file("plain.h5"), "not a Calico trace");
}

TEST(Trace, RandomByteFlipsNeverCrashTheReader) {
  TempDir dir("flips");
  write_trace(dir.file("t.h5"), toy_trace(1, 1));
  const auto bytes = slurp(dir.file("t.h5"));
  int errors = 0;
  for (size_t i = 0; i < 300; ++i) {
    auto b = bytes;
    const size_t pos = (i * 7919u * 104729u) % b.size();
    b[pos] = static_cast<char>(b[pos] ^ (1 << (i % 8)));
    try {
      read_trace_image(b.data(), b.size());
    } catch (const Error&) {
      ++errors;
    }
  }
  EXPECT_EQ(errors, 300);  // the checksum catches every flip
}

// Edits a valid trace with the raw HDF5 API to break one schema rule.
template <typename F>
std::string edited_trace(const TempDir& dir, const std::string& name, F edit) {
  write_trace(dir.file(name), toy_trace(2, 1));
  hid_t f = H5Fopen(dir.file(name).c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  edit(f);
  H5Fclose(f);
  seal_trace_file(dir.file(name));  // so that the schema check, not the checksum, is what fails
  return dir.file(name);
}

TEST(Trace, WrongSchemaFilesGiveErrorsNamingTheProblem) {
  TempDir dir("schema");
  expect_read_error(edited_trace(dir, "a.h5", [](hid_t f) { H5Adelete(f, "format"); }), "missing attribute 'format'");
  expect_read_error(edited_trace(dir, "b.h5",
                                 [](hid_t f) {
                                   hid_t a = H5Aopen(f, "format_version", H5P_DEFAULT);
                                   int64_t v = 99;
                                   H5Awrite(a, H5T_NATIVE_INT64, &v);
                                   H5Aclose(a);
                                 }),
                    "format_version 99 is not supported (this build reads 1)");
  expect_read_error(edited_trace(dir, "c.h5", [](hid_t f) { H5Ldelete(f, "/runs/run_000/rank_001", H5P_DEFAULT); }),
                    "must hold exactly 2 rank groups");
  expect_read_error(edited_trace(dir, "d.h5",
                                 [](hid_t f) {
                                   // A well-formed dataset with the wrong shape for "out".
                                   H5Ldelete(f, "/runs/run_000/rank_000/out", H5P_DEFAULT);
                                   hsize_t dims[2] = {3, 3};
                                   hid_t s = H5Screate_simple(2, dims, nullptr);
                                   hid_t d = H5Dcreate2(f, "/runs/run_000/rank_000/out", H5T_STD_U16LE, s, H5P_DEFAULT,
                                                        H5P_DEFAULT, H5P_DEFAULT);
                                   std::vector<uint16_t> zeros(9, 0);
                                   H5Dwrite(d, H5T_NATIVE_UINT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, zeros.data());
                                   Tensor t{"out", ElemType::bf16, {3, 3}, Tensor::Bytes(18, 0)};
                                   uint64_t dg = digest(t);
                                   hid_t as = H5Screate(H5S_SCALAR);
                                   hid_t a = H5Acreate2(d, "digest", H5T_STD_U64LE, as, H5P_DEFAULT, H5P_DEFAULT);
                                   H5Awrite(a, H5T_NATIVE_UINT64, &dg);
                                   hid_t st = H5Tcopy(H5T_C_S1);
                                   H5Tset_size(st, 4);
                                   hid_t a2 = H5Acreate2(d, "dtype", st, as, H5P_DEFAULT, H5P_DEFAULT);
                                   H5Awrite(a2, st, "bf16");
                                   H5Aclose(a2);
                                   H5Tclose(st);
                                   H5Aclose(a);
                                   H5Sclose(as);
                                   H5Dclose(d);
                                   H5Sclose(s);
                                 }),
                    "tensor 'out' must have shape [8,32], got [3,3]");
  expect_read_error(edited_trace(dir, "e.h5",
                                 [](hid_t f) {
                                   hid_t g = H5Gopen2(f, "/spec", H5P_DEFAULT);
                                   hid_t a = H5Aopen(g, "top_k", H5P_DEFAULT);
                                   int64_t v = 1000;
                                   H5Awrite(a, H5T_NATIVE_INT64, &v);
                                   H5Aclose(a);
                                   H5Gclose(g);
                                 }),
                    "top_k");
}

// FNV-1a 64, written out again here so the check does not rely on calico::digest.
uint64_t fnv1a(const std::vector<uint8_t>& bytes) {
  uint64_t h = 14695981039346656037ull;
  for (uint8_t b : bytes) h = (h ^ b) * 1099511628211ull;
  return h;
}

TEST(TraceLayout, RawHdf5ApiSeesTheDocumentedLayout) {
  TempDir dir("layout");
  write_trace(dir.file("t.h5"), toy_trace(2, 2));
  hid_t f = H5Fopen(dir.file("t.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  // Every documented group exists.
  for (const char* g : {"/spec", "/config", "/routing", "/runs", "/runs/run_000", "/runs/run_001/rank_001"})
    EXPECT_GT(H5Lexists(f, g, H5P_DEFAULT), 0) << g;
  // d_w_down of rank 1: f32 [E/R=4, H=32, I=32], and its digest attribute is the FNV-1a of its bytes.
  hid_t d = H5Dopen2(f, "/runs/run_001/rank_001/d_w_down", H5P_DEFAULT);
  ASSERT_GE(d, 0);
  hid_t type = H5Dget_type(d), space = H5Dget_space(d);
  EXPECT_EQ(H5Tget_class(type), H5T_FLOAT);
  EXPECT_EQ(H5Tget_size(type), 4u);
  hsize_t dims[3];
  ASSERT_EQ(H5Sget_simple_extent_ndims(space), 3);
  H5Sget_simple_extent_dims(space, dims, nullptr);
  EXPECT_EQ(dims[0], 4u);
  EXPECT_EQ(dims[1], 32u);
  EXPECT_EQ(dims[2], 32u);
  std::vector<uint8_t> bytes(4 * 32 * 32 * 4);
  H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data());
  uint64_t stored = 0;
  hid_t a = H5Aopen(d, "digest", H5P_DEFAULT);
  H5Aread(a, H5T_NATIVE_UINT64, &stored);
  EXPECT_EQ(stored, fnv1a(bytes));
  H5Aclose(a);
  H5Tclose(type);
  H5Sclose(space);
  H5Dclose(d);
  // bf16 tensors are stored as 16-bit unsigned integers.
  d = H5Dopen2(f, "/runs/run_000/rank_000/x", H5P_DEFAULT);
  type = H5Dget_type(d);
  EXPECT_EQ(H5Tget_class(type), H5T_INTEGER);
  EXPECT_EQ(H5Tget_size(type), 2u);
  EXPECT_EQ(H5Tget_sign(type), H5T_SGN_NONE);
  H5Tclose(type);
  H5Dclose(d);
  H5Fclose(f);
}

// TRACE_FORMAT.md (issue 9): with I_s = 0 the shared-expert tensors are absent, not zero-sized.
TEST(TraceLayout, NoSharedExpertMeansNoSharedExpertTensors) {
  TempDir dir("no-shared");
  RunRequest q = testing::small_request(2);
  q.spec.shared_intermediate = 0;
  auto b = make_backend("reference");
  write_trace(dir.file("t.h5"), run_trace(*b, q, 1, "uniform"));
  hid_t f = H5Fopen(dir.file("t.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  EXPECT_GT(H5Lexists(f, "/runs/run_000/rank_001/out", H5P_DEFAULT), 0);
  for (const char* t : {"ws_gate", "ws_up", "ws_down", "d_ws_gate", "d_ws_up", "d_ws_down"})
    for (const char* rank : {"rank_000", "rank_001"})
      EXPECT_EQ(H5Lexists(f, fmt::format("/runs/run_000/{}/{}", rank, t).c_str(), H5P_DEFAULT), 0) << rank << "/" << t;
  H5Fclose(f);
  // ... and the same run with a shared expert has them (the check above can fail).
  q.spec.shared_intermediate = 32;
  write_trace(dir.file("s.h5"), run_trace(*b, q, 1, "uniform"));
  f = H5Fopen(dir.file("s.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  EXPECT_GT(H5Lexists(f, "/runs/run_000/rank_001/ws_gate", H5P_DEFAULT), 0);
  EXPECT_GT(H5Lexists(f, "/runs/run_000/rank_001/d_ws_down", H5P_DEFAULT), 0);
  H5Fclose(f);
}

TEST(TraceLayout, H5dumpShowsTheDocumentedLayout) {
  TempDir dir("h5dump");
  write_trace(dir.file("t.h5"), toy_trace(2, 1));
  const std::string cmd = std::string(CALICO_H5DUMP) + " -H -A " + dir.file("t.h5") + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  ASSERT_EQ(pclose(p), 0) << out;
  for (const char* want : {"ATTRIBUTE \"format\"",
                           "\"calico-trace\"",
                           "ATTRIBUTE \"format_version\"",
                           "ATTRIBUTE \"git_commit\"",
                           "ATTRIBUTE \"hdf5_version\"",
                           "ATTRIBUTE \"seed\"",
                           "GROUP \"spec\"",
                           "ATTRIBUTE \"hidden\"",
                           "GROUP \"config\"",
                           "ATTRIBUTE \"tokens_per_rank\"",
                           "GROUP \"routing\"",
                           "DATASET \"topk_experts\"",
                           "GROUP \"runs\"",
                           "GROUP \"run_000\"",
                           "GROUP \"rank_001\"",
                           "DATASET \"out\"",
                           "H5T_STD_U16LE",
                           "SIMPLE { ( 8, 32 ) / ( 8, 32 ) }",
                           "ATTRIBUTE \"dtype\"",
                           "\"bf16\"",
                           "ATTRIBUTE \"digest\"",
                           "ATTRIBUTE \"role\"",
                           "DATASET \"d_w_gate\"",
                           "H5T_IEEE_F32LE",
                           "SIMPLE { ( 4, 32, 32 ) / ( 4, 32, 32 ) }"})
    EXPECT_NE(out.find(want), std::string::npos) << "h5dump output lacks: " << want;
}

}  // namespace
}  // namespace calico::harness
