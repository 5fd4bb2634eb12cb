"""The parts of FlashInfer's decode wrapper API that servers still call and that change nothing in
cutefi's plan or kernel: the deprecated ``begin_forward`` / ``forward`` / ``forward_return_lse``
/ ``end_forward``, ``run_return_lse``, ``reset_workspace_buffer``, the planned values servers
read back (``_sm_scale``, ``_logits_soft_cap``, ``_window_left``), and the checks of the
options cutefi's decode does not take (``backend`` names, ``o_data_type``, ``block_tables``,
``seq_lens``, ``q_len_per_req``, ``window_right``, ``jit_args``). A mixin of
``decode.BatchDecodeWithPagedKVCacheWrapper``."""

from __future__ import annotations

import torch

from .._checks import require_cuda, require_tensor
from ..jit.logs import api_log

# FlashInfer's backend names that name its own kernels for the work cutefi's decode does: taken
# as "auto" (as use_tensor_cores is); the others are kernels cutefi does not have
BACKENDS = ("auto", "cutefi", "fa2", "fa3")


def check_backend(backend: str) -> None:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS} (FlashInfer's 'fa2' and 'fa3' run cutefi's kernels); "
                         f"got {backend!r}: cutefi runs its own kernels only")


def check_jit_args(jit_args, jit_kwargs=None) -> None:
    for name, value in (("jit_args", jit_args), ("jit_kwargs", jit_kwargs)):
        if value is not None:
            raise NotImplementedError(f"{name}: FlashInfer's custom JIT variants are not available in cutefi "
                                      "(pass None)")


def check_plan_extras(block_tables, seq_lens, q_len_per_req, window_right) -> None:
    """FlashInfer's plan options for its other backends and for multi-token decode."""
    if block_tables is not None:
        raise NotImplementedError("block_tables (FlashInfer's trtllm-gen page table): cutefi plans from indptr, "
                                  "indices and last_page_len; pass None")
    if seq_lens is not None:
        raise NotImplementedError("seq_lens: cutefi takes each request's KV length from indptr and last_page_len; "
                                  "pass None")
    if q_len_per_req not in (None, 1):
        raise NotImplementedError(f"q_len_per_req={q_len_per_req}: cutefi's decode takes one query token a request")
    if window_right not in (0, -1):  # (decode's one query is the last token: nothing lies to its right)
        raise NotImplementedError(f"window_right={window_right}: cutefi's decode attends up to the last token "
                                  "(window_right 0 or -1)")


def check_run_extras(args: tuple, q_len_per_req, skip_softmax_threshold_scale_factor, kv_cache_sf) -> None:
    """FlashInfer's run options for its other backends. ``args``: FlashInfer's positional extras
    after ``paged_kv_cache`` (a JIT module's tensors, or FP8 queries' scale tensors)."""
    if args:
        raise TypeError(f"run() got {len(args)} positional arguments after paged_kv_cache: FlashInfer's "
                        "JIT-module tensors and FP8-query scale tensors are not taken by cutefi's decode "
                        "(pass q, paged_kv_cache and keywords; FP8 KV scales as k_scale / v_scale)")
    if q_len_per_req not in (None, 1):
        raise NotImplementedError(f"q_len_per_req={q_len_per_req}: cutefi's decode takes one query token a request")
    if skip_softmax_threshold_scale_factor is not None:
        raise NotImplementedError("skip_softmax_threshold_scale_factor: cutefi's decode computes every score "
                                  "(pass None)")
    if kv_cache_sf is not None:
        raise NotImplementedError("kv_cache_sf (NVFP4 KV scale factors): cutefi's decode takes bf16/fp16 or FP8 "
                                  "caches with k_scale / v_scale")


class DecodeWrapperCompat:
    """FlashInfer's deprecated and auxiliary decode wrapper methods, on ``plan`` and ``run``."""

    def begin_forward(self, *args, **kwargs) -> None:
        """FlashInfer's deprecated name of :meth:`plan`."""
        return self.plan(*args, **kwargs)

    def end_forward(self) -> None:
        """FlashInfer's deprecated no-op."""

    def run_return_lse(self, q, paged_kv_cache, *args, **kwargs):
        """:meth:`run` with ``return_lse`` True unless given (FlashInfer's partialmethod): ``(out, lse)``."""
        kwargs.setdefault("return_lse", True)
        return self.run(q, paged_kv_cache, *args, **kwargs)

    def forward(self, q, paged_kv_cache, pos_encoding_mode="NONE", q_scale=None, k_scale=None, v_scale=None,
                window_left=-1, logits_soft_cap=None, sm_scale=None, rope_scale=None, rope_theta=None):
        """FlashInfer's deprecated ``forward``: :meth:`run` with the plan's score options
        replaced by these, as FlashInfer replaces them (``sm_scale`` None: 1/sqrt(head_dim),
        ``logits_soft_cap`` None: off). The position encoding and the window shape the plan's
        builds and partition, so they must be the planned ones."""
        return self._forward(q, paged_kv_cache, pos_encoding_mode, q_scale, k_scale, v_scale, window_left,
                             logits_soft_cap, sm_scale, rope_scale, rope_theta, False)

    def forward_return_lse(self, q, paged_kv_cache, pos_encoding_mode="NONE", q_scale=None, k_scale=None,
                           v_scale=None, window_left=-1, logits_soft_cap=None, sm_scale=None, rope_scale=None,
                           rope_theta=None):
        """:meth:`forward` returning ``(out, lse)``."""
        return self._forward(q, paged_kv_cache, pos_encoding_mode, q_scale, k_scale, v_scale, window_left,
                             logits_soft_cap, sm_scale, rope_scale, rope_theta, True)

    def _forward(self, q, paged_kv_cache, pos_encoding_mode, q_scale, k_scale, v_scale, window_left, logits_soft_cap,
                 sm_scale, rope_scale, rope_theta, return_lse):
        plan = self._planned()
        planned_mode = "ROPE_LLAMA" if plan["rope"] else "NONE"
        if pos_encoding_mode != planned_mode:
            raise ValueError(f"forward's pos_encoding_mode={pos_encoding_mode!r} differs from the planned "
                             f"{planned_mode!r}: plan again with it")
        if window_left != plan["window_left"]:
            raise ValueError(f"forward's window_left={window_left} differs from the planned {plan['window_left']}: "
                             "plan again with it")
        return self.run(q, paged_kv_cache, q_scale=q_scale, k_scale=k_scale, v_scale=v_scale, return_lse=return_lse,
                        _scores=(sm_scale, logits_soft_cap, rope_scale, rope_theta))

    @api_log
    def workspace_size(self, indptr, indices, last_page_len, num_qo_heads, num_kv_heads, head_dim, page_size,
                       pos_encoding_mode="NONE", window_left=-1, logits_soft_cap=None, q_data_type="float16",
                       kv_data_type=None, o_data_type=None, data_type=None, sm_scale=None, rope_scale=None,
                       rope_theta=None, block_tables=None, seq_lens=None, fixed_split_size=None, disable_split_kv=False,
                       q_len_per_req=1) -> tuple[int, int]:
        """FlashInfer's ``(float_workspace_size, int_workspace_size)`` in bytes that :meth:`plan`
        of these arguments needs: the float workspace holds split requests' partial states (in
        CUDA-graph mode, as many as the fixed grid's work items); the int workspace is not used
        (0). The arguments are checked as plan checks them; nothing is planned or uploaded."""
        from .decode import graph_items, partial_state_bytes

        static, batch, part, _, _, ctas_per_item, slots = self._partition(
            indptr, indices, last_page_len, num_qo_heads, num_kv_heads, head_dim, page_size, pos_encoding_mode,
            window_left, logits_soft_cap, q_data_type, kv_data_type, o_data_type, data_type, sm_scale, rope_scale,
            rope_theta, block_tables, seq_lens, fixed_split_size, disable_split_kv, q_len_per_req, 0, None)
        rows = part.partial_rows
        if self._use_cuda_graph:  # the fixed grid's items (set by the first plan, else what it would set)
            rows = self._fixed.get("capacity") or graph_items(batch, slots, ctas_per_item)
        return partial_state_bytes(rows, static.plan["num_qo_heads"], static.plan["head_dim"]), 0

    def reset_workspace_buffer(self, float_workspace_buffer: torch.Tensor, int_workspace_buffer=None) -> None:
        """Take a new float workspace (split requests' partial states); FlashInfer's int
        workspace is not used. A plan made before still holds its own buffers: plan again."""
        require_tensor("float_workspace_buffer", float_workspace_buffer)
        if require_cuda("float_workspace_buffer", float_workspace_buffer) != self.device:
            raise ValueError(f"float_workspace_buffer must be on cuda:{self.device}; got {float_workspace_buffer.device}")
        self._workspace = float_workspace_buffer.view(torch.uint8).reshape(-1)
        self._plan = None
        self._launches.clear()

    # the planned values FlashInfer keeps as attributes, which servers read back
    @property
    def _sm_scale(self):
        return self._planned()["sm_scale"]

    @property
    def _logits_soft_cap(self) -> float:
        cap = self._planned()["logits_soft_cap"]
        return 0.0 if cap is None else cap

    @property
    def _window_left(self) -> int:
        return self._planned()["window_left"]

    def _planned(self) -> dict:
        if self._plan is None:
            raise RuntimeError("no plan yet: call plan(...) with the batch's page table first")
        return self._plan
