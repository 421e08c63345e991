#!/usr/bin/env bash
# CPU/GPU agreement and GPU time of the 50,000 x 1,000 none+ts report (under 5 minutes), for a machine with a
# CUDA GPU that has its own torch and only this working tree: nothing is installed, the checkout runs in place.
#
#   benchmarks/gpu_check.sh                     # tests marked cuda, cpu vs cuda, its section of benchmarks/RESULTS.md
#   benchmarks/gpu_check.sh --device cpu --rows 2000 --classes 20 --results /tmp/RESULTS.md   # anywhere, no GPU
#
# Every option is benchmarks/gpu_check.py's (--help). PYTHON picks the interpreter (default python3).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"
exec "${PYTHON:-python3}" benchmarks/gpu_check.py "$@"
