"""Build every bf16 norm build (NORM_SPECS, LATENCY_SPECS, PARAMS16_SPECS) of kind argv[2]
("rms" or "layer") and the classes in argv[3:] of the tree on PYTHONPATH into the pack named by
argv[1]. (Run from outside the repository: python puts a script's folder first on sys.path.)"""
import sys
from pathlib import Path

import cutefi
from cutefi.jit.aot import build_pack, plan
from cutefi.norm import launch


def main():
    print("cutefi from", cutefi.__file__)
    kind, classes = sys.argv[2], {int(c) for c in sys.argv[3:]}

    def wanted(key):
        return key[0] == kind and key[1] == "bf16" and key[2] in classes

    specs = [spec for key, spec in launch.NORM_SPECS.items() if wanted(key)]
    specs += [spec for key, spec in launch.LATENCY_SPECS.items() if wanted(key)]
    specs += [spec for (key, _), spec in launch.PARAMS16_SPECS.items() if wanted(key)]
    jobs, report = plan("9.0a", specs, None)
    build_pack(Path(sys.argv[1]), jobs, report, workers=2)
    print(len(report.built), "built", report.failed)


if __name__ == "__main__":
    main()
