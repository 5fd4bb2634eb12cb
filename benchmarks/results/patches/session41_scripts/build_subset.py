"""Build the given norm specs (kind:n_class:aligned(0/1):quant(0/1)) of the tree on PYTHONPATH into a pack."""
import sys
from pathlib import Path

import cutefi
from cutefi.jit.aot import build_pack, plan
from cutefi.norm import launch


def main():
    print("cutefi from", cutefi.__file__)
    specs = []
    for k in sys.argv[2].split(","):
        norm, n, aligned, q = k.split(":")
        specs.append(launch.norm_spec(norm, "bf16", int(n), aligned=aligned == "1",
                                      out_dtype="fp8e4m3" if q == "1" else None))
    jobs, report = plan("9.0a", specs, None)
    build_pack(Path(sys.argv[1]), jobs, report, workers=2)
    print(len(report.built), "built", report.failed)


if __name__ == "__main__":
    main()
