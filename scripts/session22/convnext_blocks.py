"""A small ConvNeXt as torchvision's exports it (legacy exporter, opset 17): the stem (4x4 stride-4
convolution, `LayerNorm2d`), CNBlocks (depthwise 7x7 convolution, permute to channels-last,
LayerNorm, Linear, GELU (erf), Linear, permute back, layer scale, residual) and the head (global
average pool, `LayerNorm2d`, Linear). `python3 convnext_blocks.py OUT.onnx [dim] [hw] [blocks]`
(batch symbolic; the input is 3 x 4hw x 4hw).
For looking at what sinter compiles the block into without torch (`examples/cuda_compile_profile`)."""
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
dim = int(sys.argv[2]) if len(sys.argv) > 2 else 96
hw = int(sys.argv[3]) if len(sys.argv) > 3 else 56
blocks = int(sys.argv[4]) if len(sys.argv) > 4 else 2
rng = np.random.default_rng(0)
nodes, inits = [], []

def init(name, arr):
    inits.append(numpy_helper.from_array(arr.astype(np.float32), name))
    return name

def ln2d(x, p, c):
    t = p + "t_in"; nodes.append(helper.make_node("Transpose", [x], [t], perm=[0, 2, 3, 1]))
    g = init(p + "g", 1 + rng.standard_normal(c) * 0.1); be = init(p + "b", rng.standard_normal(c) * 0.1)
    l = p + "ln"; nodes.append(helper.make_node("LayerNormalization", [t, g, be], [l], axis=-1, epsilon=1e-6))
    o = p + "t_out"; nodes.append(helper.make_node("Transpose", [l], [o], perm=[0, 3, 1, 2]))
    return o

sw = init("stem_w", rng.standard_normal((dim, 3, 4, 4)) * 0.2); sb = init("stem_b", rng.standard_normal(dim) * 0.1)
nodes.append(helper.make_node("Conv", ["img", sw, sb], ["stem"], kernel_shape=[4, 4], strides=[4, 4]))
x = ln2d("stem", "stem_ln_", dim)
for b in range(blocks):
    p = f"b{b}_"
    def n(op, ins, outs, **kw):
        nodes.append(helper.make_node(op, ins, [p + o for o in outs], **kw))
        return p + outs[0]
    w = init(p + "dw_w", rng.standard_normal((dim, 1, 7, 7)) * 0.1)
    bb = init(p + "dw_b", rng.standard_normal(dim) * 0.1)
    h = n("Conv", [x, w, bb], ["dw"], group=dim, kernel_shape=[7, 7], pads=[3, 3, 3, 3])
    h = n("Transpose", [h], ["t1"], perm=[0, 2, 3, 1])
    g = init(p + "ln_g", 1 + rng.standard_normal(dim) * 0.1)
    be = init(p + "ln_b", rng.standard_normal(dim) * 0.1)
    h = n("LayerNormalization", [h, g, be], ["ln"], axis=-1, epsilon=1e-6)
    w1 = init(p + "w1", rng.standard_normal((dim, 4 * dim)) / np.sqrt(dim))
    b1 = init(p + "b1", rng.standard_normal(4 * dim) * 0.1)
    h = n("MatMul", [h, w1], ["mm1"]); h = n("Add", [h, b1], ["a1"])
    s2 = init(p + "sqrt2", np.array(1.4142135381698608)); one = init(p + "one", np.array(1.0)); half = init(p + "half", np.array(0.5))
    d = n("Div", [h, s2], ["g_div"]); e = n("Erf", [d], ["g_erf"]); a = n("Add", [e, one], ["g_add"])
    m = n("Mul", [h, a], ["g_mul"]); h = n("Mul", [m, half], ["gelu"])
    w2 = init(p + "w2", rng.standard_normal((4 * dim, dim)) / np.sqrt(4 * dim))
    b2 = init(p + "b2", rng.standard_normal(dim) * 0.1)
    h = n("MatMul", [h, w2], ["mm2"]); h = n("Add", [h, b2], ["a2"])
    h = n("Transpose", [h], ["t2"], perm=[0, 3, 1, 2])
    ls = init(p + "ls", np.full((dim, 1, 1), 1e-6) + rng.standard_normal((dim, 1, 1)) * 0.1)
    h = n("Mul", [ls, h], ["scale"])
    x = n("Add", [h, x], ["res"])

nodes.append(helper.make_node("ReduceMean", [x], ["pool"], axes=[2, 3], keepdims=1))
h = ln2d("pool", "head_ln_", dim)
nodes.append(helper.make_node("Flatten", [h], ["flat"], axis=1))
fw = init("fc_w", rng.standard_normal((10, dim)) * 0.1); fb = init("fc_b", rng.standard_normal(10) * 0.1)
nodes.append(helper.make_node("Gemm", ["flat", fw, fb], ["logits"], transB=1))
graph = helper.make_graph(
    nodes, "convnext_small",
    [helper.make_tensor_value_info("img", TensorProto.FLOAT, ["batch", 3, 4 * hw, 4 * hw])],
    [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
onnx.checker.check_model(model)
onnx.save(model, out)
print("wrote", out)
