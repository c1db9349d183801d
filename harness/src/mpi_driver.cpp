// The MPI driver of the reference: one process per EP rank. Each process generates its rank's inputs, runs
// the reference's rank-local stage functions (calico/reference.h) and exchanges the row buffers between
// stages with MPI_Alltoallv, exactly where the in-process driver emulates its all-to-all. Rank 0 gathers
// every rank's tensors into one RunResult (and so into one trace).
#include <mpi.h>

#include <cstdlib>
#include <cstring>

#include "calico/harness.h"
#include "calico/reference.h"
#include "calico/schedule.h"

namespace calico::harness {
namespace {

using ref::RowBuffer;

void mpi_check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    throw Error(fmt::format("MPI: {} failed: {}", what, std::string(msg, len)));
  }
}

// received[src] = what rank src sent to this rank (sent[dst] = rows for rank dst), bf16 rows.
std::vector<RowBuffer> alltoallv(const std::vector<RowBuffer>& sent, MPI_Comm comm) {
  const int R = static_cast<int>(sent.size());
  std::vector<int> scount(R), rcount(R), sdispl(R), rdispl(R);
  for (int d = 0; d < R; ++d) scount[d] = static_cast<int>(sent[d].size());
  mpi_check(MPI_Alltoall(scount.data(), 1, MPI_INT, rcount.data(), 1, MPI_INT, comm), "MPI_Alltoall (counts)");
  std::vector<uint16_t> sbuf, rbuf;
  int stotal = 0, rtotal = 0;
  for (int d = 0; d < R; ++d) {
    sdispl[d] = stotal;
    stotal += scount[d];
    rdispl[d] = rtotal;
    rtotal += rcount[d];
    sbuf.insert(sbuf.end(), sent[d].begin(), sent[d].end());
  }
  rbuf.resize(static_cast<size_t>(rtotal));
  mpi_check(MPI_Alltoallv(sbuf.data(), scount.data(), sdispl.data(), MPI_UINT16_T, rbuf.data(), rcount.data(),
                          rdispl.data(), MPI_UINT16_T, comm),
            "MPI_Alltoallv (rows)");
  std::vector<RowBuffer> received(R);
  for (int s = 0; s < R; ++s) received[s].assign(rbuf.begin() + rdispl[s], rbuf.begin() + rdispl[s] + rcount[s]);
  return received;
}

Tensor zeros(const std::string& name, ElemType type, std::vector<int64_t> shape) {
  Tensor t{name, type, std::move(shape), {}};
  t.bytes.assign(static_cast<size_t>(t.numel() * elem_size(type)), 0);
  return t;
}

uint16_t* bf16(Tensor& t) { return reinterpret_cast<uint16_t*>(t.bytes.data()); }
const uint16_t* bf16_of(const TensorSet& s, const char* n) {
  const Tensor* t = s.find(n);
  return t ? t->data<uint16_t>() : nullptr;
}

// This rank's inputs from the seed through ref::layer_input (the same values for any R).
TensorSet rank_inputs(const RunRequest& q, int r) {
  const LayerSpec& sp = q.spec;
  const int64_t T = q.config.tokens_per_rank, H = sp.hidden, I = sp.intermediate, K = sp.top_k;
  const int64_t Is = sp.shared_intermediate, EL = sp.experts / q.config.ranks;
  TensorSet set;
  Tensor x = zeros("x", ElemType::bf16, {T, H}), dout = zeros("d_out", ElemType::bf16, {T, H});
  ref::layer_input(sp, q.config.seed, ref::InputTensor::x, 0, r * T, T, bf16(x));
  ref::layer_input(sp, q.config.seed, ref::InputTensor::d_out, 0, r * T, T, bf16(dout));
  set.add(std::move(x));
  set.add(Tensor::from("topk_experts", ElemType::i32, {T, K},
                       std::vector<int32_t>(q.routing.topk_experts.begin() + r * T * K,
                                            q.routing.topk_experts.begin() + (r + 1) * T * K)));
  set.add(Tensor::from("router_weights", ElemType::f32, {T, K},
                       std::vector<float>(q.routing.router_weights.begin() + r * T * K,
                                          q.routing.router_weights.begin() + (r + 1) * T * K)));
  set.add(std::move(dout));
  auto expert_weights = [&](const char* name, ref::InputTensor which, int64_t rows, int64_t cols) {
    Tensor t = zeros(name, ElemType::bf16, {EL, rows, cols});
    for (int64_t le = 0; le < EL; ++le)
      ref::layer_input(sp, q.config.seed, which, static_cast<int>(r * EL + le), 0, rows, bf16(t) + le * rows * cols);
    set.add(std::move(t));
  };
  expert_weights("w_gate", ref::InputTensor::w_gate, I, H);
  expert_weights("w_up", ref::InputTensor::w_up, I, H);
  expert_weights("w_down", ref::InputTensor::w_down, H, I);
  if (Is > 0) {
    auto shared = [&](const char* name, ref::InputTensor which, int64_t rows, int64_t cols) {
      Tensor t = zeros(name, ElemType::bf16, {rows, cols});
      ref::layer_input(sp, q.config.seed, which, 0, 0, rows, bf16(t));
      set.add(std::move(t));
    };
    shared("ws_gate", ref::InputTensor::ws_gate, Is, H);
    shared("ws_up", ref::InputTensor::ws_up, Is, H);
    shared("ws_down", ref::InputTensor::ws_down, H, Is);
  }
  return set;
}

// One rank of the contract reference; the same stage sequence as the in-process driver.
TensorSet run_rank(const RunRequest& q, const Schedule& s, int r, MPI_Comm comm) {
  const LayerSpec& sp = q.spec;
  const int64_t T = q.config.tokens_per_rank, H = sp.hidden, I = sp.intermediate, K = sp.top_k;
  const int64_t Is = sp.shared_intermediate, EL = sp.experts / q.config.ranks;
  TensorSet set = rank_inputs(q, r);
  const ref::ExpertWeights w{bf16_of(set, "w_gate"),  bf16_of(set, "w_up"),  bf16_of(set, "w_down"),
                             bf16_of(set, "ws_gate"), bf16_of(set, "ws_up"), bf16_of(set, "ws_down")};
  auto received = alltoallv(ref::dispatch_pack(s, r, static_cast<int>(H), bf16_of(set, "x")), comm);
  std::vector<ref::FfnSaved> saved;
  auto received_y = alltoallv(ref::expert_forward(sp, s, r, received, w, saved), comm);
  ref::FfnSaved shared_saved;
  RowBuffer y_shared;
  if (Is > 0) y_shared = ref::shared_forward(sp, T, bf16_of(set, "x"), w, shared_saved);
  Tensor out = zeros("out", ElemType::bf16, {T, H});
  ref::combine(sp, s, q.routing, r, received_y, y_shared, bf16(out));
  set.add(std::move(out));
  if (!q.backward) return set;

  Tensor drw = zeros("d_router_weights", ElemType::f32, {T, K});
  ref::router_grad(sp, s, r, bf16_of(set, "d_out"), received_y, reinterpret_cast<float*>(drw.bytes.data()));
  received = alltoallv(ref::dispatch_pack(s, r, static_cast<int>(H), bf16_of(set, "d_out")), comm);
  TensorSet grads;
  grads.add(zeros("d_w_gate", ElemType::f32, {EL, I, H}));
  grads.add(zeros("d_w_up", ElemType::f32, {EL, I, H}));
  grads.add(zeros("d_w_down", ElemType::f32, {EL, H, I}));
  if (Is > 0) {
    grads.add(zeros("d_ws_gate", ElemType::f32, {Is, H}));
    grads.add(zeros("d_ws_up", ElemType::f32, {Is, H}));
    grads.add(zeros("d_ws_down", ElemType::f32, {H, Is}));
  }
  auto f = [&](const char* n) {
    Tensor* t = const_cast<Tensor*>(grads.find(n));
    return t ? reinterpret_cast<float*>(t->bytes.data()) : nullptr;
  };
  const ref::ExpertGrads g{f("d_w_gate"), f("d_w_up"), f("d_w_down"), f("d_ws_gate"), f("d_ws_up"), f("d_ws_down")};
  auto received_dx = alltoallv(ref::expert_backward(sp, s, q.routing, r, received, w, saved, g), comm);
  RowBuffer dx_shared;
  if (Is > 0) dx_shared = ref::shared_backward(sp, T, bf16_of(set, "d_out"), w, shared_saved, g);
  Tensor dx = zeros("d_x", ElemType::bf16, {T, H});
  ref::backward_combine(sp, s, r, received_dx, dx_shared, bf16(dx));
  set.add(std::move(dx));
  set.add(std::move(drw));
  for (auto& t : grads.tensors) set.add(std::move(t));
  return set;
}

// TensorSet <-> bytes for the gather: per tensor name, type, ndim, dims, byte count, bytes.
void put(std::vector<uint8_t>& b, const void* p, size_t n) {
  b.insert(b.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
}
std::vector<uint8_t> pack(const TensorSet& s) {
  std::vector<uint8_t> b;
  for (const auto& t : s.tensors) {
    const uint64_t name_len = t.name.size(), nd = t.shape.size(), nbytes = t.bytes.size();
    const uint8_t type = static_cast<uint8_t>(t.type);
    put(b, &name_len, 8);
    put(b, t.name.data(), name_len);
    put(b, &type, 1);
    put(b, &nd, 8);
    put(b, t.shape.data(), nd * 8);
    put(b, &nbytes, 8);
    put(b, t.bytes.data(), nbytes);
  }
  return b;
}
TensorSet unpack(const uint8_t* p, size_t n) {
  TensorSet s;
  size_t i = 0;
  auto get = [&](void* dst, size_t k) {
    require(i + k <= n, "MPI gather: truncated tensor blob");
    std::memcpy(dst, p + i, k);
    i += k;
  };
  while (i < n) {
    uint64_t name_len = 0, nd = 0, nbytes = 0;
    uint8_t type = 0;
    Tensor t;
    get(&name_len, 8);
    t.name.resize(name_len);
    get(t.name.data(), name_len);
    get(&type, 1);
    t.type = static_cast<ElemType>(type);
    get(&nd, 8);
    t.shape.resize(nd);
    get(t.shape.data(), nd * 8);
    get(&nbytes, 8);
    t.bytes.resize(nbytes);
    get(t.bytes.data(), nbytes);
    s.add(std::move(t));
  }
  return s;
}

}  // namespace

bool launched_by_mpi() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE") || std::getenv("PMIX_RANK");
}

MpiContext mpi_init() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    mpi_check(MPI_Init(nullptr, nullptr), "MPI_Init");
    std::atexit([] {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (!finalized) MPI_Finalize();
    });
  }
  MpiContext c;
  MPI_Comm_rank(MPI_COMM_WORLD, &c.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &c.size);
  return c;
}

RunResult mpi_run_reference(const RunRequest& q) {
  const MpiContext mc = mpi_init();
  require(q.config.ranks == mc.size, "mpirun -np must equal --ranks: {} processes, R={}", mc.size, q.config.ranks);
  const Schedule s = build_schedule(q.spec, q.config, q.routing);  // every process holds the global plan
  const std::vector<uint8_t> mine = pack(run_rank(q, s, mc.rank, MPI_COMM_WORLD));
  // Gather the blobs on rank 0 (sizes first).
  const int n = static_cast<int>(mine.size());
  std::vector<int> sizes(mc.size), displs(mc.size);
  mpi_check(MPI_Gather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Gather (sizes)");
  std::vector<uint8_t> all;
  if (mc.rank == 0) {
    int total = 0;
    for (int r = 0; r < mc.size; ++r) displs[r] = total, total += sizes[r];
    all.resize(static_cast<size_t>(total));
  }
  mpi_check(MPI_Gatherv(mine.data(), n, MPI_BYTE, all.data(), sizes.data(), displs.data(), MPI_BYTE, 0, MPI_COMM_WORLD),
            "MPI_Gatherv (tensors)");
  RunResult res;
  if (mc.rank == 0)
    for (int r = 0; r < mc.size; ++r)
      res.ranks.push_back(unpack(all.data() + displs[r], static_cast<size_t>(sizes[r])));
  return res;
}

}  // namespace calico::harness
