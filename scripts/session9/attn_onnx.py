"""Writes the f32 attention models of d7.sh: softmax(q k^T / 8) v at BERT-base's and ViT-B/16's
shapes (8 x 12 heads x 128 or 197 tokens, head dim 64). Usage: attn_onnx.py OUT_DIR"""
import sys
from pathlib import Path

import onnx
from onnx import TensorProto, helper

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
for name, s in [("attn_bert", 128), ("attn_vit", 197)]:
    shp = [8, 12, s, 64]
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, shp) for n in ("q", "k", "v", "o")]
    nodes = [
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
        helper.make_node("MatMul", ["q", "kt"], ["s0"]),
        helper.make_node("Mul", ["s0", "sc"], ["s"]),
        helper.make_node("Softmax", ["s"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "v"], ["o"]),
    ]
    sc = helper.make_tensor("sc", TensorProto.FLOAT, [], [0.125])
    g = helper.make_graph(nodes, name, io[:3], io[3:], initializer=[sc])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(m)
    onnx.save(m, str(out / f"{name}.onnx"))
