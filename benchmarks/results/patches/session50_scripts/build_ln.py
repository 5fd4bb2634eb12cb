"""Build the bf16 LayerNorm builds of the classes in argv[2:] (default 4096): plain and FP8,
aligned and shifted, fp32 and 16-bit parameters, latency builds, of the tree on PYTHONPATH into
the pack named by argv[1]. (Run from outside the repository: python puts a script's folder first
on sys.path, and the cwd for python -c.)"""
import sys
from pathlib import Path

import cutefi
from cutefi.jit.aot import build_pack, plan
from cutefi.norm import launch


def main():
    print("cutefi from", cutefi.__file__)
    classes = {int(c) for c in sys.argv[2:]} or {4096}
    specs = [spec for key, spec in launch.NORM_SPECS.items()
             if key[0] == "layer" and key[1] == "bf16" and key[2] in classes]
    specs += [spec for key, spec in launch.LATENCY_SPECS.items()
              if key[0] == "layer" and key[1] == "bf16" and key[2] in classes]
    specs += [spec for (key, _), spec in launch.PARAMS16_SPECS.items()
              if key[0] == "layer" and key[1] == "bf16" and key[2] in classes]
    jobs, report = plan("9.0a", specs, None)
    build_pack(Path(sys.argv[1]), jobs, report, workers=2)
    print(len(report.built), "built", report.failed)


if __name__ == "__main__":
    main()
