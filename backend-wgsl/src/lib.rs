//! WGSL code generation and the wgpu runtime for sinter.
