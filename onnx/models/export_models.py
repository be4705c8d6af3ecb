#!/usr/bin/env python3
"""Exports small real PyTorch models to ONNX with onnxruntime reference outputs.

Each model lands in ``<out>/<name>/`` in the ONNX backend-test layout::

    model.onnx
    test_data_set_0/input_K.pb, output_K.pb
    test_data_set_1/...          (another batch / sequence length when a dim is dynamic)

so ``sinter conformance <out>`` runs them, and ``tests/onnx_models.rs`` checks every backend
against them. Reference outputs come from **onnxruntime** (CPUExecutionProvider) on the stored
inputs; the largest |torch - onnxruntime| difference per model is recorded in
``<out>/manifest.json`` with the opset, exporter, sizes and package versions.

Two exporters, the same architectures, weights and inputs:

* ``<name>``: ``torch.onnx.export(..., dynamo=False)``, the TorchScript exporter at opset 17, what
  most models in the wild were exported with (``dynamic_axes`` for the symbolic dims).
* ``dynamo_<name>``: ``torch.onnx.export(..., dynamo=True)``, the ``torch.export``-based exporter
  (the default from torch 2.9; needs ``onnxscript``) at opset 18, with ``dynamic_shapes`` built
  from the same dynamic axes (named ``torch.export.Dim`` objects, so the ONNX dims keep the names
  ``batch``, ``seq``, ...). It emits a different op mix (``Split`` for ``chunk``, ``Expand`` /
  ``Shape`` chains from symbolic sizes, ``InstanceNormalization`` for ``GroupNorm``, no
  ``Constant`` nodes). A dynamo model and its TorchScript twin share the seed, hence the weights
  and the data sets' inputs.
* ``dynamo_transformer_external``: ``dynamo_transformer`` saved with ``external_data=True``: the
  weights in ``model.onnx.data`` beside ``model.onnx`` (how large models are shipped).

Usage::

    python3 onnx/models/export_models.py                   # the committed small models
    python3 onnx/models/export_models.py --out DIR --models mlp,resnet18,mobilenet_v3_small

``resnet18`` and ``mobilenet_v3_small`` need torchvision (random weights, batch 2, 224x224) and
are far too large to commit; ``onnx/models/device_check.sh`` exports them into a temp folder.
Needs: torch, onnx, onnxruntime, numpy (onnxscript for the dynamo models, torchvision for the two
above).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import shutil
import traceback
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch
import torch.nn as nn
import torch.nn.functional as F
from onnx import numpy_helper

OPSET = 17
DYNAMO_OPSET = 18
EXPORTER = "torch.onnx.export TorchScript exporter (dynamo=False)"
DYNAMO_EXPORTER = "torch.onnx.export torch.export-based exporter (dynamo=True)"
LEGACY = ["mlp", "cnn", "transformer", "vit_tiny", "misc", "rnn"]
DYNAMO = [f"dynamo_{n}" for n in LEGACY] + ["dynamo_transformer_external"]
SMALL = LEGACY + DYNAMO
LARGE = ["resnet18", "mobilenet_v3_small"]


# ---------------------------------------------------------------------------------------------
# Models


class Mlp(nn.Module):
    """Linear / GELU / LayerNorm / Linear."""

    def __init__(self, d_in=32, d_hidden=64, d_out=10):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.norm = nn.LayerNorm(d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_out)

    def forward(self, x):
        return self.fc2(self.norm(F.gelu(self.fc1(x))))


class Cnn(nn.Module):
    """Conv (groups, stride, padding, dilation), BatchNorm (eval), ReLU/HardSwish, MaxPool,
    AdaptiveAvgPool (GlobalAveragePool), Flatten, Linear."""

    def __init__(self, classes=10):
        super().__init__()
        self.c1 = nn.Conv2d(3, 16, 3, padding=1, bias=False)
        self.b1 = nn.BatchNorm2d(16)
        self.c2 = nn.Conv2d(16, 32, 3, stride=2, padding=2, dilation=2, groups=4, bias=False)
        self.b2 = nn.BatchNorm2d(32)
        self.pool = nn.MaxPool2d(2)
        self.dw = nn.Conv2d(32, 32, 3, padding=1, groups=32)
        self.b3 = nn.BatchNorm2d(32)
        self.pw = nn.Conv2d(32, 48, 1)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(48, classes)

    def forward(self, x):
        x = F.relu(self.b1(self.c1(x)))
        x = F.hardswish(self.b2(self.c2(x)))
        x = self.pool(x)
        x = F.relu6(self.b3(self.dw(x))) + x
        x = self.gap(F.hardswish(self.pw(x)))
        return self.fc(torch.flatten(x, 1))


class SelfAttention(nn.Module):
    """Multi-head self-attention written out: reshape / transpose / matmul / softmax."""

    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x, causal: bool):
        b, t, d = x.shape
        h = self.heads
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.reshape(b, t, h, d // h).transpose(1, 2)
        k = k.reshape(b, t, h, d // h).transpose(1, 2)
        v = v.reshape(b, t, h, d // h).transpose(1, 2)
        s = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d // h)
        if causal:
            mask = torch.triu(torch.ones(t, t, dtype=torch.bool, device=x.device), diagonal=1)
            s = s.masked_fill(mask, float("-inf"))
        a = torch.softmax(s, dim=-1)
        y = torch.matmul(a, v).transpose(1, 2).reshape(b, t, d)
        return self.proj(y)


class Block(nn.Module):
    """Pre-norm transformer block: LayerNorm, attention, residual, LayerNorm, GELU MLP, residual."""

    def __init__(self, d, heads, mlp=2):
        super().__init__()
        self.n1 = nn.LayerNorm(d)
        self.attn = SelfAttention(d, heads)
        self.n2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, mlp * d)
        self.fc2 = nn.Linear(mlp * d, d)

    def forward(self, x, causal: bool = False):
        x = x + self.attn(self.n1(x), causal)
        return x + self.fc2(F.gelu(self.fc1(self.n2(x))))


class Transformer(nn.Module):
    """A 2-layer causal language model: int64 token ids, nn.Embedding, learned positions sliced
    to the (dynamic) sequence length, causal self-attention blocks, final LayerNorm, head."""

    def __init__(self, vocab=50, d=32, heads=4, layers=2, max_len=64):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(max_len, d) * 0.1)
        self.blocks = nn.ModuleList([Block(d, heads) for _ in range(layers)])
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, ids):
        t = ids.shape[1]
        x = self.tok(ids) + self.pos[:t]
        for blk in self.blocks:
            x = blk(x, causal=True)
        return self.head(self.norm(x))


class VitTiny(nn.Module):
    """Patch-embedding conv, class token, positions, one nn.TransformerEncoderLayer (PyTorch's
    own multi-head attention), mean-pool over tokens, LayerNorm, head."""

    def __init__(self, img=32, patch=8, d=48, heads=4, classes=10):
        super().__init__()
        n = (img // patch) ** 2
        self.patch = nn.Conv2d(3, d, patch, stride=patch)
        self.cls = nn.Parameter(torch.randn(1, 1, d) * 0.1)
        self.pos = nn.Parameter(torch.randn(1, n + 1, d) * 0.1)
        self.enc = nn.TransformerEncoderLayer(
            d, heads, dim_feedforward=2 * d, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
        )
        self.block = Block(d, heads)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        cls = self.cls.expand(x.shape[0], -1, -1)
        x = torch.cat([cls, x], dim=1) + self.pos
        x = self.block(self.enc(x))
        return self.head(self.norm(x.mean(dim=1)))


class Misc(nn.Module):
    """Ops the exporter emits for less common layers: interpolate (nearest, bilinear), einsum,
    cumsum, reflect pad, ConvTranspose, AvgPool, GroupNorm, pixel shuffle, chunk, clamp, softplus,
    erf, pow, sqrt, argmax (an int64 output, compared exactly)."""

    def __init__(self, c=4, d=6):
        super().__init__()
        self.w = nn.Parameter(torch.randn(c, d) * 0.5)
        self.up = nn.ConvTranspose2d(d, d, 4, stride=2, padding=1)
        self.gn = nn.GroupNorm(2, d)
        self.conv = nn.Conv2d(d, 8, 3, padding=1)
        self.avg = nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False)

    def forward(self, x):
        y = torch.einsum("bchw,cd->bdhw", x, self.w)
        y = F.pad(y, (1, 1, 1, 1), mode="reflect")
        y = F.interpolate(y, scale_factor=2.0, mode="bilinear", align_corners=False)
        y = self.gn(self.up(y))
        y = self.avg(F.softplus(y))
        y = F.interpolate(y, scale_factor=0.5, mode="nearest")
        y = self.conv(y)
        y = torch.cumsum(y, dim=3)
        a, b = y.chunk(2, dim=1)
        z = torch.erf(a.clamp(-2.0, 2.0)) * torch.sqrt(b.abs() + 1.0) + torch.pow(b, 2) * 0.1
        z = F.pixel_shuffle(z, 2)
        return z, torch.argmax(z.mean(dim=1), dim=-1)


class Rnn(nn.Module):
    """A bidirectional LSTM then a GRU over a dynamic sequence, then a Linear head."""

    def __init__(self, d_in=8, h=12, classes=5):
        super().__init__()
        self.lstm = nn.LSTM(d_in, h, batch_first=True, bidirectional=True)
        self.gru = nn.GRU(2 * h, h, batch_first=True)
        self.fc = nn.Linear(h, classes)

    def forward(self, x):
        y, _ = self.lstm(x)
        y, _ = self.gru(y)
        return self.fc(y)


def tv_model(name):
    import torchvision

    return getattr(torchvision.models, name)(weights=None)


def randomize_bn(m: nn.Module, g: torch.Generator):
    """Gives every BatchNorm non-trivial running statistics and affine parameters (fresh modules
    have mean 0 / var 1, which would hide a wrong normalization)."""
    for mod in m.modules():
        if isinstance(mod, (nn.BatchNorm1d, nn.BatchNorm2d)):
            n = mod.num_features
            mod.running_mean.copy_(torch.randn(n, generator=g) * 0.2)
            mod.running_var.copy_(torch.rand(n, generator=g) * 1.5 + 0.5)
            mod.weight.data.copy_(torch.rand(n, generator=g) + 0.5)
            mod.bias.data.copy_(torch.randn(n, generator=g) * 0.2)


def calibrate_bn(m: nn.Module, shape, g: torch.Generator):
    """Sets every BatchNorm's running statistics from two random batches (train-mode forward
    passes with a cumulative average), as a trained network has them. Deep torchvision models
    with fresh statistics (mean 0, var 1) give nearly the same output for every input, which
    would make the comparison weak."""
    for mod in m.modules():
        if isinstance(mod, nn.modules.batchnorm._BatchNorm):
            mod.reset_running_stats()
            mod.momentum = None
    m.train()
    with torch.no_grad():
        for _ in range(2):
            m(torch.randn(*shape, generator=g))
    m.eval()


def float_input(g, *shape):
    return torch.randn(*shape, generator=g)


# name -> constructor, input makers per data set (a function of a torch.Generator returning the
# tuple of inputs), input names, output names, dynamic axes, and optionally the input shape of the
# BatchNorm calibration (else BatchNorm statistics are randomized).
SPECS = {
    "mlp": dict(
        make=Mlp,
        sets=[lambda g: (float_input(g, 4, 32),), lambda g: (float_input(g, 7, 32),)],
        inputs=["x"],
        outputs=["y"],
        dynamic={"x": {0: "batch"}, "y": {0: "batch"}},
    ),
    "cnn": dict(
        make=Cnn,
        sets=[lambda g: (float_input(g, 2, 3, 32, 32),), lambda g: (float_input(g, 3, 3, 32, 32),)],
        inputs=["image"],
        outputs=["logits"],
        dynamic={"image": {0: "batch"}, "logits": {0: "batch"}},
    ),
    "transformer": dict(
        make=Transformer,
        sets=[
            lambda g: (torch.randint(0, 50, (2, 8), generator=g),),
            lambda g: (torch.randint(0, 50, (1, 13), generator=g),),
        ],
        inputs=["ids"],
        outputs=["logits"],
        dynamic={"ids": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}},
    ),
    "vit_tiny": dict(
        make=VitTiny,
        sets=[lambda g: (float_input(g, 2, 3, 32, 32),), lambda g: (float_input(g, 1, 3, 32, 32),)],
        inputs=["image"],
        outputs=["logits"],
        dynamic={"image": {0: "batch"}, "logits": {0: "batch"}},
    ),
    "misc": dict(
        make=Misc,
        sets=[lambda g: (float_input(g, 2, 4, 6, 6),), lambda g: (float_input(g, 1, 4, 10, 8),)],
        inputs=["x"],
        outputs=["y", "argmax"],
        dynamic={"x": {0: "batch", 2: "h", 3: "w"}},
    ),
    "rnn": dict(
        make=Rnn,
        sets=[lambda g: (float_input(g, 2, 7, 8),), lambda g: (float_input(g, 3, 4, 8),)],
        inputs=["x"],
        outputs=["y"],
        dynamic={"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}},
    ),
    "resnet18": dict(
        make=lambda: tv_model("resnet18"),
        sets=[lambda g: (float_input(g, 2, 3, 224, 224),)],
        calibrate=(4, 3, 224, 224),
        inputs=["image"],
        outputs=["logits"],
        dynamic={},
    ),
    "mobilenet_v3_small": dict(
        make=lambda: tv_model("mobilenet_v3_small"),
        sets=[lambda g: (float_input(g, 2, 3, 224, 224),)],
        calibrate=(4, 3, 224, 224),
        inputs=["image"],
        outputs=["logits"],
        dynamic={},
    ),
}

# Upper bounds given to torch.export for symbolic dims: the transformer's learned positions are 64
# long, so its sequence is at most 64.
DIM_MAX = {"seq": 64}

# The dynamo twins: the same spec, exported by torch.export (``base`` names the twin, whose seed
# they share); the external-data variant keeps its weights in ``model.onnx.data``.
for _n in LEGACY:
    SPECS[f"dynamo_{_n}"] = dict(SPECS[_n], base=_n, exporter="dynamo")
SPECS["dynamo_transformer_external"] = dict(SPECS["transformer"], base="transformer", exporter="dynamo", external=True)


# ---------------------------------------------------------------------------------------------
# Export


def write_pb(path: Path, a: np.ndarray, name: str):
    path.write_bytes(numpy_helper.from_array(np.ascontiguousarray(a), name).SerializeToString())


def dynamic_shapes(spec: dict):
    """``torch.export`` dynamic shapes from a spec's ``dynamic`` axes: one named ``Dim`` per dim
    name (shared between inputs), a tuple in input order (``None`` for a static input), or
    ``None`` when nothing is dynamic."""
    from torch.export import Dim

    dims: dict = {}
    shapes = []
    for inp in spec["inputs"]:
        axes = spec["dynamic"].get(inp, {})
        for n in axes.values():
            if n not in dims:
                dims[n] = Dim(n, max=DIM_MAX[n]) if n in DIM_MAX else Dim(n)
        shapes.append({a: dims[n] for a, n in axes.items()} or None)
    return tuple(shapes) if dims else None


def export_file(spec: dict, model: nn.Module, example: tuple, path: Path, opset: int):
    """Writes ``path`` (and ``path.data`` for an external-data spec) with the spec's exporter."""
    with torch.no_grad():
        if spec.get("exporter") == "dynamo":
            torch.onnx.export(
                model,
                example,
                str(path),
                input_names=spec["inputs"],
                output_names=spec["outputs"],
                dynamic_shapes=dynamic_shapes(spec),
                opset_version=opset,
                external_data=bool(spec.get("external")),
                dynamo=True,
            )
        else:
            torch.onnx.export(
                model,
                example,
                str(path),
                input_names=spec["inputs"],
                output_names=spec["outputs"],
                dynamic_axes=spec["dynamic"] or None,
                opset_version=opset,
                do_constant_folding=True,
                dynamo=False,
            )


def export_one(name: str, out: Path, seed: int, opset: int) -> dict:
    spec = SPECS[name]
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    model = spec["make"]()
    if "calibrate" in spec:
        calibrate_bn(model, spec["calibrate"], g)
    else:
        with torch.no_grad():
            randomize_bn(model, g)
    model.eval()
    d = out / name
    d.mkdir(parents=True, exist_ok=True)
    for old in d.glob("test_data_set_*"):
        for f in old.iterdir():
            f.unlink()
        old.rmdir()
    sets = [make(torch.Generator().manual_seed(seed * 100 + k)) for k, make in enumerate(spec["sets"])]
    path = d / "model.onnx"
    data = d / "model.onnx.data"
    if data.exists():
        data.unlink()
    export_file(spec, model, sets[0], path, opset)
    if spec.get("external") and not data.is_file():
        raise RuntimeError(f"{name}: the exporter wrote no external data file {data}")
    if not spec.get("external") and data.exists():
        raise RuntimeError(f"{name}: the exporter wrote {data} though external data was not asked for")
    m = onnx.load(str(path))
    onnx.checker.check_model(str(path))
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    ort_in = [i.name for i in sess.get_inputs()]
    diffs, shapes, mismatches = [], [], 0
    for k, ins in enumerate(sets):
        with torch.no_grad():
            t_out = model(*ins)
        t_out = [t_out] if isinstance(t_out, torch.Tensor) else list(t_out)
        feeds = {n: t.numpy() for n, t in zip(ort_in, ins)}
        o_out = sess.run(None, feeds)
        sd = d / f"test_data_set_{k}"
        sd.mkdir()
        for j, (n, t) in enumerate(zip(ort_in, ins)):
            write_pb(sd / f"input_{j}.pb", t.numpy(), n)
        for j, (o, t) in enumerate(zip(o_out, t_out)):
            write_pb(sd / f"output_{j}.pb", o, sess.get_outputs()[j].name)
            t = t.numpy()
            if o.dtype.kind == "f":
                diffs.append(float(np.max(np.abs(o.astype(np.float64) - t.astype(np.float64)))) if o.size else 0.0)
            else:
                mismatches += int(np.sum(o != t))
        shapes.append({"inputs": [list(t.shape) for t in ins], "outputs": [list(o.shape) for o in o_out]})
    params = sum(p.numel() for p in model.parameters()) + sum(b.numel() for b in model.buffers())
    entry = {
        "model": name,
        "opset": opset,
        "exporter": DYNAMO_EXPORTER if spec.get("exporter") == "dynamo" else EXPORTER,
        "seed": seed,
        "parameters": int(params),
        "model_bytes": path.stat().st_size,
        "ops": sorted({n.op_type for n in m.graph.node}),
        "data_sets": shapes,
        "max_abs_torch_vs_ort": max(diffs) if diffs else 0.0,
        "int_mismatches_torch_vs_ort": mismatches,
        "versions": versions(spec),
    }
    if spec.get("external"):
        entry["external_data"] = {"file": data.name, "bytes": data.stat().st_size}
    return entry


def versions(spec: dict) -> dict:
    """The package versions an export used (onnxscript and onnx_ir for the dynamo exporter)."""
    v = {"torch": torch.__version__, "onnx": onnx.__version__, "onnxruntime": ort.__version__, "numpy": np.__version__}
    if spec.get("exporter") == "dynamo":
        import onnx_ir
        import onnxscript

        v["onnxscript"] = onnxscript.__version__
        v["onnx_ir"] = onnx_ir.__version__
    return v


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent, help="output folder")
    ap.add_argument("--models", default=",".join(SMALL), help=f"comma-separated; known: {', '.join(SPECS)}")
    ap.add_argument("--opset", type=int, default=OPSET, help="opset of the TorchScript exports")
    ap.add_argument("--dynamo-opset", type=int, default=DYNAMO_OPSET, help="opset of the dynamo exports (18+)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    names = [n for n in args.models.split(",") if n]
    unknown = [n for n in names if n not in SPECS]
    if unknown:
        ap.error(f"unknown model(s) {unknown}; known: {list(SPECS)}")
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    # nn.TransformerEncoderLayer's fused eval fast path (aten::_transformer_encoder_layer_fwd)
    # has no ONNX export; the exporter needs the composite path.
    torch.backends.mha.set_fastpath_enabled(False)
    args.out.mkdir(parents=True, exist_ok=True)
    entries, failed = [], []
    for n in names:
        # A fixed seed per model (its place in SPECS; a dynamo twin takes its base's), whatever
        # else is exported with it.
        base = SPECS[n].get("base", n)
        opset = args.dynamo_opset if SPECS[n].get("exporter") == "dynamo" else args.opset
        try:
            e = export_one(n, args.out, args.seed + list(SPECS).index(base) + 1, opset)
        except Exception as err:  # one model's exporter failure must not hide the others' results
            print(f"{n:28s} EXPORT FAILED with torch {torch.__version__}: {type(err).__name__}: "
                  f"{str(err).strip().splitlines()[-1] if str(err).strip() else ''}")
            traceback.print_exc()
            failed.append(n)
            shutil.rmtree(args.out / n, ignore_errors=True)
            continue
        size = e["model_bytes"] + e.get("external_data", {}).get("bytes", 0)
        print(f"{n:28s} {size / 1024:8.1f} KiB  max|torch-ort| {e['max_abs_torch_vs_ort']:.3e}  ops {len(e['ops'])}")
        entries.append(e)
    # Entries of models not exported now are kept (each with the versions it was made with), so
    # exporting some models does not drop the others from the manifest.
    path = args.out / "manifest.json"
    kept = []
    if path.is_file():
        old = json.loads(path.read_text())
        old_versions = {k: old[k] for k in ("torch", "onnx", "onnxruntime", "numpy") if k in old}
        for e in old.get("models", []):
            if e.get("model") not in names and (args.out / e.get("model", "") / "model.onnx").is_file():
                e.setdefault("versions", old_versions)
                kept.append(e)
    order = {n: k for k, n in enumerate(SPECS)}
    manifest = {
        "torch": torch.__version__,
        "onnxruntime": ort.__version__,
        "onnx": onnx.__version__,
        "numpy": np.__version__,
        "python": sys.version.split()[0],
        "reference": "onnxruntime CPUExecutionProvider",
        "note": "top-level versions: the latest export; each model's own under versions",
        "models": sorted(kept + entries, key=lambda e: order.get(e["model"], len(order))),
    }
    path.write_text(json.dumps(manifest, indent=2) + "\n")
    if failed:
        print(f"export failed for {len(failed)} of {len(names)} models: {', '.join(failed)}")
        sys.exit(3)


if __name__ == "__main__":
    main()
