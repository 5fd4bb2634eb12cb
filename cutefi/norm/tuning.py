"""The norm builds' measured tuning tables: thread splits, occupancy, prefetch depths, latency
builds and the classes that read x twice, each with the measurements that chose it. The
kernels' shapes are derived from these in ``launch.py`` (``geometry``); nothing here is code."""

from __future__ import annotations

# Size-class heuristics (16-bit dtypes; shifted builds derive theirs in launch._class_table):
#   n_class -> (threads_per_row, block_threads)
# Rule: keep every thread at <= 64 elements of the row (8 x 128-bit chunks,
# 64 fp32 registers) so the whole row stays in registers with no spills; use
# >=128-thread CTAs (several rows per CTA for narrow rows) so there are enough
# 16-byte loads in flight per SM.  Mirrors quack's threads_per_row ladder
# (8/16/32/64/128/256), but widens the CTA for 16k/32k instead of reloading
# from smem.
CLASS_TABLE = {
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
# SM (see LAYER_THREADS_PER_SM): 3861 GB/s at 16384x4096 bf16 on the H200 against 3095 with
# the RMSNorm row (64 elements a thread, which spilled fp32 gamma and beta). The same split at
# 2048, 8192 and 16384 without the occupancy change measured 9-30% slower than the RMSNorm row
# (session 4, layernorm_h200.json against norm_h200.json), so those keep it.
LAYER_CLASS_TABLE = {**CLASS_TABLE, 4096: (128, 128)}  # 1 row/CTA, 4 chunks

# The FP8 LayerNorm builds (clamp and conversion on top) at most 32 elements a thread: with 64
# they spilled hundreds of registers on sm_100a/sm_120a.
LAYER_QUANT_CLASS_TABLE = {**LAYER_CLASS_TABLE, 2048: (64, 128), 8192: (256, 256), 16384: (512, 512),
                            32768: (1024, 1024)}

# Persistent LayerNorm builds (aligned rows): (n_class, quant) -> (threads_per_row,
# block_threads, prefetch depth). Each thread keeps its gamma and beta in registers for all its
# rows and has the next ``depth`` rows of x in flight (see launch.prefetch_depth). At 16384 rows bf16 on
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
# Session 42: FP8 4096, 8192 and 16384 at twice the threads a row (half the elements, and of
# gamma and beta, a thread) and 1024 threads an SM (LAYER_QUANT_THREADS_PER_SM; 64 registers,
# spill-free), against 128/256/512 threads a row at 512 threads an SM. H200, cutefi-bench, one
# process a tree, alternated twice (norm_layer_quant_threads_h200_session42.txt), us at
# 128/1024/4096/16384/65536 rows: 4096 2.30-2.34/4.99/14.1-14.6/53.6/201.7 ->
# 2.37/5.31/14.5/50.8/197.3 (16384 x 4096: 89 -> 93.5% of the copy ceiling); 8192
# 3.04/8.03/28.8/104.2/404.6 -> 3.17/8.35/27.6/101.1/394.1; 16384 4.54/15.7-16.2/56.4/209.7/811.2 ->
# 4.61/16.1/55.1/205.3/794.2 (slower below 4096 rows, as the 4096 build at 1024). Not taken
# (same file): 4096 at depth 2 (54.0-54.5 us at 16384 rows), 512 threads a row (69-72 us),
# 1536 threads an SM (69.5); FP8 1024/2048 and plain 1024/2048/16384 at twice the threads a
# row and 1024 an SM (FP8 1024/2048 18.3/35.0 against 15.1/28.5 us at 16384 rows; plain
# 1-25% slower at every row count); gamma and beta staged once a CTA in shared
# memory instead of registers (59-64 us at 16384 x 4096).
LAYER_PREFETCH = {
    (1024, False): (64, 128, 2), (2048, False): (128, 128, 2), (16384, False): (512, 512, 1),
    (1024, True): (64, 128, 2), (2048, True): (128, 128, 2), (4096, True): (256, 256, 1),
    (8192, True): (512, 512, 1), (16384, True): (1024, 1024, 1),
}

# The same for rows off 16-byte boundaries (gamma and beta in registers in the row frame of a
# thread's rows, which launch.persistent_grid makes share a lead). Until session 25 they were staged in
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
LAYER_SHIFTED_PREFETCH = {
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
RMS_SHIFTED_PREFETCH = {(2048, True): 1, (4096, True): 1, (8192, True): 1, (16384, True): 1, (16384, False): 1}

# Shifted FP8 LayerNorm one-row builds whose aligned split leaves a thread 5 chunks (40 elements
# with fp32 gamma and beta): 1024 at 64 threads a row (3 chunks). 16 x 1023 bf16 on the H200
# against 32 threads a row, same run (tune_norm_h200_session21_r13.json): +40/16/17% at
# 128/512/1000 rows; the 32-thread build spilled 82-88 registers on sm_90.
LAYER_QUANT_SHIFTED_ROWS = {1024: (64, 128)}

# RMSNorm on aligned rows, wider rows than the table's: (fused_add, quant) -> {n_class:
# (threads_per_row, block_threads, resident threads an SM)}. Measured on an H100 (the
# tune_norm_h100_*.json files, CUPTI up to 512 rows, CUDA-graph replay above):
# * plain 8192: one row a CTA of 512 threads, inductor's shape of the kernel: at 3 CTAs an SM
#   2956 against 2908 GB/s at 16384 rows, 2805 against 2691 at 4096 (4 CTAs an SM and 256-thread
#   rows spilled, holding x); since session 39 at 4 CTAs, reading x twice (REREAD_ROWS), the
#   3-CTA build being its latency build.
#   Plain 4096 at 128 threads: 8/15/7/4% faster at 1/32/128/512 rows, equal from 4096 up (2%
#   behind at 2048, L2-resident); FP8 4096 the same: +6-13% small, +1-7% from 4096 rows up.
# * the fused add at 16 elements a thread, which loads the weight with x instead of after the
#   reduction (launch._delays_weight: a memory round trip off the path of a decode-sized call): at
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
RMS_WIDE_ROWS = {
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
#   (H200, same file as REREAD_ROWS: 1.63 against 1.73-1.76 us at 1 row, 2.14 / 2.18 at 128,
#   7.05 / 7.2 at 1024, 18.0-18.2 / 18.2-18.4 at 2048; 4.45 / 4.32 at 512).
# * LayerNorm 4096 up to 1024 rows (512 before session 39, when its class's build began to read
#   x twice): H200, one process a limit, twice (norm_layernorm_latency_limit_h200_session39.txt):
#   513 rows 3.65 against 4.13-4.16 us, 1024 5.92 against 6.02-6.17, 768 and 1536 a tie, 2048
#   10.4 against 10.2, 3072 18.6 against 16.4. Since session 40 (the class's build at 256 threads
#   and 8-byte accesses) up to 384 rows: cutefi-bench, the tree with and without the latency build,
#   two processes each (norm_layernorm_latency_limit_h200_session40.txt): 1/32/128/256/384 rows
#   1.63/1.73/2.02/2.50/3.07 against 2.08/2.24/2.50-2.53/2.85-2.88/3.17 us; 512 3.62-3.65 against
#   3.49, 768 5.12 against 4.13, 1024 5.92 against 5.05-5.10, 1536 a tie.
# * RMSNorm 16384: the class's build held x in registers (256 threads a row, 2 CTAs an SM) until
#   session 49, when its build began to read x twice (REREAD_ROWS); it stays as the latency build
#   up to 1024 rows: H100, one process a tree (rmsnorm_reread16384_h100_session49.txt), 1 / 128
#   rows 2.34-2.37 / 3.26-3.33 us against 2.62-2.66 / 3.46-3.49 for the build that reads x
#   twice; session 50, the trees with and without the build that reads x twice, alternated
#   (rmsnorm_reread16384_ab_h100_session50.txt): 768 rows 18.37 against 19.04-19.07, 1024 24.83-
#   24.86 against 24.71-24.74, 4096 91.0 against 90.6.
# * LayerNorm's latency builds load gamma and beta with x (beta after the reductions until
#   session 50): H100, alternated trees (layernorm_small_rows_ab_h100_session50.txt), 4096 at 1 /
#   128 rows fp32 parameters 1.82-1.86 / 2.05 -> 1.76 / 1.92 us, 16-bit ones a tie (1.76 / 1.92-1.95).
# Not taken (same file): RMSNorm 4096 latency builds at 256 or 512 threads a row (1/128 rows 1.34/
# 1.73 and 1.38/1.76 us against the class's build's 1.31/1.73; torch.compile 1.34/1.70).
LATENCY_BUILDS = {
    ("rms", False, False): {2048: (128, 128, 512, 1024), 8192: (512, 512, 1536, 2048), 16384: (256, 256, 512, 1024)},
    ("rms", True, False): {4096: (256, 256, 512, 2048)},
    ("rms", False, True): {2048: (128, 128, 512, 256)},
    ("layer", False, False): {4096: (256, 256, 1024, 384), 8192: (512, 512, 1024, 256)},
}

# Latency builds of shifted rows (any hidden size of the class; one row a CTA, the row's extra
# chunk one more of every thread's, gamma and beta read in the row's frame with x), keyed as
# LATENCY_BUILDS. LayerNorm 4095 at 256 threads a row against the persistent shifted build
# (128 threads, the lead chunk alone), H100, alternated trees (layernorm_small_rows_ab_h100_
# session50.txt), us at 1 / 128 / 512 rows: fp32 parameters 2.98-3.04 / 3.84-3.87 / 7.74-7.84
# -> 2.78 / 3.04-3.07 / 8.13, 16-bit 2.37-2.40 / 3.04-3.07 / 5.47 -> 2.14 / 2.37 / 5.51-5.54
# (the persistent build's one-row path, norm_kernel's, 7.42-7.46 / 4.64-4.67 at 512). At 2
# CTAs an SM (128 registers; at 4 the fp32-parameter build spilled on sm_80).
LATENCY_SHIFTED_BUILDS = {
    ("layer", False, False): {4096: (256, 256, 512, 256)},
}

# Resident threads per SM the build asks for (``.minnctapersm``): 512, a 128-register cap.
# LayerNorm is latency-bound, not traffic-bound (ncu: one row per CTA and two block
# reductions per row; the same DRAM and L2 bytes as RMSNorm), so more rows in flight win even
# with a few spilled registers: at 16384x4096 bf16 on the H200, 4/5/6/8 CTAs of 128 threads
# per SM gave 3149/3497/3657/3821 GB/s (benchmarks/results/tune_layernorm_h200.json). Only the
# measured class takes it; 32768 would spill over a hundred registers at 1024 threads/SM.
THREADS_PER_SM = 512

LAYER_THREADS_PER_SM = {4096: 1024}

# The persistent FP8 LayerNorm classes (aligned) at 1024 threads an SM: see LAYER_PREFETCH.
LAYER_QUANT_THREADS_PER_SM = {4096: 1024, 8192: 1024, 16384: 1024}

# shifted plain RMSNorm: 768 threads (6 CTAs of 128 at 4096): 3397 GB/s at 16384 x 4095 bf16
# against 2965 at 512 and 3243 (spilling) at 1024 (tune_norm_h200_round2.json); its FP8 build at
# 4096 too since its thread holds 4 chunks (LEAD_CHUNK_ALONE): 3093 against 2798 at 512 (and
# the packed build's 2785) at 16384 x 4095 (tune_norm_h200_session21_r15.json). The plain 4096
# build at 1024 (spill-free since session 21): +1.7/2.2% at 16384/65536 rows, 7 CTAs a tie
# (tune_norm_h200_session25_r16.json, CUDA-graph replay).
SHIFTED_RMS_THREADS_PER_SM = 768

# bf16 only: fp16 spills 2 instructions there on sm_90 (8-14 on sm_80/86/89; bf16 4-6 on sm_80).
# The FP8 4096 build with its ring (RMS_SHIFTED_PREFETCH) at 5 CTAs: spill-free, 3447 against
# 3330 / 3277 (6 spills) GB/s at 4 / 6 CTAs, 16384 x 4095 (tune_norm_h200_session25_r22.json).
SHIFTED_RMS_THREADS_PER_SM_BY_CLASS = {(4096, False, "bf16"): 1024, (4096, True, "bf16"): 640,
                                        (4096, True, "fp16"): 640}  # (n_class, quant, dtype)

# Persistent shifted LayerNorm: 4 CTAs an SM (the default). With 5 chunks a thread of gamma and
# beta in registers 4096 spilled 18-19 registers there and took 3 (_r16.json); with the lead's
# chunk on the row's first thread (4 chunks, LAYER_LEAD_CHUNK_ALONE) 4 is spill-free and beats
# 3 by 9/12% at 16384/65536 x 4095 bf16 (3449 against 3164 GB/s), FP8 by 8/13%; 5 spills 28
# (tune_norm_h200_session25_r18.json, H200, CUDA-graph replay).
LAYER_SHIFTED_THREADS_PER_SM: dict[int, int] = {}

# Shifted RMSNorm classes (no fused add) whose lead chunk is the row's first thread's alone
# (launch.Geometry.lead_chunk_alone), H200 against 5 chunks a thread, same run (_r15.json): 4095 plain
# +0.7/3.6/4.6% at 4096/16384/65536 rows. Not taken: 2047 (2-4% slower), the fused add (a tie;
# FP8 1-2.6% slower); 8192 and up not measured.
LEAD_CHUNK_ALONE = {4096}

# The persistent shifted LayerNorm classes that do the same (the chunk prefetched into the ring
# beside the slots, its gamma and beta read each row by the one thread): 4 chunks a thread of
# gamma and beta in registers, not 5, spill-free. H200, cutefi-bench against the 5-chunk
# builds, same run (norm_lead_chunk_ab_h200_session25.json): 8191 68.1 -> 83.5% of the copy
# ceiling at 16384 rows (70.2 -> 86.0 at 65536), FP8 58.4 -> 64.7 (62.3 -> 69.2); 4095 at 4 CTAs
# an SM above; 16383 since session 26 (LAYER_SHIFTED_PREFETCH).
LAYER_LEAD_CHUNK_ALONE = {4096, 8192, 16384}

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
#   Session 40: 256 threads a row at 8 CTAs an SM (32 registers), 8-byte accesses of x (4
#   elements, 4 chunks a thread: Triton's fastest form of this kernel, 65.5 us), with a row that
#   fills the build taking a fast path: the thread's moments in one pass shifted by its first
#   element, combined with constant weights (no reciprocal), and the output loop with no branch
#   a chunk. ncu against that Triton kernel with the fast path alone (before bf16 was widened a
#   word at a time and the sums taken element by element): the same DRAM, L1 and L2 traffic, 37%
#   more instructions (46.1M against 33.7M), 65.1 against 63.0 us. Five trees alternated twice, one
#   process each (norm_layernorm_256_h200_session40.txt): 16384 x 4096 bf16 67.9 -> 66.7 us
#   (94.2% of the copy ceiling), 65536 rows 256.9 -> 255.2, 4096 rows 21.2 -> 19.6 (Triton
#   65.5 / 250.5 / 19.4 in the same processes). The same code at 128 threads and 16-byte
#   accesses: 66.6-67.6 / 255.2-255.6 / 21.2.
# * RMSNorm 16384 (session 49): 1024 threads a row at 2 CTAs an SM, 8-byte accesses (4 chunks a
#   thread: the form of the Triton kernel that session 39 measured 2% faster than the build that
#   holds x, 253.5 against 258.8 us at 16384 x 16384 on the H200). Two H100s, one process a tree,
#   alternated (rmsnorm_reread16384_h100_session49.txt): 16384 x 16384 352.9 -> 351.5 and 360.6
#   -> 353.0 us, 65536 rows 1404.4 -> 1396.7 and 1435.2 -> 1404.1, 4096 rows 92.4 -> 90.8; as
#   fast as inductor in the same processes (351.6 / 1397.0; 353.1 / 1405.3). Up to 1024 rows
#   the build that holds x stays, as the latency build (LATENCY_BUILDS). Session 39's H200 run
#   of the same split with 16-byte accesses measured it 3% slower; an H200 was not to be had in
#   sessions 49-50.
# Not taken (same files): the fused add at 8192 (1024 threads a row at 2 CTAs; 512 spill), 4%
# slower; LayerNorm with its two reductions kept (512 / 1024 threads a row), 40-80% slower: two
# reductions a row, one after the other, across 16-32 warps leave too few rows in flight.
REREAD_ROWS = {
    ("rms", False, False): {8192: (512, 512, 2048, 8), 16384: (1024, 1024, 2048, 4)},
    ("rms", True, False): {4096: (512, 512, 2048, 8)},
    ("layer", False, False): {4096: (256, 256, 2048, 4)},
}
