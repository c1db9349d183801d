#!/usr/bin/env python3
"""PyTorch MoE baseline on the same shapes as `calico bench`, and the dense bf16 GEMM ceiling.

Baseline (the one ANCHORS.md measured): permute tokens to expert order, torch._grouped_mm for gate/up (one
N = 2I GEMM) and down, SwiGLU, weighted index_add combine; backward through autograd. CUDA events around each
iteration, L2 flushed before each, median after warm-up; peak device memory. Prints one JSON line per row.

Usage: python3 bench/torch_moe_baseline.py --preset qwen3-30b-a3b --tokens 16384 [--iters 20] [--json F]
"""
import argparse
import json
import math
import os
import statistics
import sys

import torch


def load_preset(name):
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "..", "data", "presets", name + ".json")) as f:
        return json.load(f)


def median_ms(fn, iters, warmup):
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        flush.zero_()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def moe_layer(x, topk, weights, w_gu, w_d, I):
    T, K = topk.shape
    flat = topk.reshape(-1)
    order = torch.argsort(flat, stable=True)
    counts = torch.bincount(flat, minlength=w_gu.shape[0])
    offs = torch.cumsum(counts, 0).to(torch.int32)
    tokens = order // K
    xs = x[tokens]
    gu = torch._grouped_mm(xs, w_gu.transpose(-2, -1), offs=offs)
    g, u = gu[:, :I], gu[:, I:]
    h = torch.nn.functional.silu(g) * u
    y = torch._grouped_mm(h, w_d.transpose(-2, -1), offs=offs)
    y = y * weights.reshape(-1)[order].unsqueeze(1).to(y.dtype)
    out = torch.zeros_like(x)
    out.index_add_(0, tokens, y)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="qwen3-30b-a3b")
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    p = load_preset(a.preset)
    H, I, E, K = p["hidden"], p["intermediate"], p["experts"], p["top_k"]
    if p.get("shared_intermediate", 0):
        sys.exit("the PyTorch baseline covers routed experts only: use a preset without a shared expert")
    T = a.tokens
    torch.manual_seed(a.seed)
    dev = "cuda"
    x = torch.randn(T, H, device=dev, dtype=torch.bfloat16, requires_grad=True)
    logits = torch.randn(T, E, device=dev)
    w, topk = torch.topk(torch.softmax(logits, -1), K, dim=-1)
    w_gu = (torch.randn(E, 2 * I, H, device=dev, dtype=torch.bfloat16) / math.sqrt(H)).requires_grad_()
    w_d = (torch.randn(E, H, I, device=dev, dtype=torch.bfloat16) / math.sqrt(I)).requires_grad_()
    d_out = torch.randn(T, H, device=dev, dtype=torch.bfloat16)
    flops_fwd = 6.0 * T * K * H * I

    def fwd():
        with torch.no_grad():
            moe_layer(x, topk, w, w_gu, w_d, I)

    def fwd_bwd():
        out = moe_layer(x, topk, w, w_gu, w_d, I)
        out.backward(d_out)

    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    t_fwd = median_ms(fwd, a.iters, a.warmup)
    t_all = median_ms(fwd_bwd, a.iters, a.warmup)
    peak = torch.cuda.max_memory_allocated()

    # Dense ceiling: one bf16 GEMM of the same forward FLOPs (M = T*K rows of [H -> 3I] equivalents: 8192^3 too).
    n = 8192
    A = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    B = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    t_dense = median_ms(lambda: A @ B, a.iters, a.warmup)
    dense_tflops = 2.0 * n**3 / (t_dense * 1e-3) / 1e12
    row = {
        "backend": "pytorch-grouped-mm", "preset": a.preset, "tokens": T, "torch": torch.__version__,
        "device": torch.cuda.get_device_name(), "forward_ms": round(t_fwd, 4), "forward_backward_ms": round(t_all, 4),
        "forward_tflops": round(flops_fwd / (t_fwd * 1e-3) / 1e12, 1),
        "forward_backward_tflops": round(3 * flops_fwd / (t_all * 1e-3) / 1e12, 1),
        "peak_bytes": peak, "resident_bytes": base, "dense_tflops": round(dense_tflops, 1),
        "dense_ideal_forward_ms": round(flops_fwd / (dense_tflops * 1e12) * 1e3, 4),
        "dense_ideal_forward_backward_ms": round(3 * flops_fwd / (dense_tflops * 1e12) * 1e3, 4),
    }
    print(json.dumps(row))
    if a.json:
        with open(a.json, "w") as f:
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
