//! `SINTER_ADAPTER` selects the adapter; a value that matches nothing is a clear error. Alone in its test
//! binary because it sets an environment variable.

use sinter_wgsl::device::{Device, DeviceError, DeviceOptions, ENV_ADAPTER};

#[test]
fn sinter_adapter_that_matches_nothing_is_no_adapter() {
    // SAFETY: this is the only test in this binary, so no other thread reads or writes the environment.
    unsafe { std::env::set_var(ENV_ADAPTER, "nonexistent") };
    let result = Device::new(DeviceOptions::default());
    match result {
        Err(e @ DeviceError::NoAdapter { .. }) => {
            let msg = e.to_string();
            eprintln!("{msg}");
            assert!(msg.contains("nonexistent"), "{msg}");
            assert!(msg.contains("adapters seen"), "{msg}");
        }
        other => panic!("expected NoAdapter, got {other:?}"),
    }
}
