"""The examples notebook and the notebook-facing pieces of cutefi.bench, on the CPU tier: the
notebook is stored stripped and runs end to end in a real Jupyter kernel (GPU cells skip
themselves with a note, the compile-only cell builds); results render as tables and plots."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

import cutefi
import cutefi.bench
from cutefi.bench import interactive, runner
from cutefi.bench.routines import BenchInputError
from cutefi.bench.timing import GpuTime

from conftest import HAS_GPU, requires_dsl

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "examples" / "quickstart.ipynb"
sys.path.insert(0, str(ROOT / "examples"))


def test_the_notebook_is_stored_without_outputs():
    document = json.loads(NOTEBOOK.read_text())
    code = [cell for cell in document["cells"] if cell["cell_type"] == "code"]
    assert len(code) >= 6
    for cell in code:
        assert cell["outputs"] == [] and cell["execution_count"] is None, "strip the outputs before committing"


@requires_dsl
def test_the_notebook_runs_headless_in_a_jupyter_kernel(tmp_path):
    from execute_notebook import as_text, execute

    pytest.importorskip("nbclient")
    notebook = execute(NOTEBOOK, timeout=600, cwd=tmp_path)
    text = as_text(notebook)
    errors = [o for cell in notebook.cells for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, errors
    assert "cutefi " + cutefi.__version__ in text  # the env cell
    if not HAS_GPU:
        for cell in ("rmsnorm check", "RoPE check", "merging attention states", "timing", "sweep"):
            assert f"skipped ({cell}): no CUDA GPU visible here" in text
    # the compile-only cell built its two kernels for three targets and showed the table
    assert "sm_80" in text and "sm_120a" in text and "total (2 kernels)" in text


def test_a_failing_cell_fails_the_run(tmp_path):
    pytest.importorskip("nbclient")
    import nbformat
    from execute_notebook import main

    bad = tmp_path / "bad.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("assert 1 == 2, 'boom'")],
                                            metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                                     "language": "python"}}), str(bad))
    assert main([str(bad)]) == 1


# --- results that read well in a notebook ------------------------------------------------------

def rows_of_a_run():
    common = {"routine": "rmsnorm", "shape": "rows=8 hidden=64", "rows": 8, "hidden": 64, "dtype": "bf16",
              "bytes": 2048, "flops": 0, "gpu": "Fake GPU", "timer": "cupti"}
    return [{**common, "backend": "cutefi", "median_us": 2.0, "gbps": 1.024, "tflops": None, "ceiling": "copy",
             "pct_of_ceiling": 0.03, "vs_fastest": 1.0, "refcheck": "pass", "rel_err": 1e-3, "spread": 0.01},
            {**common, "backend": "torch", "median_us": 4.0, "gbps": 0.512, "tflops": None, "ceiling": "copy",
             "pct_of_ceiling": 0.015, "vs_fastest": 2.0, "refcheck": "pass", "rel_err": 2e-3, "spread": 0.02},
            {**common, "backend": "torch.compile", "error": "ValueError: <refused> & more"}]


def test_results_are_a_table_in_html_and_text():
    results = cutefi.bench.Results.timing(rows_of_a_run(), ["rmsnorm: flashinfer not run: not installed"])
    assert len(results) == 3 and results[0]["backend"] == "cutefi"
    assert list(results)[1]["median_us"] == 4.0
    html = results._repr_html_()
    assert html.startswith("<table>") and "<th>median µs" in html
    assert "&lt;refused&gt; &amp; more" in html  # escaped, not raw markup
    assert "flashinfer not run" in html
    text = repr(results)
    assert "2.00" in text and "torch.compile" in text and "flashinfer not run" in text
    assert repr(cutefi.bench.Results.timing([])) == "(no rows)"


def test_results_plot_is_a_figure_and_writes_files(tmp_path):
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    results = cutefi.bench.Results.timing(rows_of_a_run())
    figure = results.plot(tmp_path / "sweep.png")
    assert isinstance(figure, Figure) and len(figure.axes[0].lines) >= 2  # two backends (+ ceiling line)
    assert (tmp_path / "sweep.png").read_bytes()[:4] == b"\x89PNG"
    results.write(tmp_path / "rows.json")
    assert json.loads((tmp_path / "rows.json").read_text())["rows"][0]["backend"] == "cutefi"
    with pytest.raises(TypeError, match="only timing results"):
        cutefi.bench.Results.compiled([]).plot()


def test_to_pandas_gives_a_frame_or_says_how_to_get_pandas(monkeypatch):
    results = cutefi.bench.Results.timing(rows_of_a_run())
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="pip install pandas"):
            results.to_pandas()
        return
    frame = results.to_pandas()
    assert list(frame.columns[:4]) == ["routine", "shape", "dtype", "backend"] and len(frame) == 3
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match="pip install pandas"):
        results.to_pandas()


def test_gpu_time_is_one_line_and_a_small_table():
    timed = GpuTime((0.010, 0.011, 0.012, 0.013), "cupti", True)
    assert repr(timed) == ("GpuTime(median 11.50 µs, p10 10.00, p90 13.00, spread 26.1%, 4 iterations, "
                           "cupti, cold L2)")
    assert "<th>median</th>" in timed._repr_html_() and "11.50 µs" in timed._repr_html_()


def test_run_routine_returns_the_rows_of_the_command(monkeypatch):
    from test_bench import Scale  # the CPU fake routine of the CLI tests

    monkeypatch.setitem(interactive.ROUTINES, "scale", Scale)
    monkeypatch.setattr(runner, "missing_reason", lambda name: None)
    timings = iter([(0.010, 0.011, 0.012), (0.020, 0.021, 0.022)] * 4)
    monkeypatch.setattr(runner, "bench_gpu_time", lambda fn, args, **kw: GpuTime(next(timings), "cupti", False))
    from cutefi.bench import environment

    monkeypatch.setattr(environment, "environment", lambda argv=None: {"gpu": "Fake GPU", "command": argv})
    monkeypatch.setattr("cutefi.jit.driver.gpu_available", lambda: (True, ""))
    results = cutefi.bench.run_routine("scale", numel=[64, 128], backends=["cutefi", "torch"], ceilings=False,
                                       progress=False)
    assert [(row["numel"], row["backend"]) for row in results] == [(64, "cutefi"), (64, "torch"),
                                                                   (128, "cutefi"), (128, "torch")]
    assert results[0]["refcheck"] == "pass" and results[1]["refcheck"] == "FAIL"  # torch's fake is wrong
    assert results[0]["command"] == "cutefi.bench.run_routine('scale', numel=[64, 128])"
    assert results[0]["median_us"] == pytest.approx(11.0)


@pytest.mark.parametrize("kwargs, message", [
    (dict(routine="nope"), "unknown routine 'nope'"),
    (dict(routine="rmsnorm", tokens=4), "rmsnorm has no size tokens; its sizes are: rows, hidden"),
    (dict(routine="rmsnorm", rows="many"), "rows='many': give an int or a list of ints"),
    (dict(routine="rmsnorm", timer="stopwatch"), "timer must be one of"),
    (dict(routine="rmsnorm", dtype="fp64"), "--dtype fp64"),
])
def test_run_routine_refuses_bad_input_before_timing(kwargs, message):
    with pytest.raises(BenchInputError, match=message.replace("(", r"\(").replace("[", r"\[")):
        cutefi.bench.run_routine(**kwargs)


@pytest.mark.skipif(HAS_GPU, reason="checks the no-GPU message")
def test_run_routine_without_a_gpu_points_at_the_compile_report():
    with pytest.raises(RuntimeError, match="compile_kernels"):
        cutefi.bench.run_routine("rmsnorm", rows=8, hidden=64)


@requires_dsl
def test_compile_kernels_refuses_an_unknown_kernel():
    with pytest.raises(BenchInputError, match="no kernel name contains any of: no_such_kernel"):
        cutefi.bench.compile_kernels(arch="8.0", only="no_such_kernel")


def test_env_report_as_data(tmp_path, monkeypatch):
    monkeypatch.setenv("CUTEFI_CACHE_DIR", str(tmp_path))
    report = cutefi.env()
    assert report.facts["cutefi"] == cutefi.__version__
    assert str(report).splitlines()[0] == f"cutefi {cutefi.__version__}"
    assert "rmsnorm" in report.facts["ops"] and report.facts["ops"]["rmsnorm"]["dtypes"] == ["bf16", "fp16"]
    assert report.facts["torch"] == torch.__version__
    assert report._repr_html_().startswith("<pre>cutefi ")
    if not HAS_GPU:
        assert report.facts["gpus"] == [] and "GPU: none" in str(report)
    assert "env" not in cutefi.__all__  # a report, not an op
