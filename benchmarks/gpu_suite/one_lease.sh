#!/usr/bin/env bash
# Issue 63 in one GPU call, each step under its own time limit so that a slow step leaves the
# later ones their share, every finished step's numbers kept under OUT_DIR:
#   1. versions: the card, the driver, CUDA, Python, torch, triton, transformers (versions.txt);
#   2. correctness: pytest -m gpu on the fused kernels' tests (junit XML);
#   3. the loss kernels: kernels a step (profile_loss.py, bf16 and fp32), then forward+backward
#      against F.cross_entropy, eager, in a CUDA graph and compiled, at 16384x5, 16384x151, 8192x5201 in
#      bf16 and fp32, and multi-label at GoEmotions' 28 classes against BCE-with-logits
#      (loss_graphs.py: 7 interleaved rounds of 10 steps, CUDA events);
#   4. SST-5 at the paper's size: softmax, AS-Softmax, AS-Speed, AS-Skip x seeds 42, 43, 44, the
#      12 runs side by side on the card, one CPU core and one torch thread each
#      (sst5_side_by_side.py; its summary: means and 95% t-intervals, time ratios to softmax
#      paired by seed);
#   5. astune's loop against transformers.Trainer, rounds until its limit (trainer_side_by_side.py,
#      the 95% interval of the per-round ratio);
#   issue 69's, chosen by GPU_SUITE_STEPS: syncs (torch's sync check inside every step, compiled
#   against eager: pytest -m gpu) and compiled (compiled / eager an epoch, 6-layer MiniLM, alone
#   on the card), portfolio (history's first config for SST-5 at the paper's size beside the
#   paper's setting, 3 seeds side by side); SST5_EXTRA=--compile runs the 12 side-by-side runs
#   compiled.
# Usage: benchmarks/gpu_suite/one_lease.sh OUT_DIR SECONDS [BACKBONE]
#   SECONDS bounds the whole run (its last 15 s kept for the end); give the device call a minute
#   more. ASTUNE_DATA_DIR names the data folder (SST-5); the backbone travels as
#   pack_offline.py packs it, or is installed. GPU_SUITE_SCALE=tiny runs every step on the CPU
#   at toy sizes (triton interpreted, CUDA-only parts skipped) to check this script.
#   GPU_SUITE_STEPS (default versions,tests,kernels,sst5,trainer) picks the steps and their order.
#   Step limits (seconds, each also cut to what is left): LIMIT_TESTS (60), LIMIT_PROFILE (20
#   each dtype), LIMIT_LOSS (90), LIMIT_SST5 (300), the trainer all that is left.
set -uo pipefail
py=${PYTHON:-python3}  # a lent GPU machine has python3 (the one with torch) and no python
if (($# < 2)) || ! [[ $2 =~ ^[0-9]+$ ]]; then
    echo "usage: $0 OUT_DIR SECONDS [BACKBONE] (SECONDS a whole number; got: $*)" >&2
    exit 2
fi
out=$1 budget=$2 backbone=${3:-minilm}
mkdir -p "$out"
out=$(cd "$out" && pwd)  # the steps run from the checkout's root
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"  # where python -m benchmarks.<study>.<script> finds the benchmarks
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
log="$out/log.txt" start=$SECONDS reserve=15
# shellcheck source=benchmarks/common/steps.sh
source "$root/benchmarks/common/steps.sh"  # say, left, step

if [[ ${GPU_SUITE_SCALE:-full} == tiny ]]; then
    bench=(env TRITON_INTERPRET=1 "$py") device=cpu marks="not gpu" dtypes=(float32)
    tests=("$root/tests/test_as_softmax_triton.py") pytest_select=(-k "compile")
    sizes=256x5,64x151,8x5201 multi=64x28 loss_extra=(--rounds 2 --block 2) profile_steps=2
    sst5=(--device cpu --max-train-samples 128 --max-eval-samples 32 --num-layers 1 --epochs 1)
    side=(--device cpu --rounds 3 --max-train-samples 32 --num-layers 1 --threads 1)
    compiled_args=(--device cpu --layers 1 --rounds 1 --max-train-samples 32 --max-length 32)
else
    bench=("$py") device=cuda marks=gpu dtypes=(bfloat16 float32) pytest_select=()
    tests=(test_as_softmax_triton.py test_multilabel_triton.py test_training.py)
    tests=("${tests[@]/#/$root/tests/}")
    sizes=16384x5,16384x151,8192x5201 multi=16384x28,512x28 loss_extra=(--rounds 7 --block 10)
    profile_steps=5
    sst5=(--device cuda --precision bf16 --full --max-eval-samples 0 --epochs 7)
    side=(--device cuda --rounds 12 --max-train-samples 2000 --num-layers 6 --max-length 128)
    compiled_args=(--device cuda --layers 6 --rounds 3 --max-train-samples 2000 --max-length 128)
fi
# SST5_EXTRA: more flags for the 12 runs (issue 69: --compile, after a compiled run warmed the
# inductor cache that the 12 processes then share)
read -ra sst5_extra <<<"${SST5_EXTRA:-}"

versions() {
    {
        date -u
        nvidia-smi 2>&1 || echo "nvidia-smi: not available"
        nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv 2>&1
        "$py" -c 'import platform, torch; print("python", platform.python_version(), "torch",
            torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available(),
            torch.cuda.get_device_name() if torch.cuda.is_available() else "")' 2>&1
        "$py" -c 'import triton, transformers; print("triton", triton.__version__,
            "transformers", transformers.__version__)' 2>&1
        echo "cpus $(nproc); git $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo -)"
    } >"$out/versions.txt"
    tee -a "$log" <"$out/versions.txt"
}

tests() {
    step "${LIMIT_TESTS:-75}" "pytest -m $marks" "$py" -m pytest -q -p no:cacheprovider \
        -m "$marks" "${pytest_select[@]}" --junitxml "$out/pytest_gpu.xml" "${tests[@]}"
}

kernels() {
    for dtype in "${dtypes[@]}"; do
        step "${LIMIT_PROFILE:-20}" "profile $dtype" "${bench[@]}" -m benchmarks.loss_kernels.profile_loss \
            --device "$device" --dtype "$dtype" --sizes "$sizes" --steps "$profile_steps" \
            --json "$out/profile_loss_${dtype}.json"
    done
    step "${LIMIT_LOSS:-90}" "loss speed, eager, graphed and compiled" "${bench[@]}" -m benchmarks.loss_kernels.loss_graphs \
        --device "$device" --dtypes "$(IFS=,; echo "${dtypes[*]}")" --sizes "$sizes" \
        --multi-sizes "$multi" "${loss_extra[@]}" --json "$out/loss_graphs.json"
}

sst5() {
    # the launcher stops its runs 20 s before the step's limit, so that it writes its record
    local limit=${LIMIT_SST5:-330}
    ((limit > $(left) - reserve)) && limit=$(($(left) - reserve))
    ((limit < 40)) && limit=40  # step() then says there is no time left, or cuts it
    step "$limit" "SST-5, 12 runs side by side" "$py" -m benchmarks.trial_speed.sst5_side_by_side run \
        "$out/sst5" --limit $((limit - 20)) -- --data-dir "$ASTUNE_DATA_DIR" \
        --backbone "$backbone" "${sst5[@]}" --dataset sst5 --batch-size 16 --max-length 128 \
        --lr 2e-5 --delta 0.3 --lam 1.5 --max-accum-steps 4 "${sst5_extra[@]}"
    "$py" -m benchmarks.trial_speed.sst5_side_by_side summary "$out/sst5" >>"$log" 2>&1
    gzip -f "$out"/sst5/*_seed*.json 2>/dev/null  # the summary reads them gzipped too
    # One archive, not 30-odd files: a lent machine hands back a few files only (2026-11-28:
    # the per-run files of the 12 runs stayed behind, the summary in log.txt came back).
    tar czf "$out/sst5.tar.gz" -C "$out" sst5 && rm -rf "$out/sst5"
}

syncs() {  # issue 69: torch's own sync check inside every step, and compiled against eager
    step "${LIMIT_SYNCS:-60}" "no step waits (sync debug mode)" "$py" -m pytest -q \
        -p no:cacheprovider -m "$marks" --junitxml "$out/pytest_syncs.xml" \
        "$root/tests/test_step_syncs.py" "$root/tests/test_compiled.py"
}

compiled() {  # issue 69: compiled / eager an epoch, alone on the card, interleaved rounds
    step "${LIMIT_COMPILED:-150}" "compiled / eager" "${bench[@]}" -m benchmarks.trial_speed.compiled \
        --data-dir "$ASTUNE_DATA_DIR" "${compiled_args[@]}" --json "$out/compiled.json"
}

portfolio() {  # issue 69 (c): history's first config at the paper's size beside the paper's setting
    local limit=${LIMIT_PORTFOLIO:-300}
    ((limit > $(left) - reserve)) && limit=$(($(left) - reserve))
    ((limit < 40)) && limit=40
    step "$limit" "SST-5, the portfolio's first and the paper's, 3 seeds" "$py" \
        -m benchmarks.trial_speed.sst5_side_by_side run "$out/portfolio" \
        --variants as_softmax,portfolio_first --limit $((limit - 20)) -- \
        --data-dir "$ASTUNE_DATA_DIR" --backbone "$backbone" "${sst5[@]}" --dataset sst5 \
        --batch-size 16 --max-length 128 --lr 2e-5 --delta 0.3 "${sst5_extra[@]}"
    gzip -f "$out"/portfolio/*_seed*.json 2>/dev/null
    tar czf "$out/portfolio.tar.gz" -C "$out" portfolio && rm -rf "$out/portfolio"
}

trainer() {  # all the time that is left, or LIMIT_TRAINER
    local limit=$(($(left) - reserve))
    ((limit > ${LIMIT_TRAINER:-100000})) && limit=$LIMIT_TRAINER
    ((limit < 20)) && limit=20
    read -ra trainer_extra <<<"${TRAINER_EXTRA:-}"  # issue 69: --compile, both sides compiled
    step "$limit" "astune against the Trainer" "$py" -m benchmarks.trainer_loop.trainer_side_by_side \
        "${side[@]}" "${trainer_extra[@]}" --max-seconds $((limit - 10)) --data-dir "$ASTUNE_DATA_DIR" \
        --output "$out/trainer_side_by_side.json"
}

IFS=, read -ra chosen <<<"${GPU_SUITE_STEPS:-versions,tests,kernels,sst5,trainer}"
for name in "${chosen[@]}"; do
    case $name in
        versions | tests | kernels | sst5 | trainer | syncs | compiled | portfolio) "$name" ;;
        *) say "unknown step $name (versions, tests, kernels, sst5, trainer, syncs, compiled," \
            "portfolio)" ;;
    esac
done
say "done"
