"""torch's cuDNN on ResNet-18 layers at batch 32, TF32, NCHW against channels-last, and whether
Inductor's layout optimization turns ResNet-18 channels-last (session 10, device call 2)."""
import torch
import torch.nn.functional as F
import torchvision

torch.backends.cudnn.allow_tf32 = True
torch.backends.cuda.matmul.allow_tf32 = False


def bench(fn, iters=50):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(iters):
        fn()
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e) / iters


layers = [(3, 64, 224, 7, 2, 3), (64, 64, 56, 3, 1, 1), (128, 128, 28, 3, 1, 1), (256, 256, 14, 3, 1, 1),
          (512, 512, 7, 3, 1, 1), (64, 128, 56, 3, 2, 1)]
for c, k, hw, ks, st, pd in layers:
    x = torch.randn(32, c, hw, hw, device="cuda")
    w = torch.randn(k, c, ks, ks, device="cuda")
    t_nchw = bench(lambda: F.conv2d(x, w, stride=st, padding=pd))
    xc, wc = x.to(memory_format=torch.channels_last), w.to(memory_format=torch.channels_last)
    t_nhwc = bench(lambda: F.conv2d(xc, wc, stride=st, padding=pd))
    oh = (hw + 2 * pd - ks) // st + 1
    fl = 2 * 32 * k * oh * oh * c * ks * ks
    print(f"conv {c}->{k} {hw}x{hw} k{ks} s{st}: NCHW {t_nchw*1e3:7.1f} us ({fl/t_nchw/1e9:5.0f} TFLOP/s)  "
          f"NHWC {t_nhwc*1e3:7.1f} us ({fl/t_nhwc/1e9:5.0f} TFLOP/s)")

import torch._inductor.config as cfg
print("inductor layout_optimization:", cfg.layout_optimization)
m = torchvision.models.resnet18().cuda().eval()
x = torch.randn(32, 3, 224, 224, device="cuda")
from torch._inductor import graph as g
orig = g.GraphLowering.decide_layout_opt
seen = []
def spy(gm, *a, **k):
    r = orig(gm, *a, **k)
    seen.append(r)
    return r
g.GraphLowering.decide_layout_opt = staticmethod(spy)
with torch.no_grad():
    cm = torch.compile(m)
    cm(x)
    print("inductor decide_layout_opt:", seen)
    print("eager NCHW ms", bench(lambda: m(x), 20))
    import copy
    mc = copy.deepcopy(m).to(memory_format=torch.channels_last)
    xc = x.to(memory_format=torch.channels_last)
    print("eager channels_last ms", bench(lambda: mc(xc), 20))
    print("compiled ms", bench(lambda: cm(x), 20))
