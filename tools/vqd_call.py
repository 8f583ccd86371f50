"""Run one fa3api row's call a few times (ncu's target): python tools/vqd_call.py [ROW] [CALLS] [NUM_SPLITS]."""
import sys

import torch

from kernelseek import fa3api_grid as F

name = sys.argv[1] if len(sys.argv) > 1 else "varlen_q_dense"
row = next(r for r in F.load_rows() if r["name"] == name)
if len(sys.argv) > 3 and int(sys.argv[3]):
    row = dict(row, num_splits=int(sys.argv[3]))
call = F.make_call(row)
fn = call.bound(caches=call.caches() if row["fn"] == "kvcache" else None)
for _ in range(int(sys.argv[2]) if len(sys.argv) > 2 else 4):
    fn()
torch.cuda.synchronize()
print(name, "ok")
