import sys
from pathlib import Path


def main():
    from cutefi.jit.aot import build_pack, plan
    from cutefi.jit.registry import all_specs
    specs = [s for s in all_specs() if s.name in ("norm.rmsnorm", "norm.rmsnorm_latency")
             and dict(s.options).get("n_class") == 8192 and dict(s.options).get("dtype_name") == "bf16"
             and not dict(s.options).get("fused_add") and not dict(s.options).get("gemma")
             and "out_dtype" not in dict(s.options) and dict(s.options).get("aligned", True)]
    print([s.describe() for s in specs], flush=True)
    jobs, report = plan("9.0a", specs, None)
    build_pack(Path(sys.argv[1]), jobs, report, workers=1)
    print(len(report.built), "built", report.failed)


if __name__ == "__main__":
    main()
