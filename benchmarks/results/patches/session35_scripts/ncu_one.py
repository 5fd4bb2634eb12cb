import sys, torch, cutefi
m, n, k = (int(v) for v in sys.argv[1:4])
w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
for _ in range(3):
    cutefi.mm_bf16(a, w.t()); torch.matmul(a, w.t())
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
cutefi.mm_bf16(a, w.t()); torch.matmul(a, w.t())
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
