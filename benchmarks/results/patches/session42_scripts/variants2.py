import re, sys
from cutefi.jit.compile import build
from cutefi.jit.sass import disassemble
from cutefi.jit.targets import Target
from cutefi.norm import launch, tuning
tpr, block, depth, per_sm = map(int, sys.argv[1:5])
sm = sys.argv[5] if len(sys.argv) > 5 else "9.0a"
q = sys.argv[6] if len(sys.argv) > 6 else "fp8e4m3"
n = int(sys.argv[7]) if len(sys.argv) > 7 else 4096
tuning.LAYER_PREFETCH[(n, q is not None and q != "none")] = (tpr, block, depth)
orig = launch.min_ctas_per_sm
launch.min_ctas_per_sm = lambda *a, **k: max(1, per_sm // block)
spec = launch.norm_spec("layer", "bf16", n, aligned=True, out_dtype=None if q == "none" else q)
res = build(spec, Target.parse(sm))
sass = disassemble(res.cubin)
print(sys.argv[1:], "spill", len(re.findall(r"\b(LDL|STL)", sass)), "lines", len(sass.splitlines()), flush=True)
