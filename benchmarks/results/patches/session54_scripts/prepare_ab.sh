# Session 54, on the CPU machine from the repository root: four source trees for ab4.sh, each with a pack of
# its 4096-class RMSNorm and LayerNorm builds (build_subset.py) and copy/fill:
#   .ab_base  HEAD
#   .ab_a     HEAD + rms_staged_weight_session54.patch (one-row FP8/plain RMSNorm 4095, weight staged in
#             shared memory by cp.async)
#   .ab_b     HEAD + rms_parked_weight_session54.patch (FP8 RMSNorm 4095's ring at 1024 threads an SM, its
#             weight parked in shared memory, a latency build for calls of up to 1024 rows)
#   .ab_c     HEAD + norm_parked_params_session54.patch (B, and LayerNorm 4095's gamma and beta parked in
#             shared memory, 5 CTAs an SM instead of 4)
set -e
S=benchmarks/results/patches/session54_scripts
# (the patches' cutefi/ parts: the trees hold no tests/)
only_cutefi() { python3 -c "import re, sys; parts = re.split(r'(?m)^(?=diff --git )', open(sys.argv[1]).read())
print(''.join(p for p in parts if p.startswith('diff --git a/cutefi/')), end='')" "$1"; }
for t in base a b c; do
  rm -rf .ab_$t && mkdir .ab_$t && git archive HEAD cutefi | tar -x -C .ab_$t
done
only_cutefi $S/rms_staged_weight_session54.patch | (cd .ab_a && patch -p1 -s)
only_cutefi $S/rms_parked_weight_session54.patch | (cd .ab_b && patch -p1 -s)
only_cutefi $S/norm_parked_params_session54.patch | (cd .ab_c && patch -p1 -s)
for t in base a b c; do
  (cd .ab_$t && PYTHONPATH=$PWD CUTEFI_CACHE_DIR=/tmp/cc_ab_$t python ../$S/build_subset.py .cubins)
  find .ab_$t/.cubins -name '*.ptx' -delete
done
du -sm .ab_base .ab_a .ab_b .ab_c
