"""The parts of the row-norm kernel (``norm_kernel.RowNormKernel``) that only the shifted builds
whose row pass covers ``n_class`` exactly use (``launch.Geometry.lead_chunk_alone``): a row
that starts ``lead`` elements into its first aligned chunk ends in one chunk more, past the
threads' split, which is one thread's alone (``lead_lane``). A mixin: the methods read the build's
shape from the kernel object."""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Float32, const_expr

from cutefi.cute.activation import silu
from cutefi.cute.args import KernelArgs
from cutefi.cute.convert import store_fp8
from cutefi.norm.shifted import params16_in_row_frame, store_ends


class LeadChunk:
    @cute.jit
    def _lead_params(self, args: KernelArgs, col_e: cutlass.Int32, lead: cutlass.Int32, like: cute.Tensor):
        """The lead chunk's parameters in the row's frame, as fp32 ``(gamma, beta)`` (LayerNorm:
        an element at a time, fp32 or 16-bit, 0 past the row) or ``(w, None)`` (RMSNorm: 16-bit words joined by
        a byte permute, ``shifted.params16_in_row_frame``; 1 added for gemma); ``like``: the
        chunk's row registers (their layout)."""
        if const_expr(self.layer):
            gamma = cute.make_tensor(args.weight, cute.make_layout(self.tile_n + self.vec))
            beta = cute.make_tensor(args.bias, cute.make_layout(self.tile_n + self.vec))
            rWe = cute.make_rmem_tensor(like.layout, Float32)
            rBe = cute.make_rmem_tensor(like.layout, Float32)
            rWe.fill(0.0)
            rBe.fill(0.0)
            for i in cutlass.range_constexpr(self.vec):
                if col_e + i < args.N:
                    if const_expr(self.param_dtype.width == 16):  # (16-bit parameters widened)
                        rWe[(i, 0), 0, 0] = gamma[col_e + i].to(Float32)
                        rBe[(i, 0), 0, 0] = beta[col_e + i].to(Float32)
                    else:
                        rWe[(i, 0), 0, 0] = gamma[col_e + i]
                        rBe[(i, 0), 0, 0] = beta[col_e + i]
            return rWe.load(), rBe.load()
        rWe = cute.make_rmem_tensor(like.layout, self.param_dtype)
        params16_in_row_frame(args.weight, rWe, [col_e], lead, args.N, self.tile_n + self.vec)
        w = self._widen(rWe)
        if const_expr(self.gemma):
            w = w + Float32(1.0)
        return w, None

    @cute.jit
    def _stage_lead_params(self, args: KernelArgs, lane: cutlass.Int32, lead: cutlass.Int32, inv_scale: Float32):
        """Persistent builds (the thread's rows share ``lead``): the lead chunk's parameters
        (``_lead_params``; LayerNorm's prescaled by 1/scale as the registers' are) read once
        into shared memory by each row's ``lead_lane``, the only one that reads them back (no
        barrier): each row then reads them in one or two 128-bit accesses, not an element or a
        word at a time. Returns the (rows_per_cta, 2 or 1, vec) fp32 buffer (gamma and beta, or w)."""
        layout = cute.make_ordered_layout((self.rows_per_cta, 2 if const_expr(self.layer) else 1, self.vec),
                                          order=(2, 1, 0))
        staged = cute.make_tensor(cute.arch.alloc_smem(Float32, cute.cosize(layout), alignment=16), layout)
        if lane == self.lead_lane:
            row_in_cta = cute.arch.thread_idx()[0] // self.threads_per_row
            like = cute.make_rmem_tensor(cute.make_layout(((self.vec, 1), 1, 1)), self.dtype)
            w, b = self._lead_params(args, self.tile_n - lead, lead, like)
            if const_expr(self.prescaled):
                w, b = w * inv_scale, b * inv_scale
            staged_w = cute.make_rmem_tensor(cute.make_layout(self.vec), Float32)
            staged_w.store(w.reshape(staged_w.shape))
            cute.autovec_copy(staged_w, staged[row_in_cta, 0, None])
            if const_expr(self.layer):
                staged_b = cute.make_rmem_tensor(cute.make_layout(self.vec), Float32)
                staged_b.store(b.reshape(staged_b.shape))
                cute.autovec_copy(staged_b, staged[row_in_cta, 1, None])
        return staged

    @cute.jit
    def _lead_chunk_out(self, args: KernelArgs, rXe: cute.Tensor, col_e: cutlass.Int32, lead: cutlass.Int32,
                        factor: Float32, mean: Float32, gOe: cute.Tensor, inv_scale: Float32, staged=None):
        """The lead chunk's output (its thread only): its parameters (``staged`` by
        ``_stage_lead_params``, or read here: ``_lead_params``), stored in pieces
        (``shifted.store_ends``: always a row's partial end). ``factor``: rstd (times 1/scale
        for RMSNorm without SiLU)."""
        if const_expr(staged is not None):
            row_in_cta = cute.arch.thread_idx()[0] // self.threads_per_row
            w = self._staged_row(staged, row_in_cta, 0, rXe)
            b = self._staged_row(staged, row_in_cta, 1, rXe) if const_expr(self.layer) else None
        else:
            w, b = self._lead_params(args, col_e, lead, rXe)
        if const_expr(self.layer):
            y = (self._widen(rXe) - mean) * factor * w + b
            if const_expr(self.quant and not (self.prescaled and staged is not None)):
                y = y * inv_scale
        else:
            y = self._widen(rXe) * factor * w
            if const_expr(self.silu):  # (factor: rstd alone, 1/scale after SiLU)
                y = silu(y)
                if const_expr(self.quant):
                    y = y * inv_scale
        rOe = cute.make_rmem_tensor(rXe.layout, self.out_dtype)
        if const_expr(self.quant):
            store_fp8(y, rOe, self.quant_max, self.fp8_in_software)
        else:
            rOe.store(y.to(self.out_dtype))
        # (in pieces on the persistent builds: the one-row RMSNorm, at its register cap, spilled)
        store_ends(rOe, gOe, 0, col_e, args.N, False, bool(self.prefetch), False)

    @cute.jit
    def _staged_row(self, staged: cute.Tensor, row_in_cta: cutlass.Int32, which: cutlass.Constexpr[int],
                    like: cute.Tensor) -> cute.TensorSSA:
        values = cute.make_rmem_tensor(cute.make_layout(self.vec), Float32)
        cute.autovec_copy(staged[row_in_cta, which, None], values)
        return cute.make_tensor(values.iterator, like.layout).load()
