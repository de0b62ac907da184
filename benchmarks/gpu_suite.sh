#!/usr/bin/env bash
# The GPU benchmarks in one go, most wanted first, each under its own time limit so that one slow
# step leaves the later ones their share, and every finished step's numbers are kept:
#   1. the bf16 GPU test (tests/test_training.py -m gpu);
#   2. loss_overhead.py on the GPU, bf16 then float32;
#   3. AS-Speed on the whole of SST-5 (the paper's settings: 7 epochs, batch 16, lr 2e-5,
#      delta 0.3, lambda 1.5, s 4, max length 128), softmax / AS-Softmax / AS-Speed interleaved;
#   4. AS-Skip against InfoBatch on the whole of CLINC150 (10 epochs, batch 32, lr 2e-5,
#      delta 0.3, lambda 0.5, s 5, max length 64), 3 seeds, with what time is left.
# Measured on an H200 with MiniLM (2026-11-26, benchmarks/RESULTS.md): steps 1 and 2 take about
# 45 s together; a micro-batch takes about 36 ms in all, so step 3 needs about 480 s (three
# variants of 7 x 534 micro-batches, with their evaluations) and step 4 about 1,600 s a seed
# round. One 15-minute lease holds steps 1-2 and a 2-epoch step 3, not the paper's scale.
# Usage: benchmarks/gpu_suite.sh OUT_DIR SECONDS [BACKBONE]
#   OUT_DIR gets log.txt, the JSON reports (gzipped) and the PNGs; SECONDS bounds the whole run,
#   the last 45 s of it kept for the end. A lent machine's call limit should exceed SECONDS by a
#   minute more: on 2026-11-26 a call given 575 s for SECONDS=540 ran out with nothing returned.
#   ASTUNE_DATA_DIR names the data folder. GPU_SUITE_SCALE=tiny shrinks every step to a smoke
#   test of this script on the CPU (fp32, a 1-layer backbone, a few hundred samples).
set -uo pipefail
py=${PYTHON:-python3}  # a lent GPU machine has python3 (the one with torch) and no python
if (($# < 2)) || ! [[ $2 =~ ^[0-9]+$ ]]; then
    echo "usage: $0 OUT_DIR SECONDS [BACKBONE] (SECONDS a whole number; got: $*)" >&2
    exit 2
fi
out=$1 budget=$2 backbone=${3:-minilm}
mkdir -p "$out"
work=$(mktemp -d)
start=$SECONDS
here=$(cd "$(dirname "$0")" && pwd)
log="$out/log.txt" reserve=45
# shellcheck source=benchmarks/_steps.sh
source "$here/_steps.sh"  # say, left, step

if [[ ${GPU_SUITE_SCALE:-paper} == tiny ]]; then
    device=(--device cpu --threads 2) scale=(--max-train-samples 256 --max-eval-samples 64
        --num-layers 1) epochs_sst5=2 epochs_clinc=2 probe=2
    loss=(--device cpu --rounds 1 --block 2 --no-compile --sizes 256x5,128x151,16x5201)
    pytest_marks="not gpu" pytest_select=(-k torch_lower_bound)
else
    device=(--device cuda --precision bf16) scale=(--full --max-eval-samples 0)
    # the kernel's own suite (gpu_kernel_suite.sh) times the torch.compile column
    epochs_sst5=7 epochs_clinc=10 probe=20 loss=(--device cuda --no-compile) pytest_marks=gpu
    pytest_select=()
fi
common=(--data-dir "$ASTUNE_DATA_DIR" --backbone "$backbone" "${scale[@]}" "${device[@]}"
    --lr 2e-5 --delta 0.3 --seed 42 --output-dir "$work/runs")


say "$("$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available(),
    torch.cuda.get_device_name() if torch.cuda.is_available() else "")')"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null |
    tee -a "$log"
step 120 "bf16 GPU test" "$py" -m pytest -q -p no:cacheprovider -m "$pytest_marks" \
    "${pytest_select[@]}" "$here/../tests/test_training.py"
for dtype in bfloat16 float32; do
    step 60 "loss overhead $dtype" "$py" "$here/loss_overhead.py" "${loss[@]}" \
        --dtype "$dtype" --json "$out/loss_overhead_${dtype}.json"
done
step 150 "AS-Speed SST-5" "$py" "$here/as_speed.py" "${common[@]}" --dataset sst5 \
    --epochs "$epochs_sst5" --batch-size 16 --max-length 128 --lam 1.5 --max-accum-steps 4 \
    --variants softmax,as_softmax,as_speed --probe-rounds "$probe" \
    --json "$work/as_speed_sst5.json" --plot "$out/as_speed_masked_sst5.png"
step "$budget" "AS-Skip CLINC150" "$py" "$here/as_speed.py" "${common[@]}" \
    --dataset clinc_oos --epochs "$epochs_clinc" --batch-size 32 --max-length 64 --lam 0.5 \
    --max-accum-steps 5 --seeds 3 --variants softmax,as_skip,infobatch --probe-rounds 0 \
    --json "$work/as_skip_clinc.json" --plot "" --skip-plot "$out/as_skip_computed_clinc.png"
for report in "$work"/*.json; do
    [[ -f $report ]] && gzip -c "$report" >"$out/$(basename "$report").gz"
done
rm -rf "$work"
say "done"
