"""GPU tier, two GPUs in one process: every public op on cuda:0 and cuda:1, whichever device is current.

cutefi must launch on the device of the tensors and on torch's current stream *of that device*,
leave torch's current device as it found it, key every cache by device, and refuse tensors of
two devices in one call. References are float32 (RoPE angles in float64); outputs are poisoned
with NaN first, so an unwritten element fails the check.
"""

import contextlib
import re
from types import SimpleNamespace

import pytest
import torch

import cutefi
from cutefi.gemm.plan import override

NUM_GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(NUM_GPUS < 2, reason=f"needs 2 CUDA GPUs in one process; {NUM_GPUS} visible")]

TOLERANCE = {torch.bfloat16: 1e-2, torch.float16: 3e-3}  # relative L2 error
EPS = 1e-6
MAX_POS = 4096
# torch.cuda._sleep spins this many clocks (~0.25 s at H200 clocks): a kernel launched on any
# stream but the intended one races ahead of the inputs queued behind the sleep and reads NaN
SLEEP_CYCLES = 500_000_000


def rms_reference(x, weight):
    x32 = x.float()
    return x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + EPS) * weight.float()


def layernorm_reference(x, gamma, beta):
    return torch.nn.functional.layer_norm(x.float(), (x.shape[-1],), gamma, beta, EPS)


def rope_reference(x, pos_ids, theta=1e4):
    """NeoX-style (non-interleaved) RoPE over the whole head_dim of x [nnz, heads, D]."""
    half = x.shape[-1] // 2
    freq = theta ** (-torch.arange(half, device=x.device, dtype=torch.float64) / half)
    angle = pos_ids.double()[:, None] * freq
    cos, sin = angle.cos().float()[:, None], angle.sin().float()[:, None]
    lo, hi = x.float()[..., :half], x.float()[..., half:]
    return torch.cat([lo * cos - hi * sin, hi * cos + lo * sin], dim=-1)


def references(t):
    """{output name: expected} for :func:`launch_ops` on the inputs ``t``."""
    x, w = t["x"], t["w"]
    added = (x.float() + t["residual"].float()).to(x.dtype)
    return {"rmsnorm": rms_reference(x, w), "fused_add_rmsnorm": rms_reference(added, w),
            "fused_add_rmsnorm.residual": added, "layernorm": layernorm_reference(x, t["gamma"], t["beta"]),
            "rope.q": rope_reference(t["q"], t["pos_ids"]), "rope.k": rope_reference(t["k"], t["pos_ids"]),
            "copy_": x, "tma_copy_": x,
            # the FP8 output compared as float32 with the unrounded value (one FP8 step is 1/8)
            "rmsnorm_quant": (rms_reference(x, w) / t["scale"]).clamp(-448, 448),
            "rmsnorm.odd": rms_reference(x[:, 1:], w[1:]),
            "fused_rmsnorm_silu": rms_reference(x, w) / (1 + torch.exp(-rms_reference(x, w))),
            "merge_state": merge_reference(t["q"], t["s_a"], t["v_b"], t["s_b"]),
            "append_paged_kv_cache": t["k"], "append_paged_mla_kv_cache": t["k"][:, 0],
            "rope_quantize_fp8.q": rope_reference(t["q"], t["pos_ids"]).clamp(-448, 448),
            "rope_quantize_fp8.k_cache": rope_reference(t["k"], t["pos_ids"]).clamp(-448, 448),
            # GEMMs, each with split-K (partials in a scratch per device and stream)
            "mm.decode": t["ga"][:5].float() @ t["gw"].float().t(),
            "mm.few_tokens": t["ga"][:33].float() @ t["gw"].float().t(),
            "mm.cluster": t["ga"][:200].float() @ t["gw"].float().t(),
            "mm.tiles": t["ga"].float() @ t["gw"].float().t()}


def merge_reference(v_a, s_a, v_b, s_b):
    """The attention state over two KV ranges from theirs (base-2 log-sum-exps), in float32."""
    m = torch.maximum(s_a, s_b)
    w_a, w_b = torch.exp2(s_a - m)[..., None], torch.exp2(s_b - m)[..., None]
    return (w_a * v_a.float() + w_b * v_b.float()) / (w_a + w_b)


def check(what, out, ref):
    """Assert ``out`` matches ``ref`` (bit-exact where ref has out's dtype); returns the relative error."""
    assert out.device == ref.device, f"{what}: output on {out.device}, inputs on {ref.device}"
    assert not torch.isnan(out).any(), f"{what}: NaN in the output (unwritten, or inputs read too early)"
    fp8 = out.element_size() == 1
    if out.dtype == ref.dtype and not fp8:  # the copies and the fused residual
        assert torch.equal(out, ref), f"{what}: differs from the exact result"
        return 0.0
    tolerance = 0.06 if fp8 else TOLERANCE[out.dtype]  # FP8: compared as float32, a step is 1/8
    out = out.float() if fp8 else out
    rel = ((out.float() - ref).norm() / ref.norm()).item()
    assert rel < tolerance, f"{what}: relative error {rel:.2e}"
    return rel


def check_all(outs, t, label):
    refs = references(t)
    for name, out in outs.items():
        check(f"{label}: {name}", out, refs[name])


def poisoned(like):
    return cutefi.poison_(torch.empty_like(like))


def make_inputs(d, dtype=torch.bfloat16, rows=37, hidden=4096, nnz=29, heads=(8, 2), head_dim=128, seed=None):
    """Fresh random inputs on cuda:d; with ``seed``, drawn on the CPU so both devices can get the same values."""
    dev = torch.device("cuda", d)
    gen = torch.Generator().manual_seed(seed) if seed is not None else None
    where = "cpu" if gen is not None else dev

    def randn(*shape, dt=dtype):
        return torch.randn(*shape, generator=gen, device=where).to(dev, dt)

    return dict(x=randn(rows, hidden), w=randn(hidden), residual=randn(rows, hidden),
                gamma=randn(hidden, dt=torch.float32), beta=randn(hidden, dt=torch.float32),
                q=randn(nnz, heads[0], head_dim), k=randn(nnz, heads[1], head_dim),
                pos_ids=torch.randint(0, MAX_POS, (nnz,), generator=gen, device=where).to(dev, torch.int32),
                s_a=randn(nnz, heads[0], dt=torch.float32), v_b=randn(nnz, heads[0], head_dim),
                s_b=randn(nnz, heads[0], dt=torch.float32),
                scale=torch.full((1,), 0.25, device=dev),
                ga=randn(300, 8192), gw=randn(1024, 8192))


def launch_ops(t):
    """Every public op once on the inputs ``t`` (left unchanged); returns {name: output}."""
    x, res = t["x"].clone(), t["residual"].clone()
    cutefi.fused_add_rmsnorm(x, res, t["w"])
    outs = {"rmsnorm": cutefi.rmsnorm(t["x"], t["w"], out=poisoned(t["x"])),
            "fused_add_rmsnorm": x, "fused_add_rmsnorm.residual": res,
            "layernorm": cutefi.layernorm(t["x"], t["gamma"], t["beta"]),
            "copy_": cutefi.copy_(poisoned(t["x"]), t["x"])}
    outs["rope.q"], outs["rope.k"] = cutefi.apply_rope_pos_ids(t["q"], t["k"], t["pos_ids"])
    if torch.cuda.get_device_capability(t["x"].device) >= (9, 0):
        outs["tma_copy_"] = cutefi.tma_copy_(poisoned(t["x"]), t["x"])
    quant = torch.full(t["x"].shape, float("nan"), device=t["x"].device).to(torch.float8_e4m3fn)
    cutefi.rmsnorm_quant(quant, t["x"], t["w"], t["scale"])
    outs["rmsnorm_quant"] = quant
    # rows off 16-byte boundaries, an odd hidden size and a misaligned weight: the staged path
    # (out is contiguous, so its rows sit unlike the input's) onto the shifted build
    outs["rmsnorm.odd"] = cutefi.rmsnorm(t["x"][:, 1:], t["w"][1:])
    if t["x"].dtype == torch.bfloat16:  # (FlashInfer's fused_rmsnorm_silu takes bf16 only)
        outs["fused_rmsnorm_silu"] = cutefi.fused_rmsnorm_silu(t["x"], t["w"], out=poisoned(t["x"]))
    outs["merge_state"] = cutefi.merge_state(t["q"], t["s_a"], t["v_b"], t["s_b"])[0]
    # k's tokens appended to one request over pages 3, 2, 1, 0 of an NHD cache (8 entries a page;
    # index tensors made on the device: no host copies, so this also runs under graph capture)
    cache = poisoned(torch.empty(4, 2, 8, *t["k"].shape[1:], dtype=t["k"].dtype, device=t["k"].device))
    index = dict(dtype=torch.int32, device=t["k"].device)
    tokens = t["k"].shape[0]
    pages = torch.arange(3, -1, -1, **index)
    cutefi.append_paged_kv_cache(t["k"], t["k"], torch.zeros(tokens, **index), torch.arange(tokens, **index), cache,
                                 pages, torch.arange(0, 5, 4, **index), torch.full((1,), tokens - 24, **index))
    outs["append_paged_kv_cache"] = cache[pages.long(), 0].reshape(-1, *t["k"].shape[1:])[:tokens]
    # MLA's two row sets (k's first head as the compressed kv, its second's first half as the rope part)
    latent = [poisoned(torch.empty(4, 8, width, dtype=t["k"].dtype, device=t["k"].device)) for width in (128, 64)]
    cutefi.append_paged_mla_kv_cache(t["k"][:, 0], t["k"][:, 1, :64], torch.zeros(tokens, **index),
                                     torch.arange(tokens, **index), *latent, pages, torch.arange(0, 5, 4, **index),
                                     torch.full((1,), tokens - 24, **index))
    outs["append_paged_mla_kv_cache"] = latent[0][pages.long()].reshape(-1, 128)[:tokens]
    # q and k rotated (a cos|sin cache of rope_reference's angles) and made FP8, k and v appended
    # to an FP8 cache over the same pages
    half = t["q"].shape[-1] // 2
    freq = 1e4 ** (-torch.arange(half, device=t["q"].device, dtype=torch.float64) / half)
    angle = torch.arange(MAX_POS, device=t["q"].device, dtype=torch.float64)[:, None] * freq
    fp8_caches = [torch.full((4, 8, *t["k"].shape[1:]), float("nan"), device=t["k"].device).to(torch.float8_e4m3fn)
                  for _ in "kv"]
    outs["rope_quantize_fp8.q"], _ = cutefi.rope_quantize_fp8_append_paged_kv_cache(
        t["q"], t["k"], None, None, t["k"], torch.cat([angle.cos(), angle.sin()], -1).float(), t["pos_ids"],
        fp8_caches, pages, torch.arange(0, 5, 4, **index), torch.zeros(tokens, **index),
        torch.arange(tokens, **index), page_size=8)
    outs["rope_quantize_fp8.k_cache"] = fp8_caches[0][pages.long()].reshape(-1, *t["k"].shape[1:])[:tokens]
    # the decode-sized kernel (5 tokens), Hopper's swapped build (33) or the mma.sync kernel
    # elsewhere, and whole tiles (300): all with K cut into splits; on Hopper also K split in a
    # cluster of two (200 rows, 128 x 128 tiles: the CTAs meet through distributed shared memory)
    mm = cutefi.mm_bf16 if t["ga"].dtype == torch.bfloat16 else cutefi.mm_fp16
    hopper = torch.cuda.get_device_capability(t["ga"].device) == (9, 0)
    for name, rows in (("mm.decode", 5), ("mm.few_tokens", 33), ("mm.cluster", 200), ("mm.tiles", 300)):
        with override(config="128x128c1k2" if name == "mm.cluster" and hopper else None):
            outs[name] = mm(t["ga"][:rows], t["gw"].t(), out=poisoned(t["ga"][:rows, :1024]),
                            out_dtype=t["ga"].dtype)
    return outs


def delayed(t, d):
    """Copies of the inputs ``t`` that hold NaN (ints: 0) until a long sleep on cuda:d's current stream ends."""
    live = {k: torch.full_like(v, float("nan")) if v.is_floating_point() else torch.zeros_like(v)
            for k, v in t.items()}
    torch.cuda.synchronize(d)  # the poison is in place before the sleep starts
    with torch.cuda.device(d):
        torch.cuda._sleep(SLEEP_CYCLES)
    for k, v in live.items():
        v.copy_(t[k])  # cuda:d's current stream, behind the sleep
    return live


@contextlib.contextmanager
def current(d):
    """``torch.cuda.device(d)``, asserting that nothing inside left another device current."""
    with torch.cuda.device(d):
        yield
        assert torch.cuda.current_device() == d, f"cuda:{d} was current, now cuda:{torch.cuda.current_device()}"


def synchronize_both():
    torch.cuda.synchronize(0)
    torch.cuda.synchronize(1)


@pytest.fixture(autouse=True)
def cuda0_current():
    torch.cuda.set_device(0)
    yield
    assert torch.cuda.current_device() == 0, "a test left another device current"


@pytest.mark.parametrize("d", [0, 1])
def test_call_while_the_other_device_is_current(d):
    t = make_inputs(d)
    with current(1 - d):
        outs = launch_ops(t)
    torch.cuda.synchronize(d)
    check_all(outs, t, f"cuda:{d} with cuda:{1 - d} current")


def test_interleaved_devices_in_one_loop():
    """0, 1, 0, 1, ... with fresh inputs each, the current device flipping every two calls, no sync until the end."""
    pending = []
    for i in range(8):
        d, cur = i % 2, (i // 2) % 2
        with current(cur):
            t = make_inputs(d, dtype=torch.bfloat16 if i < 4 else torch.float16, rows=1 + 11 * i)
            pending.append((f"call {i} on cuda:{d} with cuda:{cur} current", launch_ops(t), t))
    synchronize_both()
    for label, outs, t in pending:
        check_all(outs, t, label)


def test_first_use_on_cuda1_after_cuda0():
    """fp16 RMSNorm of hidden 1000 (size class 1024) is in no other test: its first launch on cuda:0 and
    then its first on cuda:1, with cuda:0 current both times (loading must not leave cuda:1 current)."""
    for d in (0, 1):
        x = torch.randn(5, 1000, device=f"cuda:{d}", dtype=torch.float16)
        w = torch.randn(1000, device=f"cuda:{d}", dtype=torch.float16)
        with current(0):
            out = cutefi.rmsnorm(x, w, out=poisoned(x))
        torch.cuda.synchronize(d)
        check(f"fp16 rmsnorm N=1000, first use on cuda:{d}", out, rms_reference(x, w))


@pytest.mark.parametrize("d", [0, 1])
def test_side_stream_while_the_other_device_is_current(d):
    """Inputs reach the side stream only after a long sleep on it: a launch on any other stream reads NaN."""
    other, t = 1 - d, make_inputs(d)
    side = torch.cuda.Stream(device=d)
    with current(other), torch.cuda.stream(side):  # torch.cuda.stream makes cuda:d current ...
        live = delayed(t, d)
        with current(other):  # ... so make the other device current again for the cutefi calls
            assert torch.cuda.current_stream(d) == side
            outs = launch_ops(live)
    side.synchronize()
    check_all(outs, t, f"cuda:{d} side stream with cuda:{other} current")


def test_cuda_graph_on_cuda1_while_cuda0_is_current():
    """Capture every op (rmsnorm, rope, copy_ and the rest) on cuda:1; replay on fresh inputs, outputs poisoned."""
    t = make_inputs(1)
    with current(0):
        launch_ops(t)  # warm-up: every kernel loaded on cuda:1 outside the capture
    torch.cuda.synchronize(1)
    graph = torch.cuda.CUDAGraph()
    # torch.cuda.graph's default capture stream is made once per process on whichever device is current
    # then (here cuda:0), so pass one on cuda:1. Entering the capture makes cuda:1 current (torch.cuda.stream
    # -> set_stream switches device), which capture_begin relies on: no torch.cuda.device(1) is needed.
    # Inside, cuda:0 is made current again, so cutefi must take the device from the tensors.
    with current(0):
        with torch.cuda.graph(graph, stream=torch.cuda.Stream(device=1)):
            with current(0):
                outs = launch_ops(t)
    for replay in range(3):
        fresh = make_inputs(1)
        with current(0):
            for name, tensor in t.items():
                tensor.copy_(fresh[name])
            for out in outs.values():
                cutefi.poison_(out)  # the graph is not empty only if replay overwrites every output
            graph.replay()
        torch.cuda.synchronize(1)
        check_all(outs, t, f"graph replay {replay} on cuda:1 with cuda:0 current")


def _names(*parts):
    """A regex that finds every ``"<argument> on cuda:<i>"`` of ``parts`` in a message, in any order."""
    return "".join(f"(?=.*\\b{re.escape(p)})" for p in parts)


MIXED = {  # call(a on cuda:0, b on cuda:1), the arguments and devices the ValueError must name
    "rmsnorm-weight": (lambda a, b: cutefi.rmsnorm(a.x, b.w, out=a.out), ("input on cuda:0", "weight on cuda:1")),
    "rmsnorm-out": (lambda a, b: cutefi.rmsnorm(a.x, a.w, out=b.out), ("input on cuda:0", "out on cuda:1")),
    "fused_add-residual": (lambda a, b: cutefi.fused_add_rmsnorm(a.x, b.residual, a.w),
                           ("input on cuda:0", "residual on cuda:1")),
    "layernorm-beta": (lambda a, b: cutefi.layernorm(a.x, a.gamma, b.beta), ("input on cuda:0", "beta on cuda:1")),
    "rope-k": (lambda a, b: cutefi.apply_rope_pos_ids(a.q, b.k, a.pos_ids), ("q on cuda:0", "k on cuda:1")),
    "rope-pos_ids": (lambda a, b: cutefi.apply_rope_pos_ids(a.q, a.k, b.pos_ids),
                     ("q on cuda:0", "pos_ids on cuda:1")),
    "copy_-dst": (lambda a, b: cutefi.copy_(b.out, a.x), ("src on cuda:0", "dst on cuda:1")),
    "tma_copy_-src": (lambda a, b: cutefi.tma_copy_(a.out, b.x), ("src on cuda:1", "dst on cuda:0")),
    "merge_state-v_b": (lambda a, b: cutefi.merge_state(a.q, a.s_a, b.v_b, a.s_b), ("v_a on cuda:0", "v_b on cuda:1")),
    "mm_bf16-b": (lambda a, b: cutefi.mm_bf16(a.ga[:5], b.gw.t()), ("a on cuda:0", "b on cuda:1")),
    "mm_bf16-out": (lambda a, b: cutefi.mm_bf16(a.ga, a.gw.t(), out=b.ga[:, :1024]), ("a on cuda:0", "out on cuda:1")),
    "append-cache": (lambda a, b: cutefi.append_paged_kv_cache(
        a.k, a.k, a.pos_ids * 0, a.pos_ids * 0, b.out.view(-1)[: 2 * 8 * a.k[0].numel()].view(1, 2, 8, *a.k.shape[1:]),
        a.pos_ids[:1] * 0, a.pos_ids[:2] * 0, a.pos_ids[:1] * 0 + 1), ("append_key on cuda:0", "k_cache on cuda:1")),
}


@pytest.mark.parametrize("cur", [0, 1], ids=["cuda0-current", "cuda1-current"])
@pytest.mark.parametrize("case", MIXED)
def test_two_devices_in_one_call_are_refused(case, cur):
    call, named = MIXED[case]
    a, b = (SimpleNamespace(**make_inputs(d, rows=16, hidden=256, nnz=8)) for d in (0, 1))
    a.out, b.out = poisoned(a.x), poisoned(b.x)
    before = {(d, k): v.clone() for d, ns in enumerate((a, b)) for k, v in vars(ns).items()}
    with current(cur), pytest.raises(ValueError, match=_names(*named)):
        call(a, b)
    synchronize_both()
    for (d, k), v in before.items():  # bit for bit: the poisoned outputs are still NaN
        now = vars((a, b)[d])[k]
        assert torch.equal(now.view(torch.uint8), v.view(torch.uint8)), f"{k} on cuda:{d} written by a refused call"


def test_same_layouts_on_both_devices_in_the_same_order():
    """Same values and layouts on cuda:0 then cuda:1 in the same call order, cuda:0 current: a cache keyed
    without the device would launch cuda:1's calls on cuda:0 (UVA gives the devices distinct addresses, so
    only the pointer and the device differ). cuda:1's inputs arrive behind a sleep: such a launch reads NaN."""
    staged = {d: make_inputs(d, seed=1234) for d in (0, 1)}
    outs = {0: launch_ops(staged[0])}
    live = delayed(staged[1], 1)
    outs[1] = launch_ops(live)
    synchronize_both()
    for d in (0, 1):
        check_all(outs[d], staged[d], f"same layout, cuda:{d}")
    for name, out in outs[0].items():
        assert torch.equal(out.cpu(), outs[1][name].cpu()), f"{name}: cuda:0 and cuda:1 differ on the same input"


@pytest.mark.parametrize("side_stream", [False, True])
def test_decode_on_cuda1_while_cuda0_is_current(side_stream):
    """BatchDecodeWithPagedKVCacheWrapper with every tensor on cuda:1 and cuda:0 current: plan
    uploads to cuda:1, run launches there (on a side stream of cuda:1 too)."""
    from test_gpu_decode import check, make_batch, reference

    lengths = [3000, 5, 700]
    with torch.cuda.device(1):
        kv, k_cache, v_cache, indptr, indices, last = make_batch(lengths, 16, 2, 128, torch.bfloat16)
        q = torch.randn(3, 8, 128, device="cuda").to(torch.bfloat16)
        workspace = torch.empty(32 << 20, dtype=torch.uint8, device="cuda")
    assert torch.cuda.current_device() == 0 and q.device == torch.device("cuda", 1)
    wrapper = cutefi.BatchDecodeWithPagedKVCacheWrapper(workspace)
    wrapper.plan(indptr, indices, last, 8, 2, 128, 16, q_data_type=torch.bfloat16)
    torch.cuda.synchronize(1)  # the plan's tables are uploaded on cuda:1's current stream
    stream = torch.cuda.Stream(device=1) if side_stream else torch.cuda.current_stream(1)
    with torch.cuda.stream(stream):
        out, lse = wrapper.run(q, kv, return_lse=True)
    assert torch.cuda.current_device() == 0
    stream.synchronize()
    ref_out, ref_lse = reference(q, k_cache, v_cache, indptr, indices, lengths, "NHD")
    check(out, lse, ref_out, ref_lse, torch.bfloat16)


@pytest.mark.parametrize("kv_dtype, rope", [(None, None), (torch.float8_e4m3fn, (1.0, 1e4))], ids=["bf16", "e4m3-rope"])
def test_cuda_graph_decode_on_cuda1_while_cuda0_is_current(kv_dtype, rope):
    """CUDAGraphBatchDecodeWithPagedKVCacheWrapper with every tensor on cuda:1 and cuda:0 current: planned and
    re-planned from cuda:0 (tables uploaded to cuda:1), captured on a cuda:1 stream, replayed with new lengths on
    fresh q, out and lse poisoned before each replay, against the float32 reference."""
    from test_gpu_decode import FP8_SCALES, make_batch, page_table, reference, rope_args
    from test_gpu_decode import check as decode_check

    qo_heads, kv_heads, head_dim, page_size, batch = 8, 2, 128, 16, 3
    cache_dtype = kv_dtype or torch.bfloat16
    scales = FP8_SCALES if kv_dtype else {}
    dev = torch.device("cuda", 1)
    with torch.cuda.device(1):
        kv, k_cache, v_cache, _, indices, _ = make_batch([3000] * batch, page_size, kv_heads, head_dim, cache_dtype,
                                                         seed=51)
    i32 = dict(dtype=torch.int32, device=dev)
    wrapper = cutefi.CUDAGraphBatchDecodeWithPagedKVCacheWrapper(
        torch.empty(32 << 20, dtype=torch.uint8, device=dev), torch.empty(batch + 1, **i32),
        torch.empty(indices.numel(), **i32), torch.empty(batch, **i32))
    planned = dict(q_data_type=torch.bfloat16, kv_data_type=cache_dtype, **rope_args(rope))
    gen = torch.Generator().manual_seed(52)
    q = torch.randn(batch, qo_heads, head_dim, generator=gen).to(dev, torch.bfloat16)
    out, lse = poisoned(q), poisoned(torch.empty(batch, qo_heads, device=dev))
    assert torch.cuda.current_device() == 0 and k_cache.device == dev
    with current(0):
        # the first plan is the smallest (one page a request); the warm-up loads the kernels on cuda:1
        wrapper.plan(*page_table([page_size] * batch, page_size, indices), qo_heads, kv_heads, head_dim, page_size,
                     **planned)
        wrapper.run(q, kv, out=out, lse=lse, **scales)
    torch.cuda.synchronize(1)
    graph = torch.cuda.CUDAGraph()
    # as in test_cuda_graph_on_cuda1_while_cuda0_is_current: a capture stream on cuda:1, cuda:0 current inside
    with current(0):
        with torch.cuda.graph(graph, stream=torch.cuda.Stream(device=1)):
            with current(0):
                wrapper.run(q, kv, out=out, lse=lse, **scales)
    for lengths in ([3000, 5, 700], [1, 2999, 64], [3000, 3000, 3000]):
        indptr, used, last = page_table(lengths, page_size, indices)
        with current(0):
            wrapper.plan(indptr, used, last, qo_heads, kv_heads, head_dim, page_size, **planned)
            q.copy_(torch.randn(q.shape, generator=gen))
            cutefi.poison_(out)
            cutefi.poison_(lse)  # the graph is not empty only if replay overwrites both
            graph.replay()
        torch.cuda.synchronize(1)
        assert out.device == dev and lse.device == dev
        ref_out, ref_lse = reference(q, k_cache, v_cache, indptr, used, lengths, "NHD", rope=rope, **scales)
        decode_check(out, lse, ref_out, ref_lse, torch.bfloat16)


@pytest.mark.parametrize("cur", [0, 1], ids=["cuda0-current", "cuda1-current"])
def test_quant_scale_tensor_on_the_other_device(cur):
    """FlashInfer copies a quant norm's scale tensor to the input's device: the same bytes as
    with the scale there, and the float32 reference (y / scale, saturated) within FP8 rounding."""
    fp8 = torch.float8_e4m3fn
    x = torch.randn(16, 512, device="cuda:0", dtype=torch.bfloat16)
    w = torch.randn(512, device="cuda:0", dtype=torch.bfloat16)
    here, there = poisoned(x).to(fp8), poisoned(x).to(fp8)
    with current(cur):
        cutefi.rmsnorm_quant(here, x, w, torch.tensor([0.25], device="cuda:0"))
        cutefi.rmsnorm_quant(there, x, w, torch.tensor([0.25], device="cuda:1"))
    synchronize_both()
    assert torch.equal(here.view(torch.uint8), there.view(torch.uint8))
    xf = x.float()
    ref = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS) * w.float() / 0.25).clamp(-448, 448)
    torch.testing.assert_close(there.float(), ref, rtol=0.07, atol=2e-2)
