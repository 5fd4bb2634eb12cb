import torch, torch.nn.functional as F, cutefi
torch.manual_seed(0)
for dtype in (torch.bfloat16, torch.float16):
  for fp8 in (torch.float8_e5m2, torch.float8_e4m3fn):
    rows, hidden = 701, 16384
    x = (torch.randn(rows, hidden, device="cuda") + 1000.0).to(dtype)
    gamma, beta = torch.randn(hidden, device="cuda"), torch.randn(hidden, device="cuda")
    out = torch.empty(x.shape, device="cuda", dtype=fp8); out.view(torch.uint8).fill_(0x7F)
    cutefi.layernorm_quant(out, x, gamma, beta, 0.25)
    y = F.layer_norm(x.float(), (hidden,), gamma, beta, 1e-6)
    x64 = x.double(); m = x64.mean(-1, keepdim=True); v = ((x64 - m) ** 2).mean(-1, keepdim=True)
    y64 = (x64 - m) / torch.sqrt(v + 1e-6) * gamma.double() + beta.double()
    want = (y * 4).clamp(-57344, 57344).to(fp8).float(); got = out.float()
    d = (got - want).abs()
    print(dtype, fp8, "differ share", (d > 0).float().mean().item(), "max |y - y64|", (y.double() - y64).abs().max().item())
    idx = torch.nonzero(d > 0)[:5]
    for r, c in idx.tolist():
        print("  r", r, "c", c, "got", got[r, c].item(), "want", want[r, c].item(), "y*4", (y[r, c] * 4).item(), "y64*4", (y64[r, c] * 4).item())
