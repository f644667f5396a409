#!/usr/bin/env bash
# Builds one virtual environment per peer so benchmarks can run them beside us on the same data.
# mosaicml-streaming's import name `streaming` collides with ours, so it never shares our venv.
# LitData is installed with --no-deps to keep torch at 2.13.0 (the pre-placed CPU wheel); its
# runtime dependencies are then added by hand.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dest="${PEERS_DIR:-$root/.bench-venvs}"
mkdir -p "$dest"

make_venv() {
  local dir="$1"
  if [ ! -x "$dir/bin/python" ]; then
    python3 -m venv "$dir"
    "$dir/bin/pip" install -q --upgrade pip
    "$dir/bin/pip" install -q torch==2.13.0
  fi
}

make_venv "$dest/reference"
"$dest/reference/bin/pip" install -q mosaicml-streaming==0.13.0 'torch==2.13.0'

make_venv "$dest/litdata"
"$dest/litdata/bin/pip" install -q --no-deps litdata
"$dest/litdata/bin/pip" install -q lightning-utilities filelock numpy boto3 requests 'urllib3>=1.26' \
  tifffile obstore zstandard zstd pyarrow polars 'torch==2.13.0'

# Hugging Face datasets, streaming Parquet (benchmarks/parquet.py --peers).
make_venv "$dest/hf"
"$dest/hf/bin/pip" install -q datasets pyarrow 'torch==2.13.0'

for peer in reference litdata hf; do
  "$dest/$peer/bin/python" -c "import importlib; m = {'reference': 'streaming', 'litdata': 'litdata', 'hf': 'datasets'}['$peer']; importlib.import_module(m); print('$peer ok')"
done
