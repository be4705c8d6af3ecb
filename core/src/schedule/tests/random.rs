//! Property tests: random programs scheduled fused and unfused, run on the interpreter, against the CPU reference.

use super::*;
use proptest::prelude::*;

/// One step of a random program, interpreted against the tensors built so far.
#[derive(Clone, Debug)]
enum Step {
    Unary(u8, usize),
    Binary(u8, usize, usize),
    Reduce(u8, usize, u8, bool),
    Reshape(usize),
    Permute(usize, u8),
    Slice(usize, u8),
    Expand(usize),
    BroadcastReduce(usize, u8),
    Concat(usize, usize),
    Pad(usize, u8),
    ArgMax(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0u8..6, 0usize..64).prop_map(|(a, b)| Step::Unary(a, b)),
        (0u8..4, 0usize..64, 0usize..64).prop_map(|(a, b, c)| Step::Binary(a, b, c)),
        (0u8..3, 0usize..64, 0u8..8, any::<bool>()).prop_map(|(a, b, c, d)| Step::Reduce(a, b, c, d)),
        (0usize..64).prop_map(Step::Reshape),
        (0usize..64, 0u8..6).prop_map(|(a, b)| Step::Permute(a, b)),
        (0usize..64, 0u8..4).prop_map(|(a, b)| Step::Slice(a, b)),
        (0usize..64).prop_map(Step::Expand),
        (0usize..64, 0u8..3).prop_map(|(a, b)| Step::BroadcastReduce(a, b)),
        (0usize..64, 0usize..64).prop_map(|(a, b)| Step::Concat(a, b)),
        (0usize..64, 0u8..4).prop_map(|(a, b)| Step::Pad(a, b)),
        (0usize..64).prop_map(Step::ArgMax),
    ]
}

fn build(shape: &[usize], steps: &[Step], outs: &[usize]) -> Option<IrGraph> {
    let g = Graph::new();
    let mut ts = vec![g.input("x", DType::F32, shape.to_vec()), g.input("y", DType::F32, shape.to_vec())];
    for s in steps {
        let pick = |i: usize| ts[i % ts.len()].clone();
        let t = match s {
            Step::Unary(op, a) => {
                let x = pick(*a);
                match op {
                    0 => x.sin(),
                    1 => x.tanh(),
                    2 => x.relu(),
                    3 => x.abs(),
                    4 => x.sigmoid(),
                    _ => x.neg(),
                }
            }
            Step::Binary(op, a, b) => {
                let (x, y) = (pick(*a), pick(*b));
                if x.shape() != y.shape() {
                    continue;
                }
                match op {
                    0 => &x + &y,
                    1 => &x * &y,
                    2 => &x - &y,
                    _ => x.maximum(&y),
                }
            }
            Step::Reduce(op, a, mask, keep) => {
                let x = pick(*a);
                let r = x.shape().rank() as i64;
                let axes: Vec<i64> = (0..r).filter(|i| mask & (1 << i) != 0).collect();
                if axes.is_empty() {
                    continue;
                }
                match op {
                    0 => x.sum(&axes, *keep),
                    1 => x.max(&axes, *keep),
                    _ => x.mean(&axes, *keep),
                }
            }
            Step::Reshape(a) => {
                let x = pick(*a);
                let n = x.shape().numel().unwrap_or(0);
                if n % 2 == 0 && n > 0 { x.reshape([2, n / 2]) } else { x.reshape([n]) }
            }
            Step::Permute(a, p) => {
                let x = pick(*a);
                let r = x.shape().rank();
                if r < 2 {
                    continue;
                }
                let mut perm: Vec<usize> = (0..r).collect();
                perm.rotate_left(*p as usize % r);
                x.permute(&perm)
            }
            Step::Slice(a, k) => {
                let x = pick(*a);
                let dims = x.shape().as_static().unwrap_or_default();
                if dims.is_empty() || dims[0] < 2 {
                    continue;
                }
                if k % 2 == 0 { x.slice(0, 1, dims[0] as i64, 1) } else { x.slice(0, dims[0] as i64 - 1, -100, -2) }
            }
            Step::Expand(a) => {
                let x = pick(*a);
                let mut dims = x.shape().as_static().unwrap_or_default();
                dims.insert(0, 3);
                x.expand(dims)
            }
            Step::BroadcastReduce(a, ax) => {
                let x = pick(*a);
                let r = x.shape().rank();
                if r == 0 {
                    continue;
                }
                let axis = (*ax as usize % r) as i64;
                &x - &x.max(&[axis], true)
            }
            Step::Concat(a, b) => {
                let (x, y) = (pick(*a), pick(*b));
                let (sx, sy) = (x.shape(), y.shape());
                if sx.rank() == 0 || sx.rank() != sy.rank() || sx.0[1..] != sy.0[1..] {
                    continue;
                }
                g.concat(&[&x, &y, &x], 0)
            }
            Step::Pad(a, m) => {
                let x = pick(*a);
                let dims = x.shape().as_static().unwrap_or_default();
                if dims.is_empty() || dims[dims.len() - 1] < 2 {
                    continue;
                }
                let mut pads = vec![(0i64, 0i64); dims.len()];
                pads[dims.len() - 1] = (1, 2);
                pads[0] = (pads[0].0 + 1, pads[0].1 - i64::from(dims[0] > 2));
                let mode = match m {
                    0 => PadMode::Constant(0.5),
                    1 => PadMode::Reflect,
                    2 => PadMode::Edge,
                    _ => PadMode::Wrap,
                };
                x.pad(&pads, mode)
            }
            Step::ArgMax(a) => {
                let x = pick(*a);
                if x.shape().rank() == 0 {
                    continue;
                }
                x.argmax(0, true).cast(DType::F32)
            }
        };
        if t.id().is_none() || t.shape().numel().unwrap_or(0) > 4096 {
            return None;
        }
        ts.push(t);
    }
    for &o in outs {
        g.output(&ts[o % ts.len()]);
    }
    g.build().ok()
}

/// Regression (found by the property test below): materializing a node during stage B to
/// relieve one kernel's binding count made an earlier kernel, which had inlined a user of a
/// member of another kernel, read that member from a buffer, adding a write the other kernel's
/// count had not included (5 bindings with a limit of 4). `bindings` now counts a write for
/// every member some placed kernel already reads.
#[test]
fn late_materialization_keeps_earlier_kernels_within_the_binding_limit() {
    use Step::*;
    let steps = [
        BroadcastReduce(5, 1),
        Unary(0, 0),
        Unary(0, 0),
        Unary(0, 17),
        Binary(0, 2, 3),
        BroadcastReduce(20, 0),
        Reduce(0, 7, 2, false),
        Unary(0, 0),
        Binary(0, 9, 0),
        Reshape(0),
        Reduce(0, 0, 1, false),
    ];
    let g = build(&[3, 4], &steps, &[8, 23]).expect("graph");
    let ins = [rnd(DType::F32, &[3, 4], 0), rnd(DType::F32, &[3, 4], 1)];
    check_with(&g, &ins, &caps_with_bindings(4), &ScheduleOptions::default());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]
    #[test]
    fn fused_equals_eager_equals_reference(
        shape in prop::sample::select(vec![vec![5usize], vec![3, 4], vec![2, 3, 5], vec![1, 7], vec![4, 1, 3]]),
        steps in prop::collection::vec(step(), 1..16),
        outs in prop::collection::vec(0usize..64, 1..3),
        seed in 0u64..1000,
    ) {
        let Some(g) = build(&shape, &steps, &outs) else { return Ok(()) };
        let ins = [rnd(DType::F32, &shape, seed), rnd(DType::F32, &shape, seed + 1)];
        let fused = check_with(&g, &ins, &caps_with_bindings(4), &ScheduleOptions::default());
        let eager = check_with(&g, &ins, &Capabilities::host(), &ScheduleOptions::eager());
        let small = ScheduleOptions { max_group_nodes: 2, ..ScheduleOptions::default() };
        check_with(&g, &ins, &Capabilities::host(), &small);
        prop_assert!(fused.kernels.len() <= eager.kernels.len() + fused.outputs.len());
        let a = run_program(&fused, &ins).expect("fused");
        let b = run_program(&eager, &ins).expect("eager");
        for (x, y) in a.iter().zip(&b) {
            assert_close(x, y, "fused vs eager");
        }
    }
}
