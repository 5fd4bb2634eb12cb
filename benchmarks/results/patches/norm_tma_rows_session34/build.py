import sys
from cuda.bindings import nvrtc
src = open(sys.argv[1]).read()
defs = "#define STAGES_BF16 %s\n#define STAGES_FP8 %s\n" % (sys.argv[3], sys.argv[4])
src = defs + src
prog = nvrtc.nvrtcCreateProgram(src.encode(), b"t.cu", 0, [], [])[1]
import os
opts = [b"--gpu-architecture=sm_90a", b"-std=c++17", b"--use_fast_math", b"-default-device", b"-lineinfo", b"--ptxas-options=-v"]
# include path for cuda headers
import glob
for inc in glob.glob(os.path.join(os.path.dirname(nvrtc.__file__), "..", "..", "nvidia", "*", "include")) + glob.glob("/work/main/.venv/lib/python3.11/site-packages/nvidia/*/include") + ["/usr/local/cuda-13.0/include"]:
    opts.append(b"-I" + inc.encode())
err, = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
size = nvrtc.nvrtcGetProgramLogSize(prog)[1]; log = b" " * size; nvrtc.nvrtcGetProgramLog(prog, log); print(log.decode())
assert err == nvrtc.nvrtcResult.NVRTC_SUCCESS, err
size = nvrtc.nvrtcGetCUBINSize(prog)[1]; buf = b" " * size; nvrtc.nvrtcGetCUBIN(prog, buf)
open(sys.argv[2], "wb").write(buf); print("ok", len(buf))
