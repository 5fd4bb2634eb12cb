"""Build the aligned bf16 RMSNorm builds (plain, FP8 e4m3, fused add, fused FP8) of classes 1024-16384,
with their latency builds, of the tree on PYTHONPATH into a pack."""
import sys
from pathlib import Path

import cutefi
from cutefi.jit.aot import build_pack, plan
from cutefi.norm import launch


def main():
    print("cutefi from", cutefi.__file__)
    specs = []
    for n in (1024, 2048, 4096, 8192, 16384):
        for fused in (False, True):
            for out in (None, "fp8e4m3"):
                specs.append(launch.norm_spec("rms", "bf16", n, fused, False, True, out))
                if launch.latency_rows("rms", fused, out is not None, n):
                    specs.append(launch.norm_spec("rms", "bf16", n, fused, False, True, out, True))
    jobs, report = plan("9.0a", specs, None)
    build_pack(Path(sys.argv[1]), jobs, report, workers=2)
    print(len(report.built), "built", report.failed)


if __name__ == "__main__":
    main()
