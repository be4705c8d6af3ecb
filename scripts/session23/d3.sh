#!/usr/bin/env bash
# Session 23, device call 3 (issue 13): call 2's script (`d2.sh`) after autocast's attention lost
# its copies (cast round trips through movement ops, scaled bf16 operands read in place, keys
# stored as rows), with ViT-B/16's bf16 kernels and `device_attention attention_matches` (`CALL3=1`).
CALL3=1 exec bash "$(dirname "$0")/d2.sh"
