"""Contract, size-class heuristics and specs of the CuTe DSL row-norm kernel (RMSNorm and
LayerNorm families, and their FP8-quantising variants). Pure Python, no cutlass import.

The kernel (``norm_kernel.py``) is specialised at build time on ``(norm, dtype, n_class,
fused_add, gemma, aligned, out_dtype)``; rows, heads, the hidden size within its class, strides
and eps are kernel arguments. Parameters (the contract below is the only list): ``x``,
``weight``, ``bias`` (layernorm's beta), ``out`` (may alias ``x``; FP8 for the quant builds),
``residual`` (fused add, read and written in place), ``scale`` and ``scale_value`` (quant: the
output is divided by ``scale_value``, or by ``scale[0]`` where ``scale_value`` is 0), ``M`` rows, ``N`` hidden size (``N <= n_class``), ``heads``, and per tensor a
row (token) stride and a head stride in elements, and ``eps``: row ``r`` starts at ``(r //
heads) * row_stride + (r % heads) * head_stride``, so a 2-D tensor is ``heads = 1`` and a 3-D
``[tokens, heads, head_dim]`` view may have any strides. Grid: ``ceil(M / (rows_per_cta *
row_iters))`` CTAs; ``row_iters`` is 1 except on the persistent LayerNorm builds
(``prefetch_depth``), whose threads each normalise ``row_iters`` rows ``grid`` row groups apart.

Every access moves 8 elements (128 bits of a 16-bit dtype). ``aligned`` builds need ``N``,
every stride and every pointer 8-element aligned. The others ("shifted") take any hidden size
and stride: each row is read and written in the aligned 8-element chunks that cover it, from
``shift + row start`` rounded down, where ``shift`` is the first row's offset from the 16-byte
aligned pointers passed (x, out and residual rows must sit alike in their chunks; the API
checks); the chunks at a row's ends are masked element by element, and the parameters are
read in the row's frame (``shifted.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .. import dtypes
from . import tuning
from ..jit.contract import LaunchContract, Param, ceil_div, pointers, scalars
from ..jit.policy import Family
from ..jit.registry import register
from ..jit.spec import KernelSpec

KINDS = ("rms", "layer")
QUANT_DTYPES = ("fp8e4m3", "fp8e5m2")
QUANT_MAX = dtypes.FP8_MAX  # quant outputs are saturated to their format's largest finite value
# RMSNorm + SiLU builds (FlashInfer's fused_rmsnorm_silu): its input and output dtypes
SILU_DTYPES = ("bf16",)
SILU_OUT_DTYPES = (None, "fp8e4m3")

# Elements per access of an aligned build: 128 bits of a 16-bit dtype.
VEC_BITS = 128


# Shifted builds (rows not 16-byte aligned: any hidden size, odd strides) take the aligned
# split with one more 128-bit chunk a thread's row pass may need: a row starts up to 7 elements
# into its first aligned chunk.
SUPPORTED_N_CLASSES = tuple(sorted(tuning.CLASS_TABLE))
SUPPORTED_DTYPES = ("bf16", "fp16")


def dtype_bits(dtype_name: str) -> int:
    if dtype_name not in SUPPORTED_DTYPES:
        raise ValueError(f"unsupported dtype {dtype_name!r}; expected one of {SUPPORTED_DTYPES}")
    return dtypes.bits(dtype_name)


def _check(n_class: int, dtype_name: str) -> None:
    dtype_bits(dtype_name)
    if n_class not in tuning.CLASS_TABLE:
        raise ValueError(f"unsupported n_class {n_class}; expected one of {SUPPORTED_N_CLASSES}")


def vec_elems(dtype_name: str) -> int:
    """Elements per 128-bit global access (8 for bf16/fp16)."""
    return VEC_BITS // dtype_bits(dtype_name)


def access_elems(norm: str, dtype_name: str, aligned: bool) -> int:
    """Consecutive row elements a thread owns per access (the build's ``vec``): 8, one 128-bit
    access of a 16-bit row."""
    return vec_elems(dtype_name)


def prefetch_depth(norm: str, n_class: int, aligned: bool, quant: bool, fused_add: bool) -> int:
    """Rows a thread's loads run ahead of its work (0: none). With a depth D the CTA walks rows
    ``grid`` row groups apart (a persistent loop of ``row_iters`` rows) and keeps the next D rows
    of x in flight through a per-thread cp.async ring in shared memory, with gamma and beta read
    once: LayerNorm (tuning.LAYER_PREFETCH, LAYER_SHIFTED_PREFETCH) and shifted RMSNorm classes
    (tuning.RMS_SHIFTED_PREFETCH)."""
    if fused_add:
        return 0
    if norm == "rms":
        return 0 if aligned else tuning.RMS_SHIFTED_PREFETCH.get((n_class, quant), 0)
    return (tuning.LAYER_PREFETCH if aligned else tuning.LAYER_SHIFTED_PREFETCH).get((n_class, quant), (0, 0, 0))[2]


def _class_table(kind: str, fused_add: bool, aligned: bool, quant: bool) -> dict[int, tuple[int, int]]:
    if kind == "layer":
        table = tuning.LAYER_QUANT_CLASS_TABLE if quant else tuning.LAYER_CLASS_TABLE
    else:
        table = tuning.CLASS_TABLE
    if aligned:
        if kind == "rms":
            wide = tuning.RMS_WIDE_ROWS[(fused_add, quant)]
            return {**table, **{n: (tpr, threads) for n, (tpr, threads, _) in wide.items()}}
        if kind == "layer" and not fused_add:
            table = {**table, **{n: (tpr, threads) for (n, q), (tpr, threads, _) in tuning.LAYER_PREFETCH.items()
                                 if q == quant}}
        return table
    # shifted RMSNorm (when chosen, it held the weight's two aligned chunks and their shifted copy;
    # since session 21 it reads the weight in the row's frame): twice the threads a row, at most
    # 1024. At 16384 x 4095 bf16 on the H200 (tune_norm_h200*.json)
    # that beat 4x by 14% (fused add, 3970 GB/s, 98% of the aligned 4096) and 1x (spills);
    # LayerNorm (latency-bound) keeps its aligned split: 1480 GB/s against 1033 with 2x.
    factor = 1 if kind == "layer" else 2
    shifted = {n: (min(1024, tpr * factor), max(threads, min(1024, tpr * factor)))
               for n, (tpr, threads) in table.items()}
    if kind == "layer" and not fused_add:
        shifted |= {n: (tpr, threads) for (n, q), (tpr, threads, _) in tuning.LAYER_SHIFTED_PREFETCH.items()
                    if q == quant}
        if quant:
            shifted |= tuning.LAYER_QUANT_SHIFTED_ROWS
    return shifted


def _latency_table(aligned: bool) -> dict:
    return tuning.LATENCY_BUILDS if aligned else tuning.LATENCY_SHIFTED_BUILDS


def latency_rows(kind: str, fused_add: bool, quant: bool, n_class: int, aligned: bool = True) -> int:
    """The most rows a call may have to take the class's latency build (0: it has none)."""
    return _latency_table(aligned).get((kind, fused_add, quant), {}).get(n_class, (0, 0, 0, 0))[3]


def _lead_chunk_alone(norm: str, n_class: int, fused_add: bool, aligned: bool, quant: bool, split: int) -> bool:
    """Whether a shifted build's row pass covers ``n_class`` exactly (``split`` columns a pass)
    and leaves the chunk a row's lead adds past it to one thread of the row (its last:
    ``norm_kernel.RowNormKernel.lead_lane``)."""
    if aligned or fused_add or n_class % split:
        return False
    if norm == "rms":
        return n_class in tuning.LEAD_CHUNK_ALONE
    return n_class in tuning.LAYER_LEAD_CHUNK_ALONE and bool(prefetch_depth(norm, n_class, aligned, quant, fused_add))


def min_ctas_per_sm(n_class: int, block_threads: int, kind: str = "rms", aligned: bool = True,
                    quant: bool = False, fused_add: bool = False, dtype_name: str = "bf16") -> int:
    """Occupancy target baked into the PTX (``.minnctapersm``), in CTAs per SM. The FP8
    LayerNorm keeps 512 threads but where a thread holds at most 16 elements of its row
    (tuning.LAYER_QUANT_THREADS_PER_SM): at 1024 (64 registers) with 32 elements a thread its
    4096 build spilled ~170 registers and ran at 21% of the copy bandwidth."""
    threads = tuning.THREADS_PER_SM
    if kind == "layer" and aligned and not quant:
        threads = tuning.LAYER_THREADS_PER_SM.get(n_class, tuning.THREADS_PER_SM)
    elif kind == "layer" and aligned:
        threads = tuning.LAYER_QUANT_THREADS_PER_SM.get(n_class, tuning.THREADS_PER_SM)
    elif kind == "layer" and not aligned:
        threads = tuning.LAYER_SHIFTED_THREADS_PER_SM.get(n_class, tuning.THREADS_PER_SM)
    elif kind == "rms" and aligned and n_class in tuning.RMS_WIDE_ROWS[(fused_add, quant)]:
        threads = tuning.RMS_WIDE_ROWS[(fused_add, quant)][n_class][2]
    elif kind == "rms" and not aligned and not fused_add and (not quant or n_class in tuning.LEAD_CHUNK_ALONE):
        # (FP8 with 5 chunks a thread spilled at 768)
        threads = tuning.SHIFTED_RMS_THREADS_PER_SM_BY_CLASS.get((n_class, quant, dtype_name),
                                                                 tuning.SHIFTED_RMS_THREADS_PER_SM)
    return max(1, threads // block_threads)


@dataclass(frozen=True)
class Geometry:
    """A build's compile-time shape; the kernel and its contract both derive from it."""

    n_class: int
    vec: int  # elements per access
    shifted: bool  # rows start anywhere in their first aligned chunk (one chunk more a row)
    threads_per_row: int
    block_threads: int
    min_ctas_per_sm: int
    # load w (and b) after the row reduction (register budget): fused builds, layernorm (fp32
    # gamma and beta take four times the registers of a 16-bit weight) and shifted builds
    delay_weight_load: bool
    prefetch: int = 0  # rows of x in flight ahead of the one being normalised (prefetch_depth)
    # shifted RMSNorm whose split covers n_class exactly: the chunk a row's lead adds past it is
    # one thread's alone (the row's last), not one more chunk of every thread (which did the math
    # of a 5th, almost always empty chunk: ~20% of the element work)
    lead_chunk_alone: bool = False
    elem_bytes: int = 2
    # read x twice (for the statistics, then to scale it) instead of holding it in registers
    # across the reductions (tuning.REREAD_ROWS)
    reread: bool = False

    @property
    def ring_bytes(self) -> int:
        """Shared memory of the prefetch ring: ``prefetch`` rows of every thread's chunks, then
        (``lead_chunk_alone``) ``prefetch`` of each row's lead chunk."""
        lead_chunks = self.rows_per_cta if self.lead_chunk_alone else 0
        return self.prefetch * (self.block_threads * self.chunks + lead_chunks) * self.vec * self.elem_bytes

    @property
    def rows_per_cta(self) -> int:
        return self.block_threads // self.threads_per_row

    @property
    def warps_per_row(self) -> int:
        return max(1, self.threads_per_row // 32)

    @property
    def chunks(self) -> int:
        """Accesses (chunks) each thread owns in its row (compile-time K); with
        ``lead_chunk_alone`` the row's last chunk (``tile_n`` on) is one thread's extra."""
        extra = self.vec if self.shifted and not self.lead_chunk_alone else 0
        return -(-(self.n_class + extra) // (self.vec * self.threads_per_row))

    @property
    def tile_n(self) -> int:
        """Columns covered by one pass of a row's threads (>= n_class)."""
        return self.vec * self.threads_per_row * self.chunks


def geometry(norm: str, dtype_name: str, n_class: int, fused_add: bool = False, aligned: bool = True,
             out_dtype: str | None = None, latency: bool = False) -> Geometry:
    _check(n_class, dtype_name)
    if latency:
        return _latency_geometry(norm, dtype_name, n_class, fused_add, aligned, out_dtype)
    quant = out_dtype is not None
    if aligned and n_class in tuning.REREAD_ROWS.get((norm, fused_add, quant), {}):
        tpr, threads, per_sm, vec = tuning.REREAD_ROWS[(norm, fused_add, quant)][n_class]
        return Geometry(n_class=n_class, vec=vec, shifted=False,
                        threads_per_row=tpr, block_threads=threads, min_ctas_per_sm=max(1, per_sm // threads),
                        delay_weight_load=True, elem_bytes=dtype_bits(dtype_name) // 8, reread=True)
    threads_per_row, block_threads = _class_table(norm, fused_add, aligned, quant)[n_class]
    shape = Geometry(
        n_class=n_class, vec=access_elems(norm, dtype_name, aligned), shifted=not aligned,
        threads_per_row=threads_per_row,
        block_threads=block_threads,
        min_ctas_per_sm=min_ctas_per_sm(n_class, block_threads, norm, aligned, quant, fused_add, dtype_name),
        delay_weight_load=_delays_weight(norm, fused_add, aligned, n_class, threads_per_row, dtype_name),
        prefetch=prefetch_depth(norm, n_class, aligned, quant, fused_add),
        lead_chunk_alone=_lead_chunk_alone(norm, n_class, fused_add, aligned, quant,
                                           access_elems(norm, dtype_name, aligned) * threads_per_row),
        elem_bytes=dtype_bits(dtype_name) // 8,
    )
    return shape


def _delays_weight(norm: str, fused_add: bool, aligned: bool, n_class: int, threads_per_row: int,
                   dtype_name: str) -> bool:
    """Whether a build loads its parameters after the row reduction (to keep them out of the
    registers held across it): LayerNorm (fp32 gamma and beta), shifted rows, and the fused add
    where a thread holds more than 16 elements (x, residual and weight at once would spill);
    a narrower fused add loads the weight with x, off the critical path of small calls. (The
    builds that read x twice always do: ``geometry``.)"""
    if norm == "layer" or not aligned:
        return True
    return fused_add and n_class // threads_per_row > 2 * vec_elems(dtype_name)


def _latency_geometry(norm: str, dtype_name: str, n_class: int, fused_add: bool, aligned: bool,
                      out_dtype: str | None) -> Geometry:
    """A latency build's shape (``tuning.LATENCY_BUILDS``, ``LATENCY_SHIFTED_BUILDS``): one row a
    group of threads, no prefetch, parameters loaded with x."""
    if not latency_rows(norm, fused_add, out_dtype is not None, n_class, aligned):
        raise ValueError(f"no latency build for {norm} n_class={n_class} fused_add={fused_add} aligned={aligned} "
                         f"out_dtype={out_dtype}")
    tpr, threads, per_sm, _ = _latency_table(aligned)[(norm, fused_add, out_dtype is not None)][n_class]
    return Geometry(n_class=n_class, vec=access_elems(norm, dtype_name, aligned), shifted=not aligned,
                    threads_per_row=tpr, block_threads=threads, min_ctas_per_sm=max(1, per_sm // threads),
                    delay_weight_load=False, elem_bytes=dtype_bits(dtype_name) // 8)


def row_iters(shape: Geometry, rows: int, sms: int) -> int:
    """Rows each thread normalises (the kernel's ``row_iters``): 1 on one-row builds; on
    persistent ones enough that the grid is about one wave of resident CTAs."""
    if not shape.prefetch:
        return 1
    if rows >= 1 << 30:  # rows + (row_iters + depth) row groups must stay below 2^31 in the kernel
        raise ValueError(f"at most 2^30 rows on a persistent norm build; got {rows}")
    groups = -(-rows // shape.rows_per_cta)
    return max(1, -(-groups // (sms * shape.min_ctas_per_sm)))


def persistent_grid(shape: Geometry, rows: int, sms: int, lead_period: int) -> tuple[int, int]:
    """``(row_iters, grid CTAs)`` of a launch. A thread's rows are ``grid * rows_per_cta`` apart;
    a shifted persistent build holds its parameters (LayerNorm's gamma and beta, RMSNorm's
    weight) in the row frame of the thread's first row, so that step must be a multiple of
    ``lead_period``, the rows over which the start of a row in its 16-byte chunk repeats (the
    plan's ``lead_period``): the grid is rounded up to one (its surplus CTAs' rows lie past the
    last and do nothing). The plan launches this grid, not the contract's formula: the
    contract's grid also runs at compile time on DSL values, where this rounding cannot."""
    iters = row_iters(shape, rows, sms)
    groups = ceil_div(rows, shape.rows_per_cta)
    grid = ceil_div(groups, iters)
    if iters > 1 and shape.shifted:
        unit = lead_period // math.gcd(lead_period, shape.rows_per_cta)
        # rounded down where rounding up would start more CTAs than an SM wave holds (the
        # surplus would run after the rest: +30-40% time at 65536 rows, session 25)
        up, down = ceil_div(grid, unit) * unit, grid // unit * unit
        grid = up if up <= sms * shape.min_ctas_per_sm or not down else down
        iters = ceil_div(groups, grid)
        if iters == 1:
            grid = groups
    return iters, grid


def pick_n_class(N: int) -> int:
    """Smallest supported class that covers N."""
    for c in SUPPORTED_N_CLASSES:
        if N <= c:
            return c
    raise ValueError(f"N={N} exceeds the largest supported class {SUPPORTED_N_CLASSES[-1]}")


def _check_out_dtype(out_dtype: str | None) -> None:
    if out_dtype is not None and out_dtype not in QUANT_DTYPES:
        raise ValueError(f"unsupported quant out_dtype {out_dtype!r}; expected one of {QUANT_DTYPES}")


def entry_name(dtype_name: str, n_class: int, fused_add: bool, gemma: bool, kind: str = "rms",
               aligned: bool = True, out_dtype: str | None = None) -> str:
    """The PTX entry's name prefix of a build."""
    dtype_bits(dtype_name)
    _check_out_dtype(out_dtype)
    return (f"cutefi_{kind}norm_{dtype_name}_n{n_class}" + ("_add" if fused_add else "")
            + ("_gemma" if gemma else "") + ("" if aligned else "_any")
            + (f"_to_{out_dtype}" if out_dtype else ""))


def _pointer_align(dtype_name: str, dtype_of_row: str) -> int:
    """Byte alignment of a pointer: one access of the row's width (8 elements)."""
    return max(1, dtypes.bits(dtype_name) // 8) * vec_elems(dtype_of_row)


def norm_params(dtype_name: str, param_dtype: str, out_name: str, element_aligned: bool = False) -> tuple[Param, ...]:
    """The kernel parameters every row-norm build takes (one launch call serves them all);
    ``element_aligned``: pointers an element aligned (the long-row builds' element accesses),
    else an access (8 elements)."""

    def align(name: str) -> int:
        return max(1, dtypes.bits(name) // 8) if element_aligned else _pointer_align(name, dtype_name)

    return (
        *pointers("x", dtype=dtype_name, align=align(dtype_name)),
        *pointers("weight", "bias", dtype=param_dtype, align=align(param_dtype)),
        *pointers("out", dtype=out_name, align=align(out_name)),
        *pointers("residual", dtype=dtype_name, align=align(dtype_name)),
        Param("scale", "ptr", "fp32", 4),
        *scalars("i32", "M", "N", "heads", "shift", "row_iters"),
        *scalars("i64", "x_row_stride", "x_head_stride", "out_row_stride", "out_head_stride",
                 "residual_row_stride", "residual_head_stride"),
        Param("eps", "f32"), Param("scale_value", "f32"),
    )


def contract(norm: str, dtype_name: str, n_class: int, fused_add: bool, gemma: bool, aligned: bool = True,
             out_dtype: str | None = None, fp8_in_software: bool = False, latency: bool = False,
             params16: bool = False, silu: bool = False) -> LaunchContract:
    _check_out_dtype(out_dtype)
    param_dtype = "fp32" if norm == "layer" and not params16 else dtype_name
    out_name = out_dtype or dtype_name
    shape = geometry(norm, dtype_name, n_class, fused_add, aligned, out_dtype, latency)

    return LaunchContract(
        params=norm_params(dtype_name, param_dtype, out_name),
        block=(shape.block_threads, 1, 1),
        # rows row_iters apart by the grid: row_iters = 1 (no prefetch) is one row a thread
        grid=lambda p: (ceil_div(p["M"], shape.rows_per_cta * p["row_iters"]), 1, 1),
        sample={"M": 1000, "N": n_class, "heads": 1, "shift": 0, "row_iters": 1, "x_row_stride": n_class,
                "x_head_stride": 0,
                "out_row_stride": n_class, "out_head_stride": 0, "residual_row_stride": n_class,
                "residual_head_stride": 0, "eps": 1e-6, "scale_value": 1.0},
        min_ctas_per_sm=shape.min_ctas_per_sm,
        entry=entry_name(dtype_name, n_class, fused_add, gemma, norm, aligned, out_dtype)
        + ("_swcvt" if fp8_in_software else "") + ("_lat" if latency else "") + ("_p16" if params16 else "")
        + ("_silu" if silu else ""),
        pdl=True,
    )


def make_spec(norm: str, dtype_name: str, n_class: int, fused_add: bool = False, gemma: bool = False,
              aligned: bool = True, out_dtype: str | None = None, fp8_in_software: bool = False,
              latency: bool = False, params16: bool = False, silu: bool = False) -> KernelSpec:
    # the default access width and output dtype are left out of the options, so the specs
    # (and their names) of the plain aligned builds read as before
    extra = ({} if aligned else {"aligned": False}) | ({"out_dtype": out_dtype} if out_dtype else {})
    extra |= {"fp8_in_software": True} if fp8_in_software else {}
    extra |= {"latency": True} if latency else {}
    extra |= {"params16": True} if params16 else {}
    extra |= {"silu": True} if silu else {}
    # the latency builds and LayerNorm's 16-bit-parameter builds are kernel names of their own: the
    # CPU tier's rotation of targets over a kernel's builds (test_build_all) stays as it was for
    # the class builds
    return KernelSpec.make(
        f"norm.{norm}norm" + ("_silu" if silu else "") + ("_latency" if latency else "")
        + ("_params16" if params16 else ""), "cute",
        "cutefi.norm.norm_kernel:RowNormKernel", "cutefi.norm.launch:contract",
        Family.SIMT, norm=norm, dtype_name=dtype_name, n_class=n_class, fused_add=fused_add, gemma=gemma, **extra,
    )


def _variants():
    """Every build's (kind, dtype, n_class, fused_add, gemma, aligned, out_dtype): RMSNorm (plain
    / fused add x plain / gemma weight), LayerNorm (fp32 gamma and beta), and the FP8 quant
    variants of RMSNorm (plain, fused add) and LayerNorm; each in both access widths."""
    for dtype in SUPPORTED_DTYPES:
        for n_class in SUPPORTED_N_CLASSES:
            for aligned in (True, False):
                for fused in (False, True):
                    for gemma in (False, True):
                        yield ("rms", dtype, n_class, fused, gemma, aligned, None)
                    for out_dtype in QUANT_DTYPES:
                        yield ("rms", dtype, n_class, fused, False, aligned, out_dtype)
                for out_dtype in (None, *QUANT_DTYPES):
                    yield ("layer", dtype, n_class, False, False, aligned, out_dtype)


NORM_SPECS = {key: make_spec(*key) for key in _variants()}
# The FP8 conversion of sm_80/sm_86 (no FP8 instructions) built for any target, so a GPU test
# can compare it bit for bit with the hardware conversion: one build per format.
SOFTWARE_FP8_SPECS = {fmt: make_spec("rms", "bf16", 4096, out_dtype=fmt, fp8_in_software=True)
                      for fmt in QUANT_DTYPES}
# The latency builds (tuning.LATENCY_BUILDS, LATENCY_SHIFTED_BUILDS), keyed as NORM_SPECS: gemma
# weights and both FP8 formats too.
LATENCY_SPECS = {key: make_spec(*key, latency=True) for key in _variants()
                 if latency_rows(key[0], key[3], key[6] is not None, key[2], key[5])}
# LayerNorm with gamma and beta in the input's dtype (as a bf16 model stores them; FlashInfer's CuTe
# LayerNorm builds for the gamma's dtype): the same builds, the parameters read 16-bit and widened
# in registers. (key, latency) -> spec.
PARAMS16_SPECS = {(key, latency): make_spec(*key, latency=latency, params16=True)
                  for latency, table in ((False, NORM_SPECS), (True, LATENCY_SPECS)) for key in table
                  if key[0] == "layer"}
# RMSNorm + SiLU (FlashInfer's fused_rmsnorm_silu): bf16 rows, the plain weight, a bf16 or FP8
# e4m3 output, as FlashInfer takes them; the RMSNorm builds' geometry with SiLU in the output
# stage. (key, latency) -> spec.
SILU_SPECS = {(key, latency): make_spec(*key, latency=latency, silu=True)
              for latency, table in ((False, NORM_SPECS), (True, LATENCY_SPECS)) for key in table
              if key[0] == "rms" and key[1] in SILU_DTYPES and not key[3] and not key[4]
              and key[6] in SILU_OUT_DTYPES}
register(*NORM_SPECS.values(), *SOFTWARE_FP8_SPECS.values(), *LATENCY_SPECS.values(), *PARAMS16_SPECS.values(),
         *SILU_SPECS.values())


def norm_spec(kind: str, dtype_name: str, n_class: int, fused_add: bool = False, gemma: bool = False,
              aligned: bool = True, out_dtype: str | None = None, latency: bool = False,
              params16: bool = False, silu: bool = False) -> KernelSpec:
    """The registered build for a specialisation (KeyError for one that is not built)."""
    key = (kind, dtype_name, n_class, fused_add, gemma, aligned, out_dtype)
    if silu:
        return SILU_SPECS[(key, latency)]
    if params16:
        return PARAMS16_SPECS[(key, latency)]
    return (LATENCY_SPECS if latency else NORM_SPECS)[key]
