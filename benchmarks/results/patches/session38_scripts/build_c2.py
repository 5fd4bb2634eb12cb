"""bf16 -> bf16 K-major non-swapped 128 x {64, 128} builds (c1, c2, c1k2) of this tree."""
import importlib
import sys
from pathlib import Path
from cutefi.jit.aot import build_pack, plan
from cutefi.jit.registry import all_specs

importlib.import_module("cutefi.gemm.launch")  # (registers the GEMM specs)


def keep(s):
    o = dict(s.options)
    return (s.name == "gemm.sm90" and o.get("dtype") == "bf16" and o.get("b_major") == "k" and not o.get("swap")
            and o.get("out_dtype") == "bf16" and not o.get("grouped") and not o.get("block_scaled")
            and o.get("tile_n") in (64, 128))


def main():
    specs = [s for s in all_specs() if keep(s)]
    print(len(specs), [(dict(s.options)["tile_n"], dict(s.options)["cluster_m"], dict(s.options).get("cluster_k")) for s in specs], flush=True)
    jobs, report = plan("9.0a", specs, None)
    build_pack(Path(sys.argv[1]), jobs, report, workers=2)
    print(len(report.built), "built", report.failed)


if __name__ == "__main__":
    main()
