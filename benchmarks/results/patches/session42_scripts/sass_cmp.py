import hashlib, re, sys
from cutefi.jit.compile import build
from cutefi.jit.sass import disassemble
from cutefi.jit.targets import Target
from cutefi.norm import launch
sm = sys.argv[1] if len(sys.argv) > 1 else "9.0a"
cases = [("rms", "bf16", 4096, False, False, False, None), ("rms", "bf16", 4096, False, False, True, "fp8e4m3"),
         ("layer", "bf16", 4096, False, False, True, None), ("layer", "bf16", 4096, False, False, False, "fp8e4m3"),
         ("layer", "bf16", 4096, False, False, True, "fp8e4m3"), ("layer", "bf16", 16384, False, False, False, None),
         ("layer", "bf16", 1024, False, False, True, "fp8e4m3"), ("layer", "bf16", 2048, False, False, True, None),
         ("layer", "bf16", 8192, False, False, True, "fp8e4m3"), ("layer", "bf16", 8192, False, False, True, None),
         ("layer", "bf16", 16384, False, False, True, "fp8e5m2"), ("layer", "fp16", 32768, False, False, True, None)]
for (norm, dt, n, fa, g, al, q) in cases:
    spec = launch.norm_spec(norm, dt, n, fused_add=fa, gemma=g, aligned=al, out_dtype=q)
    sass = disassemble(build(spec, Target.parse(sm)).cubin)
    body = "\n".join(l.split("*/", 1)[-1] for l in sass.splitlines() if "/*" in l)
    print(norm, dt, n, "aligned" if al else "shifted", q, hashlib.sha1(body.encode()).hexdigest()[:10],
          "lines", len(sass.splitlines()), "spill", len(re.findall(r"\b(LDL|STL)", sass)), "bar", len(re.findall(r"\bBAR\b", sass)), flush=True)
