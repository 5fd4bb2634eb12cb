"""bf16 -> bf16 K-major dense sm90 builds (swapped or not; the first unroll run took the swapped ones only) of this tree."""
import importlib
import sys
from pathlib import Path
from cutefi.jit.aot import build_pack, plan
from cutefi.jit.registry import all_specs

importlib.import_module("cutefi.gemm.launch")  # (registers the GEMM specs)


def keep(s):
    o = dict(s.options)
    return (s.name == "gemm.sm90" and o.get("dtype") == "bf16" and o.get("b_major") == "k"
            and o.get("out_dtype") == "bf16" and not o.get("grouped") and not o.get("block_scaled"))


def main():
    specs = [s for s in all_specs() if keep(s)]
    print(len(specs), flush=True)
    jobs, report = plan("9.0a", specs, None)
    build_pack(Path(sys.argv[1]), jobs, report, workers=2)
    print(len(report.built), "built", report.failed)


if __name__ == "__main__":
    main()
