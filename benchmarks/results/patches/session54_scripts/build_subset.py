"""Build, for the tree on PYTHONPATH (sm_90a), its RMSNorm and LayerNorm 4096-class builds (aligned and
shifted: the class's, latency, 16-bit-parameter and SiLU builds of every dtype and output) and the copy
and fill kernels into a pack."""
import sys
from pathlib import Path

import cutefi
from cutefi.jit.aot import build_pack, plan
from cutefi.jit.registry import all_specs


def wanted(description: str, name: str) -> bool:
    if name.startswith(("copy", "fill")):
        return True
    # (aligned and shifted: 4095 against 4096 in the same process)
    return (name.startswith(("norm.rmsnorm", "norm.layernorm")) and "n_class=4096" in description
            and "fused_add=False" in description)


def main():
    print("cutefi from", cutefi.__file__)
    specs = [s for s in all_specs() if wanted(s.describe(), s.name)]
    jobs, report = plan("9.0a", specs, None)
    build_pack(Path(sys.argv[1]), jobs, report, workers=2)
    print(len(report.built), "built of", len(jobs), "failed:", report.failed)


if __name__ == "__main__":
    main()
