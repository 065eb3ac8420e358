#!/usr/bin/env bash
# What a lent GPU machine runs (the workplace's device tool, one call): install the wheels that
# ../shared/gpu/fetch-wheels.sh wrote to .whl/ (carried), print what the machine is, run
# `gnnwb validate --device cuda` and pack what it wrote into $OUT (the tool brings back at most
# 8 files, 2 folders down, hence one archive). Stops itself before the call's limit:
#     VALIDATE_S (default 330) for validate in all, RUN_LIMIT_S (default 60) for one real run;
# arguments go to validate (--graph, --schemes, --out), TAG names its log (default validate).
set -uo pipefail
out=${OUT:-/tmp/device-out}
mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
  || { echo "wheel install failed"; exit 3; }
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  python3 -c "import sys, torch; print(sys.version.split()[0], torch.__version__, torch.version.cuda,
torch.cuda.get_device_name(0), torch.cuda.device_count(), torch.cuda.nccl.version())"
  python3 -c "from workbench.dgl_loader import load_dgl; print('dgl', load_dgl().__version__)" 2>&1 | tail -2
  nproc
} 2>&1 | tee "$out/machine.txt"
timeout "${VALIDATE_S:-330}" python3 -m workbench.cli.main validate --device cuda \
  --time-limit "${RUN_LIMIT_S:-60}" "$@" 2>&1 | tee "$out/${TAG:-validate}.log"
echo "validate exit status: ${PIPESTATUS[0]}"
tar czf "$out/traces.tgz" --exclude reports/traces/cpu reports/traces 2>/dev/null
ls -la "$out"
