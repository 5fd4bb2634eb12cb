"""Which builds spill registers on which targets: every registered spec built for every target
of its family (CPU, CuTe DSL), SASS read for local-memory traffic (LDL/STL).

Writes ``tests/known_spills.json`` ({spec: [targets]}), the list ``test_build_all`` holds
builds to (strict: a listed build that stops spilling fails too, so the list stays exact).
``--ci``: only the (spec, target) pairs CI builds (test_build_all's rotation), much faster.

Run: python benchmarks/spill_survey.py [--only norm.] [--ci] [--jobs 2]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "tests" / "known_spills.json"
ARCH = "8.0 8.6 8.9 9.0a 10.0a 10.3a 12.0a 12.1a"  # test_build_all's CI_ARCH


def _spills(job: tuple[str, str]) -> tuple[str, str, int]:
    from cutefi.jit.compile import build
    from cutefi.jit.registry import all_specs
    from cutefi.jit.sass import disassemble
    from cutefi.jit.targets import Target

    described, sm = job
    spec = next(s for s in all_specs() if s.describe() == described)
    sass = disassemble(build(spec, Target.parse(sm)).cubin)
    return described, sm, len(re.findall(r"\b(LDL|STL)\b", sass))


def main(argv: list[str] | None = None) -> int:
    from cutefi.jit.policy import TargetPolicy
    from cutefi.jit.registry import all_specs
    from cutefi.jit.toolchain import toolchain_for

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="", help="spec name prefix (e.g. norm.)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--ci", action="store_true", help="only the pairs CI builds (one target a spec)")
    args = parser.parse_args(argv)
    jobs, turn = [], {}
    for spec in sorted(all_specs(), key=lambda spec: spec.describe()):
        targets = TargetPolicy.from_environment(toolchain_for(spec.kind), None, arch_list=ARCH).decide(spec.family).kept
        if not targets:
            continue
        index = turn.get(spec.name, 0)  # test_build_all.ci_build_plan's rotation over the family's targets
        turn[spec.name] = index + 1
        if spec.name.startswith(args.only):
            chosen = [targets[index % len(targets)]] if args.ci else targets
            jobs += [(spec.describe(), target.sm) for target in chosen]
    # --ci rewrites the list (only CI's pairs are held to it); a full survey keeps what it skipped
    known = json.loads(OUT.read_text()) if OUT.is_file() and not args.ci else {}
    surveyed = set(jobs)
    known = {spec: [t for t in targets if (spec, t) not in surveyed] for spec, targets in known.items()}
    known = {spec: targets for spec, targets in known.items() if targets}
    with ProcessPoolExecutor(args.jobs) as pool:
        for described, sm, count in pool.map(_spills, jobs, chunksize=8):
            if count:
                known.setdefault(described, []).append(sm)
                print(f"{described} @ {sm}: {count} spill instructions", flush=True)
    OUT.write_text(json.dumps({spec: sorted(known[spec]) for spec in sorted(known)}, indent=1) + "\n")
    print(f"{len(jobs)} builds; {sum(map(len, known.values()))} spill; wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
