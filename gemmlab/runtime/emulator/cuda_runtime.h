// Emulator stand-in for <cuda_runtime.h>: everything a kernel needs from it is in cuda_shim.h.
#pragma once
