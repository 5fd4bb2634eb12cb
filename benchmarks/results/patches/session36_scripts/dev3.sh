pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>&1 | grep -v WARN | tail -1
export CUTEFI_CACHE_DIR=/tmp/cc
ROOT=$PWD
CUTEFI_PACK_PATH=$ROOT/.cubins_attn PYTHONPATH=/tmp/site:$ROOT python -m pytest -q tests/test_gpu_decode.py -k "merged_in_kernel or split or single or graph or sinks" 2>&1 | tail -2
for r in 1 2; do
  (cd scratch/base && CUTEFI_PACK_PATH=$ROOT/.cubins_attn_base PYTHONPATH=/tmp/site:$ROOT/scratch/base python $ROOT/scratch/s36/probe_merge.py 2>&1 | grep -v -i warn > $OUT/base_$r.txt)
  CUTEFI_PACK_PATH=$ROOT/.cubins_attn PYTHONPATH=/tmp/site:$ROOT python scratch/s36/probe_merge.py 2>&1 | grep -v -i warn > $OUT/new_$r.txt
done
python - <<'PY'
import json, os
out = os.environ["OUT"]
for r in (1, 2):
    b = [json.loads(l) for l in open(f"{out}/base_{r}.txt") if l.startswith("{")]
    n = [json.loads(l) for l in open(f"{out}/new_{r}.txt") if l.startswith("{")]
    for x, y in zip(b, n):
        s = x["shape"]
        print(r, x["kind"], s.get("batch", 1), s["kv_len"], s.get("kv_fp8", 0), "base", x["full"], "new", y["full"], "sdpa", x["sdpa"], y["sdpa"], "err", round(y["err"], 5))
PY
