//! Generates the ONNX protobuf types from `proto/onnx.proto` with a pure-Rust protobuf compiler
//! (protox parses the schema, prost-build writes the Rust code), so no `protoc` is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/onnx.proto");
    let fds = protox::compile(["proto/onnx.proto"], ["proto"])?;
    prost_build::Config::new().compile_fds(fds)?;
    Ok(())
}
