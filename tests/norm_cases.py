"""The dtype × hidden × rows × contiguous/strided grid the norm GPU tests share."""

import pytest

MAX_ELEMENTS = 2**28  # largest input the grid allocates (512 MiB of 16-bit values)


def row_norm_cases(dtypes_with_ids, hidden_sizes, row_counts):
    """``pytest.param(dtype, hidden, rows, strided)`` for every combination that fits."""
    for dtype, dtype_id in dtypes_with_ids:
        for hidden in hidden_sizes:
            for rows in row_counts:
                if rows * hidden > MAX_ELEMENTS:
                    continue
                for strided in (False, True):
                    yield pytest.param(dtype, hidden, rows, strided,
                                       id=f"{dtype_id}-N{hidden}-M{rows}-{'strided' if strided else 'contig'}")
