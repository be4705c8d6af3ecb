#!/usr/bin/env python3
"""Compares `sinter run` outputs with the onnxruntime references of a models folder.

    python3 compare_outputs.py MODELS_DIR [--json report.json] [--tol 1e-4]

MODELS_DIR is what export_models.py wrote (``<model>/model.onnx``,
``<model>/test_data_set_N/{input,output}_K.pb``); next to each data set's references,
device_check.sh put ``sinter_<backend>.npz`` (the outputs, by graph output name) or
``sinter_<backend>.err`` (what went wrong). One line per model, data set and backend is printed
with the relative error and PASS/FAIL.

Metric (the same as tests/onnx_models.rs): for a float output ``a`` against the reference ``b``,
``max|a - b| / max(max|b|, 1e-30)`` over the tensor, at most ``--tol`` (1e-4) to pass; a NaN
where the reference has none is an infinite error. Integer and bool outputs must match exactly,
shapes and dtypes too. Exits non-zero when anything failed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper


def rel_error(a: np.ndarray, b: np.ndarray) -> tuple[float, str | None]:
    if a.shape != b.shape:
        return float("inf"), f"shape {a.shape}, expected {b.shape}"
    if a.dtype != b.dtype:
        return float("inf"), f"dtype {a.dtype}, expected {b.dtype}"
    if b.dtype.kind not in "fc":
        return (0.0, None) if np.array_equal(a, b) else (float("inf"), f"{int(np.sum(a != b))} elements differ")
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    if np.any(np.isnan(a64) != np.isnan(b64)):
        return float("inf"), "NaN where the reference has none (or the reverse)"
    ok = ~np.isnan(b64)
    if a.size == 0 or not ok.any():
        return 0.0, None
    fin = ok & np.isfinite(b64)
    if np.any(a64[ok & ~fin] != b64[ok & ~fin]):
        return float("inf"), "infinities differ"
    diff = float(np.max(np.abs(a64[fin] - b64[fin]))) if fin.any() else 0.0
    scale = float(np.max(np.abs(b64[fin]))) if fin.any() else 0.0
    return diff / max(scale, 1e-30), None


def load_pb(p: Path) -> np.ndarray:
    t = onnx.TensorProto()
    t.ParseFromString(p.read_bytes())
    return numpy_helper.to_array(t)


def compare_set(model_dir: Path, set_dir: Path, backend: str, out_names: list[str]) -> dict:
    refs = sorted(set_dir.glob("output_*.pb"), key=lambda p: int(p.stem.split("_")[1]))
    res = {"model": model_dir.name, "data_set": set_dir.name, "backend": backend}
    npz, err = set_dir / f"sinter_{backend}.npz", set_dir / f"sinter_{backend}.err"
    if not npz.exists():
        msg = err.read_text().strip().splitlines()[-5:] if err.exists() else ["no output written"]
        return {**res, "status": "FAIL", "rel_error": None, "detail": " | ".join(msg)}
    got = np.load(npz)
    files = list(got.files)
    worst, detail = 0.0, None
    if len(files) != len(refs):
        return {**res, "status": "FAIL", "rel_error": None, "detail": f"{len(files)} outputs, expected {len(refs)}"}
    for k, rp in enumerate(refs):
        name = out_names[k] if k < len(out_names) and out_names[k] in files else files[k]
        e, m = rel_error(got[name], load_pb(rp))
        if m and detail is None:
            detail = f"output {k} ({name}): {m}"
        worst = max(worst, e)
    return {**res, "rel_error": worst, "detail": detail}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", type=Path)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--backends", default="wgsl,cpu")
    args = ap.parse_args(argv)
    rows = []
    for md in sorted(p for p in args.dir.iterdir() if (p / "model.onnx").is_file()):
        out_names = [o.name for o in onnx.load(str(md / "model.onnx"), load_external_data=False).graph.output]
        for sd in sorted(md.glob("test_data_set_*")):
            for b in [x for x in args.backends.split(",") if x]:
                r = compare_set(md, sd, b, out_names)
                if "status" not in r:
                    r["status"] = "PASS" if r["rel_error"] <= args.tol else "FAIL"
                rows.append(r)
                e = "-" if r["rel_error"] is None else f"{r['rel_error']:.3e}"
                extra = f"  {r['detail']}" if r.get("detail") else ""
                print(f"{r['model']:28s} {r['data_set']:16s} {b:6s} rel error {e:>10s}  {r['status']}{extra}", flush=True)
    failed = sum(r["status"] != "PASS" for r in rows)
    print(f"{len(rows) - failed} passed, {failed} failed")
    if args.json:
        args.json.write_text(json.dumps({"tolerance": args.tol, "metric": "max|a-b| / max(max|b|, 1e-30)", "results": rows}, indent=2) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
