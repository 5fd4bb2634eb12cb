"""The decode forms built on :class:`cutefi.attention.decode.BatchDecodeWithPagedKVCacheWrapper`
(FlashInfer's): ``CUDAGraphBatchDecodeWithPagedKVCacheWrapper``, ``fast_decode_plan`` (which
servers bind as a wrapper's ``begin_forward``) and ``single_decode_with_kv_cache`` (one request
as one page of the batch kernel, its wrappers kept by shape)."""

from __future__ import annotations

import torch

from .._checks import require_cuda, require_tensor
from .._graph_cache import GraphSafeCache
from ..jit.driver import device_info
from ..jit.logs import api_log
from . import decode_plan
from .decode import BatchDecodeWithPagedKVCacheWrapper, _check_options
from .plan import KV_LAYOUTS


class CUDAGraphBatchDecodeWithPagedKVCacheWrapper(BatchDecodeWithPagedKVCacheWrapper):
    """The CUDA-graph form of :class:`BatchDecodeWithPagedKVCacheWrapper` (FlashInfer's)."""

    def __init__(self, workspace_buffer: torch.Tensor, indptr_buffer: torch.Tensor, indices_buffer: torch.Tensor,
                 last_page_len_buffer: torch.Tensor, kv_layout: str = "NHD", use_tensor_cores: bool = False) -> None:
        require_tensor("workspace_buffer", workspace_buffer)
        require_cuda("workspace_buffer", workspace_buffer)
        super().__init__(workspace_buffer, kv_layout, True, use_tensor_cores, indptr_buffer, indices_buffer,
                         last_page_len_buffer)


# single_decode's wrappers, 64 kept (a generation loop makes one per KV length); evicted ones a
# CUDA graph captured stay alive
_SINGLE: GraphSafeCache[BatchDecodeWithPagedKVCacheWrapper] = GraphSafeCache(64)


@api_log
def fast_decode_plan(self, indptr, indices, last_page_len, num_qo_heads, num_kv_heads, head_dim, page_size,
                     pos_encoding_mode="NONE", window_left=-1, logits_soft_cap=None, q_data_type=None,
                     kv_data_type=None, data_type=None, sm_scale=None, rope_scale=None, rope_theta=None,
                     non_blocking=True, fixed_split_size=None, disable_split_kv=False, q_len_per_req=1,
                     global_override_indptr_cpu=None) -> None:
    """FlashInfer's ``fast_decode_plan``: ``self.plan(...)`` of a (CUDA-graph) decode wrapper,
    which servers bind as ``wrapper.begin_forward``. cutefi's ``plan`` is already the light one
    (numpy partition, device page tables used in place); ``global_override_indptr_cpu``, a
    host copy of a device ``indptr``, spares its device-to-host copy."""
    if not isinstance(self, BatchDecodeWithPagedKVCacheWrapper):
        raise TypeError(f"fast_decode_plan's first argument must be a cutefi decode wrapper; got {type(self).__name__}")
    self.plan(indptr, indices, last_page_len, num_qo_heads, num_kv_heads, head_dim, page_size,
              pos_encoding_mode=pos_encoding_mode, window_left=window_left, logits_soft_cap=logits_soft_cap,
              q_data_type=q_data_type, kv_data_type=kv_data_type, data_type=data_type, sm_scale=sm_scale,
              rope_scale=rope_scale, rope_theta=rope_theta, non_blocking=non_blocking,
              fixed_split_size=fixed_split_size, disable_split_kv=disable_split_kv, q_len_per_req=q_len_per_req,
              _indptr_host=global_override_indptr_cpu)


@api_log
def single_decode_with_kv_cache(q, k, v, kv_layout="NHD", pos_encoding_mode="NONE", use_tensor_cores=False,
                                q_scale=None, k_scale=None, v_scale=None, window_left=-1, logits_soft_cap=None,
                                sm_scale=None, rope_scale=None, rope_theta=None, return_lse=False):
    """Decode attention of one query ``q`` [num_qo_heads, head_dim] over ``k``, ``v``
    [kv_len, num_kv_heads, head_dim] (NHD) or [num_kv_heads, kv_len, head_dim] (HND): the
    sequence is one page of the batch kernel, split over the SMs. Returns ``out``
    [num_qo_heads, head_dim] (or ``(out, lse)``)."""
    _check_options(pos_encoding_mode)
    for name, t in (("q", q), ("k", k), ("v", v)):
        require_tensor(name, t)
    if q.dim() != 2 or k.dim() != 3 or v.shape != k.shape:
        raise ValueError(f"q must be [num_qo_heads, head_dim] and k, v [kv_len, num_kv_heads, head_dim] ({kv_layout}); "
                         f"got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if kv_layout not in KV_LAYOUTS:
        raise ValueError(f"kv_layout must be 'NHD' or 'HND'; got {kv_layout!r}")
    kv_len, kv_heads = (k.shape[0], k.shape[1]) if kv_layout == "NHD" else (k.shape[1], k.shape[0])
    device = require_cuda("q", q)
    key = (device, q.shape, k.shape, kv_layout, q.dtype, k.dtype, window_left, logits_soft_cap, sm_scale,
           pos_encoding_mode, rope_scale, rope_theta)

    def planned() -> BatchDecodeWithPagedKVCacheWrapper:
        if torch.cuda.is_current_stream_capturing():
            raise RuntimeError(f"single_decode_with_kv_cache: no plan for kv_len={kv_len} (and these shapes) yet, "
                               "and none can be made during CUDA graph capture: call it once with them before "
                               "capturing")
        # the partial states of one request: at most a part a 256-token chunk (decode_plan.MIN_CHUNK)
        # and a few waves of CTAs' worth (choose_chunk aims at one)
        parts = min(-(-max(kv_len, 1) // decode_plan.MIN_CHUNK), 8 * device_info(device).sms) + 1
        workspace = torch.empty(parts * q.shape[0] * (2 * q.shape[1] + 4), dtype=torch.uint8, device=q.device)
        wrapper = BatchDecodeWithPagedKVCacheWrapper(workspace, kv_layout)
        page = max(kv_len, 1)
        wrapper.plan(torch.tensor([0, 1], dtype=torch.int32), torch.zeros(1, dtype=torch.int32),
                     torch.tensor([page], dtype=torch.int32), q.shape[0], kv_heads, q.shape[1], page,
                     pos_encoding_mode=pos_encoding_mode, window_left=window_left, logits_soft_cap=logits_soft_cap,
                     q_data_type=q.dtype, kv_data_type=k.dtype, sm_scale=sm_scale, rope_scale=rope_scale,
                     rope_theta=rope_theta)
        wrapper._plan_fixed = True
        return wrapper

    wrapper = _SINGLE.get(key, planned)
    if kv_len == 0:
        raise ValueError("k and v must hold at least one token")
    result = wrapper.run(q.unsqueeze(0), (k.unsqueeze(0), v.unsqueeze(0)), q_scale=q_scale, k_scale=k_scale,
                         v_scale=v_scale, return_lse=return_lse)
    if return_lse:
        return result[0][0], result[1][0]
    return result[0]
