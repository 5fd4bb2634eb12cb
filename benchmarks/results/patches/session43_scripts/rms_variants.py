import re, sys
from cutefi.jit.compile import build
from cutefi.jit.sass import disassemble
from cutefi.jit.targets import Target
from cutefi.norm import launch, tuning
tpr, block, depth, per_sm = map(int, sys.argv[1:5])
sm = sys.argv[5]; q = sys.argv[6]
quant = q != "none"
tuning.CLASS_TABLE[4096] = (tpr // 2, block)
if depth:
    tuning.RMS_SHIFTED_PREFETCH[(4096, quant)] = depth
else:
    tuning.RMS_SHIFTED_PREFETCH.pop((4096, quant), None)
tuning.SHIFTED_RMS_THREADS_PER_SM_BY_CLASS[(4096, quant, "bf16")] = per_sm
spec = launch.norm_spec("rms", "bf16", 4096, aligned=False, out_dtype=None if not quant else q)
print(launch.geometry("rms", "bf16", 4096, aligned=False, out_dtype=None if not quant else q))
sass = disassemble(build(spec, Target.parse(sm)).cubin)
print(sys.argv[1:], "spill", len(re.findall(r"\b(LDL|STL)", sass)), "lines", len(sass.splitlines()), flush=True)
