mod common;
#[test]
fn coop() {
    let src = std::fs::read_to_string("/tmp/coop/t.wgsl").unwrap();
    common::naga_validate(&src);
}
