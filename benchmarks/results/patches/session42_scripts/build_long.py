import sys
from pathlib import Path


def main():
    from cutefi.jit.aot import build_pack, plan
    from cutefi.norm import long_rows
    jobs, report = plan("9.0a", list(long_rows.LONG_SPECS.values()), None)
    build_pack(Path(sys.argv[1]), jobs, report, workers=2)
    print(len(report.built), "built", report.failed)


if __name__ == "__main__":
    main()
