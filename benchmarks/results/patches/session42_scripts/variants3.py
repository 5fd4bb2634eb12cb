import re, sys
from cutefi.jit.compile import build
from cutefi.jit.sass import disassemble
from cutefi.jit.targets import Target
from cutefi.norm import launch, tuning
tpr, block, depth, per_sm = map(int, sys.argv[1:5])
sm = sys.argv[5]; q = sys.argv[6]; n = int(sys.argv[7])
quant = q != "none"
tuning.LAYER_SHIFTED_PREFETCH[(n, quant)] = (tpr, block, depth)
tuning.LAYER_SHIFTED_THREADS_PER_SM[n] = per_sm
spec = launch.norm_spec("layer", "bf16", n, aligned=False, out_dtype=None if not quant else q)
print(launch.geometry("layer", "bf16", n, aligned=False, out_dtype=None if not quant else q))
sass = disassemble(build(spec, Target.parse(sm)).cubin)
print(sys.argv[1:], "spill", len(re.findall(r"\b(LDL|STL)", sass)), "lines", len(sass.splitlines()), flush=True)
