"""cutefi-bench on the CPU tier: CUPTI record matching, statistics, the events fallback, argument
handling, the CSV/JSON schema, the plot and the compile-only report."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import warnings

import pytest
import torch

from cutefi.bench import cli, cupti_timer, report, runner, timing
from cutefi.bench.ceilings import Ceilings
from cutefi.bench.cupti_records import ApiCall, GpuActivity, NoGpuWork, iteration_spans_ns
from cutefi.bench.routines import ROUTINES, BenchInputError, Cost, Routine, ShapeFlag
from cutefi.bench.timing import GpuTime, rotating_copies_needed

HAS_GPU = torch.cuda.is_available()


# --- CUPTI record matching --------------------------------------------------------------------

def test_spans_cover_first_start_to_last_end_of_each_window():
    windows = [(100, 200), (1000, 1100)]
    calls = [
        ApiCall(50, 60, 1),      # L2 flush memset, before the first window: never counted
        ApiCall(110, 120, 2),    # runtime launch of kernel A
        ApiCall(112, 118, 3),    # the driver call nested in it (no work of its own)
        ApiCall(130, 140, 4),    # a second launch in the same iteration
        ApiCall(1000, 1010, 5),  # starts exactly at the second window's start: counted
        ApiCall(1100, 1105, 6),  # starts exactly at its end: counted
    ]
    work = [
        GpuActivity(300, 700, 1, "memset"),
        GpuActivity(500, 540, 2, "kernel_a"),
        GpuActivity(545, 600, 4, "kernel_b"),
        GpuActivity(2000, 2100, 5, "memcpy/memset"),
        GpuActivity(2100, 2160, 6, "kernel_c"),
    ]
    assert iteration_spans_ns(windows, calls, work) == [100, 160]


def test_a_graph_launch_is_one_call_with_many_kernels():
    calls = [ApiCall(10, 20, 7)]
    work = [GpuActivity(100 + 10 * i, 105 + 10 * i, 7, f"node{i}") for i in range(5)]
    assert iteration_spans_ns([(0, 50)], calls, work) == [45]


def test_records_arrive_in_any_order():
    calls = [ApiCall(30, 31, 2), ApiCall(10, 11, 1)]
    work = [GpuActivity(90, 95, 2, "b"), GpuActivity(50, 60, 1, "a")]
    assert iteration_spans_ns([(0, 20), (25, 40)], calls, work) == [10, 5]


def test_a_window_without_gpu_work_is_an_error_not_zero():
    with pytest.raises(NoGpuWork, match="iteration 1"):
        iteration_spans_ns([(0, 10), (20, 30)], [ApiCall(1, 2, 1), ApiCall(21, 22, 2)],
                           [GpuActivity(5, 9, 1, "k")])


# --- statistics and the timer dispatch ------------------------------------------------------

def test_gpu_time_statistics():
    samples = tuple(float(v) for v in range(1, 11))  # 1 .. 10 ms
    timed = GpuTime(samples, "cupti", cold_l2=False)
    assert timed.median_ms == 5.5 and timed.mean_ms == 5.5
    assert timed.quantile_ms(0.1) == 2.0 and timed.quantile_ms(0.9) == 10.0
    assert timed.spread == pytest.approx(8 / 5.5)
    summary = timed.summary()
    assert summary["median_us"] == 5500 and summary["iters"] == 10 and summary["timer"] == "cupti"


def test_rotating_copies_cover_twice_the_l2():
    assert rotating_copies_needed(32 << 20, 50 << 20) == 4
    assert rotating_copies_needed(1 << 30, 50 << 20) == 1
    assert rotating_copies_needed(16, 50 << 20) == 256  # capped
    assert rotating_copies_needed(0, 50 << 20) == 1


def test_cupti_unavailable_falls_back_to_events_with_one_warning(monkeypatch):
    class NoCupti:
        def __init__(self):
            raise cupti_timer.CuptiUnavailable("profiler busy")

    monkeypatch.setattr(timing, "ActivityTrace", NoCupti)
    monkeypatch.setattr(timing.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(timing, "_warm_up", lambda call, warmup: 1.0)
    monkeypatch.setattr(timing, "_event_windows", lambda call, before, iters: [0.5] * iters)
    monkeypatch.setattr(timing, "_warned_fallback", False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = timing.bench_gpu_time(lambda: None, timer="cupti", iters=3)
        second = timing.bench_gpu_time(lambda: None, timer="cupti", iters=3)
    assert first.timer == second.timer == "events" and first.samples_ms == (0.5, 0.5, 0.5)
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1 and "profiler busy" in messages[0]


def test_cupti_without_a_driver_reports_unavailable():
    pytest.importorskip("cupti")
    if HAS_GPU:
        pytest.skip("checks the no-driver path")
    with pytest.raises(cupti_timer.CuptiUnavailable, match="failed to start"):
        with cupti_timer.ActivityTrace():
            pass


def test_missing_cupti_python_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupti", None)
    with pytest.raises(cupti_timer.CuptiUnavailable, match=r"cutefi\[bench\]"):
        cupti_timer.load_cupti()


def test_bench_gpu_time_refuses_bad_arguments():
    with pytest.raises(ValueError, match="timer must be one of"):
        timing.bench_gpu_time(lambda: None, timer="nvtx")
    with pytest.raises(ValueError, match="iters"):
        timing.bench_gpu_time(lambda: None, iters=0)
    with pytest.raises(TypeError, match="callable"):
        timing.bench_gpu_time(42)


# --- argument handling ------------------------------------------------------------------------

@pytest.mark.parametrize("argv, message", [
    (["--routine", "nope"], "unknown routine 'nope'; known: rmsnorm"),
    (["--routine", "rmsnorm", "--backends", "nope"], "unknown backend 'nope'"),
    (["--routine", "rmsnorm", "--backends", "cudnn"], "rmsnorm has no cudnn backend; it has: cutefi"),
    (["--routine", "rmsnorm", "--tokens", "8"], "--tokens does not apply to rmsnorm"),
    (["--routine", "rmsnorm", "--hidden", "0"], "--hidden 0: must be at least 1"),
    (["--routine", "rope", "--head-dim", "100"], "--head-dim 100: rope takes multiples of 16"),
    (["--routine", "copy", "--mib", "0"], "--mib 0: must be at least 1"),
    (["--routine", "rmsnorm", "--dtype", "fp8"], "--dtype fp8: accepted are bf16, fp16"),
    (["--routine", "layernorm", "--param-bits", "24"], "--param-bits 24: 32 (float32) or 16"),
    (["--routine", "fused_rmsnorm_silu", "--dtype", "fp16"], "--dtype fp16: fused_rmsnorm_silu takes bf16"),
    (["--routine", "fused_rmsnorm_silu", "--out-bits", "32"], "--out-bits 32: 16 (bf16) or 8 (float8_e4m3fn)"),
    (["--routine", "rmsnorm", "--param-bits", "16"], "--param-bits does not apply to rmsnorm"),
    (["--output", "results.txt"], "the suffix picks the format"),
    (["--plot", "plot.svg"], "write a .png"),
    (["--output", "/nonexistent/folder/r.csv"], "the folder /nonexistent/folder does not exist"),
    (["--iters", "0"], "--iters"),
    (["--testlist", "/nonexistent/cases.txt"], "No such file"),
])
def test_bad_input_is_a_message_and_exit_2(argv, message, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_missing_peer_is_named(monkeypatch, capsys):
    from cutefi.bench import backends

    monkeypatch.setattr(backends, "missing_reason", lambda name: "flashinfer is not installed"
                        if name == "flashinfer" else None)
    monkeypatch.setattr(runner, "missing_reason", backends.missing_reason)
    assert cli.main(["--routine", "rope", "--backends", "cutefi", "flashinfer"]) == 2
    assert "backend flashinfer was asked for but cannot run here: flashinfer is not installed" in capsys.readouterr().err


def test_bad_input_through_the_installed_command_has_no_traceback():
    result = subprocess.run([sys.executable, "-m", "cutefi.bench.cli", "--routine", "rmsnorm", "--rows", "x"],
                            capture_output=True, text=True)
    assert result.returncode == 2 and "invalid int value: 'x'" in result.stderr
    assert "Traceback" not in result.stderr


def test_default_suite_and_explicit_routines_pick_their_sizes():
    args = cli.build_parser().parse_args([])
    suite = cli.requests_from(args, None, quick=True)
    assert [r.routine for r in suite] == list(ROUTINES)
    assert suite[0].sizes == {"rows": (128, 16384), "hidden": (4096,)}
    args = cli.build_parser().parse_args(["--routine", "rmsnorm", "rope", "--head-dim", "64", "--dtype", "fp16"])
    rmsnorm, rope = cli.requests_from(args, args.routine, quick=False)
    assert rmsnorm.sizes["rows"] == (1, 128, 4096, 16384, 65536) and rmsnorm.dtypes == ("fp16",)
    assert rope.sizes["head_dim"] == (64,) and rope.sizes["tokens"] == (1, 128, 4096, 16384, 65536)


def test_layernorm_rows_name_16_bit_parameters_only():
    """--param-bits 16 times layernorm with gamma/beta in the input's dtype; fp32 rows keep the
    label they had before the flag (results stay comparable), and the bytes count the parameters'."""
    routine = ROUTINES["layernorm"]()
    args = cli.build_parser().parse_args(["--routine", "layernorm", "--rows", "8", "--hidden", "4096",
                                          "--param-bits", "32", "16"])
    request, = cli.requests_from(args, args.routine, quick=False)
    shapes = list(routine.shapes(request.sizes))
    assert [routine.label(shape) for shape in shapes] == ["rows=8 hidden=4096", "rows=8 hidden=4096 param_bits=16"]
    fp32, bf16 = (routine.cost(shape, torch.bfloat16).bytes for shape in shapes)
    assert fp32 - bf16 == 2 * 4096 * 2


def test_testlist_lines_become_requests(tmp_path):
    cases = tmp_path / "cases.txt"
    cases.write_text("# rmsnorm first\n"
                     "--routine rmsnorm --rows 7 --hidden 4096 8192 --backends cutefi torch\n\n"
                     "--routine rope --tokens 128 --dtype fp16   # trailing comment\n")
    first, second = cli.read_testlist(str(cases))
    assert first.routine == "rmsnorm" and first.sizes == {"rows": (7,), "hidden": (4096, 8192)}
    assert first.backends == ("cutefi", "torch")
    assert second.routine == "rope" and second.dtypes == ("fp16",) and second.sizes["tokens"] == (128,)
    # the command line's --backends go to the lines that name none
    first, second = cli.read_testlist(str(cases), ["cutefi", "cublas"])
    assert first.backends == ("cutefi", "torch") and second.backends == ("cutefi", "cublas")


@pytest.mark.parametrize("line, message", [
    ("--rows 7", "cases.txt:1: each line needs --routine"),
    ("--routine rmsnorm --iters 5", "cases.txt:1: not a case flag: --iters"),
    ("--routine rmsnorm --tokens 5", "cases.txt:1: --tokens does not apply"),
])
def test_testlist_errors_name_the_line(tmp_path, line, message):
    cases = tmp_path / "cases.txt"
    cases.write_text(line + "\n")
    with pytest.raises(BenchInputError, match=message):
        cli.read_testlist(str(cases))


def test_list_works_without_a_gpu(capsys):
    assert cli.main(["--list"]) == 0
    out = capsys.readouterr().out
    for name in ROUTINES:
        assert name in out


# --- a whole run on the CPU: a fake routine, a fake timer ----------------------------------

class Scale(Routine):
    """y = 2x on the CPU; "torch" is deliberately wrong so refcheck must fail it."""

    name = "scale"
    flags = (ShapeFlag("numel", (64,), (64,), "elements"),)

    def backends(self):
        return {"cutefi": lambda x: x * 2, "torch": lambda x: x * 2 + 1,
                "torch.compile": lambda x: (_ for _ in ()).throw(ValueError("refused: numel must be even\nmore"))}

    def make_inputs(self, shape, dtype):
        return (torch.randn(shape["numel"]).to(dtype),)

    def reference(self, inputs, shape):
        return (inputs[0].float() * 2,)

    def cost(self, shape, dtype):
        return Cost(bytes=4 * shape["numel"])


@pytest.fixture
def fake_gpu(monkeypatch):
    monkeypatch.setitem(ROUTINES, "scale", Scale)
    monkeypatch.setattr(runner, "missing_reason", lambda name: None)
    # two rounds a case (cutefi, torch; then torch, cutefi): each round's first backend 1 ms slower
    fast, slow = (0.010, 0.011, 0.012), (0.020, 0.021, 0.022)
    timings = iter([(0.011, 0.012, 0.013), slow, (0.021, 0.022, 0.023), fast] * 2)
    monkeypatch.setattr(runner, "bench_gpu_time", lambda fn, args, **kw: GpuTime(next(timings), "cupti", False))
    from cutefi.bench import ceilings, environment

    monkeypatch.setattr(ceilings, "cached", lambda **kw: Ceilings(copy_gbps=4000.0, matmul_tflops=800.0,
                                                                  measured_with="cupti"))
    monkeypatch.setattr(environment, "environment", lambda argv=None: {"gpu": "Fake GPU", "driver_cuda": "13.0",
                                                                       "torch": "x", "command": "cutefi-bench"})
    monkeypatch.setattr("cutefi.jit.driver.gpu_available", lambda: (True, ""))


def test_a_run_writes_csv_json_and_png_and_fails_loudly_on_refcheck(fake_gpu, tmp_path, capsys):
    csv_path, json_path, png_path = tmp_path / "r.csv", tmp_path / "r.json", tmp_path / "r.png"
    code = cli.main(["--routine", "scale", "--dtype", "bf16", "fp16", "--refcheck", "--output", str(csv_path),
                     str(json_path), "--plot", str(png_path)])
    captured = capsys.readouterr()
    assert code == 1  # torch's wrong answer and torch.compile's refusal
    assert "REFCHECK FAILED: scale numel=64 bf16 torch" in captured.err
    assert "ERROR: scale numel=64 bf16 torch.compile: ValueError: refused: numel must be even" in captured.err
    document = json.loads(json_path.read_text())
    assert document["schema"] == report.SCHEMA
    rows = document["rows"]
    assert len(rows) == 6  # 2 dtypes x 3 backends
    for row in rows:
        for key in ("routine", "shape", "dtype", "backend", "gpu", "driver_cuda", "torch", "command",
                    "requested_timer", "iters", "copy_ceiling_gbps"):
            assert key in row, key
    good = next(r for r in rows if r["backend"] == "cutefi" and r["dtype"] == "bf16")
    assert good["refcheck"] == "pass" and good["rel_err"] == 0.0
    assert good["median_us"] == pytest.approx(11.0) and good["timer"] == "cupti"
    assert good["gbps"] == pytest.approx(256 / 11e-6 / 1e9)
    assert good["pct_of_ceiling"] == pytest.approx(100 * good["gbps"] / 4000) and good["ceiling"] == "copy"
    slower = next(r for r in rows if r["backend"] == "torch" and r["dtype"] == "bf16")
    assert slower["refcheck"] == "FAIL" and slower["vs_fastest"] == pytest.approx(21 / 11)
    assert good["rounds"] == slower["rounds"] == 2  # (each backend's faster round: timed once first, once last)
    with csv_path.open() as handle:
        table = list(csv.DictReader(handle))
    assert len(table) == 6 and list(table[0])[:4] == ["routine", "shape", "dtype", "backend"]
    assert {r["gpu"] for r in table} == {"Fake GPU"}
    assert png_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "Fake GPU" not in captured.out or "scale" in captured.out  # the table is printed


def test_compare_catches_nan_and_shape_mismatch():
    ref = (torch.ones(4),)
    assert runner.compare((torch.ones(4),), ref, 0.0, 0.0)[0]
    assert not runner.compare((torch.tensor([1.0, float("nan"), 1.0, 1.0]),), ref, 1.0, 1.0)[0]
    assert not runner.compare((torch.ones(5),), ref, 1.0, 1.0)[0]
    assert not runner.compare((), ref, 1.0, 1.0)[0]


# --- without a GPU: the compile-only report ----------------------------------------------------

def test_without_a_gpu_the_command_says_so_and_builds_instead(tmp_path):
    pytest.importorskip("cutlass")
    if HAS_GPU:
        pytest.skip("checks the no-GPU path")
    out = tmp_path / "compile.json"
    result = subprocess.run([sys.executable, "-m", "cutefi.bench.cli", "--only", "copy.vector", "fill(bits=16)",
                             "--arch", "8.0 12.0a", "--output", str(out)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "no CUDA GPU visible" in result.stderr and "compile-only report" in result.stderr
    assert "sm_80" in result.stdout and "sm_120a" in result.stdout and "total (2 kernels)" in result.stdout
    document = json.loads(out.read_text())
    assert document["schema"] == "cutefi-bench-compile/1"
    built = {(row["kernel"], row["target"]) for row in document["rows"]}
    assert built == {("copy.vector_copy()", "sm_80"), ("copy.vector_copy()", "sm_120a"),
                     ("fill.fill(bits=16)", "sm_80"), ("fill.fill(bits=16)", "sm_120a")}
    assert all(row["cubin_bytes"] > 1000 and row["build_s"] > 0 for row in document["rows"])


def test_compile_report_refuses_an_unknown_kernel(capsys):
    pytest.importorskip("cutlass")
    assert cli.main(["--compile-only", "--only", "no_such_kernel", "--arch", "8.0"]) == 2
    assert "no kernel name contains any of: no_such_kernel" in capsys.readouterr().err


class DoubleInPlace(Routine):
    """x *= 2 in place, two correct backends: timing mutates the inputs between refchecks."""

    name = "double_inplace"
    flags = (ShapeFlag("numel", (16,), (16,), "elements"),)

    def backends(self):
        return {"cutefi": lambda x: x.mul_(2), "torch": lambda x: x.add_(x)}

    def make_inputs(self, shape, dtype):
        return (torch.randn(shape["numel"]),)

    def reference(self, inputs, shape):
        return (inputs[0] * 2,)

    def cost(self, shape, dtype):
        return Cost(bytes=8 * shape["numel"])


def test_refcheck_of_in_place_ops_starts_from_the_original_inputs(monkeypatch):
    def fake_timer(fn, args, **kwargs):
        for _ in range(3):
            fn(*args)  # as timing would: the inputs change
        return GpuTime((0.01,), "cupti", False)

    monkeypatch.setattr(runner, "bench_gpu_time", fake_timer)
    monkeypatch.setattr(runner, "missing_reason", lambda name: None)
    monkeypatch.setitem(ROUTINES, "double_inplace", DoubleInPlace)
    item = runner.plan(runner.Request("double_inplace", None, ("bf16",), {"numel": (16,)}))
    rows = runner.run_plan(item, runner.Options(refcheck=True), ceilings=None)
    assert [row["refcheck"] for row in rows] == ["pass", "pass"]


def test_the_queued_sleep_is_bounded():
    # a first call that compiled for seconds must not turn into a seconds-long sleep per iteration
    assert timing.queue_cycles(5e6) == timing.queue_cycles(2000.0) == 2000 * 2000
    assert timing.queue_cycles(1.0) == 50 * 2000
    assert timing.queue_cycles(100.0) == 200 * 2000


def test_compile_report_names_the_arch_variable(capsys, monkeypatch):
    pytest.importorskip("cutlass")
    monkeypatch.setenv("CUTEFI_CUDA_ARCH_LIST", "foo")
    assert cli.main(["--compile-only", "--only", "fill"]) == 2
    assert "CUTEFI_CUDA_ARCH_LIST='foo'" in capsys.readouterr().err
