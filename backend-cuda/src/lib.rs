//! CUDA C++ code generation (NVRTC, cudarc) for sinter.
