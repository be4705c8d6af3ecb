#!/usr/bin/env bash
# Session 7, device call 6: is ResNet-50's TF32 error (2.4e-2 in d5.sh) TF32's own? torch itself
# on the GPU with TF32 convolutions (its default) and without, against its f32 CPU output, for the
# zoo's models (same builder, same inputs, same metric as zoo_check.py).
set -uo pipefail
cd onnx/models
timeout 300 python3 - <<'PY'
import sys, numpy as np, torch
sys.argv = ["x"]
import zoo_check as z
for name in ["resnet50", "resnet18", "vit_b_16", "efficientnet_b0"]:
    m, (x,), _, _ = z.build(name, False, 0)
    with torch.no_grad():
        ref = m(x).numpy()
        g = m.cuda()
        out = {}
        for tf32 in [True, False]:
            torch.backends.cudnn.allow_tf32 = tf32
            torch.backends.cuda.matmul.allow_tf32 = False
            out[tf32] = g(x.cuda()).float().cpu().numpy()
    print(f"{name:16} torch cuda tf32 convs: {z.rel_error(out[True], ref):.2e}   exact: {z.rel_error(out[False], ref):.2e}", flush=True)
PY
