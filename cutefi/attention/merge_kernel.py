"""Attention-state merge kernel in CuTe DSL (FlashInfer's merge_state / merge_state_in_place /
merge_states): ``states`` partial outputs of a (position, head) row and their base-2
log-sum-exps in, the merged row and its log-sum-exp out. Mapping, ABI and launch: ``launch.py``;
the online merge itself: ``cutefi.cute.attention_state``.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int64

from cutefi.attention import launch
from cutefi.cute import args as kernel_args
from cutefi.cute.args import KernelArgs
from cutefi.cute.attention_state import NEG_INF, merge_state_finish, merge_state_init, merge_state_update
from cutefi.cute.dtypes import cute_dtype
from cutefi.cute.pdl import wait_for_inputs


class MergeStatesKernel:
    # ------------------------------------------------------------------ #
    # 1. specialisation: dtype, lanes a row, 128-bit chunks a thread, states in flight
    # ------------------------------------------------------------------ #
    def __init__(self, dtype: str, lanes: int, chunks: int, in_flight: int):
        if dtype not in launch.DTYPES or (lanes, chunks) not in launch.MERGE_SHAPES \
                or in_flight not in launch.STATES_IN_FLIGHT:
            raise ValueError(f"unsupported merge build {dtype!r}, lanes={lanes}, chunks={chunks}, "
                             f"in_flight={in_flight}")
        self.contract = launch.merge_contract(dtype, lanes, chunks, in_flight)
        self.in_flight = in_flight
        self.dtype = cute_dtype(dtype)
        self.lanes = lanes
        self.chunks = chunks
        self.rows_per_cta = launch.MERGE_THREADS // lanes
        self.tile = launch.VEC * lanes * chunks  # columns one pass of a row's lanes covers

    # ------------------------------------------------------------------ #
    # 2. host wrapper: the contract's launch
    # ------------------------------------------------------------------ #
    @cute.jit
    def __call__(self, args: KernelArgs):
        kernel_args.launch(self.kernel, self.contract, args)

    # ------------------------------------------------------------------ #
    # 3. device kernel
    # ------------------------------------------------------------------ #
    @cute.kernel
    def kernel(self, args: KernelArgs):
        a = args
        tidx, _, _ = cute.arch.thread_idx()
        pos, head_group, _ = cute.arch.block_idx()

        # ---- stage 0: this group's row (position, head) -------------------
        lane = tidx % self.lanes
        head = head_group * self.rows_per_cta + tidx // self.lanes
        wait_for_inputs()
        # no branch around the row: every lane runs the state loop (the warp synchronises
        # before the log-sum-exp store), rows out of range or masked off skip loads and stores
        active = head < a.heads
        if a.has_mask != 0 and active:
            active = cute.make_tensor(a.mask, cute.make_layout(a.seq_len))[pos] != 0
        # this position's states
        states = a.states
        v_row = Int64(pos) * a.v_stride_pos + Int64(head) * a.v_stride_head
        s_row = Int64(pos) * a.s_stride_pos + Int64(head) * a.s_stride_head

        # ---- stage 1: this thread's chunks of the row ---------------------
        copy = cute.make_tiled_copy_tv(
            cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), self.dtype, num_bits_per_copy=128),
            cute.make_layout((1, self.lanes)), cute.make_layout((1, launch.VEC)))
        thr = copy.get_slice(lane)
        tXcX = thr.partition_S(cute.make_identity_tensor((1, self.tile)))
        pred = cute.make_rmem_tensor(cute.make_layout((1, 1, self.chunks), stride=(0, 0, 1)), cutlass.Boolean)
        for k in cutlass.range_constexpr(self.chunks):
            pred[0, 0, k] = tXcX[(0, 0), 0, k][1] < a.head_dim and active

        # ---- stage 2: merge the states online, in_flight at a time ---------------------
        # each group's loads are all issued (into registers of their own) before any of its
        # math, so a row has that many 128-bit loads in flight, not one
        acc = cute.make_rmem_tensor(tXcX.shape, Float32)
        md = merge_state_init(acc)
        for first in cutlass.range(0, states, self.in_flight):
            values = [cute.make_rmem_tensor(tXcX.shape, self.dtype) for _ in range(self.in_flight)]
            lses = [None] * self.in_flight
            for u in cutlass.range_constexpr(self.in_flight):
                i = first + u
                loads = cute.make_rmem_tensor_like(pred)
                for k in cutlass.range_constexpr(self.chunks):
                    loads[0, 0, k] = pred[0, 0, k] and i < states
                values[u].fill(0.0)
                cute.copy(copy, self._row_view(a.v, v_row + Int64(i) * a.v_stride_state, thr), values[u], pred=loads)
                # every lane reads the row's log-sum-exp (one broadcast access a row), without
                # a branch (so the loads issue together): a state past the last one, or a row
                # that is not merged, reads the first element instead and counts as -inf
                # (weight 0)
                valid = active and i < states
                offset = cutlass.select_(valid, s_row + Int64(i) * a.s_stride_state, Int64(0))
                lse = cute.make_tensor(a.s + offset, cute.make_layout(1))[0]
                lses[u] = cutlass.select_(valid, lse, Float32(NEG_INF))
            for u in cutlass.range_constexpr(self.in_flight):
                merge_state_update(acc, md, lses[u], values[u].load().to(Float32))

        # ---- stage 3: normalise and store ---------------------------------------
        merged, lse_out = merge_state_finish(acc, md)
        result = cute.make_rmem_tensor(tXcX.shape, self.dtype)
        result.store(merged.to(self.dtype))
        v_out_row = Int64(pos) * a.v_out_stride_pos + Int64(head) * a.v_out_stride_head
        cute.copy(copy, result, self._row_view(a.v_out, v_out_row, thr), pred=pred)
        # s_out may be state 0's s (in place): every lane of the row has read it by now
        cute.arch.sync_warp()
        if a.write_lse != 0 and lane == 0 and active:
            s_out_row = Int64(pos) * a.s_out_stride_pos + Int64(head) * a.s_out_stride_head
            cute.make_tensor(a.s_out + s_out_row, cute.make_layout(1))[0] = lse_out

    # ------------------------------------------------------------------ #
    # 4. stages
    # ------------------------------------------------------------------ #
    @cute.jit
    def _row_view(self, ptr: cute.Pointer, offset: Int64, thr) -> cute.Tensor:
        """This thread's chunks of the row at ``ptr + offset`` (offset a multiple of 8: 16-byte rows)."""
        offset = cute.assume(offset, divby=launch.VEC)
        return thr.partition_S(cute.make_tensor(ptr + offset, cute.make_layout((1, self.tile))))
