import re, sys, collections
from cutefi.jit.compile import build
from cutefi.jit.sass import disassemble
from cutefi.jit.targets import Target
from cutefi.norm import launch
kind, n, aligned, q = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4]
spec = launch.norm_spec(kind, "bf16", n, aligned=aligned, out_dtype=None if q == "none" else q)
sass = disassemble(build(spec, Target.parse("9.0a")).cubin)
open(sys.argv[5], "w").write(sass)
ops = collections.Counter(re.findall(r"^\s+/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", sass, re.M))
print(sum(ops.values()), ops.most_common(40))
