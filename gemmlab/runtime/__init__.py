"""How a step becomes a launch: the registry of steps, their sources, compilation (NVRTC) and the three
backends (a GPU through CuPy, the CPU emulator in emulator/, compile-only analysis); TMA descriptors,
clusters, and the fused A x B x C steps' runtime (fusion)."""
