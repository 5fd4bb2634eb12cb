"""The parts of FlashInfer's batch prefill wrapper API that servers still call beside ``plan`` and
``run``: the deprecated ``forward`` / ``forward_return_lse`` (SGLang plans with ``causal=False``
and passes ``causal=True`` at forward; the values given there replace the plan's, as in
FlashInfer), ``end_forward``, ``run_return_lse``, ``reset_workspace_buffer``, the planned values
vLLM asserts (``_causal``, ``_window_left``, ``_logits_soft_cap``, ``_sm_scale``), and the checks of
the ``run`` keywords of FlashInfer's other backends. A mixin of both batch wrappers."""

from __future__ import annotations

import functools
import inspect
from typing import Callable

import torch

from .._checks import require_cuda, require_tensor
from .ops import _scales, rope_scales

# forward's options: those that shape the plan's partition, and those that only change the scores
# (applied to the plan without partitioning again). Its pos_encoding_mode is taken and ignored:
# FlashInfer builds its kernel with the plan's mode, so its forward keeps that mode too
_PARTITION_OPTIONS = ("causal", "window_left")
_SCORE_OPTIONS = ("logits_soft_cap", "sm_scale", "rope_scale", "rope_theta")


def remember_plan(plan: Callable) -> Callable:
    """Keep ``plan``'s arguments so ``forward`` can plan again with its own causal / window /
    position-encoding values (bound to the signature only when read: nothing on the plan path)."""
    signature = inspect.signature(plan)

    @functools.wraps(plan)
    def planned(self, *args, **kwargs):
        plan(self, *args, **kwargs)
        self._plan_call = (signature, args, kwargs)
        self._plan_arguments = None

    return planned


def check_run_extras(**given) -> None:
    """FlashInfer's ``run`` keywords of its other backends (NVFP4 KV, skip-softmax, trtllm-gen):
    taken as their defaults, refused by name otherwise."""
    for name, value in given.items():
        if value is not None:
            raise NotImplementedError(f"{name}: an option of FlashInfer's other prefill backends (NVFP4 KV, "
                                      "trtllm-gen), not of cutefi's prefill; pass None")


class PrefillWrapperCompat:
    """FlashInfer's deprecated and auxiliary batch prefill wrapper methods, on ``plan`` and ``run``."""

    def end_forward(self) -> None:
        """FlashInfer's deprecated no-op."""

    def run_return_lse(self, *args, **kwargs):
        """:meth:`run` with ``return_lse`` True unless given (FlashInfer's partialmethod): ``(out, lse)``."""
        kwargs.setdefault("return_lse", True)
        return self.run(*args, **kwargs)

    def reset_workspace_buffer(self, float_workspace_buffer: torch.Tensor, int_workspace_buffer=None) -> None:
        """FlashInfer's workspace swap. cutefi's prefill keeps its work arrays in its own buffers,
        so the current plan stays valid; the new buffer must be on the wrapper's device."""
        require_tensor("float_workspace_buffer", float_workspace_buffer)
        if require_cuda("float_workspace_buffer", float_workspace_buffer) != self.device:
            raise ValueError(f"float_workspace_buffer must be on cuda:{self.device} (the wrapper's device); got "
                             f"{float_workspace_buffer.device}")

    def _forward(self, run_args: tuple, run_kwargs: dict, options: dict):
        """FlashInfer's ``forward``: its options replace the plan's (defaults included: a
        ``forward`` without ``window_left`` runs without a window), then :meth:`run`. A change
        of causal or window partitions the batch again (once: later layers with the same values
        reuse it); a change of the score scales (sm_scale, soft cap, RoPE's scale and theta) only
        rescales. The position encoding stays the plan's, as in FlashInfer."""
        arguments = self._planned_arguments()
        changed = {name: value for name, value in options.items() if arguments[name] != value}
        if any(name in _PARTITION_OPTIONS for name in changed):
            if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
                raise RuntimeError(f"forward's {sorted(changed)} differ from the plan's and a new plan cannot be "
                                   "made during CUDA graph capture: plan with them before capturing")
            self.plan(**{**arguments, **options})
        elif changed:
            plan = self._plan
            given = {**arguments, **options}
            head_dim = plan["head_dim"]
            scales = list(_scales(given["sm_scale"], head_dim, given["logits_soft_cap"]))
            rope = rope_scales(given["pos_encoding_mode"], given["rope_scale"], given["rope_theta"], head_dim,
                               plan["head_dim_vo"])
            self._plan = dict(plan, scales=scales, rope=rope)
            self._plan_arguments = given
            self._launches.clear()  # (the kept launches carry the old scales)
        return self.run(*run_args, **run_kwargs)

    def _planned_arguments(self) -> dict:
        """The last plan's arguments by name, defaults included."""
        if self._plan is None:
            raise RuntimeError("no plan yet: call plan(...) with the batch's indptr arrays first")
        if self._plan_arguments is None:
            signature, args, kwargs = self._plan_call
            bound = signature.bind(self, *args, **kwargs)
            bound.apply_defaults()
            self._plan_arguments = {name: value for name, value in bound.arguments.items() if name != "self"}
        return self._plan_arguments

    # the planned values FlashInfer keeps as attributes, which servers read back (vLLM asserts them)
    @property
    def _causal(self) -> bool:
        return bool(self._planned_arguments()["causal"])

    @property
    def _window_left(self) -> int:
        return self._planned_arguments()["window_left"]

    @property
    def _logits_soft_cap(self) -> float:
        cap = self._planned_arguments()["logits_soft_cap"]
        return 0.0 if cap is None else cap

    @property
    def _sm_scale(self):
        return self._planned_arguments()["sm_scale"]

    @property
    def _pos_encoding_mode(self) -> str:
        return self._planned_arguments()["pos_encoding_mode"]
