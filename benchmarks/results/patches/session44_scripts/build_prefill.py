"""Build the given prefill Hopper specs (dtype:head_dim:page_size, page 0 = ragged) of the tree on PYTHONPATH into a pack."""
import sys
from pathlib import Path

import cutefi
from cutefi.jit.aot import build_pack, plan
from cutefi.prefill import launch


def main():
    print("cutefi from", cutefi.__file__)
    specs = []
    for k in sys.argv[2].split(","):
        dtype, d, page = k.split(":")
        specs.append(launch.SM90_SPECS[(dtype, int(d))] if page == "0" else launch.PAGED_SPECS[(dtype, int(d), int(page))])
    jobs, report = plan("9.0a", specs, None)
    build_pack(Path(sys.argv[1]), jobs, report, workers=2)
    print(len(report.built), "built", report.failed)


if __name__ == "__main__":
    main()
