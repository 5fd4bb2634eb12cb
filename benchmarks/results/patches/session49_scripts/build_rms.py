"""Build the plain aligned bf16 RMSNorm builds (every class of issue 11's grid, and their latency
builds) of the tree on PYTHONPATH into the pack named by argv[1]."""
import sys
from pathlib import Path

import cutefi
from cutefi.jit.aot import build_pack, plan
from cutefi.norm import launch


def main():
    print("cutefi from", cutefi.__file__)
    specs = []
    for n in (2048, 4096, 8192, 16384):
        specs.append(launch.norm_spec("rms", "bf16", n))
        if launch.latency_rows("rms", False, False, n):
            specs.append(launch.norm_spec("rms", "bf16", n, latency=True))
    jobs, report = plan("9.0a", specs, None)
    build_pack(Path(sys.argv[1]), jobs, report, workers=2)
    print(len(report.built), "built", report.failed)


if __name__ == "__main__":
    main()
