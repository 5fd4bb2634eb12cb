"""Target parsing and the target policy, as a table."""

import pytest

from cutefi.jit.policy import Family, TargetPolicy, Toolchain, family_target
from cutefi.jit.targets import Target, parse_target_list

from conftest import requires_dsl

CUDA_12_8 = Toolchain("CuTe DSL", "test", (12, 8), min_cc=(8, 0))
CUDA_12_9 = Toolchain("CuTe DSL", "test", (12, 9), min_cc=(8, 0))
CUDA_13_0 = Toolchain("NVRTC", "13.0", (13, 0))


@pytest.mark.parametrize("text, expected", [
    ("8.0", Target(8, 0)),
    ("9.0a", Target(9, 0, "a")),
    ("sm_90a", Target(9, 0, "a")),
    ("90a", Target(9, 0, "a")),
    ("12.0f", Target(12, 0, "f")),
    ("sm_121a", Target(12, 1, "a")),
    ("compute_100a", Target(10, 0, "a")),
    (" SM_86 ", Target(8, 6)),
])
def test_parse_accepted_forms(text, expected):
    assert Target.parse(text) == expected


@pytest.mark.parametrize("target, printed", [
    (Target(9, 0, "a"), "sm_90a"), (Target(12, 1, "a"), "sm_121a"), (Target(8, 0), "sm_80"),
])
def test_print(target, printed):
    assert str(target) == printed
    assert Target.parse(str(target)) == target
    assert Target.parse(target.dotted) == target


@pytest.mark.parametrize("bad", ["", "ampere", "9.0b", "sm_9", "9.", "sm_90x", "1000"])
def test_unknown_string_lists_accepted_forms(bad):
    with pytest.raises(ValueError, match="accepted forms: '8.0', '9.0a'"):
        Target.parse(bad)


def test_list_separators():
    assert parse_target_list("8.0 9.0a,12.0a;12.1a") == [
        Target(8, 0), Target(9, 0, "a"), Target(12, 0, "a"), Target(12, 1, "a")]
    with pytest.raises(ValueError, match="empty"):
        parse_target_list("  ")


@pytest.mark.parametrize("family, cc, expected", [
    (Family.SIMT, (8, 0), "sm_80"),
    (Family.SIMT, (9, 0), "sm_90"),
    (Family.SIMT, (10, 0), "sm_100a"),
    (Family.SIMT, (12, 0), "sm_120a"),
    (Family.SIMT, (12, 1), "sm_121a"),   # exact: never an sm_120a binary for CC 12.1
    (Family.MMA_SYNC, (8, 0), "sm_80"),
    (Family.MMA_SYNC, (9, 0), "sm_90"),
    (Family.MMA_SYNC, (10, 0), "sm_100a"),  # B200: mma.sync runs on Blackwell too
    (Family.MMA_SYNC, (10, 3), "sm_103a"),  # GB300
    (Family.MMA_SYNC, (11, 0), "sm_110a"),  # Thor
    (Family.MMA_SYNC, (12, 0), "sm_120a"),
    (Family.MMA_SYNC, (12, 1), "sm_121a"),
    (Family.WGMMA, (9, 0), "sm_90a"),
    (Family.TMA, (9, 0), "sm_90"),
    (Family.TCGEN05, (10, 3), "sm_103a"),
])
def test_device_to_target_is_exact(family, cc, expected):
    assert str(family_target(family, Target(*cc))) == expected


@pytest.mark.parametrize("family, cc, reason", [
    (Family.WGMMA, (8, 0), "only sm_90a"),
    (Family.WGMMA, (12, 0), "only sm_90a"),
    (Family.TCGEN05, (9, 0), "sm_100a or sm_103a"),
    (Family.TMA, (8, 6), "9.0 and newer"),
    (Family.MMA_SYNC, (8, 7), "8.0, 8.6, 8.9, 9.0, 10.0, 10.3, 11.0, 12.0 and 12.1"),
    (Family.MMA_SYNC, (10, 7), "8.0, 8.6, 8.9, 9.0, 10.0, 10.3, 11.0, 12.0 and 12.1"),
    (Family.MMA_SYNC, (7, 5), "8.0, 8.6, 8.9, 9.0, 10.0, 10.3, 11.0, 12.0 and 12.1"),
])
def test_family_refusals(family, cc, reason):
    result = family_target(family, Target(*cc))
    assert isinstance(result, str) and reason in result


def _decide(toolchain, arch_list, family=Family.SIMT, driver=None):
    policy = TargetPolicy.from_environment(toolchain, arch_list=arch_list, driver_cuda=driver)
    return policy.decide(family)


@pytest.mark.parametrize("toolchain, arch_list, family, kept, dropped", [
    # CUDA 12.8 cannot build sm_103a: dropped with the version it needs, the rest still build
    (CUDA_12_8, "9.0a 10.3a 12.0a", Family.SIMT, ["sm_90", "sm_120a"], {"sm_103a": "needs CUDA 12.9"}),
    (CUDA_12_8, "12.1a", Family.SIMT, [], {"sm_121a": "needs CUDA 12.9"}),
    (CUDA_12_9, "10.3a 12.1a", Family.SIMT, ["sm_103a", "sm_121a"], {}),
    (CUDA_12_9, "8.0 9.0 12.0", Family.WGMMA, ["sm_90a"], {"sm_80": "only sm_90a", "sm_120": "only sm_90a"}),
    (CUDA_12_9, "9.0 9.0a", Family.MMA_SYNC, ["sm_90"], {}),  # de-duplicated
    # mma.sync on every tensor-core chip; CUDA 12.9 knows Thor only as sm_101, not sm_110
    (CUDA_12_9, "8.0 8.6 8.9 9.0 10.0 10.3 11.0 12.0 12.1", Family.MMA_SYNC,
     ["sm_80", "sm_86", "sm_89", "sm_90", "sm_100a", "sm_103a", "sm_120a", "sm_121a"],
     {"sm_110": "needs CUDA 13.0, CuTe DSL uses CUDA 12.9"}),
    (CUDA_13_0, "8.0 8.6 8.9 9.0 10.0 10.3 11.0 12.0 12.1", Family.MMA_SYNC,
     ["sm_80", "sm_86", "sm_89", "sm_90", "sm_100a", "sm_103a", "sm_110a", "sm_120a",
      "sm_121a"], {}),
    (CUDA_12_8, "10.0 10.3 12.0 12.1", Family.MMA_SYNC, ["sm_100a", "sm_120a"],
     {"sm_103": "needs CUDA 12.9", "sm_121": "needs CUDA 12.9"}),
    (CUDA_12_9, "10.0f 12.0f", Family.MMA_SYNC, ["sm_100f", "sm_120f"], {}),
])
def test_policy_table(toolchain, arch_list, family, kept, dropped):
    decision = _decide(toolchain, arch_list, family)
    assert [t.sm for t in decision.kept] == kept
    reasons = {t.sm: reason for t, reason in decision.dropped}
    assert set(reasons) == set(dropped)
    for target, fragment in dropped.items():
        assert fragment in reasons[target]
    for line in decision.reasons():
        assert " dropped: " in line


@pytest.mark.parametrize("toolchain, ccs, dropped", [
    (CUDA_13_0, [(7, 0), (8, 0)], {"sm_70": "CUDA 13 no longer builds it"}),  # Volta
    (CUDA_12_9, [(7, 5), (8, 0)], {"sm_75": "8.0 and newer"}),
])
def test_old_visible_gpus_are_dropped_with_a_reason(toolchain, ccs, dropped):
    # an arch list refuses these up front (tests/test_settings.py); a visible GPU is explained
    decision = TargetPolicy.from_environment(toolchain, device_ccs=ccs, arch_list="").decide(Family.SIMT)
    assert [t.sm for t in decision.kept] == ["sm_80"]
    reasons = {t.sm: reason for t, reason in decision.dropped}
    assert set(reasons) == set(dropped)
    for target, fragment in dropped.items():
        assert fragment in reasons[target]


def test_arch_list_refuses_targets_cutefi_never_builds():
    for text in ("7.0 8.0", "sm_75", "99.9", "sm_999"):
        with pytest.raises(ValueError, match="known targets: 8.0 8.6"):
            parse_target_list(text)


def test_driver_too_old_drops_target():
    decision = _decide(CUDA_12_9, "9.0 12.0a", driver=(12, 4))
    assert [t.sm for t in decision.kept] == ["sm_90"]
    assert "driver is 12.4" in decision.dropped[0][1]


def test_environment_variable_and_devices(monkeypatch):
    monkeypatch.setenv("CUTEFI_CUDA_ARCH_LIST", "8.6,12.1a")
    policy = TargetPolicy.from_environment(CUDA_12_9, device_ccs=[(9, 0)])
    assert [t.sm for t in policy.decide(Family.SIMT).kept] == ["sm_86", "sm_121a"]
    monkeypatch.delenv("CUTEFI_CUDA_ARCH_LIST")
    policy = TargetPolicy.from_environment(CUDA_12_9, device_ccs=[(9, 0)])
    assert [t.sm for t in policy.decide(Family.WGMMA).kept] == ["sm_90a"]
    with pytest.raises(ValueError, match="CUTEFI_CUDA_ARCH_LIST"):
        TargetPolicy.from_environment(CUDA_12_9, device_ccs=[])


def test_family_portable_request_kept():
    assert str(family_target(Family.SIMT, Target(12, 0, "f"))) == "sm_120f"
    assert str(family_target(Family.WGMMA, Target(9, 0, "f"))) == "sm_90a"


@requires_dsl
def test_installed_dsl_mma_sync_targets():
    """The installed CuTe DSL's mma_sync targets: each Blackwell chip kept where its CUDA
    version builds it, else dropped in one sentence (tests/test_mma_sync_targets.py builds
    each kept one down to SASS)."""
    from cutefi.jit.toolchain import dsl_toolchain

    toolchain = dsl_toolchain()
    decision = TargetPolicy(tuple(parse_target_list("10.0 10.3 11.0")), toolchain).decide(
        Family.MMA_SYNC)
    assert [t.sm for t in decision.kept][:2] == ["sm_100a", "sm_103a"]
    if toolchain.cuda_version >= (13, 0):
        assert [t.sm for t in decision.kept] == ["sm_100a", "sm_103a", "sm_110a"]
    else:
        assert [(t.sm, r) for t, r in decision.dropped] == [
            ("sm_110", f"needs CUDA 13.0, CuTe DSL uses CUDA {toolchain.cuda_version[0]}."
                       f"{toolchain.cuda_version[1]}")]
