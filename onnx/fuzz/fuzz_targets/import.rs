//! Fuzzes the ONNX importer: arbitrary bytes as a model (decode, then import symbolically and
//! specialized to small shapes) and as a tensor. Any panic, abort or runaway allocation is a bug.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = sinter_onnx::load_bytes(data) {
        let _ = m.graph();
        let shapes = m.probe_shapes(2, 8);
        let _ = m.graph_for(&shapes);
    }
    let _ = sinter_onnx::tensor_from_pb(data);
});
