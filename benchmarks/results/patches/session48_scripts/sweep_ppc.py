"""Session 48: the append kernel's pieces a CTA (launch.append_pieces_per_cta), forced to each
value and to the heuristic's, over append sizes; cutefi-bench's CUPTI medians. Usage:
python sweep_ppc.py [args for cutefi-bench]."""
import sys

import cutefi.attention.api as api
import cutefi.attention.launch as launch
from cutefi.bench.cli import main

auto = launch.append_pieces_per_cta
for label, choice in [("auto", auto), *[(str(n), (lambda n: lambda pieces, sms: n)(n)) for n in (128, 256, 384, 512)],
                      ("auto2", auto)]:
    launch.append_pieces_per_cta = choice
    api._PLANS.clear()
    print(f"### pieces_per_cta {label}", flush=True)
    main(sys.argv[1:])
