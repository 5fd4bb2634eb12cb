"""RoPE + FP8 quantisation in CuTe DSL (FlashInfer's ``rope_quantize_fp8``): q and k split into
their rotary part (``*_rope``, rotated by a cos|sin cache row) and the rest (``*_nope``, passed
through), each element times its scale (``scale_q`` for q, ``scale_kv`` for k) and saturated to
the FP8 format's largest finite value (the conversion of sm_89+, ``cvt.rn.satfinite``; sm_80/86
convert in arithmetic). One launch: the grid is the row sets' CTAs (q_rope, k_rope, q_nope,
k_nope) one after another, each CTA a range of its set's (token, head, slot) units. Mapping,
ABI and launch: ``launch.py`` (``quant_contract``).

``RopeQuantAppendKernel`` (FlashInfer's ``rope_quantize_fp8_append_paged_kv_cache``) is the same
kernel with a fifth set, v, and k's and v's rows stored into a paged cache at their token's page
and entry (``launch.append_contract``).
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32, Int64, const_expr

from cutefi.cute import args as kernel_args
from cutefi.cute.args import KernelArgs
from cutefi.cute.convert import has_fp8_convert, store_fp8
from cutefi.cute.dtypes import cute_dtype
from cutefi.cute.paged import page_entry
from cutefi.cute.pdl import wait_for_inputs
from cutefi.dtypes import FP8_MAX
from cutefi.rope import launch

VEC = launch.VEC


class RopeQuantKernel:
    # ------------------------------------------------------------------ #
    # 1. specialisation
    # ------------------------------------------------------------------ #
    def __init__(self, dtype: str, out_dtype: str, index_dtype: str, interleave: bool):
        if dtype not in launch.DTYPES or out_dtype not in launch.QUANT_OUT_DTYPES \
                or index_dtype not in launch.INDEX_DTYPES:
            raise ValueError(f"unsupported RoPE quant build {dtype!r} -> {out_dtype!r}, {index_dtype!r}")
        self.contract = self.make_contract(dtype, out_dtype, index_dtype, interleave)
        self.dtype = cute_dtype(dtype)
        self.out_dtype = cute_dtype(out_dtype)
        self.quant_max = FP8_MAX[out_dtype]  # (saturated to the format's largest finite value)
        self.interleave = interleave

    append = False  # k's sets to dense outputs; RopeQuantAppendKernel: k's and v's into a paged cache
    make_contract = staticmethod(launch.quant_contract)

    @cute.jit
    def __call__(self, args: KernelArgs):
        kernel_args.launch(self.kernel, self.contract, args)

    # ------------------------------------------------------------------ #
    # 2. device kernel: a CTA of one row set
    # ------------------------------------------------------------------ #
    @cute.kernel
    def kernel(self, args: KernelArgs):
        a = args
        tidx, _, _ = cute.arch.thread_idx()
        bidx, _, _ = cute.arch.block_idx()
        # the sets' CTAs one after another (launch.quant_grid / append_grid): which set, which of its CTAs
        end_q_rope = launch.quant_set_ctas(a.nnz, a.num_q_heads, a.rope_dim)
        end_k_rope = end_q_rope + launch.quant_set_ctas(a.nnz, a.num_k_heads, a.rope_dim)
        end_q_nope = end_k_rope + launch.quant_set_ctas(a.nnz, a.num_q_heads, a.nope_dim)
        end_k_nope = end_q_nope + launch.quant_set_ctas(a.nnz, a.num_k_heads, a.nope_dim)
        per_cta = launch.QUANT_THREADS * launch.QUANT_UNITS
        wait_for_inputs()
        if bidx < end_q_rope:
            self._rows(a, a.q_rope, a.num_q_heads, a.rope_dim, a.q_rope_stride_t, a.q_rope_stride_h, a.scale_q, True,
                       bidx * per_cta + tidx, a.q_rope_out, (a.q_rope_out_stride_t, a.q_rope_out_stride_h))
        elif bidx < end_k_rope:
            self._rows(a, a.k_rope, a.num_k_heads, a.rope_dim, a.k_rope_stride_t, a.k_rope_stride_h, a.scale_kv,
                       True, (bidx - end_q_rope) * per_cta + tidx, *self._k_destination(a, "k_rope"))
        elif bidx < end_q_nope:
            self._rows(a, a.q_nope, a.num_q_heads, a.nope_dim, a.q_nope_stride_t, a.q_nope_stride_h, a.scale_q,
                       False, (bidx - end_k_rope) * per_cta + tidx, a.q_nope_out,
                       (a.q_nope_out_stride_t, a.q_nope_out_stride_h))
        elif bidx < end_k_nope:
            self._rows(a, a.k_nope, a.num_k_heads, a.nope_dim, a.k_nope_stride_t, a.k_nope_stride_h, a.scale_kv,
                       False, (bidx - end_q_nope) * per_cta + tidx, *self._k_destination(a, "k_nope"))
        elif const_expr(self.append):  # (the v set: only the append build's grid has its CTAs)
            self._rows(a, a.v, a.num_v_heads, a.rope_dim + a.nope_dim, a.v_stride_t, a.v_stride_h, a.scale_kv,
                       False, (bidx - end_k_nope) * per_cta + tidx, a.v_cache,
                       (a.v_cache_stride_p, a.v_cache_stride_e, a.v_cache_stride_h))

    def _k_destination(self, a, name: str) -> tuple:
        """(pointer, strides) a k set is stored to: its dense output at (token, head) strides, or
        (append) its place in the paged cache at (page, entry, head) strides."""
        if self.append:
            return getattr(a, f"{name}_cache"), tuple(getattr(a, f"{name}_cache_stride_{d}") for d in "peh")
        return getattr(a, f"{name}_out"), tuple(getattr(a, f"{name}_out_stride_{d}") for d in "th")

    # ------------------------------------------------------------------ #
    # 3. stages of a row set
    # ------------------------------------------------------------------ #
    @cute.jit
    def _rows(self, a, src_ptr: cute.Pointer, heads: Int32, width: Int32, src_t: Int64, src_h: Int64,
              scale: Float32, rope: cutlass.Constexpr, first: Int32, dst_ptr: cute.Pointer, dst_strides: tuple):
        """The thread's units of one row set (``rope``: rotated, else passed through): every
        unit's two 8-element vectors (and its cos / sin) loaded first, then converted and stored
        to ``dst_ptr``: a dense [nnz, heads, width] output at (token, head) ``dst_strides``, or
        a paged cache at (page, entry, head) ones."""
        slots = width // launch.SLOT
        units = a.nnz * heads * slots
        src = cute.make_tensor(src_ptr, cute.make_layout(
            (a.nnz, heads, width), stride=(cute.assume(src_t, divby=VEC), cute.assume(src_h, divby=VEC), 1)))
        paged = len(dst_strides) == 3
        rows = (a.num_pages, a.page_size, heads, width) if paged else (a.nnz, heads, width)
        dst = cute.make_tensor(dst_ptr, cute.make_layout(
            rows, stride=(*(cute.assume(d, divby=launch.SLOT) for d in dst_strides), 1)))
        count = launch.QUANT_UNITS
        regs = cute.make_rmem_tensor(cute.make_layout((VEC, 2, count)), self.dtype)
        cos = cute.make_rmem_tensor(cute.make_layout((VEC, count)), Float32)
        sin = cute.make_rmem_tensor(cute.make_layout((VEC, count)), Float32)
        vec = (VEC,)
        # ---- stage 1: loads --------------------------------------------------
        for i in cutlass.range_constexpr(count):
            unit = first + i * launch.QUANT_THREADS
            if unit < units:
                token, head, chunk_a, chunk_b, slot = self._unit(unit, heads, slots, width, rope)
                row = src[token, head, None]
                cute.autovec_copy(cute.local_tile(row, vec, (chunk_a,)), regs[None, 0, i])
                cute.autovec_copy(cute.local_tile(row, vec, (chunk_b,)), regs[None, 1, i])
                if const_expr(rope):
                    self._cos_sin(a, token, slot, cos[None, i], sin[None, i])
        # ---- stage 2: (page lookup,) rotate, scale, convert, store ----------------
        for i in cutlass.range_constexpr(count):
            unit = first + i * launch.QUANT_THREADS
            if unit < units:
                token, head, chunk_a, chunk_b, slot = self._unit(unit, heads, slots, width, rope)
                values = cute.make_rmem_tensor(cute.make_layout((VEC, 2)), Float32)
                for j in cutlass.range_constexpr(VEC):
                    values[j, 0] = regs[j, 0, i].to(Float32)
                    values[j, 1] = regs[j, 1, i].to(Float32)
                if const_expr(rope):
                    self._rotate(values, cos[None, i], sin[None, i])
                for j in cutlass.range_constexpr(2 * VEC):
                    values[j] = values[j] * scale
                codes = cute.make_rmem_tensor(cute.make_layout((VEC, 2)), self.out_dtype)
                self._convert(values, codes)
                if const_expr(paged):
                    page, entry = page_entry(a.batch_indices, a.positions, a.kv_indptr, a.kv_indices, token,
                                             a.batch, a.num_indices, a.page_size, a.num_pages)
                    if page >= 0:
                        self._store(codes, dst[page, entry, head, None], chunk_a, chunk_b, slot, rope)
                else:
                    self._store(codes, dst[token, head, None], chunk_a, chunk_b, slot, rope)

    @cute.jit
    def _store(self, codes: cute.Tensor, row: cute.Tensor, chunk_a: Int32, chunk_b: Int32, slot: Int32,
               rope: cutlass.Constexpr):
        if const_expr(rope and not self.interleave):  # (NeoX: the two halves R/2 apart)
            cute.autovec_copy(codes[None, 0], cute.local_tile(row, (VEC,), (chunk_a,)))
            cute.autovec_copy(codes[None, 1], cute.local_tile(row, (VEC,), (chunk_b,)))
        else:  # one 16-byte store of the slot's [16s, 16s + 16)
            whole = cute.make_tensor(codes.iterator, cute.make_layout(launch.SLOT))
            cute.autovec_copy(whole, cute.local_tile(row, (launch.SLOT,), (slot,)))

    @cute.jit
    def _unit(self, unit: Int32, heads: Int32, slots: Int32, width: Int32, rope: cutlass.Constexpr):
        """(token, head, the 8-element chunks of the unit's two vectors, slot)."""
        per_token = heads * slots
        token = unit // per_token
        rest = unit - token * per_token
        head = rest // slots
        slot = rest - head * slots
        chunk_a = 2 * slot  # interleaved and nope: [16s, 16s + 16)
        chunk_b = chunk_a + 1
        if const_expr(rope and not self.interleave):  # NeoX: [8s, 8s + 8) pairs with [8s + R/2, ...)
            chunk_a = slot
            chunk_b = slot + width // (2 * VEC)
        return token, head, chunk_a, chunk_b, slot

    @cute.jit
    def _cos_sin(self, a, token: Int32, slot: Int32, cos: cute.Tensor, sin: cute.Tensor):
        """Frequencies 8s .. 8s+7 of the token's cache row: cos at [8s, ...), sin at [R/2 + 8s, ...);
        positions outside the cache are clamped (wrong in, wrong out, never out of bounds)."""
        position = cute.make_tensor(a.pos, cute.make_layout(token + 1))[token]
        row = Int32(cutlass.min(cutlass.max(position, 0), a.cache_rows - 1))
        cache = cute.make_tensor(a.cos_sin_cache, cute.make_layout(
            (a.cache_rows, a.rope_dim), stride=(cute.assume(a.cache_row_stride, divby=VEC), 1)))
        half = a.rope_dim // (2 * VEC)
        cute.autovec_copy(cute.local_tile(cache[row, None], (VEC,), (slot,)), cos)
        cute.autovec_copy(cute.local_tile(cache[row, None], (VEC,), (half + slot,)), sin)

    @cute.jit
    def _rotate(self, values: cute.Tensor, cos: cute.Tensor, sin: cute.Tensor):
        """In fp32 registers: NeoX pairs (values[j, 0], values[j, 1]), or interleaved pairs
        (x[2m], x[2m + 1]) with frequencies 0..3 in the first vector and 4..7 in the second."""
        if const_expr(self.interleave):
            for v in cutlass.range_constexpr(2):
                for m in cutlass.range_constexpr(VEC // 2):
                    x0 = values[2 * m, v]
                    x1 = values[2 * m + 1, v]
                    c = cos[4 * v + m]
                    s = sin[4 * v + m]
                    values[2 * m, v] = x0 * c - x1 * s
                    values[2 * m + 1, v] = x1 * c + x0 * s
        else:
            for j in cutlass.range_constexpr(VEC):
                x0 = values[j, 0]
                x1 = values[j, 1]
                values[j, 0] = x0 * cos[j] - x1 * sin[j]
                values[j, 1] = x1 * cos[j] + x0 * sin[j]

    @cute.jit
    def _convert(self, values: cute.Tensor, codes: cute.Tensor):
        """fp32 -> FP8, saturating: the hardware's satfinite conversion (NaN stays NaN, as in
        FlashInfer's cast); sm_80/86 in arithmetic (``cute/convert.py``: NaN becomes the max)."""
        if const_expr(has_fp8_convert()):
            codes.store(values.load().to(self.out_dtype))
        else:
            store_fp8(values.load(), codes, self.quant_max, True)


class RopeQuantAppendKernel(RopeQuantKernel):
    """The five row sets (q_rope, k_rope, q_nope, k_nope, v), K and V into a paged cache."""

    append = True
    make_contract = staticmethod(launch.append_contract)
