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
from ..jit.contract import LaunchContract, Param, ceil_div, pointers, scalars
from ..jit.policy import Family
from ..jit.registry import register
from ..jit.spec import KernelSpec

KINDS = ("rms", "layer")
QUANT_DTYPES = ("fp8e4m3", "fp8e5m2")
# the largest finite value of each FP8 format: quant outputs are saturated to it
QUANT_MAX = {"fp8e4m3": 448.0, "fp8e5m2": 57344.0}

# Elements per access of an aligned build: 128 bits of a 16-bit dtype.
VEC_BITS = 128

# Size-class heuristics (16-bit dtypes; shifted builds derive theirs in _class_table):
#   n_class -> (threads_per_row, block_threads)
# Rule: keep every thread at <= 64 elements of the row (8 x 128-bit chunks,
# 64 fp32 registers) so the whole row stays in registers with no spills; use
# >=128-thread CTAs (several rows per CTA for narrow rows) so there are enough
# 16-byte loads in flight per SM.  Mirrors quack's threads_per_row ladder
# (8/16/32/64/128/256), but widens the CTA for 16k/32k instead of reloading
# from smem.
_CLASS_TABLE = {
    64: (8, 128),  # 16 rows/CTA, 1 chunk/thread
    128: (16, 128),  # 8 rows/CTA, 1 chunk
    256: (32, 128),  # 4 rows/CTA, 1 chunk
    512: (32, 128),  # 4 rows/CTA, 2 chunks
    1024: (32, 128),  # 4 rows/CTA, 4 chunks
    2048: (32, 128),  # 4 rows/CTA, 8 chunks
    4096: (64, 128),  # 2 rows/CTA, 8 chunks
    8192: (128, 128),  # 1 row/CTA, 8 chunks
    16384: (256, 256),  # 1 row/CTA, 8 chunks
    32768: (512, 512),  # 1 row/CTA, 8 chunks
}

# LayerNorm at 4096 columns: twice the threads per row (32 elements a thread) and 8 CTAs per
# SM (see _LAYER_THREADS_PER_SM): 3861 GB/s at 16384x4096 bf16 on the H200 against 3095 with
# the RMSNorm row (64 elements a thread, which spilled fp32 gamma and beta). The same split at
# 2048, 8192 and 16384 without the occupancy change measured 9-30% slower than the RMSNorm row
# (session 4, layernorm_h200.json against norm_h200.json), so those keep it.
_LAYER_CLASS_TABLE = {**_CLASS_TABLE, 4096: (128, 128)}  # 1 row/CTA, 4 chunks
# The FP8 LayerNorm builds (clamp and conversion on top) at most 32 elements a thread: with 64
# they spilled hundreds of registers on sm_100a/sm_120a.
_LAYER_QUANT_CLASS_TABLE = {**_LAYER_CLASS_TABLE, 2048: (64, 128), 8192: (256, 256), 16384: (512, 512),
                            32768: (1024, 1024)}

# Shifted builds (rows not 16-byte aligned: any hidden size, odd strides) take the aligned
# split with one more 128-bit chunk a thread's row pass may need: a row starts up to 7 elements
# into its first aligned chunk.
SUPPORTED_N_CLASSES = tuple(sorted(_CLASS_TABLE))
SUPPORTED_DTYPES = ("bf16", "fp16")


def dtype_bits(dtype_name: str) -> int:
    if dtype_name not in SUPPORTED_DTYPES:
        raise ValueError(f"unsupported dtype {dtype_name!r}; expected one of {SUPPORTED_DTYPES}")
    return dtypes.bits(dtype_name)


def _check(n_class: int, dtype_name: str) -> None:
    dtype_bits(dtype_name)
    if n_class not in _CLASS_TABLE:
        raise ValueError(f"unsupported n_class {n_class}; expected one of {SUPPORTED_N_CLASSES}")


def vec_elems(dtype_name: str) -> int:
    """Elements per 128-bit global access (8 for bf16/fp16)."""
    return VEC_BITS // dtype_bits(dtype_name)


def access_elems(norm: str, dtype_name: str, aligned: bool) -> int:
    """Consecutive row elements a thread owns per access (the build's ``vec``): 8, one 128-bit
    access of a 16-bit row."""
    return vec_elems(dtype_name)


# Persistent LayerNorm builds (aligned rows): (n_class, quant) -> (threads_per_row,
# block_threads, prefetch depth). Each thread keeps its gamma and beta in registers for all its
# rows and has the next ``depth`` rows of x in flight (see prefetch_depth). At 16384 rows bf16 on
# the H200 (tune_norm_h200_round10*.json), against the one-row builds in the same run: quant
# 1024/2048/4096/8192/16384 2716/2893/3713/3917/3687 GB/s against 2273/2381/2454/2171/1789;
# plain 1024/2048/16384 3432/3698/3921 against 2813/3195/3633. Plain 4096 and 8192 keep their one-row builds
# (3729 and 3822 at best against 3862 and 3886); 32768's ring would not fit static shared memory.
# Depth 1 where a thread holds 4 chunks of its row (FP8 4096 and 8192, and the shifted 4096
# below): the same bytes in flight as depth 2 at 2 chunks. On an H100 against depth 2, same run
# (tune_norm_h100_layer_quant_4096.json, tune_norm_h100_layer_prefetch_depth.json), at 4096/16384/
# 65536 rows: FP8 4096 +0/12/8% (2862 against 2560 GB/s at 16384: 84 -> 94% of the copy
# ceiling), FP8 8192 +5/12/7%, shifted 4095 +7/6/6% and FP8 +5/1/0%; the 2-chunk builds (1024,
# 2048, plain and FP8) lost 1-14% at depth 1 from 16384 rows up. Not re-measured on an H200.
_LAYER_PREFETCH = {
    (1024, False): (64, 128, 2), (2048, False): (128, 128, 2), (16384, False): (512, 512, 1),
    (1024, True): (64, 128, 2), (2048, True): (128, 128, 2), (4096, True): (128, 128, 1),
    (8192, True): (256, 256, 1), (16384, True): (512, 512, 1),
}


# The same for rows off 16-byte boundaries (gamma and beta in registers in the row frame of a
# thread's rows, which persistent_grid makes share a lead). Until session 25 they were staged in
# shared memory and read an element at a time; the measurements below are that form's. 16384 rows of n_class - 1
# columns bf16 on the H200 (tune_norm_h200_round10d/e.json), against the one-row builds in the
# same run: 1023/2047/4095/8191/16383 1702/1834/2630/2724/2681 GB/s against 1411/1210/1470/1458/
# 1218; FP8 2047/4095/8191/16383 1147/1548/1590/1456 against 860/914/921/722.
# 16383 measured 2681 against 1218 (FP8 1456 against 722) but its gamma/beta needed 131 KB of
# shared memory: more than sm_86/89/120 grant a CTA (99 KB), so no build had it until session 26.
# Session 25 (registers; tune_norm_h200_session25_r16/r17.json, CUDA-graph replay, 16384 rows):
# FP8 1023 joined (1664 GB/s against the packed build's 1381); 8191 at one CTA an SM (256 or
# 512 threads a row, spill-free) 2-27% slower than two CTAs of 256 (19 spilled registers).
# Session 26 (tune_norm_h200_session26_r27.json, same form): 16383 at one CTA of 512 threads
# an SM (4 chunks a thread and the lead's on the row's first thread, spill-free) 3170/3566/3553
# GB/s at 4096/16384/65536 rows against the one-row build's 1399/1486/1538, FP8 2609/2828/2888
# against 813/829/833; 1024 threads a row (6-8 spilled) 15-25% behind it.
_LAYER_SHIFTED_PREFETCH = {
    (1024, False): (64, 128, 2), (2048, False): (128, 128, 2), (4096, False): (128, 128, 1),
    (8192, False): (256, 256, 1), (16384, False): (512, 512, 1), (1024, True): (64, 128, 2),
    (2048, True): (128, 128, 2), (4096, True): (128, 128, 1), (8192, True): (256, 256, 1),
    (16384, True): (512, 512, 1),
}


# Shifted RMSNorm classes that loop over rows with the next one in flight (a ring, as the
# persistent LayerNorm) and the weight held in the row frame their rows share: (n_class,
# quant) -> depth. FP8 4096: 4095 columns on the H200, against the one-row build in the same
# session (norm_rms_ring_ab_h200_session25.json, CUPTI): 64.2 -> 60.7 us at 16384 rows, 247.3 ->
# 230.4 at 65536, 18.8 -> 18.0 at 4096 (at 6 CTAs an SM; 5, taken, is 4-6% faster still); a
# call of one row a thread takes the kernel's one-row path. Without the ring (the weight held,
# each row's loads behind the last row's reduction) it was no faster (_r19.json).
# Session 26, the other classes on the H200 (tune_norm_h200_session26_r24.json, CUDA-graph
# replay, against the one-row builds in the same run, at 4096/16384/65536 rows): FP8 2047 at 4
# CTAs an SM +40/25/21% (5 spill), 8191 at 2 +45/52/50%, 16383 at 1 +69/73/74%; plain 16383
# at 1 +48/50/49%. At 1 and 128 rows (one row a thread: the one-row path) 0-3% behind, at 1024
# +20-67% (_r25_small.json, CUPTI). Not taken: plain 1023/2047/4095 (4-37% slower from 16384
# rows), 8191 (+0.5-2.7%), FP8 1023 (the packed build is faster from 16384 rows).
_RMS_SHIFTED_PREFETCH = {(2048, True): 1, (4096, True): 1, (8192, True): 1, (16384, True): 1, (16384, False): 1}


def prefetch_depth(norm: str, n_class: int, aligned: bool, quant: bool, fused_add: bool) -> int:
    """Rows a thread's loads run ahead of its work (0: none). With a depth D the CTA walks rows
    ``grid`` row groups apart (a persistent loop of ``row_iters`` rows) and keeps the next D rows
    of x in flight through a per-thread cp.async ring in shared memory, with gamma and beta read
    once: LayerNorm (tables above) and shifted RMSNorm classes (_RMS_SHIFTED_PREFETCH)."""
    if fused_add:
        return 0
    if norm == "rms":
        return 0 if aligned else _RMS_SHIFTED_PREFETCH.get((n_class, quant), 0)
    return (_LAYER_PREFETCH if aligned else _LAYER_SHIFTED_PREFETCH).get((n_class, quant), (0, 0, 0))[2]


def _class_table(kind: str, fused_add: bool, aligned: bool, quant: bool) -> dict[int, tuple[int, int]]:
    if kind == "layer":
        table = _LAYER_QUANT_CLASS_TABLE if quant else _LAYER_CLASS_TABLE
    else:
        table = _CLASS_TABLE
    if aligned:
        if kind == "rms":
            return {**table, **{n: (tpr, threads) for n, (tpr, threads, _) in _RMS_WIDE_ROWS[(fused_add, quant)].items()}}
        if kind == "layer" and not fused_add:
            table = {**table, **{n: (tpr, threads) for (n, q), (tpr, threads, _) in _LAYER_PREFETCH.items()
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
        shifted |= {n: (tpr, threads) for (n, q), (tpr, threads, _) in _LAYER_SHIFTED_PREFETCH.items() if q == quant}
        if quant:
            shifted |= _LAYER_QUANT_SHIFTED_ROWS
    return shifted


# Shifted FP8 LayerNorm one-row builds whose aligned split leaves a thread 5 chunks (40 elements
# with fp32 gamma and beta): 1024 at 64 threads a row (3 chunks). 16 x 1023 bf16 on the H200
# against 32 threads a row, same run (tune_norm_h200_session21_r13.json): +40/16/17% at
# 128/512/1000 rows; the 32-thread build spilled 82-88 registers on sm_90.
_LAYER_QUANT_SHIFTED_ROWS = {1024: (64, 128)}


# RMSNorm on aligned rows, wider rows than the table's: (fused_add, quant) -> {n_class:
# (threads_per_row, block_threads, resident threads an SM)}. Measured on an H100 (the
# tune_norm_h100_*.json files, CUPTI up to 512 rows, CUDA-graph replay above):
# * plain 8192: one row a CTA of 512 threads, inductor's shape of the kernel: at 3 CTAs an SM
#   2956 against 2908 GB/s at 16384 rows, 2805 against 2691 at 4096 (4 CTAs an SM and 256-thread
#   rows spilled, holding x); since session 39 at 4 CTAs, reading x twice (_REREAD_ROWS), the
#   3-CTA build being its latency build.
#   Plain 4096 at 128 threads: 8/15/7/4% faster at 1/32/128/512 rows, equal from 4096 up (2%
#   behind at 2048, L2-resident); FP8 4096 the same: +6-13% small, +1-7% from 4096 rows up.
# * the fused add at 16 elements a thread, which loads the weight with x instead of after the
#   reduction (_delays_weight: a memory round trip off the path of a decode-sized call): at
#   1/32/128/512 rows 2048 +28/51/46/14%, 4096 +25/42/26/13%, 8192 +23/17/18/7%, 1024 and 16384
#   +6-20%, FP8 4096 / 8192 +25-27% / +10-15%; from 4096 rows up equal or up to 1.4% faster.
# * FP8 4096 at 8 CTAs an SM (1024 threads, 64 registers, no spills), on the H200 (session 20,
#   tune_norm_h200_session20_r3.json and _r5_*.json, CUDA-graph replay, three runs): +7-10% at
#   4096 and 16384 rows, +9-13% at 65536 (4070 against 3700 GB/s at 16384: 95% of the copy
#   ceiling, was 87%); 2% behind at 128 and 512 rows (CUPTI). 6 CTAs: +5-6%. On an H100
#   (tune_norm_h100_session20_fp8_4096_*.json) a tie: +3.5% at 4096 rows, within 1% elsewhere.
# Not taken: FP8 8192 at 512 threads (15% slower from 512 rows up), FP8 and FP8-fused 2048 at
# 128 (fast below 512 rows, 1-11% slower from 4096 up), LayerNorm at 16 elements a thread with
# gamma/beta loaded with x (+8-21% up to 512 rows, 1-16% slower from 4096 up).
_RMS_WIDE_ROWS = {
    (False, False): {4096: (128, 128, 512)},
    (False, True): {4096: (128, 128, 1024)},
    (True, False): {1024: (64, 128, 512), 2048: (128, 128, 512), 4096: (256, 256, 512), 8192: (512, 512, 1024),
                    16384: (1024, 1024, 1024)},
    (True, True): {4096: (256, 256, 512), 8192: (512, 512, 1024)},
}

# Latency builds: a second build of a class for decode-sized calls, with a wider row split
# (fewer elements a thread: less serial work between a row's loads and its stores) and its
# parameters loaded with x. Calls with at most ``most_rows`` rows take it; the class's own
# build, tuned for bandwidth, takes the rest. (kind, fused_add, quant) -> {n_class:
# (threads_per_row, block_threads, resident threads an SM, most_rows)}. Measured on an H100
# with CUPTI against the class's build in the same run (tune_norm_h100_small_m.json,
# tune_norm_h100_quant_layer_small_m.json, *_large_m.json for the rows where they lose):
# * RMSNorm 2048 at 128 threads a row: +13/19/16/2% at 1/32/128/512 rows, 3-7% behind from
#   2048 rows up; FP8 2048 the same split: +11-14% up to 128 rows, 1% behind at 512.
# * LayerNorm 4096 at 256 threads a row: +24/21/17/8% at 1/32/128/512 rows, 1-5% behind from
#   4096 up; 8192 at 512: +10/11/21% up to 128 rows, 6% behind at 512.
# The row limits from the public calls with and without these builds, same run
# (norm_latency_ab_h100.json): RMSNorm 2048 +13/19/16/7/5/8% at 1/32/128/256/512/1024 rows,
# equal from 2048; FP8 2048 +12/14/12/5% up to 256, equal from 512; LayerNorm 4096
# +24/21/17/15/11% up to 512, 1% behind at 1024; 8192 +11/11/20/8% up to 256, equal from 512.
# * RMSNorm 8192: the class's build held x in registers at 3 CTAs an SM until session 39; it
#   stays as the latency build up to 2048 rows, where the build that reads x twice is no faster
#   (H200, same file as _REREAD_ROWS: 1.63 against 1.73-1.76 us at 1 row, 2.14 / 2.18 at 128,
#   7.05 / 7.2 at 1024, 18.0-18.2 / 18.2-18.4 at 2048; 4.45 / 4.32 at 512).
# * LayerNorm 4096 up to 1024 rows (512 before session 39, when its class's build began to read
#   x twice): H200, one process a limit, twice (norm_layernorm_latency_limit_h200_session39.txt):
#   513 rows 3.65 against 4.13-4.16 us, 1024 5.92 against 6.02-6.17, 768 and 1536 a tie, 2048
#   10.4 against 10.2, 3072 18.6 against 16.4.
_LATENCY_BUILDS = {
    ("rms", False, False): {2048: (128, 128, 512, 1024), 8192: (512, 512, 1536, 2048)},
    ("rms", True, False): {4096: (256, 256, 512, 2048)},
    ("rms", False, True): {2048: (128, 128, 512, 256)},
    ("layer", False, False): {4096: (256, 256, 1024, 1024), 8192: (512, 512, 1024, 256)},
}


def latency_rows(kind: str, fused_add: bool, quant: bool, n_class: int) -> int:
    """The most rows a call may have to take the class's latency build (0: it has none)."""
    return _LATENCY_BUILDS.get((kind, fused_add, quant), {}).get(n_class, (0, 0, 0, 0))[3]


# Resident threads per SM the build asks for (``.minnctapersm``): 512, a 128-register cap.
# LayerNorm is latency-bound, not traffic-bound (ncu: one row per CTA and two block
# reductions per row; the same DRAM and L2 bytes as RMSNorm), so more rows in flight win even
# with a few spilled registers: at 16384x4096 bf16 on the H200, 4/5/6/8 CTAs of 128 threads
# per SM gave 3149/3497/3657/3821 GB/s (benchmarks/results/tune_layernorm_h200.json). Only the
# measured class takes it; 32768 would spill over a hundred registers at 1024 threads/SM.
_THREADS_PER_SM = 512
_LAYER_THREADS_PER_SM = {4096: 1024}
# shifted plain RMSNorm: 768 threads (6 CTAs of 128 at 4096): 3397 GB/s at 16384 x 4095 bf16
# against 2965 at 512 and 3243 (spilling) at 1024 (tune_norm_h200_round2.json); its FP8 build at
# 4096 too since its thread holds 4 chunks (_LEAD_CHUNK_ALONE): 3093 against 2798 at 512 (and
# the packed build's 2785) at 16384 x 4095 (tune_norm_h200_session21_r15.json). The plain 4096
# build at 1024 (spill-free since session 21): +1.7/2.2% at 16384/65536 rows, 7 CTAs a tie
# (tune_norm_h200_session25_r16.json, CUDA-graph replay).
_SHIFTED_RMS_THREADS_PER_SM = 768
# bf16 only: fp16 spills 2 instructions there on sm_90 (8-14 on sm_80/86/89; bf16 4-6 on sm_80).
# The FP8 4096 build with its ring (_RMS_SHIFTED_PREFETCH) at 5 CTAs: spill-free, 3447 against
# 3330 / 3277 (6 spills) GB/s at 4 / 6 CTAs, 16384 x 4095 (tune_norm_h200_session25_r22.json).
_SHIFTED_RMS_THREADS_PER_SM_BY_CLASS = {(4096, False, "bf16"): 1024, (4096, True, "bf16"): 640,
                                        (4096, True, "fp16"): 640}  # (n_class, quant, dtype)
# Persistent shifted LayerNorm: 4 CTAs an SM (the default). With 5 chunks a thread of gamma and
# beta in registers 4096 spilled 18-19 registers there and took 3 (_r16.json); with the lead's
# chunk on the row's first thread (4 chunks, _LAYER_LEAD_CHUNK_ALONE) 4 is spill-free and beats
# 3 by 9/12% at 16384/65536 x 4095 bf16 (3449 against 3164 GB/s), FP8 by 8/13%; 5 spills 28
# (tune_norm_h200_session25_r18.json, H200, CUDA-graph replay).
_LAYER_SHIFTED_THREADS_PER_SM: dict[int, int] = {}
# Shifted RMSNorm classes (no fused add) whose lead chunk is the row's first thread's alone
# (Geometry.lead_chunk_alone), H200 against 5 chunks a thread, same run (_r15.json): 4095 plain
# +0.7/3.6/4.6% at 4096/16384/65536 rows. Not taken: 2047 (2-4% slower), the fused add (a tie;
# FP8 1-2.6% slower); 8192 and up not measured.
_LEAD_CHUNK_ALONE = {4096}
# The persistent shifted LayerNorm classes that do the same (the chunk prefetched into the ring
# beside the slots, its gamma and beta read each row by the one thread): 4 chunks a thread of
# gamma and beta in registers, not 5, spill-free. H200, cutefi-bench against the 5-chunk
# builds, same run (norm_lead_chunk_ab_h200_session25.json): 8191 68.1 -> 83.5% of the copy
# ceiling at 16384 rows (70.2 -> 86.0 at 65536), FP8 58.4 -> 64.7 (62.3 -> 69.2); 4095 at 4 CTAs
# an SM above; 16383 since session 26 (_LAYER_SHIFTED_PREFETCH).
_LAYER_LEAD_CHUNK_ALONE = {4096, 8192, 16384}


def _lead_chunk_alone(norm: str, n_class: int, fused_add: bool, aligned: bool, quant: bool, split: int) -> bool:
    """Whether a shifted build's row pass covers ``n_class`` exactly (``split`` columns a pass)
    and leaves the chunk a row's lead adds past it to the row's first thread."""
    if aligned or fused_add or n_class % split:
        return False
    if norm == "rms":
        return n_class in _LEAD_CHUNK_ALONE
    return n_class in _LAYER_LEAD_CHUNK_ALONE and bool(prefetch_depth(norm, n_class, aligned, quant, fused_add))


def min_ctas_per_sm(n_class: int, block_threads: int, kind: str = "rms", aligned: bool = True,
                    quant: bool = False, fused_add: bool = False, dtype_name: str = "bf16") -> int:
    """Occupancy target baked into the PTX (``.minnctapersm``), in CTAs per SM. The FP8
    LayerNorm keeps 512 threads: at 1024 (64 registers) its 4096 build spilled ~170 registers
    and ran at 21% of the copy bandwidth."""
    threads = _THREADS_PER_SM
    if kind == "layer" and aligned and not quant:
        threads = _LAYER_THREADS_PER_SM.get(n_class, _THREADS_PER_SM)
    elif kind == "layer" and not aligned:
        threads = _LAYER_SHIFTED_THREADS_PER_SM.get(n_class, _THREADS_PER_SM)
    elif kind == "rms" and aligned and n_class in _RMS_WIDE_ROWS[(fused_add, quant)]:
        threads = _RMS_WIDE_ROWS[(fused_add, quant)][n_class][2]
    elif kind == "rms" and not aligned and not fused_add and (not quant or n_class in _LEAD_CHUNK_ALONE):
        # (FP8 with 5 chunks a thread spilled at 768)
        threads = _SHIFTED_RMS_THREADS_PER_SM_BY_CLASS.get((n_class, quant, dtype_name), _SHIFTED_RMS_THREADS_PER_SM)
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
    # the row's first thread's alone, not one more chunk of every thread (which did the math
    # of a 5th, almost always empty chunk: ~20% of the element work)
    lead_chunk_alone: bool = False
    elem_bytes: int = 2
    # read x twice (for the statistics, then to scale it) instead of holding it in registers
    # across the reductions (_REREAD_ROWS)
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
        ``lead_chunk_alone`` the row's last chunk (``tile_n`` on) is the first thread's extra."""
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
    if aligned and n_class in _REREAD_ROWS.get((norm, fused_add, quant), {}):
        tpr, threads, per_sm, vec = _REREAD_ROWS[(norm, fused_add, quant)][n_class]
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


# Aligned classes that read x (and the fused add's residual) twice, inductor's form of the
# kernel: the first read for the row's statistics, marked evict-last in L1 and L2, the second
# after the reductions (an L1 hit) evict-first, then the parameters; nothing is held across the
# last reduction, so more rows fit an SM. (kind, fused_add, quant) -> {n_class:
# (threads_per_row, block_threads, resident threads an SM, elements an access)}. On the H200:
# * RMSNorm 8192, one process a build, alternated twice (norm_rms8192_reread_h200_session39.json):
#   16384 x 8192 bf16 130.9 -> 125.7 us (4104 -> 4272 GB/s; inductor 125.5), 65536 rows 518.0 ->
#   496.2 (inductor 496.4), 4096 rows 34.1 -> 33.4; up to 2048 rows the one-row build that holds
#   x stays (the class's latency build: 1 row 1.63 against 1.73-1.76 us). The second read from
#   L2 instead of L1 (no priorities) measured 125.5 against 122.5 us for inductor's kernel (ncu),
#   the priorities on L1 alone 129.4. At 16384 columns the same form ran 3% slower (1024
#   threads a row at 2 CTAs an SM; at 512 threads and 4 CTAs it spills): not taken.
# * the fused add at 4096 (x and the residual read twice, the residual stored with the output
#   from the second read: FlashInfer's numerics, s = x + residual in fp32 again), against the
#   256-thread build that holds them at 2 CTAs an SM, two trees alternated twice
#   (norm_reread_fused_layer_h200_session39.json): 16384 x 4096 bf16 133.0 -> 126.7 us (4036 ->
#   4238 GB/s), 65536 rows 528 -> 499, 4096 rows 34.4 -> 33.9-34.3; up to 2048 rows (L2-resident)
#   the old build is faster (1 row 1.38 against 1.79 us, 2048 rows 12.1 against 13.2) and stays
#   as the class's latency build.
# * LayerNorm 4096: one reduction of each thread's (count, mean, squared deviations), combined
#   pairwise (Chan et al.: no cancellation), then x again a chunk at a time with gamma and beta;
#   128 threads a row at 12 CTAs an SM (40 registers; 16 spill). Against the one-row build that
#   holds x (two reductions a row, 8 CTAs), three trees alternated twice
#   (norm_layernorm_reread_h200_session39.json): 16384 x 4096 bf16 69.5-69.9 -> 67.9-68.1 us
#   (3865 -> 3952 GB/s), 65536 rows 262.3 -> 256.0-256.9, 4096 rows 22.3 -> 21.1-21.3; rows of
#   mean 1000 and std 1 as accurate as the rest (rel 1.7e-3). 513-2048 rows lost 5-8% (the
#   class's latency build now takes up to 1024). 256 threads a row were slower: 8-byte accesses
#   (Triton's best form, 65.5 us) 76 us, 16-byte 79.
# Not taken (same files): the fused add at 8192 (1024 threads a row at 2 CTAs; 512 spill), 4%
# slower; LayerNorm with its two reductions kept (512 / 1024 threads a row), 40-80% slower: two
# reductions a row, one after the other, across 16-32 warps leave too few rows in flight.
_REREAD_ROWS = {
    ("rms", False, False): {8192: (512, 512, 2048, 8)},
    ("rms", True, False): {4096: (512, 512, 2048, 8)},
    ("layer", False, False): {4096: (128, 128, 1536, 8)},
}


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
    """A latency build's shape (``_LATENCY_BUILDS``): aligned rows, one row a thread, no prefetch,
    parameters loaded with x."""
    if not aligned or not latency_rows(norm, fused_add, out_dtype is not None, n_class):
        raise ValueError(f"no latency build for {norm} n_class={n_class} fused_add={fused_add} aligned={aligned} "
                         f"out_dtype={out_dtype}")
    tpr, threads, per_sm, _ = _LATENCY_BUILDS[(norm, fused_add, out_dtype is not None)][n_class]
    return Geometry(n_class=n_class, vec=access_elems(norm, dtype_name, aligned), shifted=False,
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


def norm_params(dtype_name: str, param_dtype: str, out_name: str) -> tuple[Param, ...]:
    """The kernel parameters every row-norm build takes (one launch call serves them all)."""

    def align(name: str) -> int:
        return _pointer_align(name, dtype_name)

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
             out_dtype: str | None = None, fp8_in_software: bool = False, latency: bool = False) -> LaunchContract:
    _check_out_dtype(out_dtype)
    param_dtype = "fp32" if norm == "layer" else dtype_name
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
        + ("_swcvt" if fp8_in_software else "") + ("_lat" if latency else ""),
        pdl=True,
    )


def make_spec(norm: str, dtype_name: str, n_class: int, fused_add: bool = False, gemma: bool = False,
              aligned: bool = True, out_dtype: str | None = None, fp8_in_software: bool = False,
              latency: bool = False) -> KernelSpec:
    # the default access width and output dtype are left out of the options, so the specs
    # (and their names) of the plain aligned builds read as before
    extra = ({} if aligned else {"aligned": False}) | ({"out_dtype": out_dtype} if out_dtype else {})
    extra |= {"fp8_in_software": True} if fp8_in_software else {}
    extra |= {"latency": True} if latency else {}
    # the latency builds are a kernel name of their own: the CPU tier's rotation of targets over
    # a kernel's builds (test_build_all) stays as it was for the class builds
    return KernelSpec.make(
        f"norm.{norm}norm" + ("_latency" if latency else ""), "cute", "cutefi.norm.norm_kernel:RowNormKernel", "cutefi.norm.launch:contract",
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
# The latency builds (_LATENCY_BUILDS), keyed as NORM_SPECS: gemma weights and both FP8 formats too.
LATENCY_SPECS = {key: make_spec(*key, latency=True) for key in _variants()
                 if key[5] and latency_rows(key[0], key[3], key[6] is not None, key[2])}
register(*NORM_SPECS.values(), *SOFTWARE_FP8_SPECS.values(), *LATENCY_SPECS.values())


def norm_spec(kind: str, dtype_name: str, n_class: int, fused_add: bool = False, gemma: bool = False,
              aligned: bool = True, out_dtype: str | None = None, latency: bool = False) -> KernelSpec:
    """The registered build for a specialisation (KeyError for one that is not built)."""
    return (LATENCY_SPECS if latency else NORM_SPECS)[(kind, dtype_name, n_class, fused_add, gemma, aligned,
                                                       out_dtype)]
