import sys
from pathlib import Path
from cutefi.jit.aot import build_pack, plan
from cutefi.norm import launch


def main():
    specs = [launch.norm_spec("layer", "bf16", 4096), launch.norm_spec("layer", "bf16", 4096, latency=True)]
    jobs, report = plan("9.0a", specs, None)
    build_pack(Path(sys.argv[1]), jobs, report, workers=2)
    print(len(report.built), "built", report.failed)


if __name__ == "__main__":
    main()
