"""How many clusters of the clusters lab kernel (clusters.cu, once step 10) the GPU runs at once (cuOccupancyMaxActiveClusters), asked about the
compiled step itself and about gemmlab/runtime/clusters.py's stand-in (what the registry's grid uses), beside
the grid the registry launches at 8192.

Usage (GPU): python3 lab/hgemm-past-cublas/clusters.py [NAME=VALUE ...]
"""
import sys

import gemmlab
from gemmlab import clusters, gpu, registry


def main(argv):
    kern = gemmlab.step("hgemm-past-cublas/clusters", backend="gpu", **registry.parse_params(argv))
    launch = kern.launch_config(8192, 8192, 8192)
    kern.module.allow_dynamic_shared(launch.shared_bytes)
    fn = getattr(kern.module.function, "kernel", kern.module.function).ptr
    c = kern.params["CLUSTER_M"]
    own = clusters.query(fn, launch.grid[0], launch.block[0], launch.shared_bytes)
    stand_in = clusters.max_active(c, launch.block[0], launch.shared_bytes)
    dev = gpu.device()
    print(f"{kern.label} on {dev['name']} ({dev['sms']} SMs): grid {launch.grid[0]} blocks = {launch.grid[0] // c} "
          f"clusters of {c}; max active clusters: {own} (the step), {stand_in} (stand-in)"
          + ("  WARNING: a second wave" if own > 0 and own * c < launch.grid[0] else ""))


if __name__ == "__main__":
    main(sys.argv[1:])
