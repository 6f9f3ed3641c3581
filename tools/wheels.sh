# Sourced by the GPU scripts (tools/gpu_lane.sh, lab/hgemm-past-cublas/stream_k.sh) on a machine without a package
# registry: the wheels in .whl/ (downloaded elsewhere, as the README says) installed into /tmp/site and put on
# PYTHONPATH and PATH. Nothing happens without .whl/; a failed install returns 1.
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || return 1
  export PYTHONPATH=/tmp/site:${PYTHONPATH:-} PATH=/tmp/site/bin:$PATH
fi
