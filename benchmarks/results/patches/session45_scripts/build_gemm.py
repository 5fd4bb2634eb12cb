"""Build the gemm specs of one group into a pack: dense (16-bit in, any out) or rest (FP8, block-scaled, grouped)."""
import sys
from pathlib import Path

from cutefi.gemm import launch
from cutefi.jit.aot import build_pack, plan


def main():
    out, group = sys.argv[1], sys.argv[2]
    dense = [s for d in (launch.SM90_SPECS, launch.SKINNY_SPECS, launch.SM80_SPECS, launch.GEMV_SPECS)
             for k, s in d.items() if k[0] in launch.DTYPES]
    if group == "dense":
        specs = dense
    elif group == "fp32":
        specs = [s for s in dense if dict(s.options)["out_dtype"] == "fp32"]
    else:
        from cutefi.jit.registry import all_specs
        dense_ids = {id(s) for s in dense}
        specs = [s for s in all_specs() if s.name.startswith("gemm") and id(s) not in dense_ids]
    jobs, report = plan("9.0a", specs, None)
    build_pack(Path(out), jobs, report, workers=2)
    print(len(specs), "specs;", len(report.built), "built", report.failed)


if __name__ == "__main__":
    main()
