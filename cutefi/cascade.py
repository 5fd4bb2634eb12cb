"""``flashinfer.cascade``'s merge ops in cutefi (attention states merged by their log-sum-exps),
so ``from flashinfer.cascade import merge_state`` becomes ``from cutefi.cascade import
merge_state``. They live in the attention family (``cutefi/attention/api.py``) and are
resolved on first use; the cascade wrappers are not provided."""

from ._reexport import lazy_names

API = ("merge_state", "merge_state_in_place", "merge_states")

__all__ = ["API", *API]

__getattr__, __dir__ = lazy_names(__name__, "cutefi.attention.api", API)
