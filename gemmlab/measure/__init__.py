"""How we know a step is right and how fast it is: verification against float64 (check), timing against
cuBLAS (bench), the recorded results and experiments, Nsight Compute counters (profile), GPU specs
(hardware)."""
