"""Dispatch: the kernel variant per compute capability, its logged reason, forcing, errors.

Fake compute capabilities only: no GPU, no torch, no CuTe DSL.
"""

import contextlib
import logging
import subprocess
import sys

import pytest

from cutefi.jit import dispatch
from cutefi.jit.dispatch import (
    FORCE_ENV,
    NoVariantError,
    Variant,
    choose,
    decide,
    force_variant,
)
from cutefi.jit.policy import Family

WGMMA = Variant("wgmma", Family.WGMMA, impl="sm90 kernel")
MMA_SYNC = Variant("mma_sync", Family.MMA_SYNC, impl="sm80 kernel")
TCGEN05 = Variant("tcgen05", Family.TCGEN05)
GEMM = (WGMMA, MMA_SYNC)


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.delenv(FORCE_ENV, raising=False)
    dispatch.clear_cache()
    yield
    dispatch.clear_cache()


@pytest.mark.parametrize("cc, name, sm", [
    ((8, 0), "mma_sync", "sm_80"),
    ((8, 9), "mma_sync", "sm_89"),
    ((9, 0), "wgmma", "sm_90a"),
    ((10, 0), "mma_sync", "sm_100a"),
    ((12, 0), "mma_sync", "sm_120a"),
])
def test_wgmma_on_hopper_mma_sync_elsewhere(cc, name, sm):
    variant = choose("gemm", GEMM, cc)
    assert variant.name == name
    assert variant.impl == {"wgmma": "sm90 kernel", "mma_sync": "sm80 kernel"}[name]
    choice = decide("gemm", GEMM, cc)
    assert choice.target.sm == sm and choice.forced_by is None
    assert choice.reason.startswith(f"{name}: {sm} on CC {cc[0]}.{cc[1]}")


def test_preference_order_and_skipped_reasons():
    ops = (TCGEN05, WGMMA, MMA_SYNC)
    assert choose("attention", ops, (10, 0)).name == "tcgen05"
    assert choose("attention", ops, (9, 0)).name == "wgmma"
    choice = decide("attention", ops, (8, 9))
    assert choice.variant is MMA_SYNC
    assert [name for name, _ in choice.skipped] == ["tcgen05", "wgmma"]
    assert "wgmma skipped: the wgmma family needs wgmma, which only sm_90a has" in choice.reason
    # mma_sync listed first wins even on Hopper: order is the op's preference
    assert choose("gemm_correctness", (MMA_SYNC, WGMMA), (9, 0)).name == "mma_sync"


def test_reason_is_logged_once_per_op_and_cc(caplog):
    caplog.set_level(logging.DEBUG, logger="cutefi.dispatch")
    for _ in range(3):
        choose("gemm", GEMM, (8, 9))
        choose("gemm", GEMM, (9, 0))
    records = [r for r in caplog.records if r.name == "cutefi.dispatch"]
    assert [r.levelno for r in records] == [logging.DEBUG, logging.DEBUG]
    messages = [r.getMessage() for r in records]
    assert messages[0].startswith("gemm on CC 8.9 -> mma_sync: sm_89 on CC 8.9; wgmma skipped: ")
    assert "only sm_90a" in messages[0]
    assert messages[1] == "gemm on CC 9.0 -> wgmma: sm_90a on CC 9.0"


def test_memoised_per_op_and_cc():
    first = decide("gemm", GEMM, (9, 0))
    assert decide("gemm", GEMM, (9, 0)) is first
    assert decide("gemm", list(GEMM), (9, 0)) is first        # equal list, same decision
    assert decide("gemm", GEMM, (8, 0)) is not first
    assert decide("other", GEMM, (9, 0)) is not first
    # a different variant list for the same op is decided afresh, not served stale
    assert choose("gemm", (MMA_SYNC,), (9, 0)).name == "mma_sync"


def test_force_variant_context_manager(caplog):
    caplog.set_level(logging.DEBUG, logger="cutefi.dispatch")
    assert choose("gemm", GEMM, (9, 0)).name == "wgmma"
    with force_variant("gemm", "mma_sync"):
        choice = decide("gemm", GEMM, (9, 0))
        assert choice.variant.name == "mma_sync" and choice.target.sm == "sm_90"
        assert choice.forced_by == "force_variant()"
        assert choose("attention", GEMM, (9, 0)).name == "wgmma"   # other ops untouched
    assert choose("gemm", GEMM, (9, 0)).name == "wgmma"            # restored after the block
    assert any("forced by force_variant()" in r.getMessage() for r in caplog.records)


def test_force_variant_nests_and_restores():
    with force_variant("gemm", "mma_sync"):
        with force_variant("gemm", "wgmma"):
            assert choose("gemm", GEMM, (9, 0)).name == "wgmma"
        assert choose("gemm", GEMM, (9, 0)).name == "mma_sync"


def test_force_variant_environment(monkeypatch):
    monkeypatch.setenv(FORCE_ENV, "gemm=mma_sync, attention=wgmma")
    choice = decide("gemm", GEMM, (9, 0))
    assert choice.variant.name == "mma_sync" and choice.forced_by == FORCE_ENV
    assert choose("attention", GEMM, (9, 0)).name == "wgmma"
    assert choose("norm", GEMM, (9, 0)).name == "wgmma"  # not named: normal dispatch
    with force_variant("gemm", "wgmma"):                    # the context manager wins
        assert choose("gemm", GEMM, (9, 0)).name == "wgmma"
    monkeypatch.delenv(FORCE_ENV)                            # read per call, not once
    assert choose("gemm", GEMM, (9, 0)).name == "wgmma"


@pytest.mark.parametrize("text", ["gemm", "gemm=", "=wgmma", "gemm:wgmma"])
def test_malformed_environment_is_refused(monkeypatch, text):
    monkeypatch.setenv(FORCE_ENV, text)
    with pytest.raises(ValueError, match=f"{FORCE_ENV}.*expected op=variant"):
        choose("gemm", GEMM, (9, 0))


def test_forcing_unknown_variant_names_op_and_variants():
    with force_variant("gemm", "tcgen05"):
        with pytest.raises(ValueError) as error:
            choose("gemm", GEMM, (10, 0))
    message = str(error.value)
    assert "'tcgen05'" in message and "'gemm'" in message and "wgmma, mma_sync" in message


@pytest.mark.parametrize("how", ["context", "env"])
@pytest.mark.parametrize("cc", [(8, 0), (8, 9), (10, 0), (12, 0)])
def test_forcing_variant_the_device_cannot_run(monkeypatch, how, cc):
    with contextlib_for(how, monkeypatch, "gemm", "wgmma"):
        with pytest.raises(ValueError) as error:
            choose("gemm", GEMM, cc)
    message = str(error.value)
    assert "'wgmma'" in message and "'gemm'" in message
    assert f"CC {cc[0]}.{cc[1]}" in message and "only sm_90a" in message
    assert (FORCE_ENV if how == "env" else "force_variant()") in message


def contextlib_for(how, monkeypatch, op, name):
    if how == "context":
        return force_variant(op, name)
    monkeypatch.setenv(FORCE_ENV, f"{op}={name}")
    return contextlib.nullcontext()


def test_no_variant_lists_each_and_why():
    with pytest.raises(NoVariantError) as error:
        choose("attention", (TCGEN05, WGMMA), (8, 9))
    message = str(error.value)
    assert "no variant of op 'attention' can run on CC 8.9" in message
    assert "tcgen05 (tcgen05): the tcgen05 family needs tcgen05 (sm_100a or sm_103a)" in message
    assert "wgmma (wgmma): the wgmma family needs wgmma, which only sm_90a has" in message
    # too old for any family
    with pytest.raises(NoVariantError, match="CC 7.5"):
        choose("gemm", GEMM, (7, 5))


def test_bad_variant_lists():
    with pytest.raises(ValueError, match="no variants"):
        choose("gemm", (), (9, 0))
    with pytest.raises(ValueError, match="twice"):
        choose("gemm", (WGMMA, Variant("wgmma", Family.SIMT)), (9, 0))
    with pytest.raises(ValueError, match="an op and a variant name"):
        with force_variant("gemm", ""):
            pass


def test_variant_impl_takes_no_part_in_equality():
    assert Variant("a", Family.SIMT, impl=[1]) == Variant("a", Family.SIMT, impl=[2])
    hash(Variant("a", Family.SIMT, impl={"unhashable": []}))


def test_import_is_pure_python():
    code = ("import sys, cutefi.jit.dispatch; "
            "print(sorted(m for m in ('torch', 'cutlass') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"
