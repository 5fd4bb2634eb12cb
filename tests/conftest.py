import os

import pytest


def _has_gpu() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


HAS_GPU = _has_gpu()


def pytest_collection_modifyitems(config, items):
    if HAS_GPU:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def isolated_cache(tmp_path, monkeypatch):
    """A private, empty cubin cache for one test."""
    from cutefi.jit import lookup

    root = tmp_path / "cache"
    monkeypatch.setenv("CUTEFI_CACHE_DIR", str(root))
    lookup.cache_store.cache_clear()
    yield root
    lookup.cache_store.cache_clear()


def dsl_available() -> bool:
    from cutefi.jit.toolchain import dsl_version

    return dsl_version() is not None


requires_dsl = pytest.mark.skipif(not dsl_available() and not os.environ.get("CI"),
                                  reason="CuTe DSL not installed")
