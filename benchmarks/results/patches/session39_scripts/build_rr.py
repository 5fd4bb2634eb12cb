import sys
# (as run in session 39: the modes came from a CUTEFI_EXP_REREAD switch in a variant of norm/launch.py, since replaced by launch._RMS_REREAD)
from pathlib import Path
from cutefi.jit.aot import build_pack, plan
from cutefi.norm import launch


def main():
    specs = [launch.norm_spec("rms", "bf16", n) for n in (4096, 8192, 16384)]
    jobs, report = plan("9.0a", specs, None)
    build_pack(Path(sys.argv[1]), jobs, report, workers=2)
    print(len(report.built), "built", report.failed)


if __name__ == "__main__":
    main()
