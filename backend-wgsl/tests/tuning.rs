//! Issue 14: the tunings max-autotune may use (its candidates, and entries read back from the
//! autotuning cache) are checked against the adapter, including its subgroup size.

mod common;

use common::*;
use sinter_core::DType;
use sinter_core::kernel::ReduceStrategy;
use sinter_wgsl::backend::{candidates, check_tuning};
use sinter_wgsl::render::{Tuning, WgslCaps};

fn with_subgroups(size: u32) -> WgslCaps {
    WgslCaps { has_subgroups: true, subgroup_size: Some(size), ..WgslCaps::baseline() }
}

#[test]
fn cached_workgroup_sizes_the_renderer_cannot_honour_are_rejected() {
    for caps in [WgslCaps::baseline(), with_subgroups(32), with_subgroups(64)] {
        for bad in [0u32, 1, 2, 4, 7, 48, 1 << 20] {
            let t = Tuning { workgroup_size: Some(bad), ..Tuning::default() };
            assert!(check_tuning(&t, &caps).is_err(), "workgroup {bad} accepted on {caps:?}");
        }
        assert!(check_tuning(&Tuning { workgroup_size: Some(64), ..Tuning::default() }, &caps).is_ok());
        assert!(check_tuning(&Tuning::default(), &caps).is_ok());
    }
    // A workgroup of 32 is one subgroup on 32-wide adapters, half of one on 64-wide ones.
    let t32 = Tuning { workgroup_size: Some(32), ..Tuning::default() };
    assert!(check_tuning(&t32, &with_subgroups(32)).is_ok());
    assert!(check_tuning(&t32, &with_subgroups(64)).is_err());
}

#[test]
fn candidates_fit_the_adapter_subgroup_size() {
    for caps in [WgslCaps::baseline(), with_subgroups(32), with_subgroups(64)] {
        for strategy in [ReduceStrategy::Persistent, ReduceStrategy::Looped, ReduceStrategy::ThreadPerRow] {
            let p = softmax(6, 300, DType::F32, strategy);
            let c = candidates(&p.kernels[0], &caps);
            assert!(c.len() > 2, "{strategy:?}: {} candidates", c.len());
            for t in &c {
                assert!(check_tuning(t, &caps).is_ok(), "{strategy:?} candidate {t:?} is illegal on {caps:?}");
            }
        }
    }
}

/// Issue 14: the renderer itself never gives a workgroup-per-row reduction fewer threads than one
/// subgroup, whatever the tuning asks (a short row used to get 32 threads on 64-wide subgroups).
#[test]
fn reductions_hold_at_least_one_subgroup() {
    use sinter_wgsl::render::render_with;
    for strategy in [ReduceStrategy::Persistent, ReduceStrategy::Looped] {
        let p = softmax(6, 8, DType::F32, strategy);
        for ask in [None, Some(1), Some(16), Some(32)] {
            let t = Tuning { workgroup_size: ask, ..Tuning::default() };
            let wg = |caps: &WgslCaps| render_with(&p.kernels[0], &p, caps, &t).unwrap().workgroup_size[0];
            // 32-wide subgroups (and none): 32 threads for a row of 8 is legal and kept.
            assert_eq!(wg(&with_subgroups(32)), 32, "{strategy:?} {ask:?}");
            assert_eq!(wg(&with_subgroups(64)), 64, "{strategy:?} {ask:?}");
            assert_eq!(wg(&with_subgroups(128)), 128, "{strategy:?} {ask:?}");
        }
    }
}
