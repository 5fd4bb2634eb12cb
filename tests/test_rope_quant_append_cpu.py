"""CPU tier: rope_quantize_fp8_append_paged_kv_cache without a GPU: FlashInfer's signature, the
arguments refused (a TypeError or ValueError naming the argument, before any launch), a trace
into one cutefi op under torch.compile on fake tensors, and the kernel's builds (FP8 stores
with saturation, 128-bit loads and stores, the page lookup's bounds checks, no spills)."""

from __future__ import annotations

import inspect
import re

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import cutefi
from cutefi._plans import PlanCache
from cutefi.rope import launch

from conftest import requires_dsl
from test_gemm_builds_cpu import _build

BF16, E4M3, E5M2 = torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2
I32 = torch.int32
CUDA = "must be on a CUDA device"
# FlashInfer (flashinfer/rope.py at fb28d72): the parameters in order, and their defaults
SIGNATURE = ["q_rope", "k_rope", "q_nope", "k_nope", "v", "cos_sin_cache", "pos_ids", "paged_kv_cache", "kv_indices",
             "kv_indptr", "batch_indices", "positions", "is_neox", "quantize_dtype", "quant_scale_q",
             "quant_scale_kv", "page_size", "kv_layout", "q_rope_out", "q_nope_out", "enable_pdl"]
DEFAULTS = {"is_neox": True, "quantize_dtype": None, "quant_scale_q": 1.0, "quant_scale_kv": 1.0, "page_size": 16,
            "kv_layout": "NHD", "q_rope_out": None, "q_nope_out": None, "enable_pdl": False}


def test_signature_is_flashinfers():
    parameters = inspect.signature(inspect.unwrap(cutefi.rope_quantize_fp8_append_paged_kv_cache)).parameters
    assert list(parameters) == SIGNATURE
    assert {name: parameters[name].default for name in DEFAULTS} == DEFAULTS
    from cutefi.rope import rope_quantize_fp8_append_paged_kv_cache  # (FlashInfer's module path)
    assert rope_quantize_fp8_append_paged_kv_cache is cutefi.rope_quantize_fp8_append_paged_kv_cache


def _gqa(**changes):
    """A valid GQA call (NHD, page 16, 64 + 64 columns) on CPU tensors, with ``changes``."""
    nnz, heads, kv_heads = 8, 4, 2
    q = torch.randn(nnz, heads, 128).to(BF16)
    k = torch.randn(nnz, kv_heads, 128).to(BF16)
    args = dict(q_rope=q[..., :64], k_rope=k[..., :64], q_nope=q[..., 64:], k_nope=k[..., 64:],
                v=torch.randn(nnz, kv_heads, 128).to(BF16), cos_sin_cache=torch.randn(32, 64),
                pos_ids=torch.arange(nnz), paged_kv_cache=tuple(torch.empty(5, 16, kv_heads, 128, dtype=E4M3)
                                                                  for _ in range(2)),
                kv_indices=torch.arange(5, dtype=I32), kv_indptr=torch.tensor([0, 2, 5], dtype=I32),
                batch_indices=torch.tensor([0] * 4 + [1] * 4, dtype=I32), positions=torch.arange(nnz, dtype=I32))
    args.update(changes)
    return args


def _mla(**changes):
    nnz = 8
    q = torch.randn(nnz, 4, 576).to(BF16)
    args = _gqa(q_rope=q[..., 512:], k_rope=torch.randn(nnz, 64).to(BF16), q_nope=q[..., :512],
                k_nope=torch.randn(nnz, 512).to(BF16), v=None,
                paged_kv_cache=(torch.empty(5, 64, 512, dtype=E5M2), torch.empty(5, 64, 64, dtype=E5M2)),
                page_size=64)
    args.update(changes)
    return args


def _refused(exc, pattern, args):
    with pytest.raises(exc, match=pattern):
        cutefi.rope_quantize_fp8_append_paged_kv_cache(**args)


@pytest.mark.parametrize("args", [
    _gqa(), _gqa(is_neox=False, quantize_dtype=E4M3),
    _gqa(q_nope=None, k_nope=None, v=torch.randn(8, 2, 64).to(BF16),
         paged_kv_cache=tuple(torch.empty(5, 16, 2, 64, dtype=E4M3) for _ in range(2))),
    _gqa(kv_layout="HND", paged_kv_cache=tuple(torch.empty(5, 2, 16, 128, dtype=E4M3) for _ in range(2))),
    _gqa(page_size=1, paged_kv_cache=list(torch.empty(5, 2, 1, 2, 128, dtype=E4M3).unbind(1))),  # (strided pages)
    _gqa(kv_indices=torch.arange(5), kv_indptr=torch.tensor([0, 2, 5]), batch_indices=torch.zeros(8, dtype=torch.long),
         positions=torch.arange(8)),  # int64 indices (converted)
    _gqa(q_rope_out=torch.empty(8, 4, 64, dtype=E4M3), enable_pdl=True, quant_scale_q=2, quant_scale_kv=0.0),
    _mla(), _mla(is_neox=False),
], ids=["gqa", "gptj", "no-nope", "hnd", "page-1-strided", "int64", "outs-scalars", "mla", "mla-gptj"])
def test_valid_calls_reach_the_device_check(args):
    _refused(ValueError, f"^q_rope {CUDA}", args)


@pytest.mark.parametrize("args, exc, pattern", [
    (_gqa(v=None), TypeError, r"^v must be a torch.Tensor"),
    (_gqa(v=torch.randn(8, 2, 64).to(BF16)), ValueError, r"^v must have 128 columns"),
    (_gqa(v=torch.randn(8, 3, 128).to(BF16)), ValueError, r"^v must be \[nnz, num_kv_heads"),
    (_gqa(v=torch.randn(8, 2, 128).half()), TypeError, r"^v dtype"),
    (_mla(v=torch.randn(8, 1, 576).to(BF16)), ValueError, r"^v must be None for MLA"),
    (_gqa(paged_kv_cache=torch.empty(5, 2, 16, 2, 128, dtype=E4M3)), TypeError, r"^paged_kv_cache must be a tuple"),
    (_gqa(paged_kv_cache=(torch.empty(5, 16, 2, 128, dtype=E4M3),) * 2, page_size=8), ValueError,
     r"^k_cache \(paged_kv_cache\[0\]\) must be .* \[pages, 8, 2, 128\]"),
    (_gqa(kv_layout="HND"), ValueError, r"^k_cache .* must be \[pages, num_kv_heads, page_size"),
    (_gqa(kv_layout="NDH"), ValueError, r"^kv_layout must be 'NHD' or 'HND'"),
    (_gqa(page_size=0), ValueError, r"^page_size must be a positive int"),
    (_gqa(quantize_dtype=E5M2), TypeError, r"^k_cache \(paged_kv_cache\[0\]\) dtype .* must be the quantize dtype"),
    (_gqa(paged_kv_cache=(torch.empty(5, 16, 2, 128, dtype=E4M3), torch.empty(4, 16, 2, 128, dtype=E4M3))),
     ValueError, r"^k_cache .* and v_cache .* must have the same number of pages"),
    (_gqa(paged_kv_cache=tuple(torch.empty(5, 16, 2, 136, dtype=E4M3)[..., 8:] for _ in range(2))), ValueError,
     r"rows must start on 16-byte boundaries"),
    (_mla(paged_kv_cache=(torch.empty(5, 64, 512, dtype=E5M2), torch.empty(5, 64, 32, dtype=E5M2))), ValueError,
     r"^kpe_cache \(paged_kv_cache\[1\]\) must be"),
    (_gqa(batch_indices=torch.zeros(4, dtype=I32)), ValueError, r"^batch_indices must be a contiguous 1-D tensor"),
    (_gqa(kv_indptr=torch.zeros(0, dtype=I32)), ValueError, r"^kv_indptr must be a contiguous 1-D tensor of at least 1"),
    (_gqa(positions=torch.arange(8.0)), TypeError, r"^positions must be int32"),
    (_gqa(kv_indices=[0, 1]), TypeError, r"^kv_indices must be a torch.Tensor"),
    (_gqa(q_nope_out=torch.empty(8, 4, 64, dtype=E5M2), quantize_dtype=E4M3), TypeError, r"^q_nope_out dtype"),
    (_gqa(q_rope_out=torch.empty(8, 4, 32, dtype=E4M3)), ValueError, r"^q_rope_out must have shape"),
    (_gqa(k_rope=torch.randn(8, 2, 32).to(BF16)), ValueError, r"^k_rope must have 64 columns"),
    (_gqa(quant_scale_kv=float("inf")), ValueError, r"^quant_scale_kv must be finite"),
    (_gqa(enable_pdl="no"), TypeError, r"^enable_pdl must be a bool"),
])
def test_bad_arguments_are_refused(args, exc, pattern):
    _refused(exc, pattern, args)


def test_traces_into_one_op_on_fake_tensors():
    """torch.compile's view: the call records one torch.ops.cutefi op that writes both caches and
    the q outputs, with no graph break."""
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    def step(q_rope, k_rope, q_nope, k_nope, v, k_cache, v_cache, cos_sin, pos, indices, indptr, batch, positions):
        q8, qn8 = cutefi.rope_quantize_fp8_append_paged_kv_cache(
            q_rope, k_rope, q_nope, k_nope, v, cos_sin, pos, (k_cache, v_cache), indices, indptr, batch, positions)
        return q8.float() + qn8.float()

    compiled = torch.compile(step, backend=backend, fullgraph=True)  # fullgraph: a break raises
    with FakeTensorMode():
        cuda = dict(device="cuda")
        q, k = (torch.randn(8, h, 64, dtype=BF16, **cuda) for h in (4, 2))  # (rope and nope parts alike)
        compiled(q, k, q, k, torch.randn(8, 2, 128, dtype=BF16, **cuda), torch.empty(5, 16, 2, 128, dtype=E4M3, **cuda),
                 torch.empty(5, 16, 2, 128, dtype=E4M3, **cuda), torch.randn(32, 64, **cuda),
                 torch.zeros(8, dtype=I32, **cuda), torch.arange(5, dtype=I32, **cuda),
                 torch.arange(0, 6, 5, dtype=I32, **cuda), torch.zeros(8, dtype=I32, **cuda),
                 torch.arange(8, dtype=I32, **cuda))
    assert len(graphs) == 1
    assert "torch.ops.cutefi.rope_quantize_fp8_append_paged_kv_cache" in graphs[0].code


@requires_dsl
@pytest.mark.parametrize("arch", ["8.0", "9.0a", "12.0a"])
@pytest.mark.parametrize("interleave", [False, True])
def test_builds_store_saturated_fp8_into_pages(arch, interleave):
    """sm_89+: ``cvt.rn.satfinite`` (sm_80: arithmetic); 128-bit loads of the 16-bit rows and
    128-bit stores of whole slots (NeoX rotary halves: 64-bit); no local memory; PDL's wait."""
    ptx, sass = _build(launch.APPEND_SPECS[("fp16", "fp8e5m2", "i32", interleave)], arch)
    assert re.search(r"\bLDG\.E\.128\b", sass) and re.search(r"\bSTG\.E\.128\b", sass)
    assert ("cvt.rn.satfinite.e5m2x2.f32" in ptx) == (arch != "8.0")
    assert not re.search(r"\b(LDL|STL)\b", sass), "the RoPE quant append build spills"
    assert "griddepcontrol.wait" in ptx or arch == "8.0"


class _Recorder:
    """A stand-in kernel: records what a launch would pass (no GPU here)."""

    def __init__(self, contract):
        self.contract = contract
        self.calls = []

    def launch(self, grid, device, *args, **params):
        self.calls.append((grid, params))


@pytest.mark.parametrize("args", [_gqa(), _gqa(kv_layout="HND", paged_kv_cache=tuple(
    torch.empty(5, 2, 16, 128, dtype=E4M3) for _ in range(2))), _mla()], ids=["nhd", "hnd", "mla"])
def test_plan_passes_every_kernel_parameter(monkeypatch, args):
    """Past the device check (stubbed), the launch names each of the contract's parameters once,
    the cache strides are (page, entry, head) in elements, k_nope's columns start R bytes into a
    GQA K row, and the grid holds the five sets' CTAs."""
    from cutefi.rope import append_quant

    made = []

    def kernel(spec, device):
        options = dict(spec.options)
        made.append(_Recorder(launch.append_contract(*(options[k] for k in ("dtype", "out_dtype", "index_dtype",
                                                                             "interleave")))))
        return made[-1]

    monkeypatch.setattr(append_quant, "require_cuda", lambda name, tensor: 0)
    monkeypatch.setattr(append_quant, "require_same_device", lambda *named: None)
    monkeypatch.setattr(append_quant, "get_kernel", kernel)
    monkeypatch.setattr(append_quant, "_PLANS", PlanCache())  # (no plan of another test's kernel)
    cutefi.rope_quantize_fp8_append_paged_kv_cache(**args)
    (grid, params), = made[0].calls
    assert set(params) == {p.name for p in made[0].contract.params}
    first, second = args["paged_kv_cache"]
    if args["v"] is None:  # MLA: k_rope -> kpe, k_nope -> ckv, no V
        assert params["k_rope_cache"] == second.data_ptr() and params["k_nope_cache"] == first.data_ptr()
        assert (params["k_rope_cache_stride_p"], params["k_rope_cache_stride_e"]) == second.stride()[:2]
        assert params["v"] == params["v_cache"] == params["num_v_heads"] == 0
    else:
        page, entry, head = (0, 1, 2) if args.get("kv_layout", "NHD") == "NHD" else (0, 2, 1)
        assert params["k_nope_cache"] == first.data_ptr() + 64
        for name, cache in (("k_rope_cache", first), ("k_nope_cache", first), ("v_cache", second)):
            assert [params[f"{name}_stride_{d}"] for d in "peh"] == [cache.stride(i) for i in (page, entry, head)]
    sets = [(4, 64), (1 if args["v"] is None else 2, 64), (4, 512 if args["v"] is None else 64)]
    sets.append((sets[1][0], sets[2][1]))
    if args["v"] is not None:
        sets.append((2, 128))
    assert grid == (sum(-(-8 * heads * (width // 16) // 128) for heads, width in sets), 1, 1)
