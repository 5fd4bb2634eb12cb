#!/bin/bash
pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl > /dev/null 2>&1
export CUTEFI_CACHE_DIR=/tmp/cc
for round in 1 2; do
for t in head q1k3v3 q1k2v4; do
  echo "== $t round $round"
  B=cutefi; [ $t = head ] && B="cutefi cudnn"
  PYTHONPATH=/tmp/site:$PWD/scratch/$t CUTEFI_PACK_PATH=$PWD/scratch/pk_$t python scratch/bench_main.py --refcheck --routine batch_prefill --batch 4 --seq-len 4096 --causal 0 1 --head-dim 128 --backends $B 2>&1 | grep -E "^batch|rror" | cut -c1-30,100-200
  PYTHONPATH=/tmp/site:$PWD/scratch/$t CUTEFI_PACK_PATH=$PWD/scratch/pk_$t python scratch/bench_main.py --refcheck --routine batch_prefill --batch 16 --seq-len 1024 --causal 1 --head-dim 128 --backends $B 2>&1 | grep -E "^batch|rror" | cut -c1-30,100-200
done; done
