#!/usr/bin/env bash
# Session 22, device call 3 (issue 13): channels-last depthwise windows with four channels a thread
# (`render/reduce_rows.rs`): call 1's measurement again (`d1.sh`: the CUDA suite, ConvNeXt-Tiny
# and EfficientNet-B0 beside torch.compile in f32 and bf16, ConvNeXt-Tiny's kernels by kind,
# resnet18_b32_f32).
exec bash scripts/session22/d1.sh
