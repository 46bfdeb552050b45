"""A stand-in for the ROCm HIP runtime (libamdhip64.so) that runs kernels on the gfx950 emulator, so the
real hip-python wheel drives rawindexer's hip backend where no AMD GPU exists. See runtime.py."""
