"""ConvNeXt-Tiny's stem and first block as torchvision exports them (Conv 4x4/4 -> LayerNorm2d
-> depthwise 7x7 -> permute -> LayerNorm -> Linear -> GELU -> Linear -> permute -> layer scale ->
residual), random weights, for offline scheduling checks (`cuda_compile_profile`).

    python3 convnext_block.py OUT.onnx [C=96]
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
C = int(sys.argv[2]) if len(sys.argv) > 2 else 96
rng = np.random.default_rng(0)
inits = []


def w(name, *shape):
    inits.append(numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32) * 0.1, name))
    return name


def ln(x, tag, nodes):
    nodes.append(helper.make_node("LayerNormalization", [x, w(tag + "_g", C), w(tag + "_b", C)], [tag], axis=-1, epsilon=1e-6))
    return tag


nodes = [
    helper.make_node("Conv", ["x", w("stem_w", C, 3, 4, 4), w("stem_b", C)], ["s0"], kernel_shape=[4, 4], strides=[4, 4]),
    helper.make_node("Transpose", ["s0"], ["s1"], perm=[0, 2, 3, 1]),
]
ln("s1", "s2", nodes)
nodes.append(helper.make_node("Transpose", ["s2"], ["s3"], perm=[0, 3, 1, 2]))
nodes += [
    helper.make_node("Conv", ["s3", w("dw_w", C, 1, 7, 7), w("dw_b", C)], ["d0"], kernel_shape=[7, 7], pads=[3, 3, 3, 3], group=C),
    helper.make_node("Transpose", ["d0"], ["d1"], perm=[0, 2, 3, 1]),
]
ln("d1", "d2", nodes)
nodes += [
    helper.make_node("MatMul", ["d2", w("fc1_w", C, 4 * C)], ["f0"]),
    helper.make_node("Add", ["f0", w("fc1_b", 4 * C)], ["f1"]),
    helper.make_node("Div", ["f1", "sqrt2"], ["g0"]),
    helper.make_node("Erf", ["g0"], ["g1"]),
    helper.make_node("Add", ["g1", "one"], ["g2"]),
    helper.make_node("Mul", ["f1", "g2"], ["g3"]),
    helper.make_node("Mul", ["g3", "half"], ["g4"]),
    helper.make_node("MatMul", ["g4", w("fc2_w", 4 * C, C)], ["h0"]),
    helper.make_node("Add", ["h0", w("fc2_b", C)], ["h1"]),
    helper.make_node("Transpose", ["h1"], ["h2"], perm=[0, 3, 1, 2]),
    helper.make_node("Mul", ["h2", w("scale", C, 1, 1)], ["h3"]),
    helper.make_node("Add", ["h3", "s3"], ["y"]),
]
for name, v in [("sqrt2", 1.4142135), ("one", 1.0), ("half", 0.5)]:
    inits.append(numpy_helper.from_array(np.array(v, np.float32), name))
g = helper.make_graph(
    nodes, "convnext_block",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 224, 224])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", C, 56, 56])], inits)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
onnx.checker.check_model(m)
onnx.save(m, out)
