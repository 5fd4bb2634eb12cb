"""Launching batch decode: the paged cache's checked layout, the prepared launch of the decode
kernel (which merges split requests itself), and the ``cutefi::batch_decode_out`` torch op torch.compile records for a
wrapper's ``run`` (its plan's tensors and sizes are the op's arguments)."""

from __future__ import annotations

import torch

from .._library import define
from ..dtypes import name_of
from ..jit.lookup import get_kernel
from . import launch
from .plan import split_cache

# the plan's sizes the launch needs, in the order the op's ``int[] sizes`` carries them
SIZES = ("batch", "num_qo_heads", "num_kv_heads", "group", "head_dim", "page_size", "stages", "items",
         "partial_rows", "graph", "rope", "narrow", "pack_shift")


class Layout:
    """The paged cache of a run: k/v caches and their strides (elements), checked.
    ``check_pointers``: also the 16-byte alignment of the data (not while tracing)."""

    def __init__(self, paged_kv_cache: object, kv_layout: str, kv_heads: int, head_dim: int, page_size: int,
                 kv_dtype: torch.dtype, check_pointers: bool = True) -> None:
        k_cache, v_cache = split_cache(paged_kv_cache, kv_layout)
        dims = "[pages, page_size, kv_heads, head_dim]" if kv_layout == "NHD" else "[pages, kv_heads, page_size, head_dim]"
        for name, cache in (("k_cache", k_cache), ("v_cache", v_cache)):
            if cache.dim() != 4:
                raise ValueError(f"{name} must be 4-D {dims} ({kv_layout}); got shape {tuple(cache.shape)}")
            if cache.dtype != kv_dtype:
                raise TypeError(f"{name} dtype {cache.dtype} differs from the planned kv_data_type {kv_dtype}")
        entry_dim, head_dim_index = (1, 2) if kv_layout == "NHD" else (2, 1)
        expected = [k_cache.shape[0], page_size, kv_heads, head_dim]
        if kv_layout == "HND":
            expected[1], expected[2] = kv_heads, page_size
        if list(k_cache.shape) != expected or v_cache.shape != k_cache.shape:
            raise ValueError(f"paged_kv_cache ({kv_layout}) must be {tuple(expected)} as planned (page_size "
                             f"{page_size}, {kv_heads} kv heads, head_dim {head_dim}); got {tuple(k_cache.shape)} "
                             f"and {tuple(v_cache.shape)}")
        size = k_cache.element_size()
        if k_cache.stride() != v_cache.stride():
            raise ValueError(f"k_cache and v_cache must share one layout; got strides {k_cache.stride()} "
                             f"and {v_cache.stride()}")
        misaligned = check_pointers and (k_cache.data_ptr() | v_cache.data_ptr()) % 16
        if k_cache.stride(3) != 1 or any((k_cache.stride(d) * size) % 16 for d in range(3)) or misaligned:
            raise ValueError(f"paged_kv_cache rows must start on 16-byte boundaries (contiguous head_dim, strides "
                             f"in multiples of 16 bytes); got strides {k_cache.stride()}")
        self.k_cache, self.v_cache = k_cache, v_cache
        self.strides = dict(cache_stride_page=k_cache.stride(0), cache_stride_entry=k_cache.stride(entry_dim),
                            cache_stride_head=k_cache.stride(head_dim_index))


class DecodeLaunch:
    """Everything of a run that the call's data pointers do not change, computed once: the
    decode kernel, its grid and scalars. Split requests are merged inside it (the last CTA of
    each request's kv head, counted in ``counters``: int32, zero between launches). Calling
    it launches the kernel."""

    def __init__(self, q: torch.Tensor, layout: Layout, out: torch.Tensor, lse: torch.Tensor | None,
                 has_sinks: bool, workspace: torch.Tensor, work: torch.Tensor, state_indptr: torch.Tensor,
                 kv_indices: torch.Tensor, counters: torch.Tensor, sizes: list[int], q_mult: float, cap_scale: float,
                 out_scale: float, rope_rcp_scale: float, rope_log2_step: float, pdl: bool) -> None:
        p = dict(zip(SIZES, sizes))
        self.device = device = q.get_device()
        self.pdl = pdl
        if p["narrow"]:
            spec = launch.MMA_DECODE_NARROW_SPECS[(name_of(q.dtype), name_of(layout.k_cache.dtype), p["head_dim"],
                                                   p["stages"])]
        else:
            spec = launch.MMA_DECODE_SPECS[(name_of(q.dtype), name_of(layout.k_cache.dtype), p["head_dim"],
                                            p["stages"], bool(p["rope"]))]
        self.kernel = get_kernel(spec, device)
        heads, d = p["num_qo_heads"], p["head_dim"]
        rows = p["items"] if p["graph"] else p["partial_rows"]
        tmp_v = workspace.data_ptr()
        self.tmp_s = tmp_v + rows * heads * d * 2 if rows else tmp_v
        shift = p["pack_shift"]
        step = launch.mma_decode_step() >> shift
        self.args = dict(items=p["items"], kv_heads=p["num_kv_heads"] >> shift, group=p["group"], pack_shift=shift,
                         row_blocks=row_blocks(p["group"] << shift, bool(p["narrow"])), num_qo_heads=heads,
                         page_size=p["page_size"], tile_pages=step // p["page_size"], tile_rem=step % p["page_size"],
                         num_pages=layout.k_cache.shape[0], write_lse=int(lse is not None), has_sinks=int(has_sinks), q_scale=q_mult,
                         cap_scale=cap_scale, out_scale=out_scale, rope_rcp_scale=rope_rcp_scale,
                         rope_log2_step=rope_log2_step, q_stride_batch=q.stride(0),
                         q_stride_head=q.stride(1), out_stride_batch=out.stride(0), out_stride_head=out.stride(1),
                         lse_stride_batch=lse.stride(0) if lse is not None else 0, tmp_v=tmp_v, tmp_s=self.tmp_s,
                         work=work.data_ptr(), kv_indices=kv_indices.data_ptr(), state_indptr=state_indptr.data_ptr(),
                         counters=counters.data_ptr(), **layout.strides)
        self.grid = self.kernel.contract.grid(self.args)

    def __call__(self, q: int, k_cache: int, v_cache: int, out: int, lse: int | None, sinks: int | None) -> None:
        """Launch on the tensors at these addresses (laid out as when this was built)."""
        lse = self.tmp_s if lse is None else lse
        self.kernel.launch(self.grid, self.device, None, self.pdl, q=q, out=out, k_cache=k_cache, v_cache=v_cache,
                           lse=lse, sinks=self.tmp_s if sinks is None else sinks, **self.args)


def row_blocks(group: int, narrow: bool) -> int:
    """CTAs a kv head's q heads take (``launch.mma_decode_rows`` heads each)."""
    return -(-group // launch.mma_decode_rows(narrow))


def ctas_per_item(num_kv_heads: int, group: int, narrow: bool, pack_shift: int) -> int:
    """CTAs a work item takes: its kv heads (2^pack_shift a CTA) times their q heads' row blocks."""
    return (num_kv_heads >> pack_shift) * row_blocks(group << pack_shift, narrow)


def _op_impl(q, k_cache, v_cache, out, lse, sinks, workspace, work, state_indptr, kv_indices, counters, kv_layout,
             sizes, scales, pdl) -> None:
    p = dict(zip(SIZES, sizes))
    layout = Layout((k_cache, v_cache), kv_layout, p["num_kv_heads"], p["head_dim"], p["page_size"], k_cache.dtype)
    DecodeLaunch(q, layout, out, lse, sinks is not None, workspace, work, state_indptr, kv_indices, counters,
                 list(sizes), *scales, pdl)(q.data_ptr(), k_cache.data_ptr(), v_cache.data_ptr(), out.data_ptr(),
                                            lse.data_ptr() if lse is not None else None,
                                            sinks.data_ptr() if sinks is not None else None)


OP = define("batch_decode_out(Tensor q, Tensor k_cache, Tensor v_cache, Tensor(a!) out, Tensor(b!)? lse, Tensor? sinks, "
            "Tensor(c!) workspace, Tensor work, Tensor state_indptr, Tensor kv_indices, Tensor(d!) counters, "
            "str kv_layout, int[] sizes, float[] scales, bool pdl) -> ()",
            _op_impl, lambda *args: None)
