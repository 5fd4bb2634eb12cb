import re, sys
from cutefi.jit.compile import build
from cutefi.jit.sass import disassemble
from cutefi.jit.targets import Target
from cutefi.norm import launch, tuning
n = int(sys.argv[1]); q = sys.argv[2]; sm = sys.argv[3]
quant = q != "none"
tuning.REGISTER_PREFETCH.add(("layer", n, quant))
spec = launch.norm_spec("layer", "bf16", n, aligned=True, out_dtype=q if quant else None)
sass = disassemble(build(spec, Target.parse(sm)).cubin)
print(n, q, sm, launch.geometry("layer", "bf16", n, False, True, q if quant else None).register_ring,
      "spill", len(re.findall(r"\b(LDL|STL)", sass)), flush=True)
