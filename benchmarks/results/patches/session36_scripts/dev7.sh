pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>&1 | grep -v WARN | tail -1
ROOT=$PWD
for r in 1 2; do for v in r8s4 r8s6 r16s3 r4s6; do
  (cd scratch/$v && CUTEFI_CACHE_DIR=/tmp/cc_$v CUTEFI_PACK_PATH=$PWD/pack PYTHONPATH=/tmp/site:$PWD NO_PLAN=1 python $ROOT/scratch/s36/probe_gemv.py 2>&1 | grep '^{' > $OUT/${v}_$r.txt)
done; done
python - <<'PY'
import json, os, collections
out = os.environ["OUT"]
res = collections.defaultdict(dict)
for f in sorted(os.listdir(out)):
    v, r = f[:-4].rsplit("_", 1)
    for l in open(os.path.join(out, f)):
        d = json.loads(l)
        res[(d["m"], d["n"], d["k"])].setdefault(v, []).append(d["us"]["gemv"])
        res[(d["m"], d["n"], d["k"])].setdefault("cublas", []).append(d["us"]["cublas"])
for key, v in sorted(res.items()):
    print(key, {name: round(min(t), 2) for name, t in v.items()})
PY
