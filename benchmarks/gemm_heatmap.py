"""Heat map of cutefi's mm_bf16 against cuBLAS (torch.matmul) over issue 13's grid, from the JSON
``cutefi-bench --testlist benchmarks/cases/gemm_llama.txt --output X.json`` writes.

    python benchmarks/gemm_heatmap.py benchmarks/results/gemm_llama_h200.json gemm_llama_h200.png

Cell: median time of cublas / median time of cutefi (above 1: cutefi faster), same run.
Prints the grid, the median ratio and the smallest, and the weight GB/s of the M <= 16 points.
"""

from __future__ import annotations

import json
import statistics
import sys


def ratios(rows: list[dict]) -> dict[tuple[int, int, int], float]:
    times: dict[tuple[int, int, int], dict[str, float]] = {}
    for row in rows:
        if row["routine"] == "mm_bf16":
            times.setdefault((row["m"], row["n"], row["k"]), {})[row["backend"]] = row["median_us"]
    return {shape: t["cublas"] / t["cutefi"] for shape, t in times.items() if "cublas" in t and "cutefi" in t}


def main(source: str, png: str) -> None:
    rows = json.load(open(source))["rows"]
    grid = ratios(rows)
    ms = sorted({m for m, _, _ in grid})
    nks = sorted({(n, k) for _, n, k in grid}, key=lambda nk: (nk[0] * nk[1], nk))
    print("M \\ (N, K)  " + "  ".join(f"{n}x{k}" for n, k in nks))
    for m in ms:
        print(f"{m:>10}  " + "  ".join(f"{grid.get((m, n, k), float('nan')):>{len(f'{n}x{k}')}.2f}" for n, k in nks))
    values = list(grid.values())
    print(f"median ratio {statistics.median(values):.3f}, min {min(values):.3f}, points {len(values)}")
    for row in rows:
        if row["routine"] == "mm_bf16" and row["m"] <= 16 and row["backend"] == "cutefi":
            weight_gb = row["n"] * row["k"] * 2 / 1e9
            print(f"M={row['m']} N={row['n']} K={row['k']}: {weight_gb / row['median_us'] * 1e6:.0f} GB/s of weights")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5))
    data = [[grid.get((m, n, k), float("nan")) for n, k in nks] for m in ms]
    image = ax.imshow(data, cmap="RdYlGn", vmin=0.5, vmax=1.5, aspect="auto")
    ax.set_xticks(range(len(nks)), [f"{n}x{k}" for n, k in nks], rotation=30)
    ax.set_yticks(range(len(ms)), [str(m) for m in ms])
    ax.set_xlabel("N x K")
    ax.set_ylabel("M")
    for i, row in enumerate(data):
        for j, value in enumerate(row):
            ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=8)
    gpu = rows[0].get("gpu", "")
    ax.set_title(f"mm_bf16: cuBLAS time / cutefi time ({gpu}, {rows[0].get('date', '')[:10]})")
    fig.colorbar(image, ax=ax)
    fig.tight_layout()
    fig.savefig(png, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
