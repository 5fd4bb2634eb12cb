import cProfile, pstats, sys, io
sys.argv = ["x"]
exec(open("scratch/host_time_attn.py").read().split("for fn in calls.values():")[0])
import torch
for fn in calls.values():
    for _ in range(50):
        fn()
torch.cuda.synchronize()
for name in ("ragged.run(out=)", "paged.run(out=)", "append_paged_kv_cache"):
    fn = calls[name]
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(2000):
        fn()
    pr.disable()
    torch.cuda.synchronize()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(18)
    print("=====", name)
    print("\n".join(l[:150] for l in s.getvalue().splitlines()[:40]))
