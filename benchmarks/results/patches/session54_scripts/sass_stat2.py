"""Spills and instruction count of norm specs (kind:dtype:n:aligned:out[:gemma|silu]) for a target."""
import re, sys
from cutefi.jit.compile import build
from cutefi.jit.sass import disassemble
from cutefi.jit.targets import Target
from cutefi.norm import launch
sm = sys.argv[1]
for key in sys.argv[2:]:
    parts = key.split(":")
    kind, dt, n, aligned, q = parts[:5]
    extra = parts[5] if len(parts) > 5 else ""
    spec = launch.norm_spec(kind, dt, int(n), gemma=extra == "gemma", aligned=aligned == "1",
                            out_dtype=None if q == "none" else q, silu=extra == "silu")
    sass = disassemble(build(spec, Target.parse(sm)).cubin)
    print(key, sm, "spill", len(re.findall(r"\b(LDL|STL)\b", sass)), "LDGSTS", len(re.findall(r"LDGSTS", sass)),
          "lines", len(sass.splitlines()), flush=True)
