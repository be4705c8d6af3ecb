#!/usr/bin/env python3
"""Puts random data into the initializers ``strip_weights.py`` emptied.

``fill_weights.py IN.onnx OUT.onnx``: each ``sinter:stripped`` initializer gets uniform values in
[0.01, 0.05) (positive, so batch-norm variances stay valid), f32 whatever its dtype was.
"""
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def main() -> None:
    src, dst = sys.argv[1], sys.argv[2]
    m = onnx.load(src)
    rng = np.random.default_rng(0)
    for i, t in enumerate(m.graph.initializer):
        if t.doc_string == "sinter:stripped":
            a = rng.uniform(0.01, 0.05, size=tuple(t.dims)).astype(np.float32)
            new = numpy_helper.from_array(a, t.name)
            m.graph.initializer[i].CopyFrom(new)
    onnx.save(m, dst, save_as_external_data=m.ByteSize() > 1.5e9)
    print(dst)


if __name__ == "__main__":
    main()
