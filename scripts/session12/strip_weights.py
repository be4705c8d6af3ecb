#!/usr/bin/env python3
"""Writes an ONNX model's structure without its large weights, small enough to copy off the device.

``strip_weights.py IN.onnx OUT.onnx``: every float initializer of more than 1024 elements keeps its
name, dtype and dims and loses its data (``doc_string`` says ``sinter:stripped``); everything else
(small initializers such as Reshape's shapes, Constant nodes) is kept. ``fill_weights.py`` puts
random data back, for offline compile-time profiles of the real graph structure.
"""
import sys

import numpy as np
import onnx
from onnx import numpy_helper

FLOAT = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16, onnx.TensorProto.DOUBLE}


def main() -> None:
    src, dst = sys.argv[1], sys.argv[2]
    m = onnx.load(src, load_external_data=True)
    stripped = 0
    for t in m.graph.initializer:
        if t.data_type in FLOAT and int(np.prod(t.dims)) > 1024:
            dims, dtype, name = list(t.dims), t.data_type, t.name
            t.Clear()
            t.name, t.data_type, t.doc_string = name, dtype, "sinter:stripped"
            t.dims.extend(dims)
            stripped += 1
    onnx.save(m, dst)
    print(f"{dst}: {stripped} initializers stripped")


if __name__ == "__main__":
    main()
