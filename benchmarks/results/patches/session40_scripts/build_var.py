"""Build the LN 4096 (and given) norm specs of the tree on PYTHONPATH into a pack; print regs/spills per target."""
import io, re, sys
from pathlib import Path
from elftools.elf.elffile import ELFFile
from cutefi.jit.aot import build_pack, plan
from cutefi.jit.compile import build
from cutefi.jit.sass import disassemble
from cutefi.jit.targets import Target
from cutefi.norm import launch


def regs(cubin: bytes) -> int:
    elf = ELFFile(io.BytesIO(cubin))
    return max((s["sh_info"] >> 24) for s in elf.iter_sections() if s.name.startswith(".text."))


def main():
    out = Path(sys.argv[1])
    kinds = sys.argv[2].split(",")  # e.g. layer:4096,layer_quant:4096
    specs = []
    for k in kinds:
        norm, n, *rest = k.split(":")
        kw = {"latency": True} if rest == ["lat"] else {}
        if norm.endswith("_q"):
            norm = norm[:-2]; kw["out_dtype"] = "fp8e4m3"
        specs.append(launch.norm_spec(norm, "bf16", int(n), **kw))
    for spec in specs:
        for sm in (sys.argv[3].split(",") if len(sys.argv) > 3 else ["9.0a"]):
            art = build(spec, Target.parse(sm) if hasattr(Target, "parse") else Target(sm))
            sass = disassemble(art.cubin)
            print(spec.describe(), sm, "regs", regs(art.cubin), "spill-instr", len(re.findall(r"\b(LDL|STL)\b", sass)),
                  "LDG128", len(re.findall(r"LDG\.E[^ ]*\.128", sass)), flush=True)
    if out.name != "none":
        jobs, report = plan("9.0a", specs, None)
        build_pack(out, jobs, report, workers=2)
        print(len(report.built), "built", report.failed)


if __name__ == "__main__":
    main()
