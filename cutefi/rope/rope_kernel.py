"""Rotary position embedding (RoPE) kernel in CuTe DSL, applied to q and k in one launch.

For every token: find its position (pos_ids, a ragged indptr/offsets batch, or a positions
array indexing a cos|sin cache), compute the cos/sin of the thread's 8 frequencies once, then
rotate the thread's slot of every head in the CTA's head group, q heads first, then k heads.
The thread mapping and the contract are in ``launch.py``.

Frequencies (FlashInfer's convention): ``f_i = theta^(-2i/R)``, then with
``smooth = clamp(f_i * smooth_a + smooth_b, 0, 1)``, ``f_i = (1 - smooth) * f_i * rcp_scale +
smooth * f_i``: plain RoPE passes ``smooth_a = smooth_b = 0`` (so ``f_i * rcp_scale``), Llama 3.1
passes its wavelength band. Angles are fp32; they are reduced to [-pi, pi] with a two-term
Cody-Waite step (fma, exact for any angle below 2^24 * 2pi) before the hardware
``sin/cos.approx`` (abs. error ~1e-6 there): accurate at positions of 10^5 radians and more,
without libdevice's local-memory slow path.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32, Int64, const_expr

from cutefi.cute import args as kernel_args
from cutefi.cute.args import KernelArgs
from cutefi.cute.dtypes import cute_dtype
from cutefi.cute.segments import last_start_at_most
from cutefi.rope import launch


class RopeKernel:
    # ------------------------------------------------------------------ #
    # 1. specialisation
    # ------------------------------------------------------------------ #
    def __init__(self, dtype: str, positions: str, index_dtype: str, interleave: bool):
        if dtype not in launch.DTYPES or positions not in launch.POSITION_SOURCES or index_dtype not in launch.INDEX_DTYPES:
            raise ValueError(f"unsupported RoPE build {dtype!r}, {positions!r}, {index_dtype!r}")
        self.contract = launch.contract(dtype, positions, index_dtype, interleave)
        self.dtype = cute_dtype(dtype)
        self.positions = positions
        self.interleave = interleave

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
        nnz, batch, head_dim, rotary_dim = a.nnz, a.batch, a.head_dim, a.rotary_dim
        num_q_heads, num_k_heads, heads_per_cta = a.num_q_heads, a.num_k_heads, a.heads_per_cta
        tidx, _, _ = cute.arch.thread_idx()
        bidx, bidy, _ = cute.arch.block_idx()

        # ---- stage 0: which token and slot this thread owns ---------------
        slots = head_dim // launch.SLOT
        tokens_per_cta = launch.THREADS // slots
        token_in_cta = tidx // slots
        slot = tidx - token_in_cta * slots
        token = bidx * tokens_per_cta + token_in_cta
        if token_in_cta < tokens_per_cta and token < nnz:
            # ---- stage 1: position and this slot's cos / sin ---------------
            # (an interleaved slot may rotate its first 8 elements only: rotary_dim = 8 mod 16)
            rotates = slot * launch.SLOT < rotary_dim
            cos = cute.make_rmem_tensor(cute.make_layout(launch.VEC), Float32)
            sin = cute.make_rmem_tensor(cute.make_layout(launch.VEC), Float32)
            cos.fill(1.0)
            sin.fill(0.0)
            if rotates:
                if const_expr(self.positions == "cache"):
                    self._cache_cos_sin(a.pos, a.cos_sin_cache, token, batch, slot, rotary_dim,
                                        a.cache_row_stride, cos, sin)
                else:
                    position = self._position(a.pos, a.offsets, token, nnz, batch)
                    self._cos_sin(position, slot, rotary_dim, a.rcp_scale, a.log2_theta, a.smooth_a,
                                  a.smooth_b, cos, sin)
                if const_expr(self.interleave):
                    if slot * launch.SLOT + launch.VEC >= rotary_dim:  # b passes through: the identity
                        for j in cutlass.range_constexpr(launch.VEC // 2, launch.VEC):
                            cos[j] = Float32(1.0)
                            sin[j] = Float32(0.0)

            # ---- stage 2: the slot's two vectors within a head row ---------
            # pass-through slots (and interleaved ones) own [16s, 16s + 16)
            chunk_a = 2 * slot
            chunk_b = chunk_a + 1
            if const_expr(not self.interleave):
                if rotates:  # NeoX: [8s, 8s + 8) pairs with [8s + R/2, ...)
                    chunk_a = slot
                    chunk_b = slot + rotary_dim // (2 * launch.VEC)

            # ---- stage 3: rotate the head group, q heads then k heads ------
            mQ = self._heads(a.q, nnz, num_q_heads, head_dim, a.q_stride_t, a.q_stride_h)
            mQo = self._heads(a.q_out, nnz, num_q_heads, head_dim, a.q_out_stride_t, a.q_out_stride_h)
            mK = self._heads(a.k, nnz, num_k_heads, head_dim, a.k_stride_t, a.k_stride_h)
            mKo = self._heads(a.k_out, nnz, num_k_heads, head_dim, a.k_out_stride_t, a.k_out_stride_h)
            first = bidy * heads_per_cta
            last = cutlass.min(first + heads_per_cta, num_q_heads + num_k_heads)
            q_end = cutlass.min(last, num_q_heads)
            for head in cutlass.range(first, q_end, launch.HEADS_IN_FLIGHT):
                self._rotate(mQ, mQo, token, head, q_end, chunk_a, chunk_b, rotates, cos, sin)
            k_end = last - num_q_heads
            for head in cutlass.range(cutlass.max(first, num_q_heads) - num_q_heads, k_end, launch.HEADS_IN_FLIGHT):
                self._rotate(mK, mKo, token, head, k_end, chunk_a, chunk_b, rotates, cos, sin)

    # ------------------------------------------------------------------ #
    # 4. stages
    # ------------------------------------------------------------------ #
    @cute.jit
    def _heads(self, ptr: cute.Pointer, nnz: Int32, heads: Int32, head_dim: Int32,
               stride_t: Int64, stride_h: Int64) -> cute.Tensor:
        """[nnz, heads, head_dim] view; strides are multiples of 8 elements (16 bytes)."""
        stride_t = cute.assume(stride_t, divby=launch.VEC)
        stride_h = cute.assume(stride_h, divby=launch.VEC)
        return cute.make_tensor(ptr, cute.make_layout((nnz, heads, head_dim), stride=(stride_t, stride_h, 1)))

    @cute.jit
    def _position(self, pos_ptr: cute.Pointer, offsets_ptr: cute.Pointer, token: Int32, nnz: Int32,
                  batch: Int32) -> Float32:
        position = Float32(0.0)
        if const_expr(self.positions == "pos_ids"):
            position = Float32(cute.make_tensor(pos_ptr, cute.make_layout(nnz))[token])
        else:
            # ragged batch: request b holds tokens [indptr[b], indptr[b+1]); find the last b
            # with indptr[b] <= token (empty requests are skipped by construction)
            indptr = cute.make_tensor(pos_ptr, cute.make_layout(batch + 1))
            offsets = cute.make_tensor(offsets_ptr, cute.make_layout(batch))
            request = last_start_at_most(indptr, batch, token)
            position = Float32(offsets[request] + token - indptr[request])
        return position

    @cute.jit
    def _cos_sin(self, position: Float32, slot: Int32, rotary_dim: Int32, rcp_scale: Float32,
                 log2_theta: Float32, smooth_a: Float32, smooth_b: Float32,
                 cos: cute.Tensor, sin: cute.Tensor):
        # theta^(-2i/R) = exp2(i * (-2 log2(theta) / R))
        exponent_step = Float32(-2.0) * log2_theta / Float32(rotary_dim)
        for j in cutlass.range_constexpr(launch.VEC):
            freq = cute.math.exp2(Float32(slot * launch.VEC + j) * exponent_step)
            smooth = cutlass.min(cutlass.max(freq * smooth_a + smooth_b, Float32(0.0)), Float32(1.0))
            freq = (Float32(1.0) - smooth) * freq * rcp_scale + smooth * freq
            angle = _reduce_angle(position * freq)
            cos[j] = cute.math.cos(angle, approx=True)
            sin[j] = cute.math.sin(angle, approx=True)

    @cute.jit
    def _cache_cos_sin(self, pos_ptr: cute.Pointer, cache_ptr: cute.Pointer, token: Int32, rows: Int32,
                       slot: Int32, rotary_dim: Int32, row_stride: Int64,
                       cos: cute.Tensor, sin: cute.Tensor):
        # positions outside the cache are clamped: wrong in, wrong out, but never out of bounds
        position = cute.make_tensor(pos_ptr, cute.make_layout(token + 1))[token]
        row = Int32(cutlass.min(cutlass.max(position, 0), rows - 1))
        row_stride = cute.assume(row_stride, divby=4)
        cache = cute.make_tensor(cache_ptr, cute.make_layout((rows, rotary_dim), stride=(row_stride, 1)))
        # frequencies 8s .. 8s+7: cos at [8s, ...), sin at [R/2 + 8s, ...), in 4-float (16-byte)
        # pieces (R/2 is a multiple of 4); a slot that rotates only its first 8 elements
        # (interleaved, R = 8 mod 16) reads its first piece of each only: the row ends there
        piece = (launch.VEC // 2,)
        first = 2 * slot
        half = rotary_dim // launch.VEC
        pieces = 2 if slot * launch.SLOT + launch.VEC < rotary_dim else 1
        for p in cutlass.range_constexpr(2):
            if p < pieces:
                cute.autovec_copy(cute.local_tile(cache[row, None], piece, (first + p,)),
                                  cute.local_tile(cos, piece, (p,)))
                cute.autovec_copy(cute.local_tile(cache[row, None], piece, (half + first + p,)),
                                  cute.local_tile(sin, piece, (p,)))

    @cute.jit
    def _rotate(self, src: cute.Tensor, dst: cute.Tensor, token: Int32, first: Int32, end: Int32,
                chunk_a: Int32, chunk_b: Int32, rotates, cos: cute.Tensor, sin: cute.Tensor):
        """Rotate the slot's two 128-bit vectors in heads [first, min(first + HEADS_IN_FLIGHT, end)).

        All loads are issued before any store: q_out may alias q, so the compiler may not move
        a load above an earlier store, and one head at a time would leave one pair of loads in
        flight per thread.
        """
        vec = (launch.VEC,)
        group = launch.HEADS_IN_FLIGHT
        regs = cute.make_rmem_tensor(cute.make_layout((launch.VEC, 2, group)), self.dtype)
        for u in cutlass.range_constexpr(group):
            if first + u < end:
                row = src[token, first + u, None]
                cute.autovec_copy(cute.local_tile(row, vec, (chunk_a,)), regs[None, 0, u])
                cute.autovec_copy(cute.local_tile(row, vec, (chunk_b,)), regs[None, 1, u])
        for u in cutlass.range_constexpr(group):
            if first + u < end:
                a = regs[None, 0, u]
                b = regs[None, 1, u]
                if rotates:
                    self._rotate_pairs(a, b, cos, sin)
                row = dst[token, first + u, None]
                cute.autovec_copy(a, cute.local_tile(row, vec, (chunk_a,)))
                cute.autovec_copy(b, cute.local_tile(row, vec, (chunk_b,)))

    @cute.jit
    def _rotate_pairs(self, a: cute.Tensor, b: cute.Tensor, cos: cute.Tensor, sin: cute.Tensor):
        """In registers: NeoX pairs (a[j], b[j]) or interleaved pairs (x[2m], x[2m+1])."""
        if const_expr(self.interleave):
            # a holds frequencies 0..3, b holds 4..7
            for half, regs in ((0, a), (4, b)):
                for m in cutlass.range_constexpr(launch.VEC // 2):
                    x0 = regs[2 * m].to(Float32)
                    x1 = regs[2 * m + 1].to(Float32)
                    c = cos[half + m]
                    s = sin[half + m]
                    regs[2 * m] = (x0 * c - x1 * s).to(self.dtype)
                    regs[2 * m + 1] = (x1 * c + x0 * s).to(self.dtype)
        else:
            for j in cutlass.range_constexpr(launch.VEC):
                x0 = a[j].to(Float32)
                x1 = b[j].to(Float32)
                a[j] = (x0 * cos[j] - x1 * sin[j]).to(self.dtype)
                b[j] = (x1 * cos[j] + x0 * sin[j]).to(self.dtype)


_INV_TWO_PI = 0.15915494309189535
_TWO_PI_HI = 6.2831854820251465  # float32(2 pi)
_TWO_PI_LO = -1.7484555314695172e-07  # 2 pi - float32(2 pi)


@cute.jit
def _reduce_angle(angle: Float32) -> Float32:
    """angle - k * 2pi in [-pi, pi] (k = round(angle / 2pi)), to fp32 accuracy."""
    turns = cute.math.roundeven(angle * Float32(_INV_TWO_PI))
    reduced = cute.math.fma(-turns, Float32(_TWO_PI_HI), angle)
    return cute.math.fma(-turns, Float32(_TWO_PI_LO), reduced)
