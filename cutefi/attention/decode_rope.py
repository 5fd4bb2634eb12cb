"""RoPE inside the decode kernel (``pos_encoding_mode="ROPE_LLAMA"``): q rotated as it is
staged (stage 1), each K operand rotated after ldmatrix (stage 3). A mixin of
``decode_mma_kernel.BatchDecodeMmaKernel``, whose fields and q helpers it uses."""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Float32, const_expr

from cutefi.attention import launch
from cutefi.cute.rope_angle import rope_cos_sin

VEC = launch.VEC
WARPS = launch.MMA_DECODE_WARPS


class RopeStages:
    @cute.jit
    def _rope_cos_sin(self, a, position: Float32, dim):
        """(cos, sin) of Llama RoPE's angle of head dim ``dim`` (< head_dim / 2) at ``position``
        (``cute/rope_angle.py``)."""
        return rope_cos_sin(position, dim, a.rope_rcp_scale, a.rope_log2_step)

    @cute.jit
    def _stage_q_rotated(self, a, q_smem, tidx, request, first_head, heads_here, live, position: Float32):
        """Stage 1 with RoPE: a thread takes q pieces c and c + chunks / 2 of a row (dims i and
        i + head_dim / 2 pair up), rotates them in fp32 and stores both."""
        halves = self.q_chunks // 2
        for task in cutlass.range_constexpr(-(-self.rows * halves // (WARPS * 32))):
            piece = task * WARPS * 32 + tidx
            row = piece // halves
            chunk = piece % halves
            if piece < self.rows * halves:
                lo_dst = self._q_dst(q_smem, row, chunk)
                hi_dst = self._q_dst(q_smem, row, chunk + halves)
                if row < heads_here and live:
                    lo = cute.make_rmem_tensor(cute.make_layout(VEC), Float32)
                    hi = cute.make_rmem_tensor(cute.make_layout(VEC), Float32)
                    lo.store(self._q_src(a, request, first_head + row, chunk).load().to(Float32))
                    hi.store(self._q_src(a, request, first_head + row, chunk + halves).load().to(Float32))
                    for e in cutlass.range_constexpr(VEC):
                        cos, sin = self._rope_cos_sin(a, position, chunk * VEC + e)
                        x1, x2 = lo[e], hi[e]
                        lo[e] = x1 * cos - x2 * sin
                        hi[e] = x2 * cos + x1 * sin
                    lo_dst.store(self._to_mma(lo.load()).reshape(lo_dst.shape))
                    hi_dst.store(self._to_mma(hi.load()).reshape(hi_dst.shape))
                else:
                    lo_dst.fill(0)
                    hi_dst.fill(0)

    @cute.jit
    def _rotate_k(self, a, r_k: cute.Tensor, lo_block: cutlass.Constexpr[int], hi_block: cutlass.Constexpr[int],
                  tile_start, lane):
        """RoPE on K operands: block ``lo_block`` holds dims i < head_dim / 2 and ``hi_block``
        their partners i + head_dim / 2 at the same places. A lane's values are tokens
        tile_start + lane / 4 (+ 8 for n-tile 1) at in-block dims 2c + b + 8 h (c = lane % 4;
        FP8 K: 4c + b + 2 h, the permuted order)."""
        lo = cute.make_fragment_like(r_k[None, None, lo_block], Float32)
        hi = cute.make_fragment_like(r_k[None, None, hi_block], Float32)
        lo.store(r_k[None, None, lo_block].load().to(Float32))
        hi.store(r_k[None, None, hi_block].load().to(Float32))
        quad = lane % 4
        for j in cutlass.range_constexpr(2):
            position = Float32(tile_start + lane // 4 + 8 * j)
            for h in cutlass.range_constexpr(2):
                for b in cutlass.range_constexpr(2):
                    if const_expr(self.fp8):
                        dim = lo_block * 16 + 4 * quad + b + 2 * h
                    else:
                        dim = lo_block * 16 + 2 * quad + b + 8 * h
                    cos, sin = self._rope_cos_sin(a, position, dim)
                    x1, x2 = lo[(b, h), j], hi[(b, h), j]
                    lo[(b, h), j] = x1 * cos - x2 * sin
                    hi[(b, h), j] = x2 * cos + x1 * sin
        r_k[None, None, lo_block].store(lo.load().to(self.mma_dtype))
        r_k[None, None, hi_block].store(hi.load().to(self.mma_dtype))
