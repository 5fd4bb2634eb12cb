#!/bin/bash
export CUTEFI_CACHE_DIR=/tmp/cc
for round in 1 2 3; do
  echo "== old (ddb105d) round $round"
  PYTHONPATH=$PWD/scratch/old CUTEFI_PACK_PATH=$PWD/scratch/pk_old:$PWD/scratch/pk_old_att python scratch/host_time_attn.py 2>&1 | grep -v "cutefi from"
  echo "== new round $round"
  PYTHONPATH=$PWD/scratch/new CUTEFI_PACK_PATH=$PWD/scratch/pk_new:$PWD/.cubins_attention python scratch/host_time_attn.py 2>&1 | grep -v "cutefi from"
done
