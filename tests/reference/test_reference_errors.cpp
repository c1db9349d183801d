// Bad input to the reference layer: each case is a calico::Error whose text names the problem (DESIGN 2.4).
#include <gtest/gtest.h>

#include "test_util.h"

#include <cmath>

#include "calico/core.h"
#include "calico/reference.h"

using namespace calico;

namespace {

RunRequest good_request(int ranks = 2, int tokens_per_rank = 8) {
  RunRequest r;
  r.spec = load_preset("tiny");
  r.config.ranks = ranks;
  r.config.tokens_per_rank = tokens_per_rank;
  r.routing = make_routing(r.spec, int64_t{ranks} * tokens_per_rank, RoutingSource::parse("uniform"), 1);
  return r;
}

using calico::test_util::error_of;

std::string run_error(const RunRequest& r) {
  return error_of([&] { ref::run_reference(r, ref::ReferenceMode::contract); });
}

#define EXPECT_MENTIONS(text, needle) EXPECT_NE((text).find(needle), std::string::npos) << (text)

}  // namespace

TEST(ReferenceErrors, ExpertIdOutOfRange) {
  RunRequest r = good_request();
  r.routing.topk_experts[5] = 16;
  EXPECT_MENTIONS(run_error(r), "topk_experts[1][1] must be in [0, E=16), got 16");
  r.routing.topk_experts[5] = -1;
  EXPECT_MENTIONS(run_error(r), "got -1");
}

TEST(ReferenceErrors, TopKLargerThanExperts) {
  RunRequest r = good_request();
  r.spec.top_k = 17;
  EXPECT_MENTIONS(run_error(r), "top_k (K) must be in [1, experts=16], got 17");
}

TEST(ReferenceErrors, DuplicateExpertInAToken) {
  RunRequest r = good_request();
  r.routing.topk_experts[8 + 2] = r.routing.topk_experts[8 + 0];
  EXPECT_MENTIONS(run_error(r), "routing topk_experts[2] names expert");
  EXPECT_MENTIONS(run_error(r), "twice (slots 0 and 2)");
}

TEST(ReferenceErrors, RanksMustDivideExperts) {
  RunRequest r = good_request(3, 8);
  EXPECT_MENTIONS(run_error(r), "ranks (R) must divide experts (E=16), got R=3");
}

TEST(ReferenceErrors, NonFiniteRouterWeight) {
  RunRequest r = good_request();
  r.routing.router_weights[3] = NAN;
  EXPECT_MENTIONS(run_error(r), "router_weights[0][3] must be finite");
  r.routing.router_weights[3] = INFINITY;
  EXPECT_MENTIONS(run_error(r), "must be finite, got inf");
}

TEST(ReferenceErrors, ZeroTokens) {
  RunRequest r = good_request();
  r.config.tokens_per_rank = 0;
  EXPECT_MENTIONS(run_error(r), "tokens per rank (T) must be in [1,");
  EXPECT_MENTIONS(error_of([] { make_routing(load_preset("tiny"), 0, RoutingSource{}, 1); }),
                  "tokens (ranks * tokens per rank) must be >= 1, got 0");
}

TEST(ReferenceErrors, CapacityOverflow) {
  RunRequest r = good_request();
  r.routing = make_routing(r.spec, 16, RoutingSource::parse("adversarial"), 1);
  r.config.capacity_factor = 1.25;  // ceil(1.25 * 8 * 4) = 40 rows; rank 0 gets all 64
  const std::string e = run_error(r);
  EXPECT_MENTIONS(e, "capacity overflow on rank 0: expert 2");
  EXPECT_MENTIONS(e, "needs 64 rows in all, capacity is 40 rows");
}

TEST(ReferenceErrors, UnknownPreset) {
  EXPECT_MENTIONS(error_of([] { load_preset("qwen9"); }), "unknown preset 'qwen9'");
}

TEST(ReferenceErrors, BadRoutingArgument) {
  EXPECT_MENTIONS(error_of([] { RoutingSource::parse("random"); }),
                  "--routing must be uniform, zipf:S (S > 0), adversarial or a path to an HDF5 routing file, got 'random'");
}

TEST(ReferenceErrors, ZipfExponentMustBePositive) {
  EXPECT_MENTIONS(error_of([] { RoutingSource::parse("zipf:0"); }), "--routing zipf:S needs S in (0, 64], got 0");
  EXPECT_MENTIONS(error_of([] { RoutingSource::parse("zipf:-2"); }), "got -2");
}

TEST(ReferenceErrors, Mxfp8NeedsHiddenMultipleOf32) {
  RunRequest r = good_request();
  r.spec.dtype = DType::mxfp8;
  r.spec.hidden = 48;
  EXPECT_MENTIONS(run_error(r), "hidden (H) must be a multiple of 32 for mxfp8, got 48");
}

TEST(ReferenceErrors, MissingRoutingFile) {
  EXPECT_MENTIONS(error_of([] { RoutingSource::parse("/tmp/calico-no-such-routing.h5"); }),
                  "--routing file '/tmp/calico-no-such-routing.h5' does not exist");
}

TEST(ReferenceErrors, RoutingSizeMustMatchTheRun) {
  RunRequest r = good_request();
  r.config.tokens_per_rank = 16;
  EXPECT_MENTIONS(run_error(r), "routing has 16 tokens but the run needs ranks*tokens_per_rank = 2*16 = 32");
  RunRequest k = good_request();
  k.spec.top_k = 2;
  EXPECT_MENTIONS(run_error(k), "routing top_k must equal the spec's K=2, got 4");
}

TEST(ReferenceErrors, NonBf16MmaModel) {
  RunRequest r = good_request();
  r.spec.mma = MmaModel::hopper_fp8;
  EXPECT_MENTIONS(run_error(r), "--mma must be a bf16 model");
  EXPECT_MENTIONS(run_error(r), "got 'hopper-fp8'");
  // blackwell-mxfp8 is the Blackwell MXFP8 GEMM path: only with --dtype mxfp8.
  RunRequest b = good_request();
  b.spec.mma = MmaModel::blackwell_mxfp8;
  b.spec.dtype = DType::bf16;
  EXPECT_MENTIONS(run_error(b), "or blackwell-mxfp8 with --dtype mxfp8");
  EXPECT_MENTIONS(run_error(b), "got 'blackwell-mxfp8' with --dtype bf16");
}

TEST(ReferenceErrors, BadModeAndThreads) {
  EXPECT_MENTIONS(error_of([] { ref::parse_reference_mode("fast"); }), "--mode must be contract or float64, got 'fast'");
  RunRequest r = good_request();
  r.threads = -1;
  EXPECT_MENTIONS(run_error(r), "--threads must be in [0, 1024]");
}
