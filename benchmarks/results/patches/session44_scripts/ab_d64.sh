#!/bin/bash
pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl > /dev/null 2>&1
export CUTEFI_CACHE_DIR=/tmp/cc
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
for round in 1 2; do
for t in head n192 n160; do
  echo "== $t round $round"
  B=cutefi; [ $t = head ] && B="cutefi cudnn"
  PYTHONPATH=/tmp/site:$PWD/scratch/$t CUTEFI_PACK_PATH=$PWD/scratch/pk_$t python scratch/bench_main.py --refcheck --routine batch_prefill --batch 4 --seq-len 4096 --causal 1 0 --head-dim 64 --backends $B 2>&1 | grep -E "^batch|rror" 
  PYTHONPATH=/tmp/site:$PWD/scratch/$t CUTEFI_PACK_PATH=$PWD/scratch/pk_$t python scratch/bench_main.py --refcheck --routine batch_prefill --batch 16 --seq-len 1024 --causal 1 --head-dim 64 --backends $B 2>&1 | grep -E "^batch|rror" 
done; done
