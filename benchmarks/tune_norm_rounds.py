"""The variant lists of ``tune_norm.py``, round by round: the record behind each results file
(named in each list's comment). ``VARIANTS`` is the round the tuner builds and times now.

A variant: (kind, n_class, fused_add, threads_per_row, block_threads, ctas_per_sm, aligned[,
out_dtype[, vec[, prefetch[, early]]]]) on bf16 (``tune_norm.unpack`` fills the defaults).
"""

# (kind, n_class, fused_add, threads_per_row, block_threads, ctas_per_sm, aligned[, out_dtype[, vec[, prefetch]]])
# on bf16
# rows: aligned variants run rows of n_class columns, shifted ones (aligned=False) rows of n_class - 1;
# out_dtype "fp8e4m3" times the quant build (scale 1). Session 6 also timed L1 cache hints (rows
# L1::evict_first and st.cs, parameters L1::evict_last) on each shipped geometry: 1-5% slower
# everywhere (tune_norm_h200_round4*.json), so the kernel has none. Session 20 timed rows of x
# loaded with an L2::evict_first policy (createpolicy + ld.global.L2::cache_hint): 1-5% slower
# from 16384 rows up on the H200 (tune_norm_h200_l2_evict_first.json), not kept either.
# The earlier rounds' lists stay as the record behind their results files (named in each
# comment); set VARIANTS to one to rerun it. They build today's kernel: PREFETCH_ROUND1 (the ring
# with gamma/beta reloaded every row) and SHIFTED_ROUND4 (the larger first staging) now build the
# kept forms, so their numbers will differ from the files.
SMALL_M_VARIANTS = [  # session 6 (tune_norm_h200_round6.json): wider rows for decode-sized M
    ("rms", 2048, False, 32, 128, 4, True), ("rms", 2048, False, 64, 128, 4, True),
    ("rms", 2048, False, 128, 128, 4, True), ("rms", 2048, False, 256, 256, 2, True),
    ("rms", 4096, False, 256, 256, 2, True), ("rms", 4096, False, 512, 512, 1, True),
    ("rms", 8192, False, 256, 256, 2, True), ("rms", 8192, False, 512, 512, 1, True),
    ("rms", 8192, False, 1024, 1024, 1, True),
]
VECTOR_VARIANTS = [  # session 9: LayerNorm with 4 elements an access (fp32 gamma/beta read in whole sectors)
    ("layer", 4096, False, 128, 128, 8, True, None, 8), ("layer", 4096, False, 128, 128, 8, True, None, 4),
    ("layer", 4096, False, 64, 128, 8, True, None, 4),
    ("layer", 2048, False, 32, 128, 4, True, None, 8), ("layer", 2048, False, 32, 128, 4, True, None, 4),
    ("layer", 8192, False, 128, 128, 4, True, None, 8), ("layer", 8192, False, 128, 128, 4, True, None, 4),
    ("layer", 4096, False, 128, 128, 4, True, "fp8e4m3", 8), ("layer", 4096, False, 128, 128, 4, True, "fp8e4m3", 4),
]
PREFETCH_ROUND1 = [  # session 10, first try: the ring alone, gamma/beta still reloaded every row
    *[("layer", 4096, False, 128, 128, ctas, True, None, None, depth)
      for ctas, depth in ((8, 0), (8, 1), (8, 2), (8, 3), (6, 2), (4, 2), (4, 4))],
    *[("layer", 4096, False, 128, 128, ctas, True, "fp8e4m3", None, depth)
      for ctas, depth in ((4, 0), (4, 2), (4, 4), (6, 2), (8, 2))],
]
PREFETCH_ROUND2 = [  # session 10: persistent LayerNorm, next rows of x in flight, gamma/beta held in registers
    ("layer", 4096, False, 128, 128, 8, True, None, None, 0),
    *[("layer", 4096, False, tpr, tpr, ctas, True, None, None, depth)
      for tpr, ctas, depth in ((256, 4, 1), (256, 4, 2), (256, 3, 2), (128, 4, 2), (128, 4, 3), (512, 2, 2))],
    ("layer", 4096, False, 128, 128, 4, True, "fp8e4m3", None, 0),
    *[("layer", 4096, False, tpr, tpr, ctas, True, "fp8e4m3", None, depth)
      for tpr, ctas, depth in ((128, 4, 2), (256, 2, 2), (256, 3, 2), (256, 4, 2))],
    ("layer", 8192, False, 128, 128, 4, True, None, None, 0),
    *[("layer", 8192, False, tpr, tpr, ctas, True, None, None, depth)
      for tpr, ctas, depth in ((256, 2, 2), (512, 2, 2), (512, 2, 1))],
    ("layer", 2048, False, 32, 128, 4, True, None, None, 0),
    *[("layer", 2048, False, tpr, tpr, ctas, True, None, None, depth)
      for tpr, ctas, depth in ((128, 8, 2), (64, 8, 2), (128, 4, 2))],
    ("layer", 16384, False, 256, 256, 2, True, None, None, 0),
    *[("layer", 16384, False, tpr, tpr, ctas, True, None, None, depth)
      for tpr, ctas, depth in ((512, 1, 1), (1024, 1, 1))],
]
PREFETCH_ROUND3 = [  # session 10, round 3: the other quant classes, the widest rows, and M sweeps of the winners
    ("layer", 4096, False, 128, 128, 4, True, "fp8e4m3", None, 2), ("layer", 4096, False, 128, 128, 4, True, None, None, 1),
    ("layer", 4096, False, 128, 128, 6, True, None, None, 1),
    ("layer", 2048, False, 128, 128, 4, True, None, None, 2), ("layer", 2048, False, 64, 64, 8, True, None, None, 2),
    ("layer", 2048, False, 64, 128, 4, True, "fp8e4m3", None, 0), ("layer", 2048, False, 128, 128, 4, True, "fp8e4m3", None, 2),
    ("layer", 8192, False, 256, 256, 2, True, "fp8e4m3", None, 0), ("layer", 8192, False, 256, 256, 2, True, "fp8e4m3", None, 2),
    ("layer", 8192, False, 512, 512, 1, True, "fp8e4m3", None, 2), ("layer", 8192, False, 256, 256, 2, True, None, None, 1),
    ("layer", 16384, False, 512, 512, 1, True, None, None, 1),
    ("layer", 16384, False, 512, 512, 1, True, "fp8e4m3", None, 0), ("layer", 16384, False, 512, 512, 1, True, "fp8e4m3", None, 1),
    ("layer", 1024, False, 32, 128, 4, True, None, None, 0), ("layer", 1024, False, 64, 128, 4, True, None, None, 2),
    ("layer", 1024, False, 128, 128, 8, True, None, None, 2),
    ("layer", 512, False, 32, 128, 4, True, None, None, 0), ("layer", 512, False, 64, 128, 8, True, None, None, 2),
]
SHIFTED_ROUND4 = [  # session 10, round 4: persistent LayerNorm on shifted rows (gamma/beta staged in shared memory)
    ("layer", 4096, False, 128, 128, 4, False, None, None, 0),
    *[("layer", 4096, False, tpr, threads, ctas, False, None, None, depth)
      for tpr, threads, ctas, depth in ((128, 128, 3, 2), (128, 128, 4, 1), (256, 256, 3, 1), (128, 256, 2, 2),
                                        (128, 256, 3, 1))],
    ("layer", 4096, False, 128, 128, 4, False, "fp8e4m3", None, 0),
    ("layer", 4096, False, 128, 128, 3, False, "fp8e4m3", None, 2),
    ("layer", 2048, False, 32, 128, 4, False, None, None, 0), ("layer", 2048, False, 128, 128, 4, False, None, None, 2),
    ("layer", 8192, False, 128, 128, 4, False, None, None, 0), ("layer", 8192, False, 256, 256, 2, False, None, None, 1),
]
SHIFTED_ROUND5 = [  # session 10, round 5: the other shifted classes
    ("layer", 2048, False, 64, 128, 4, False, "fp8e4m3", None, 0), ("layer", 2048, False, 128, 128, 4, False, "fp8e4m3", None, 2),
    ("layer", 8192, False, 256, 256, 2, False, "fp8e4m3", None, 0), ("layer", 8192, False, 256, 256, 2, False, "fp8e4m3", None, 1),
    ("layer", 16384, False, 256, 256, 2, False, None, None, 0), ("layer", 16384, False, 512, 512, 1, False, None, None, 1),
    ("layer", 16384, False, 512, 512, 1, False, "fp8e4m3", None, 0),
    ("layer", 16384, False, 512, 512, 1, False, "fp8e4m3", None, 1),
    ("layer", 1024, False, 32, 128, 4, False, None, None, 0), ("layer", 1024, False, 64, 128, 4, False, None, None, 2),
]
SHIFTED_ROUND6 = [  # session 10, round 6: shifted 4096 at 3 or 4 CTAs an SM once gamma/beta staging shrank to 53 KB
    *[("layer", 4096, False, 128, 128, ctas, False, out, None, 2) for ctas in (3, 4) for out in (None, "fp8e4m3")],
    ("layer", 8192, False, 256, 256, 2, False, None, None, 1), ("layer", 8192, False, 256, 256, 2, False, "fp8e4m3", None, 1),
]
LAYER_QUANT_ROUND8 = [  # session 10, round 8: the FP8 LayerNorm's 1024 class on the persistent path
    ("layer", 1024, False, 32, 128, 4, True, "fp8e4m3", None, 0),
    *[("layer", 1024, False, tpr, threads, ctas, True, "fp8e4m3", None, depth)
      for tpr, threads, ctas, depth in ((64, 128, 4, 2), (128, 128, 8, 2), (64, 128, 8, 2), (128, 128, 4, 2))],
]
ROUND9 = [  # session 10, round 9: CTAs an SM of the RMSNorm builds still short of their goals
    *[("rms", 4096, False, tpr, threads, ctas, False, "fp8e4m3") for tpr, threads, ctas in
      ((128, 128, 4), (128, 128, 5), (128, 128, 6), (256, 256, 3))],
    *[("rms", 4096, True, tpr, threads, ctas, True) for tpr, threads, ctas in
      ((64, 128, 4), (64, 128, 6), (64, 128, 8), (128, 128, 4), (128, 128, 6))],
    *[("rms", 4096, True, 128, 128, ctas, False, "fp8e4m3") for ctas in (4, 6)],
]
RMS_8192_ROUND11 = [  # session 19: RMSNorm 8192 at inductor's occupancy (one row a CTA of 512, ~2048 threads an SM)
    ("rms", 8192, False, 128, 128, 4, True),  # the shipped geometry, for reference
    *[("rms", 8192, False, tpr, tpr, ctas, True) for tpr, ctas in
      ((512, 4), (512, 3), (1024, 2), (256, 8), (256, 6), (512, 2))],
]
SMALL_M_ROUND12 = [  # session 19: wider rows for decode-sized M, timed by CUPTI (--timer cupti)
    *[("rms", 2048, False, tpr, max(128, tpr), 4 if tpr <= 128 else 2, True) for tpr in (32, 64, 128, 256)],
    *[("rms", 4096, False, tpr, max(128, tpr), 4 if tpr <= 128 else 2, True) for tpr in (64, 128, 256, 512)],
    *[("rms", 8192, False, tpr, tpr, 3 if tpr == 512 else 1, True) for tpr in (512, 1024)],
]
RMS_16384_ROUND13 = [  # session 19: RMSNorm 16384, wider rows and more warps an SM
    ("rms", 16384, False, 256, 256, 2, True),  # the shipped geometry
    *[("rms", 16384, False, tpr, tpr, ctas, True) for tpr, ctas in ((512, 2), (512, 3), (1024, 1), (1024, 2))],
]
FUSED_ADD_ROUND14 = [  # session 19: the fused add with wider rows (16 elements a thread or fewer: the weight loaded with x)
    *[("rms", 2048, True, tpr, max(128, tpr), 4 if tpr <= 128 else 2, True) for tpr in (32, 128, 256)],
    *[("rms", 4096, True, tpr, max(128, tpr), 4 if tpr <= 128 else 2, True) for tpr in (64, 256, 512)],
    *[("rms", 8192, True, tpr, tpr, ctas, True) for tpr, ctas in ((128, 4), (512, 2), (512, 3), (1024, 1))],
]
FUSED_ADD_ROUND15 = [  # session 19: the same for the fused add's other classes and its FP8 variant
    *[("rms", 1024, True, tpr, 128, 4, True) for tpr in (32, 64)],
    *[("rms", 16384, True, tpr, tpr, ctas, True) for tpr, ctas in ((256, 2), (512, 2), (1024, 1), (1024, 2))],
    *[("rms", n, True, tpr, max(128, tpr), ctas, True, "fp8e4m3") for n, tpr, ctas in
      ((2048, 32, 4), (2048, 128, 4), (4096, 64, 4), (4096, 256, 2), (8192, 128, 4), (8192, 512, 2))],
]
VARIANTS = [  # session 19: wider rows for RMSNorm FP8 and LayerNorm at decode sizes (LayerNorm: gamma/beta with x)
    *[("rms", n, False, tpr, max(128, tpr), ctas, True, "fp8e4m3") for n, tpr, ctas in
      ((2048, 32, 4), (2048, 128, 4), (4096, 64, 4), (4096, 128, 4), (4096, 256, 2), (8192, 128, 4), (8192, 512, 2),
       (8192, 512, 3))],
    ("layer", 4096, False, 128, 128, 8, True),
    *[("layer", n, False, tpr, tpr, ctas, True, None, None, None, True) for n, tpr, ctas in
      ((4096, 256, 4), (4096, 512, 2), (8192, 512, 2), (8192, 512, 3))],
    ("layer", 8192, False, 128, 128, 4, True),
]
SESSION19_VARIANTS = VARIANTS
VARIANTS = [  # session 20: FP8 LayerNorm 4096 (84% of the copy ceiling at 16384 rows on the H100)
    *[("layer", 4096, False, tpr, tpr, ctas, True, "fp8e4m3", None, depth) for tpr, ctas, depth in
      ((128, 4, 2), (128, 4, 1), (128, 4, 3), (256, 2, 2), (256, 3, 1), (256, 4, 1), (128, 4, 0), (256, 4, 0))],
    *[("layer", 4096, False, tpr, tpr, ctas, True, "fp8e4m3", None, 0, True) for tpr, ctas in ((256, 4), (512, 2))],
    ("layer", 4096, False, 128, 128, 8, True),
]
LN_QUANT_4096_ROUND = VARIANTS  # tune_norm_h100_layer_quant_4096.json: depth 1 +12% at 16384 rows
VARIANTS = [  # session 20, round 2: prefetch depth 1 against 2 on every persistent LayerNorm build (H100)
    *[("layer", n, False, tpr, tpr_cta, ctas, aligned, quant, None, depth)
      for n, tpr, tpr_cta, ctas, aligned, quant in (
          (1024, 64, 128, 4, True, None), (2048, 128, 128, 4, True, None), (1024, 64, 128, 4, True, "fp8e4m3"),
          (2048, 128, 128, 4, True, "fp8e4m3"), (8192, 256, 256, 2, True, "fp8e4m3"),
          (2048, 128, 128, 4, False, None), (4096, 128, 128, 4, False, None),
          (2048, 128, 128, 4, False, "fp8e4m3"), (4096, 128, 128, 4, False, "fp8e4m3"))
      for depth in (1, 2)],
]
PREFETCH_DEPTH_ROUND = VARIANTS  # tune_norm_h{100,200}_layer_prefetch_depth.json
VARIANTS = [  # session 20, round 3, on an H200: the classes behind their goals there
    *[("rms", 8192, False, tpr, max(128, tpr), ctas, True) for tpr, ctas in
      ((128, 4), (256, 2), (256, 4), (512, 2), (512, 3), (1024, 1))],
    *[("rms", 4096, False, tpr, 128, ctas, True, out) for out in (None, "fp8e4m3") for tpr, ctas in
      ((64, 4), (128, 4), (128, 6), (128, 8))],
    ("rms", 4096, False, 256, 256, 2, True, "fp8e4m3"), ("rms", 4096, False, 256, 256, 4, True, "fp8e4m3"),
    ("layer", 4096, False, 128, 128, 8, True), ("layer", 4096, False, 128, 128, 6, True),
    *[("layer", 4096, False, tpr, tpr, ctas, True, None, None, depth) for tpr, ctas, depth in
      ((128, 4, 1), (128, 4, 2), (256, 4, 1), (256, 2, 2))],
]
ROUND3 = VARIANTS  # tune_norm_h200_session20_r3*.json
VARIANTS = [  # session 20, round 4, H200: RMSNorm 8192 at inductor's occupancy (2048 threads an SM)
    ("rms", 8192, False, 512, 512, 3, True),
    *[("rms", 8192, False, tpr, tpr, ctas, True, None, None, None, early) for tpr, ctas in
      ((512, 4), (1024, 2), (256, 8), (256, 6)) for early in (True, False)],
]
ROUND4 = VARIANTS  # tune_norm_h200_session20_r4*.json
VARIANTS = [  # session 20, round 5: FP8 RMSNorm at more CTAs an SM (4096: +9-13% from 16384 rows on the H200, r3)
    *[("rms", n, False, tpr, 128, ctas, True, "fp8e4m3") for n, tpr, ctas in
      ((4096, 128, 4), (4096, 128, 6), (4096, 128, 8), (2048, 32, 4), (2048, 64, 4), (2048, 64, 8), (2048, 128, 8))],
]
ROUND5 = VARIANTS  # tune_norm_h200_session20_r5_*.json
ROUND6 = [  # session 20, round 6: shifted 4096-class builds at 256 threads a row (3 chunks a thread, not 5)
    ("layer", 4096, False, 128, 128, 4, False, None, None, 1),
    *[("layer", 4096, False, 256, 256, ctas, False, out, None, depth) for out in (None, "fp8e4m3")
      for ctas, depth in ((2, 1), (2, 2), (3, 1))],
    ("layer", 4096, False, 128, 128, 4, False, "fp8e4m3", None, 1),
    *[("rms", 4096, False, tpr, tpr, ctas, False) for tpr, ctas in ((128, 6), (256, 3), (256, 4), (512, 2))],
]
VARIANTS = [(*variant[:5], ctas, *variant[6:]) for variant in ROUND5[:1] for ctas in (4, 8)]  # FP8 4096 on an H100
FP8_4096_H100 = VARIANTS  # tune_norm_h100_session20_fp8_4096_*.json
VARIANTS = [  # session 20, round 7: the shipped LayerNorm geometries, built from a kernel with fewer instructions an element
    # (variance summed a chunk at a time, one select a chunk; FP8 gamma/beta pre-scaled by 1/scale), timed against the
    # previous kernel's pack (tune_norm_h200_session20_r7_*.json): FP8 2048/4096/8192 +4-10/+1.5-4/+1-8% from 4096
    # rows, plain 2048/4096 within +-1% (the 4096 build no longer spills); adopted
    ("layer", 4096, False, 128, 128, 4, True, "fp8e4m3", None, 1), ("layer", 8192, False, 256, 256, 2, True, "fp8e4m3", None, 1),
    ("layer", 2048, False, 128, 128, 4, True, "fp8e4m3", None, 2), ("layer", 4096, False, 128, 128, 8, True),
    ("layer", 2048, False, 128, 128, 4, True, None, None, 2),
]
ROUND7 = VARIANTS
VARIANTS = [  # session 21, round 8: the shipped LayerNorm geometries, built with the row's mean and variance in one
    # reduction (Chan's merge of per-thread moments: one barrier a row, not two), timed against the previous kernel's pack
    # (tune_norm_h200_session21_r8_*.json, two rounds): plain 4096/8192/4095 a tie (+-2%), plain 2048 2-8% and FP8
    # 2048/4096/8192 5-16% slower (~100 more instructions a row: 7 more MUFU.RCP and 7 more SHFL); not adopted, so the
    # kernel keeps its two reductions (the barrier is not what limits it)
    *ROUND7, ("layer", 8192, False, 128, 128, 4, True),
    ("layer", 4096, False, 128, 128, 4, False, None, None, 1), ("layer", 4096, False, 128, 128, 4, False, "fp8e4m3", None, 1),
]
ROUND8 = VARIANTS
VARIANTS = [  # session 21, round 9: shifted rows with fewer instructions (x masked a packed word at a time, 16-bit
    # weights read in the row's frame as words joined by a byte permute, no select chains; rows widened a word at a
    # time), the shipped geometries timed against the previous kernel's pack (tune_norm_h200_session21_r9_*.json, two
    # rounds, CUDA-graph replay): 4095 columns RMSNorm +6/8.5/9.5% at 4096/16384/65536 rows, fused add +1-2%, FP8 fused
    # add +9/13/13.5%, LayerNorm +8/8/9% (its x masking only), FP8 LayerNorm +6/8/8%; adopted. FP8 RMSNorm stays on the
    # packed build (2789 against 2281 GB/s at 16384 rows); the aligned builds are the control (unchanged code: equal from
    # 4096 rows; 15-20% "behind" at 128 rows, where the variants launch without PDL and the public calls with it)
    ("rms", 4096, False, 128, 128, 6, False), ("rms", 4096, True, 128, 128, 4, False),
    ("rms", 4096, False, 128, 128, 4, False, "fp8e4m3"), ("rms", 4096, True, 128, 128, 4, False, "fp8e4m3"),
    ("layer", 4096, False, 128, 128, 4, False, None, None, 1), ("layer", 4096, False, 128, 128, 4, False, "fp8e4m3", None, 1),
    ("rms", 4096, False, 128, 128, 4, True), ("rms", 8192, False, 512, 512, 3, True), ("rms", 4096, True, 256, 256, 2, True),
    ("rms", 4096, False, 128, 128, 8, True, "fp8e4m3"), ("layer", 4096, False, 128, 128, 8, True),
    ("layer", 4096, False, 128, 128, 4, True, "fp8e4m3", None, 1),
]
ROUND9 = VARIANTS
VARIANTS = [  # session 21, round 10: the shifted builds at more CTAs an SM and other row splits, with round 9's kernel
    *[("rms", 4096, False, tpr, threads, ctas, False) for tpr, threads, ctas in
      ((128, 128, 6), (128, 128, 8), (64, 128, 6), (256, 256, 3))],
    *[("rms", 4096, False, 128, 128, ctas, False, "fp8e4m3") for ctas in (4, 6, 8)],
    *[("rms", 4096, True, 128, 128, ctas, False) for ctas in (4, 6)],
    *[("rms", 4096, True, 128, 128, ctas, False, "fp8e4m3") for ctas in (4, 6)],
]
ROUND10 = VARIANTS  # tune_norm_h200_session21_r10.json: none beat the shipped geometries (FP8 at 6-8 CTAs spills)
VARIANTS = [  # session 21, round 11: shifted rows' end chunks stored from their packed words (element reads split every
    # output register into bytes or halves and re-packed them for the vector stores), against round 9's pack
    # (tune_norm_h200_session21_r11.json): FP8 LayerNorm 4095 +8/11/12% at 4096/16384/65536 rows, FP8 RMSNorm +7-11%
    # (still behind its packed build), the others within +-1.5%; adopted
    ("rms", 4096, False, 128, 128, 6, False), ("rms", 4096, True, 128, 128, 4, False),
    ("rms", 4096, False, 128, 128, 4, False, "fp8e4m3"), ("rms", 4096, True, 128, 128, 4, False, "fp8e4m3"),
    ("layer", 4096, False, 128, 128, 4, False, None, None, 1), ("layer", 4096, False, 128, 128, 4, False, "fp8e4m3", None, 1),
    ("rms", 4096, False, 128, 128, 6, False, "fp8e4m3"),
]
ROUND11 = VARIANTS
VARIANTS = [  # session 21, round 12: x read again after the reduction (an L1 hit), inductor's RMSNorm 8192 (ncu: 32
    # registers, 4 CTAs of 512 an SM, 123 us against our 130 at 16384 rows), with the weight loaded late as it does
    # (tune_norm_h200_session21_r12.json): RMSNorm 8192 at 4 CTAs +2/+1% at 16384/65536 rows but 4% behind at 4096;
    # 3 CTAs, RMSNorm 4096/16384 and LayerNorm 4096 2-10% slower. Not adopted: the option (launch.reloads_x) and
    # this script's 12th variant field (reload) are in commit 571971c only; rerun the round from there
    ("rms", 8192, False, 512, 512, 3, True),
    *[("rms", 8192, False, 512, 512, ctas, True, None, None, None, early, True) for ctas in (3, 4) for early in (True, False)],
    ("rms", 4096, False, 128, 128, 4, True), ("rms", 4096, False, 128, 128, 8, True, None, None, None, False, True),
    ("rms", 16384, False, 256, 256, 2, True), ("rms", 16384, False, 1024, 1024, 2, True, None, None, None, False, True),
    ("layer", 4096, False, 128, 128, 8, True), *[("layer", 4096, False, 128, 128, ctas, True, None, None, None, None, True)
                                                for ctas in (8, 12)],
]
ROUND12 = VARIANTS
VARIANTS = [  # session 21, round 13: shifted FP8 LayerNorm 1024 (the one-row build; 5 chunks, 40 elements a thread at 32
    # threads a row spilled 82-88 registers on sm_90) at 64 and 128 threads a row (tune_norm_h200_session21_r13.json):
    # 64 +40/16/17% at 128/512/1000 rows, 128 +64/12/-3%; 64 adopted (tuning.LAYER_QUANT_SHIFTED_ROWS)
    ("layer", 1024, False, 32, 128, 4, False, "fp8e4m3"), ("layer", 1024, False, 64, 128, 4, False, "fp8e4m3"),
    ("layer", 1024, False, 128, 128, 4, False, "fp8e4m3"), ("layer", 1024, False, 32, 128, 4, False),
]
ROUND13 = VARIANTS
VARIANTS = [  # session 21, round 14: the widest shifted LayerNorm one-row builds (9 chunks a thread at 16384 and 32768,
    # 82-136 spilled registers on sm_90) at wider row splits (tune_norm_h200_session21_r14.json): none faster at 4096
    # rows (16383: 1233 GB/s shipped, 1105 at 512 threads a row, 911 at 1024; 32767 and FP8 a tie or slower); not adopted
    ("layer", 16384, False, 256, 256, 2, False), ("layer", 16384, False, 512, 512, 1, False),
    ("layer", 16384, False, 1024, 1024, 1, False),
    ("layer", 16384, False, 512, 512, 1, False, "fp8e4m3"), ("layer", 16384, False, 1024, 1024, 1, False, "fp8e4m3"),
    ("layer", 32768, False, 512, 512, 1, False), ("layer", 32768, False, 1024, 1024, 1, False),
]
ROUND14 = VARIANTS
VARIANTS = [  # session 21, round 15: shifted RMSNorm with the lead's extra chunk on the row's first thread alone
    # (4 chunks a thread, not 5), the shipped geometries against the previous kernel's pack (tune_norm_h200_session21_r15
    # .json): 4095 plain +0.7/3.6/4.6% at 4096/16384/65536 rows, FP8 at 6 CTAs an SM +20/11/6% against the packed build
    # (adopted for the 4096 class); fused add a tie, FP8 fused add 1-2.6% slower, 2047 2-4% slower (not adopted)
    ("rms", 4096, False, 128, 128, 6, False), ("rms", 4096, True, 128, 128, 4, False),
    ("rms", 4096, False, 128, 128, 4, False, "fp8e4m3"), ("rms", 4096, True, 128, 128, 4, False, "fp8e4m3"),
    ("rms", 4096, False, 128, 128, 6, False, "fp8e4m3"), ("rms", 2048, False, 64, 128, 6, False),
]
ROUND15 = VARIANTS
VARIANTS = [  # session 25, round 16: persistent shifted LayerNorm with gamma/beta in registers (the rows of a
    # thread share a lead) at 3-5 CTAs an SM; shifted RMSNorm 4096 at 7 and 8 CTAs an SM (spill-free since session 21)
    *[("layer", 4096, False, 128, 128, ctas, False, None, None, 1) for ctas in (3, 4, 5)],
    *[("layer", 4096, False, 128, 128, ctas, False, "fp8e4m3", None, 1) for ctas in (3, 4)],
    ("layer", 2048, False, 128, 128, 4, False, None, None, 2), ("layer", 2048, False, 128, 128, 6, False, None, None, 2),
    ("layer", 2048, False, 128, 128, 4, False, "fp8e4m3", None, 2), ("layer", 1024, False, 64, 128, 4, False, None, None, 2),
    ("rms", 4096, False, 128, 128, 7, False), ("rms", 4096, False, 128, 128, 8, False),
]
ROUND16 = VARIANTS  # tune_norm_h200_session25_r16.json
VARIANTS = [  # session 25, round 17: the other persistent shifted LayerNorm classes in registers
    ("layer", 1024, False, 64, 128, 4, False, "fp8e4m3", None, 2),
    ("layer", 8192, False, 256, 256, 1, False, None, None, 1), ("layer", 8192, False, 512, 512, 1, False, None, None, 1),
    ("layer", 8192, False, 256, 256, 1, False, "fp8e4m3", None, 1),
    ("layer", 8192, False, 512, 512, 1, False, "fp8e4m3", None, 1),
]
ROUND17 = VARIANTS  # tune_norm_h200_session25_r17.json
VARIANTS = [  # session 25, round 18: the persistent shifted LayerNorm with the lead's chunk on the row's first thread
    # (4 chunks a thread of gamma and beta in registers, not 5) at 3-5 CTAs an SM; 8192 at 2 CTAs of 256
    *[("layer", 4096, False, 128, 128, ctas, False, None, None, 1) for ctas in (3, 4, 5)],
    *[("layer", 4096, False, 128, 128, ctas, False, "fp8e4m3", None, 1) for ctas in (3, 4)],
    ("layer", 8192, False, 256, 256, 2, False, None, None, 1), ("layer", 8192, False, 256, 256, 2, False, "fp8e4m3", None, 1),
]
ROUND18 = VARIANTS  # tune_norm_h200_session25_r18.json
VARIANTS = [  # session 25, round 19: shifted RMSNorm 4096 looping over rows, the weight read once in the row frame
    *[("rms", 4096, False, 128, 128, ctas, False) for ctas in (4, 6, 7, 8)],
    *[("rms", 4096, False, 128, 128, ctas, False, "fp8e4m3") for ctas in (4, 5, 6)],
]
ROUND19 = VARIANTS  # tune_norm_h200_session25_r19.json (the rows-loop build of patches/norm_rms_rows_loop_session25.patch)
VARIANTS = [  # session 25, round 20: the persistent shifted LayerNorm (lead chunk alone) with two rows in flight
    # (ncu: its top stall is the ring read, x not yet landed)
    ("layer", 4096, False, 128, 128, 4, False, None, None, 1), ("layer", 4096, False, 128, 128, 4, False, None, None, 2),
    ("layer", 4096, False, 128, 128, 3, False, None, None, 2),
    ("layer", 4096, False, 128, 128, 4, False, "fp8e4m3", None, 1), ("layer", 4096, False, 128, 128, 4, False, "fp8e4m3", None, 2),
    ("layer", 8192, False, 256, 256, 2, False, None, None, 2), ("layer", 8192, False, 256, 256, 2, False, "fp8e4m3", None, 2),
]
ROUND20 = VARIANTS  # tune_norm_h200_session25_r20.json
VARIANTS = [  # session 25, round 21: shifted FP8 RMSNorm 4096 (one row a thread, lead chunk alone) at more CTAs an SM
    *[("rms", 4096, False, 128, 128, ctas, False, "fp8e4m3") for ctas in (6, 7, 8)],
]
ROUND21 = VARIANTS  # tune_norm_h200_session25_r21.json
VARIANTS = [  # session 25, round 22: shifted FP8 RMSNorm 4096 looping over rows with the next row in flight (a ring,
    # as the persistent LayerNorm) and the weight held in the shared row frame, at 4-6 CTAs an SM
    *[("rms", 4096, False, 128, 128, ctas, False, "fp8e4m3", None, 1) for ctas in (4, 5, 6)],
]
ROUND22 = VARIANTS  # tune_norm_h200_session25_r22.json
VARIANTS = [  # session 26, round 23: the aligned classes short of their goals, on the persistent path or at more CTAs
    # fused add 4096 (4126 of 4150 GB/s) at 3-4 CTAs of 256
    *[("rms", 4096, True, 256, 256, ctas, True) for ctas in (3, 4)],
    # RMSNorm 8192 (0.96x inductor) looping over rows with the next one in flight, the weight held
    ("rms", 8192, False, 512, 512, 2, True, None, None, 1), ("rms", 8192, False, 512, 512, 3, True, None, None, 1),
    *[("rms", 8192, False, 256, 256, ctas, True, None, None, 1) for ctas in (3, 4)],
    # LayerNorm 4096 (92% of copy) persistent: gamma/beta held, next row in flight
    ("layer", 4096, False, 128, 128, 4, True, None, None, 1),
    *[("layer", 4096, False, 256, 256, ctas, True, None, None, pf) for ctas, pf in ((2, 1), (2, 2), (3, 1))],
    # FP8 LayerNorm 4096 (90%): 256-thread rows
    *[("layer", 4096, False, 256, 256, ctas, True, "fp8e4m3", None, pf) for ctas, pf in ((2, 1), (2, 2), (3, 1))],
    # shifted FP8 RMSNorm 2047 (59%) and 8191 (52%) with the 4095 build's ring
    *[("rms", 2048, False, 64, 128, ctas, False, "fp8e4m3", None, 1) for ctas in (4, 6)],
    *[("rms", 8192, False, 256, 256, ctas, False, "fp8e4m3", None, 1) for ctas in (2, 3)],
]
ROUND23 = VARIANTS  # tune_norm_h200_session26_r23.json
VARIANTS = [  # session 26, round 24: the ring (next row in flight, weight held) on the other shifted RMSNorm classes
    *[("rms", 1024, False, 64, 128, ctas, False, "fp8e4m3", None, 1) for ctas in (4, 6, 8)],
    *[("rms", 2048, False, 64, 128, ctas, False, "fp8e4m3", None, 1) for ctas in (3, 4, 5)],
    *[("rms", 16384, False, 512, 512, ctas, False, "fp8e4m3", None, 1) for ctas in (1, 2)],
    *[("rms", 1024, False, 64, 128, ctas, False, None, None, 1) for ctas in (4, 6, 8)],
    *[("rms", 2048, False, 64, 128, ctas, False, None, None, 1) for ctas in (4, 6)],
    *[("rms", 4096, False, 128, 128, ctas, False, None, None, 1) for ctas in (5, 6, 8)],
    *[("rms", 8192, False, 256, 256, ctas, False, None, None, 1) for ctas in (2, 3)],
    *[("rms", 16384, False, 512, 512, ctas, False, None, None, 1) for ctas in (1, 2)],
    ("rms", 4096, True, 256, 256, 4, True),  # the fused add again (+0.5% in round 23)
]
ROUND24 = VARIANTS  # tune_norm_h200_session26_r24.json
VARIANTS = [  # session 26, round 25: round 24's winners at decode sizes (CUPTI)
    ("rms", 2048, False, 64, 128, 4, False, "fp8e4m3", None, 1), ("rms", 8192, False, 256, 256, 2, False, "fp8e4m3", None, 1),
    ("rms", 16384, False, 512, 512, 1, False, "fp8e4m3", None, 1), ("rms", 8192, False, 256, 256, 2, False, None, None, 1),
    ("rms", 16384, False, 512, 512, 1, False, None, None, 1),
]  # (32768's ring, 80 KB, is past the 48 KB of static shared memory)
ROUND25 = VARIANTS  # tune_norm_h200_session26_r25_small.json
VARIANTS = [  # session 26, round 26: the persistent shifted LayerNorm's small classes (FP8 1023/2047 at 39-44% of
    # the copy ceiling) at more CTAs an SM and either depth, and FP8 4095 at 256-thread rows
    *[("layer", 1024, False, 64, 128, ctas, False, out, None, pf) for out in ("fp8e4m3", None) for ctas in (4, 6, 8)
      for pf in (1, 2)],
    *[("layer", 2048, False, 128, 128, ctas, False, out, None, pf) for out in ("fp8e4m3", None) for ctas in (4, 6)
      for pf in (1, 2)],
    *[("layer", 4096, False, 256, 256, 2, False, "fp8e4m3", None, pf) for pf in (1, 2)],
    # twice the threads a row (a chunk and the lead's a thread at 1023, two at 2047)
    *[("layer", 1024, False, 128, 128, ctas, False, out, None, pf) for out in ("fp8e4m3", None) for ctas in (6, 8)
      for pf in (1, 2)],
    *[("layer", 2048, False, 256, 256, ctas, False, out, None, pf) for out in ("fp8e4m3", None) for ctas in (3, 4)
      for pf in (1, 2)],
]
ROUND26 = VARIANTS  # tune_norm_h200_session26_r26.json
VARIANTS = [  # session 26, round 27: the persistent shifted LayerNorm at 16383 (gamma/beta in registers since
    # session 25; the staged form needed 131 KB of shared memory), its lead's chunk on the row's first thread
    *[("layer", 16384, False, tpr, tpr, 1, False, out, None, pf) for out in (None, "fp8e4m3") for tpr in (512, 1024)
      for pf in (1,)],  # (two rows in flight: 64 KB, past the 48 KB of static shared memory)
]
ROUND27 = VARIANTS  # tune_norm_h200_session26_r27.json
VARIANTS = [  # session 26, round 28: the one-row shifted LayerNorm 16383 builds that round 27's persistent ones
    # replaced (prefetch 0), timed by CUPTI at decode sizes against them
    *[("layer", 16384, False, 512, 512, 1, False, out, None, 0) for out in (None, "fp8e4m3")],
]
ROUND28 = VARIANTS  # tune_norm_h200_session26_r28_small.json
VARIANTS = [  # session 26, round 29: the FP8 LayerNorm 4096 as the plain one-row build (no ring, gamma/beta read
    # after the reductions) at 6-8 CTAs an SM; the fused add 4096 at 512-thread rows (8 elements a thread)
    *[("layer", 4096, False, 128, 128, ctas, True, "fp8e4m3", None, 0) for ctas in (6, 7, 8)],
    *[("rms", 4096, True, 512, 512, ctas, True) for ctas in (1, 2)],
]
