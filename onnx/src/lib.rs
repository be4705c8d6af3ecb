//! ONNX importer and conformance runner for sinter.
