"""``cutefi-bench``: measure cutefi on this GPU (routines grow with each op family)."""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

ROUTINES = ("foundation",)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cutefi-bench", description=__doc__)
    parser.add_argument("--routine", choices=ROUTINES, default="foundation",
                        help="foundation: launch overhead, first call, import time, copy bandwidth")
    parser.add_argument("--output", default="cutefi-bench.json", help="JSON file for the results")
    args = parser.parse_args(argv)
    from cutefi.jit.driver import gpu_available

    available, why = gpu_available()
    if not available:
        print(f"cutefi-bench: no CUDA GPU visible ({why}); nothing to time. "
              f"`cutefi aot --arch ... --out DIR` builds kernels without a GPU.", file=sys.stderr)
        return 2
    from cutefi.bench import foundation

    return foundation.main(["--out", args.output])


if __name__ == "__main__":
    sys.exit(main())
