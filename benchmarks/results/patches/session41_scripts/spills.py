import re, sys
from cutefi.jit.compile import build
from cutefi.jit.sass import disassemble
from cutefi.jit.targets import Target
from cutefi.norm import launch
cases = [("fp16", 4096, "fp8e4m3", "8.6"), ("bf16", 16384, "fp8e4m3", "12.1a"), ("bf16", 16384, "fp8e5m2", "8.0"),
         ("fp16", 16384, "fp8e5m2", "12.0a"), ("bf16", 4096, "fp8e4m3", "8.0"), ("bf16", 4096, None, "8.0")]
for dt, n, q, sm in cases:
    spec = launch.norm_spec("layer", dt, n, aligned=False, out_dtype=q)
    sass = disassemble(build(spec, Target.parse(sm)).cubin)
    print(dt, n, q, sm, len(re.findall(r"\b(LDL|STL)", sass)), flush=True)
