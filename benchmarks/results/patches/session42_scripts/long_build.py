import re, sys, time
from cutefi.jit.compile import build
from cutefi.jit.sass import disassemble
from cutefi.jit.targets import Target
from cutefi.norm import long_rows
sm = sys.argv[1] if len(sys.argv) > 1 else "9.0a"
only = sys.argv[2] if len(sys.argv) > 2 else None
for key, spec in long_rows.LONG_SPECS.items():
    if key[1] != "bf16" and only != "all":
        continue
    t = time.time()
    sass = disassemble(build(spec, Target.parse(sm)).cubin)
    ops = {op: len(re.findall(op, sass)) for op in ("LDG.E.128", "LDG.E.U16", "LDG.E ", "STG.E.128", "STG.E.U16", "STG.E.U8", "STG.E.64", "STG.E ", "LDL", "STL")}
    print(key, f"{time.time()-t:.1f}s", {k: v for k, v in ops.items() if v}, flush=True)
