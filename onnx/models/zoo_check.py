#!/usr/bin/env python3
"""Public model families exported both ways, through the sinter binary, against torch, timed
beside torch eager and torch.compile in the same call.

    python3 onnx/models/zoo_check.py --bin .bench/sinter [--backend cuda] [--json out.json]
    python3 onnx/models/zoo_check.py --bin target/debug/sinter --backend cpu --tiny   # a CPU smoke run

For every model (random weights; nothing is downloaded):

* torchvision classification models ``resnet18``, ``resnet50``, ``mobilenet_v3_small``,
  ``efficientnet_b0``, ``vit_b_16`` (``weights=None``, BatchNorm statistics set from two random
  batches so the outputs depend on the input), batch 2, 3x224x224;
* transformers' ``BertModel``, ``GPT2LMHeadModel`` and ``ViTModel`` built from configs only
  (``bert``, ``gpt2``, ``vit_hf``; 4 layers, hidden 384, 6 heads; batch 2, sequence 128 or
  224x224 images; BERT and GPT-2 take ``input_ids`` and an ``attention_mask`` that pads the
  second sequence), attention as transformers builds it by default,

the script

1. computes torch's output on the CPU in float32 (the reference);
2. exports the model with ``torch.onnx.export(..., dynamo=False)`` (TorchScript, opset 17,
   ``dynamic_axes``) and with ``dynamo=True`` (``torch.export``, opset 18, ``dynamic_shapes``,
   weights in ``model.onnx.data`` as that exporter saves by default); the transformers models have
   symbolic batch and sequence dims, the torchvision ones a symbolic batch (when a dynamic export
   fails, a static one is tried and the ``dims`` column says so);
3. runs each file with ``sinter run MODEL --input ... --backend B --out out.npz`` twice: with
   ``--tf32 off`` (exact f32) compared with the reference: ``max|a - b| / max|b|`` (the metric of
   tests/onnx_models.rs), PASS at most ``--tol``; then with sinter's defaults (TF32 convolutions,
   as PyTorch's ``cudnn.allow_tf32``), whose time is the one reported (``sinter ms``: the median
   time of one run that ``sinter run`` reports, device time where the backend measures it;
   ``sinter compile s``: the first run's compile; with ``SINTER_LOG=compile`` in the environment
   its breakdown is listed after the table) and whose error is ``tf32 err`` (not checked:
   TF32's 10-bit mantissa gives 1e-4 to 3e-3 on these models);
4. times torch eager and ``torch.compile`` (mode default) on the same inputs, on CUDA when there
   is a GPU (else the CPU): median of ``--iters`` runs after warm-up, synchronized; ``compile s``
   is the first compiled call.

One summary table goes to stdout (and ``--json``). A missing package (torchvision,
transformers, onnxscript for the dynamo exporter) gives a ``skipped: X not installed`` line, not a
failure. A model that an exporter cannot write is listed as ``NOEXPORT`` with the exporter's error
(e.g. the TorchScript exporter has no ``aten::diff``, which transformers 5 uses to build GPT-2's
causal mask when no attention mask is given; GPT-2 is exported with one, so it does not). Exits
non-zero when sinter failed to import, run or match a model that was exported (skips and
``NOEXPORT`` rows do not count).
``--budget-s`` stops starting new models after that many seconds (the rest are listed as skipped).
``--batch N`` sets every model's batch (issue 13's targets use 8), ``--base`` builds the
transformers at base size (12 layers, hidden 768, 12 heads: BERT-base, GPT-2 small, ViT-Base),
``--bf16`` also runs sinter with ``--precision bf16`` (autocast: its error against the f32
reference is listed, not checked) and times torch.compile under ``torch.autocast(bfloat16)``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import json
import re
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

try:
    import numpy as np
except ImportError:  # reported by main() as a skip
    np = None

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

TORCHVISION = ["resnet18", "resnet50", "mobilenet_v3_small", "efficientnet_b0", "convnext_tiny", "vit_b_16"]
TRANSFORMERS = ["bert", "gpt2", "vit_hf"]
ALL = TORCHVISION + TRANSFORMERS
EXPORTERS = ["legacy", "dynamo"]


def have(module: str) -> bool:
    """Whether ``module`` can be imported (without importing it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def short(e: BaseException | str, n: int = 160) -> str:
    """One line of at most ``n`` characters describing an error."""
    s = str(e).strip().replace("\n", " | ") if not isinstance(e, str) else e.strip().replace("\n", " | ")
    if isinstance(e, BaseException):
        s = f"{type(e).__name__}: {s}"
    return s if len(s) <= n else s[: n - 3] + "..."


# ---------------------------------------------------------------------------------------------
# Models: each builder returns (module, example inputs, input names, dynamic axes by input name).


def build(name: str, tiny: bool, seed: int, batch: int = 2, base: bool = False):
    import torch
    import torch.nn as nn

    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    if name in TORCHVISION:
        import torchvision
        from export_models import calibrate_bn

        size = 64 if tiny else 224
        if name == "vit_b_16" and tiny:
            # vit_b_16 fixes its image size at 224; the tiny run uses the same class, smaller.
            from torchvision.models.vision_transformer import VisionTransformer

            m = VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64)
            size = 32
        else:
            m = getattr(torchvision.models, name)(weights=None)
        with torch.no_grad():
            # torchvision's ViT zero-initializes its classification head: the output would be
            # the bias alone, equal for every input. Such layers get random weights.
            for mod in m.modules():
                if isinstance(mod, nn.Linear) and not mod.weight.any():
                    mod.weight.copy_(torch.randn(mod.weight.shape, generator=g) * 0.02)
                    if mod.bias is not None:
                        mod.bias.copy_(torch.randn(mod.bias.shape, generator=g) * 0.02)
        calibrate_bn(m, (4, 3, size, size), g)
        x = torch.randn(batch, 3, size, size, generator=g)
        return m.eval(), (x,), ["image"], {"image": {0: "batch"}}

    import transformers as tf

    small = dict(hidden=32, layers=2, heads=2, inter=64, seq=16, vocab=100) if tiny else dict(
        hidden=384, layers=4, heads=6, inter=1536, seq=128, vocab=30522
    )
    if base and not tiny:
        # BERT-base, GPT-2 small, ViT-Base: the sizes of issue 13's performance targets.
        small = dict(hidden=768, layers=12, heads=12, inter=3072, seq=128, vocab=30522)
    seq = small["seq"]

    class Text(nn.Module):
        """A transformers model called with ids and a mask, returning its first output."""

        def __init__(self, inner, **extra):
            super().__init__()
            self.m, self.extra = inner, extra

        def forward(self, input_ids, attention_mask):
            return self.m(input_ids=input_ids, attention_mask=attention_mask, return_dict=False, **self.extra)[0]

    def text(model):
        ids = torch.randint(0, small["vocab"], (batch, seq), generator=g)
        mask = torch.ones(batch, seq, dtype=torch.int64)
        mask[batch - 1, seq * 3 // 4 :] = 0  # the last sequence right-padded: the mask matters
        dyn = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
        return model.eval(), (ids, mask), ["input_ids", "attention_mask"], dyn

    if name == "bert":
        cfg = tf.BertConfig(
            vocab_size=small["vocab"],
            hidden_size=small["hidden"],
            num_hidden_layers=small["layers"],
            num_attention_heads=small["heads"],
            intermediate_size=small["inter"],
            max_position_embeddings=512,
        )
        return text(Text(tf.BertModel(cfg)))
    if name == "gpt2":
        cfg = tf.GPT2Config(
            vocab_size=small["vocab"],
            n_embd=small["hidden"],
            n_layer=small["layers"],
            n_head=small["heads"],
            n_positions=1024,
            bos_token_id=small["vocab"] - 1,
            eos_token_id=small["vocab"] - 1,
            use_cache=False,
        )
        # With an attention mask, as generation pipelines export it. (Without one, transformers 5
        # builds the causal mask through aten::diff, which the TorchScript exporter lacks.)
        return text(Text(tf.GPT2LMHeadModel(cfg), use_cache=False))
    if name == "vit_hf":
        img, patch = (32, 8) if tiny else (224, 16)
        cfg = tf.ViTConfig(
            image_size=img,
            patch_size=patch,
            hidden_size=small["hidden"],
            num_hidden_layers=small["layers"],
            num_attention_heads=small["heads"],
            intermediate_size=small["inter"],
        )
        inner = tf.ViTModel(cfg, add_pooling_layer=False)

        class Vit(nn.Module):
            def __init__(self):
                super().__init__()
                self.m = inner

            def forward(self, pixel_values):
                return self.m(pixel_values=pixel_values, return_dict=False)[0]

        x = torch.randn(batch, 3, img, img, generator=g)
        return Vit().eval(), (x,), ["pixel_values"], {"pixel_values": {0: "batch"}}
    raise ValueError(f"unknown model {name}")


def needs(name: str) -> str:
    """The package a model family needs."""
    return "torchvision" if name in TORCHVISION else "transformers"


# ---------------------------------------------------------------------------------------------
# Export


@contextlib.contextmanager
def to_log(log: Path):
    """Sends file descriptors 1 and 2 (Python's and the C++ side's prints: the exporters' progress
    lines, the TorchScript exporter's graph dump on failure) to ``log`` for the duration."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = (os.dup(1), os.dup(2))
    try:
        with open(log, "ab") as f:
            os.dup2(f.fileno(), 1)
            os.dup2(f.fileno(), 2)
            try:
                yield
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os.dup2(saved[0], 1)
                os.dup2(saved[1], 2)
    finally:
        os.close(saved[0])
        os.close(saved[1])


def export(model, example, names, dynamic, exporter: str, path: Path) -> str:
    """Exports to ``path``; returns the dims used (``dynamic`` or ``static (...why)``)."""
    import torch

    def run(dyn: bool):
        with torch.no_grad():
            if exporter == "legacy":
                torch.onnx.export(
                    model,
                    example,
                    str(path),
                    input_names=names,
                    output_names=["out"],
                    dynamic_axes=dynamic if dyn else None,
                    opset_version=17,
                    do_constant_folding=True,
                    dynamo=False,
                )
            else:
                from torch.export import Dim

                dims: dict = {}
                shapes = None
                if dyn:
                    shapes = tuple(
                        {a: dims.setdefault(n, Dim(n)) for a, n in dynamic.get(i, {}).items()} or None for i in names
                    )
                torch.onnx.export(
                    model,
                    example,
                    str(path),
                    input_names=names,
                    output_names=["out"],
                    dynamic_shapes=shapes,
                    opset_version=18,
                    dynamo=True,
                )

    try:
        run(True)
        return "dynamic"
    except Exception as e:  # noqa: BLE001 - any export failure: try static shapes
        why = short(e, 100)
        for f in path.parent.glob(path.name + "*"):
            f.unlink()
    run(False)
    return f"static (dynamic export failed: {why})"


# ---------------------------------------------------------------------------------------------
# sinter


def rel_error(a: np.ndarray, b: np.ndarray) -> float:
    from compare_outputs import rel_error as metric

    e, msg = metric(a, b)
    if msg:
        raise ValueError(msg)
    return e


def all_cpus() -> None:
    """In the child before ``exec``: every CPU, as from a shell. torch's OpenMP can leave this
    process's thread pinned to fewer CPUs, and a child inherits that mask (seen on an H200 host:
    sinter's parallel NVRTC compiles took 3-5x longer when started from here)."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, range(os.cpu_count() or 1))


def run_sinter(bin_: Path, model: Path, inputs: list[Path], backend: str, out: Path, timeout: float,
               extra: tuple[str, ...] = ()) -> dict:
    """``sinter run`` (with ``extra`` flags); returns import_ok, run_ok, ms, compile_s, error."""
    cmd = [str(bin_), "run", str(model)]
    for p in inputs:
        cmd += ["--input", str(p)]
    cmd += ["--backend", backend, "--out", str(out), *extra]
    r = {"import_ok": False, "run_ok": False, "ms": None, "compile_s": None, "error": None}
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, preexec_fn=all_cpus)
    except subprocess.TimeoutExpired:
        r["error"] = f"timeout after {timeout:.0f} s"
        return r
    log = p.stderr + p.stdout
    # The progress line is printed only to a terminal: a run that wrote outputs imported too.
    r["import_ok"] = bool(re.search(r"\] imported: \d+ nodes", log)) or (p.returncode == 0 and out.is_file())
    m = re.search(r"per run ([0-9.]+) ms", log)
    r["ms"] = float(m.group(1)) if m else None
    m = re.search(r"compile ([0-9.]+) s", log)
    r["compile_s"] = float(m.group(1)) if m else None
    # With SINTER_LOG=compile: where the first compile went (printed by --show-compile).
    r["compile_log"] = [re.sub(r"\x1b\[[0-9;]*m", "", x) for x in log.splitlines() if "compiled in" in x or "cuda load" in x]
    if p.returncode != 0 or not out.is_file():
        lines = [x for x in log.strip().splitlines() if x.strip() and not x.startswith("# [")]
        r["error"] = short(" | ".join(lines[-4:]) or f"exit {p.returncode}", 300)
        return r
    r["run_ok"] = True
    return r


# ---------------------------------------------------------------------------------------------
# torch timing


def sync(dev):
    import torch

    if dev.type == "cuda":
        torch.cuda.synchronize()


def time_calls(fn, dev, iters: int, warmup: int) -> float:
    """Median ms of ``fn()`` over ``iters`` synchronized calls after ``warmup``."""
    for _ in range(warmup):
        fn()
    sync(dev)
    ts = []
    for _ in range(iters):
        t = time.perf_counter()
        fn()
        sync(dev)
        ts.append((time.perf_counter() - t) * 1e3)
    return float(np.median(ts))


def time_torch(model, example, iters: int, warmup: int, bf16: bool = False) -> dict:
    """torch eager and torch.compile on the same inputs, on CUDA when available; with ``bf16``
    also torch.compile under ``torch.autocast(dtype=torch.bfloat16)``."""
    import torch

    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    r = {"device": str(dev), "eager_ms": None, "compile_ms": None, "compile_s": None, "error": None}
    try:
        m = model.to(dev)
        xs = tuple(x.to(dev) for x in example)
        with torch.inference_mode():
            r["eager_ms"] = time_calls(lambda: m(*xs), dev, iters, warmup)
    except Exception as e:  # noqa: BLE001
        r["error"] = "eager: " + short(e)
        return r
    try:
        torch._dynamo.reset()
        cm = torch.compile(m)
        with torch.inference_mode():
            t = time.perf_counter()
            cm(*xs)
            sync(dev)
            r["compile_s"] = time.perf_counter() - t
            r["compile_ms"] = time_calls(lambda: cm(*xs), dev, iters, warmup)
        if bf16 and dev.type == "cuda":
            torch._dynamo.reset()
            cb = torch.compile(m)
            with torch.inference_mode(), torch.autocast("cuda", dtype=torch.bfloat16):
                t = time.perf_counter()
                cb(*xs)
                sync(dev)
                r["bf16_compile_s"] = time.perf_counter() - t
                r["bf16_compile_ms"] = time_calls(lambda: cb(*xs), dev, iters, warmup)
    except Exception as e:  # noqa: BLE001
        r["error"] = "torch.compile: " + short(e)
    finally:
        model.to("cpu")
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    return r


# ---------------------------------------------------------------------------------------------


def compare_into(row: dict, key: str, out: Path, ref: np.ndarray, what: str) -> bool:
    """Stores the error of the first array of ``out`` against ``ref`` as ``row[key]``; on a
    comparison error (shape, dtype, non-finite values) notes it in ``row["error"]``."""
    got = np.load(out)
    try:
        row[key] = rel_error(got[got.files[0]], ref)
        return True
    except ValueError as e:
        row["error"] = f"{what}: {e}"
        return False


def check_model(name: str, args, work: Path) -> list[dict]:
    import torch

    seed = args.seed + ALL.index(name) + 1
    model, example, names, dynamic = build(name, args.tiny, seed, args.batch, args.base)
    with torch.no_grad():
        ref = model(*example).numpy()
    if hasattr(os, "sched_getaffinity"):
        print(f"  {name}: this process may run on {len(os.sched_getaffinity(0))} of {os.cpu_count()} CPUs "
              "(sinter's runs get all of them)", flush=True)
    d = work / name
    d.mkdir(parents=True, exist_ok=True)
    inputs = []
    for k, x in enumerate(example):
        p = d / f"input_{k}.npy"
        np.save(p, x.numpy())
        inputs.append(p)
    shapes = ", ".join(f"{n} {list(x.shape)}" for n, x in zip(names, example))
    rows = []
    for exporter in args.exporters:
        row = {"model": name, "exporter": exporter, "inputs": shapes, "dims": None, "import_ok": False,
               "max_err": None, "status": "FAIL", "sinter_ms": None, "sinter_compile_s": None, "error": None}
        rows.append(row)
        if exporter == "dynamo" and not have("onnxscript"):
            row.update(status="skipped", error="skipped: onnxscript not installed (the dynamo exporter needs it)")
            continue
        path = d / exporter / "model.onnx"
        path.parent.mkdir(exist_ok=True)
        t = time.perf_counter()
        log = args.logs / f"{name}-{exporter}-export.log"
        try:
            with to_log(log):
                row["dims"] = export(model, example, names, dynamic, exporter, path)
        except Exception as e:  # noqa: BLE001
            # The exporter could not write the model: a row of its own, not a sinter failure.
            row.update(status="NOEXPORT", error="export: " + short(e, 300))
            if args.verbose:
                traceback.print_exc()
            continue
        row["export_s"] = round(time.perf_counter() - t, 2)
        row["onnx_bytes"] = sum(f.stat().st_size for f in path.parent.iterdir())
        out = path.parent / "sinter.npz"
        # Timed with sinter's defaults (TF32 convolutions, as torch's), checked in exact f32.
        r = run_sinter(args.bin, path, inputs, args.backend, out, args.timeout)
        row.update(import_ok=r["import_ok"], sinter_ms=r["ms"], sinter_compile_s=r["compile_s"], error=r["error"],
                   compile_log=r["compile_log"])
        if r["run_ok"]:
            compare_into(row, "tf32_err", out, ref, "compare")
            out.unlink()
            if args.bf16:
                # Autocast: matmuls, convolutions and attention in bf16, the rest f32.
                rb = run_sinter(args.bin, path, inputs, args.backend, out, args.timeout, ("--precision", "bf16"))
                row.update(bf16_ms=rb["ms"], bf16_compile_s=rb["compile_s"])
                if rb["run_ok"]:
                    compare_into(row, "bf16_err", out, ref, "compare bf16")
                    out.unlink()
                elif rb["error"]:
                    row["error"] = "bf16: " + rb["error"]
            r = run_sinter(args.bin, path, inputs, args.backend, out, args.timeout, ("--tf32", "off"))
            row.update(import_ok=r["import_ok"], error=r["error"] or row["error"])
        if r["run_ok"] and compare_into(row, "max_err", out, ref, "compare"):
            row["status"] = "PASS" if row["max_err"] <= args.tol else "FAIL"
        if not args.keep:
            for f in path.parent.iterdir():
                f.unlink()
            path.parent.rmdir()
    if args.no_torch_timing:
        return rows
    tt = time_torch(model, example, args.iters, args.warmup, args.bf16)
    for row in rows:
        row.update(torch_device=tt["device"], eager_ms=tt["eager_ms"], compile_ms=tt["compile_ms"],
                   torch_compile_s=tt["compile_s"], torch_error=tt["error"], bf16_compile_ms=tt.get("bf16_compile_ms"),
                   torch_bf16_compile_s=tt.get("bf16_compile_s"))
    return rows


def fmt(v, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def print_table(rows: list[dict], backend: str):
    print(f"\n== zoo: sinter ({backend}) vs torch, same inputs; err = max|sinter - torch cpu f32| / max|torch|")
    head = (f"{'model':20s} {'exporter':8s} {'dims':8s} {'import':6s} {'max err':>10s} {'status':8s} {'tf32 err':>9s} "
            f"{'sinter ms':>10s} {'compile s':>9s} {'eager ms':>9s} {'compile ms':>10s} {'tc s':>6s}")
    print(head)
    print("-" * len(head))
    for r in rows:
        if r["status"] == "skipped":
            print(f"{r['model']:20s} {r['exporter']:8s} {r['error']}")
            continue
        dims = "-" if r.get("dims") is None else ("dynamic" if r["dims"] == "dynamic" else "static")
        print(
            f"{r['model']:20s} {r['exporter']:8s} {dims:8s} {'yes' if r['import_ok'] else 'no':6s} "
            f"{fmt(r['max_err'], '.3e'):>10s} {r['status']:8s} {fmt(r.get('tf32_err'), '.1e'):>9s} "
            f"{fmt(r['sinter_ms'], '.3f'):>10s} "
            f"{fmt(r['sinter_compile_s'], '.2f'):>9s} {fmt(r.get('eager_ms'), '.3f'):>9s} "
            f"{fmt(r.get('compile_ms'), '.3f'):>10s} {fmt(r.get('torch_compile_s'), '.1f'):>6s}"
        )
    if any(r.get("bf16_ms") is not None or r.get("bf16_compile_ms") is not None for r in rows):
        print(f"\n{'model':20s} {'exporter':8s} {'bf16 err':>9s} {'sinter bf16 ms':>14s} {'torch.compile bf16 ms':>21s}"
              f" {'sinter bf16 compile s':>21s} {'torch.compile bf16 s':>20s}")
        for r in rows:
            if r["status"] != "skipped":
                print(f"{r['model']:20s} {r['exporter']:8s} {fmt(r.get('bf16_err'), '.1e'):>9s} "
                      f"{fmt(r.get('bf16_ms'), '.3f'):>14s} {fmt(r.get('bf16_compile_ms'), '.3f'):>21s}"
                      f" {fmt(r.get('bf16_compile_s'), '.2f'):>21s} {fmt(r.get('torch_bf16_compile_s'), '.1f'):>20s}")
    notes = [r for r in rows if r["status"] != "skipped" and (r.get("error") or r.get("torch_error")
             or (r.get("dims") or "dynamic") != "dynamic")]
    for r in notes:
        for what in (r.get("error"), r.get("torch_error"), None if r.get("dims") in (None, "dynamic") else r["dims"]):
            if what:
                print(f"  {r['model']}/{r['exporter']}: {what}")
    for r in rows:
        for line in r.get("compile_log") or []:
            print(f"  {r['model']}/{r['exporter']} compile: {line.strip()[:300]}")
    ok = sum(r["status"] == "PASS" for r in rows)
    bad = sum(r["status"] == "FAIL" for r in rows)
    noexport = sum(r["status"] == "NOEXPORT" for r in rows)
    skipped = sum(r["status"] == "skipped" for r in rows)
    print(f"zoo: {ok} passed, {bad} failed, {noexport} not exported (the exporter failed), {skipped} skipped")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", type=Path, required=True, help="the sinter binary")
    ap.add_argument("--backend", default="cuda", help="sinter's backend (cuda, wgsl, interp, cpu)")
    ap.add_argument("--models", default=",".join(ALL), help=f"comma-separated; known: {', '.join(ALL)}")
    ap.add_argument("--exporters", default=",".join(EXPORTERS), help="legacy,dynamo")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--tiny", action="store_true", help="tiny configs and 64x64 images (a CPU smoke run)")
    ap.add_argument("--iters", type=int, default=20, help="timed torch runs")
    ap.add_argument("--warmup", type=int, default=5, help="untimed torch runs before timing")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per sinter run")
    ap.add_argument("--budget-s", type=float, default=0, help="start no new model after this many seconds (0: no limit)")
    ap.add_argument("--no-torch-timing", action="store_true", help="skip the torch eager / torch.compile timing")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", type=int, default=2, help="batch of every model (issue 13's targets: 8)")
    ap.add_argument("--base", action="store_true", help="transformers at base size (12 layers, hidden 768)")
    ap.add_argument("--bf16", action="store_true",
                    help="also sinter --precision bf16 and torch.compile under bf16 autocast (timed, error listed)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--work", type=Path, help="folder for the exported files (default: a temp folder, removed)")
    ap.add_argument("--keep", action="store_true",
                    help="keep the exported models in --work (<work>/<model>/<exporter>/model.onnx, inputs beside)")
    ap.add_argument("--logs", type=Path, help="folder for the exporters' output (default: the work folder)")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    args.bin = args.bin.resolve()
    args.exporters = [e for e in args.exporters.split(",") if e]
    bad = [e for e in args.exporters if e not in EXPORTERS]
    if bad:
        ap.error(f"unknown exporter(s) {bad}; known: {EXPORTERS}")
    names = [n for n in args.models.split(",") if n]
    bad = [n for n in names if n not in ALL]
    if bad:
        ap.error(f"unknown model(s) {bad}; known: {ALL}")
    if not args.bin.is_file():
        ap.error(f"no sinter binary at {args.bin}")
    for mod in ("numpy", "torch"):
        if not have(mod) or (mod == "numpy" and np is None):
            print(f"zoo: skipped: {mod} not installed")
            return 0
    if not have("onnx"):
        print("zoo: skipped: onnx not installed (compare_outputs.py needs it)")
        return 0
    import torch

    vers = {"torch": torch.__version__}
    for mod in ("torchvision", "transformers", "onnxscript", "onnx"):
        if have(mod):
            vers[mod] = getattr(__import__(mod), "__version__", "?")
    print("zoo: " + ", ".join(f"{k} {v}" for k, v in vers.items()), flush=True)
    torch.backends.mha.set_fastpath_enabled(False)
    start = time.time()
    rows: list[dict] = []
    tmp = None
    if args.work is None:
        tmp = tempfile.TemporaryDirectory(prefix="sinter-zoo.")
        work = Path(tmp.name)
    else:
        work = args.work
        work.mkdir(parents=True, exist_ok=True)
    args.logs = args.logs or work
    args.logs.mkdir(parents=True, exist_ok=True)
    try:
        for name in names:
            pkg = needs(name)
            skip = None
            if not have(pkg):
                skip = f"skipped: {pkg} not installed"
            elif args.budget_s and time.time() - start > args.budget_s:
                skip = f"skipped: time budget of {args.budget_s:.0f} s spent"
            if skip:
                rows += [{"model": name, "exporter": e, "status": "skipped", "error": skip} for e in args.exporters]
                print(f"{name:20s} {skip}", flush=True)
                continue
            t = time.time()
            try:
                got = check_model(name, args, work)
            except Exception as e:  # noqa: BLE001 - one model's failure is a row, not the end
                if args.verbose:
                    traceback.print_exc()
                got = [{"model": name, "exporter": e_, "status": "FAIL", "import_ok": False, "max_err": None,
                        "sinter_ms": None, "sinter_compile_s": None, "error": "build/reference: " + short(e, 300)}
                       for e_ in args.exporters]
            rows += got
            for r in got:
                print(f"{name:20s} {r['exporter']:8s} {r['status']:8s} err {fmt(r.get('max_err'), '.3e')} "
                      f"{r.get('error') or ''}", flush=True)
            print(f"{name:20s} done in {time.time() - t:.1f} s", flush=True)
    finally:
        if tmp is not None:
            tmp.cleanup()
    print_table(rows, args.backend)
    if args.json:
        args.json.write_text(json.dumps({"backend": args.backend, "tolerance": args.tol, "versions": vers,
                                         "tiny": args.tiny, "rows": rows}, indent=2) + "\n")
    return 1 if any(r["status"] == "FAIL" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
