"""EfficientNet-B0's last-stage MBConv block as torchvision exports it (BatchNorm folded into the
convolutions, as the legacy exporter does): 1x1 expand + SiLU, 5x5 depthwise + SiLU, squeeze-and-
excitation (global average pool, 1x1 reduce + SiLU, 1x1 expand + sigmoid, scale), 1x1 project,
random weights, for offline scheduling checks (`cuda_compile_profile`).

    python3 se_block.py OUT.onnx [C=192] [E=1152] [S=48] [HW=7]
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
C, E, S, HW = (int(a) for a in (sys.argv[2:] + ["192", "1152", "48", "7"][len(sys.argv) - 2:]))
rng = np.random.default_rng(0)
inits = []


def w(name, *shape):
    inits.append(numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32) * 0.1, name))
    return name


def silu(x, tag, nodes):
    nodes += [helper.make_node("Sigmoid", [x], [tag + "_s"]), helper.make_node("Mul", [x, tag + "_s"], [tag])]
    return tag


nodes = [helper.make_node("Conv", ["x", w("ex_w", E, C, 1, 1), w("ex_b", E)], ["e0"], kernel_shape=[1, 1])]
silu("e0", "e1", nodes)
nodes.append(helper.make_node("Conv", ["e1", w("dw_w", E, 1, 5, 5), w("dw_b", E)], ["d0"], kernel_shape=[5, 5], pads=[2, 2, 2, 2], group=E))
silu("d0", "d1", nodes)
nodes += [
    helper.make_node("GlobalAveragePool", ["d1"], ["p0"]),
    helper.make_node("Conv", ["p0", w("se1_w", S, E, 1, 1), w("se1_b", S)], ["q0"], kernel_shape=[1, 1]),
]
silu("q0", "q1", nodes)
nodes += [
    helper.make_node("Conv", ["q1", w("se2_w", E, S, 1, 1), w("se2_b", E)], ["r0"], kernel_shape=[1, 1]),
    helper.make_node("Sigmoid", ["r0"], ["r1"]),
    helper.make_node("Mul", ["r1", "d1"], ["m0"]),
    helper.make_node("Conv", ["m0", w("pr_w", C, E, 1, 1), w("pr_b", C)], ["y"], kernel_shape=[1, 1]),
]
g = helper.make_graph(
    nodes, "se_block",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", C, HW, HW])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", C, HW, HW])], inits)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
onnx.checker.check_model(m)
onnx.save(m, out)
