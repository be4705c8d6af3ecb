#!/usr/bin/env bash
# Session 22, device call 2 (issue 13): the channels-last depthwise windows with tap-major weights.
# Call 1's measurement (`d1.sh`) for ConvNeXt-Tiny alone: the CUDA shared suite, ConvNeXt-Tiny
# beside torch.compile in f32 and bf16, its kernels by kind.
MODELS=convnext_tiny RESNET=0 exec bash scripts/session22/d1.sh
