#!/usr/bin/python3
"""Writes tiny-skewed-128x4.h5: an example routing trace for the `tiny` preset (E=16, K=4), 128 tokens.

Layout (read by calico::read_routing_h5 and `calico run --routing FILE.h5`):
  /routing/topk_experts    int32   [tokens, K]  global expert ids, distinct within a row, in [0, E)
  /routing/router_weights  float32 [tokens, K]  finite; here a softmax over the K chosen experts
A run with R ranks and T tokens per rank replays the first R*T rows (token g = r*T + t).
"""
import h5py
import numpy as np

rng = np.random.default_rng(20261130)
tokens, experts, k = 128, 16, 4
popularity = 1.0 / np.arange(1, experts + 1) ** 1.2  # expert 0 hottest: a skewed, rank-0-heavy trace
popularity /= popularity.sum()
ids = np.stack([rng.choice(experts, size=k, replace=False, p=popularity) for _ in range(tokens)]).astype(np.int32)
logits = rng.standard_normal((tokens, k))
weights = np.exp(logits - logits.max(axis=1, keepdims=True))
weights = (weights / weights.sum(axis=1, keepdims=True)).astype(np.float32)
with h5py.File("tiny-skewed-128x4.h5", "w") as f:
    f.create_dataset("routing/topk_experts", data=ids)
    f.create_dataset("routing/router_weights", data=weights)
