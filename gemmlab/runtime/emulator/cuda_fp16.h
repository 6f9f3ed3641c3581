// Emulator stand-in for <cuda_fp16.h>: everything a kernel needs from it is in cuda_shim.h.
#pragma once
