"""apply_rope_pos_ids against torch eager and torch.compile (and FlashInfer if importable), same run.

Bytes: read q and k, write q and k (out of place), read pos_ids.
Run: ``python -m cutefi.bench.rope --out results.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import torch

import cutefi
from cutefi.bench.foundation import environment
from cutefi.bench.timing import measure

TOKENS = (1, 128, 4096, 16384, 65536)
HEADS = ((32, 8, 128), (64, 8, 128), (32, 32, 64))  # (q heads, k heads, head_dim)


def torch_rope(q: torch.Tensor, k: torch.Tensor, pos_ids: torch.Tensor, theta: float = 1e4):
    """NeoX-style RoPE as a model would write it in torch (fp32 math, out of place)."""
    d = q.shape[-1]
    inv_freq = theta ** (-torch.arange(0, d, 2, device=q.device, dtype=torch.float32) / d)
    angle = pos_ids.float()[:, None] * inv_freq[None, :]
    cos, sin = angle.cos()[:, None, :], angle.sin()[:, None, :]

    def rotate(x):
        x1, x2 = x[..., : d // 2].float(), x[..., d // 2 :].float()
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1).to(x.dtype)

    return rotate(q), rotate(k)


def peers() -> dict[str, Any]:
    found = {"torch eager": torch_rope}
    try:
        import flashinfer  # noqa: F401

        found["flashinfer"] = lambda q, k, pos: flashinfer.apply_rope_pos_ids(q, k, pos)
    except Exception:
        pass
    return found


def run(dtype: torch.dtype = torch.bfloat16, tokens_list=TOKENS) -> list[dict[str, Any]]:
    torch._dynamo.config.recompile_limit = 1024
    results = []
    for heads_q, heads_k, head_dim in HEADS:
        for tokens in tokens_list:
            torch._dynamo.reset()
            q = torch.randn(tokens, heads_q, head_dim, device="cuda", dtype=dtype)
            k = torch.randn(tokens, heads_k, head_dim, device="cuda", dtype=dtype)
            pos = torch.randint(0, 32768, (tokens,), device="cuda", dtype=torch.int32)
            nbytes = 2 * (q.numel() + k.numel()) * q.element_size() + pos.numel() * 4
            compiled = torch.compile(torch_rope, dynamic=False)
            flat = torch.empty(q.numel() + k.numel(), device="cuda", dtype=dtype)
            flat_out = torch.empty_like(flat)
            calls = {"copy floor": lambda: flat_out.copy_(flat),  # torch copy of q and k: same bytes
                     "cutefi": lambda: cutefi.apply_rope_pos_ids(q, k, pos),
                     "cutefi inplace": lambda: cutefi.apply_rope_pos_ids_inplace(q, k, pos),
                     "torch.compile": lambda: compiled(q, k, pos)}
            calls |= {name: (lambda fn=fn: fn(q, k, pos)) for name, fn in peers().items()}
            for backend, call in calls.items():
                label = f"rope T={tokens:6d} H={heads_q}/{heads_k} D={head_dim} {backend:15s}"
                results.append(measure(call, nbytes, label, wall=tokens <= 128, op="apply_rope_pos_ids",
                                       dtype=str(dtype)[6:], tokens=tokens, q_heads=heads_q, k_heads=heads_k,
                                       head_dim=head_dim, backend=backend))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True)
    parser.add_argument("--tokens", type=int, nargs="+", default=list(TOKENS))
    args = parser.parse_args(argv)
    report = {"env": environment(), "results": run(tokens_list=args.tokens)}
    with open(args.out, "w") as handle:
        json.dump(report, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
