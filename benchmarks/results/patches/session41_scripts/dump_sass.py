import sys
from cutefi.jit.compile import build
from cutefi.jit.sass import disassemble
from cutefi.jit.targets import Target
from cutefi.norm import launch
norm, n, aligned, q, out = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4] == "1", sys.argv[5]
spec = launch.norm_spec(norm, "bf16", n, aligned=aligned, out_dtype="fp8e4m3" if q else None)
open(out, "w").write(disassemble(build(spec, Target.parse("9.0a")).cubin))
