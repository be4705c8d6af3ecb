//! Residual connections stored for a library product's `C` ([`CostModel::materialize_residual`]):
//! a transformer block's residual stream (`h1 = h + attn @ w + b`, read by a LayerNorm and added
//! to the MLP's last product) is materialized by a model that asks for it, so both products'
//! epilogues are `acc + bias + r` with `r` one stored tensor; the default model recomputes `h1`
//! in each consumer. Both programs run on the interpreter against the CPU reference.

use super::*;
use crate::kernel::library::library_gemm;

/// The default model, except that it stores residuals of products.
#[derive(Debug, Default)]
struct Residuals(DefaultCostModel);

impl CostModel for Residuals {
    fn name(&self) -> &str {
        "residuals"
    }
    fn base(&self) -> Option<&dyn CostModel> {
        Some(&self.0)
    }
    fn materialize_residual(&self) -> Option<String> {
        Some("materialized: residual of a matrix product (test)".into())
    }
}

/// Two pre-norm transformer blocks (the attention's mixing left out: one product stands for it)
/// on `[2, 24, d]` activations; `flat`: each product on the flattened `[48, d]` rows, reshaped
/// back (GPT-2's `Gemm` nodes), else batched over the 2.
fn blocks(g: &Graph, flat: bool) -> Tensor {
    let (d, f) = (32, 96);
    let c = |shape: Vec<usize>, seed| g.constant(HostTensor::random(DType::F32, shape, seed, -0.5, 0.5));
    let linear = |x: &Tensor, (k, n): (usize, usize), w: Tensor, b: Tensor| {
        if flat { (x.reshape(vec![48, k]).matmul(&w) + &b).reshape(vec![2, 24, n]) } else { x.matmul(&w) + &b }
    };
    let mut h = g.input("x", DType::F32, vec![2, 24, d]);
    for l in 0..2u64 {
        let s = 10 * l;
        let a = h.layer_norm(&c(vec![d], s + 1), &c(vec![d], s + 2), 1e-5);
        let h1 = &h + &linear(&a, (d, d), c(vec![d, d], s + 3), c(vec![d], s + 4));
        let a2 = h1.layer_norm(&c(vec![d], s + 5), &c(vec![d], s + 6), 1e-5);
        let u = linear(&a2, (d, f), c(vec![d, f], s + 7), c(vec![f], s + 8)).gelu_tanh();
        h = &h1 + &linear(&u, (f, d), c(vec![f, d], s + 9), c(vec![d], s + 10));
    }
    h
}

/// The residual forms of a program's products: (library form found, has a residual) each.
fn forms(p: &Program) -> Vec<(bool, bool)> {
    p.kernels
        .iter()
        .filter(|k| matches!(k.body, KernelBody::Matmul(_)))
        .map(|k| library_gemm(k).map_or((false, false), |l| (true, l.residual.is_some())))
        .collect()
}

#[test]
fn residual_streams_are_stored_for_the_library() {
    for flat in [false, true] {
        residual_streams(flat);
    }
}

fn residual_streams(flat: bool) {
    let g = Graph::new();
    g.output(&blocks(&g, flat));
    let ir = g.build().unwrap();
    let inputs = [HostTensor::random(DType::F32, vec![2, 24, 32], 1, -1.0, 1.0)];
    let opts = ScheduleOptions { cost_model: Arc::new(Residuals::default()), ..ScheduleOptions::default() };
    let stored = check_with(&ir, &inputs, &Capabilities::host(), &opts);
    // Every product: the attention's and the MLP's last add the stored residual stream.
    let want = [(true, true), (true, false), (true, true), (true, true), (true, false), (true, true)];
    assert_eq!(forms(&stored), want, "flat {flat}");
    let recorded = stored.decisions.iter().filter(|d| d.reason.contains("residual of a matrix product")).count();
    assert!(recorded >= 2, "{:#?}", stored.decisions);
    // The default model recomputes `h1` in the MLP's last epilogue: no library residual there.
    let recomputed = check_with(&ir, &inputs, &Capabilities::host(), &ScheduleOptions::default());
    assert!(forms(&recomputed).iter().filter(|f| f.1).count() < 4, "{:?}", forms(&recomputed));
    assert_eq!(stored.kernels.len(), recomputed.kernels.len());
}
