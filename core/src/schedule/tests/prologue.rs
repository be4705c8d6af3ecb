//! fp8 matmul prologues: the widening casts read by the matmul's loader, the decision and its
//! refusals, every case run on the interpreter against the CPU reference (`check`).

use super::*;
use crate::kernel::library::library_gemm;

fn matmul_kernel(p: &Program) -> &crate::kernel::Kernel {
    p.kernels.iter().find(|k| matches!(k.body, KernelBody::Matmul(_))).expect("a matmul kernel")
}

fn in_dtype(p: &Program) -> DType {
    let KernelBody::Matmul(m) = &matmul_kernel(p).body else { unreachable!() };
    m.in_dtype
}

#[test]
fn scaled_mm_workload_reads_fp8_operands_in_one_kernel() {
    let (_, _, p) = workload("matmul_8192_fp8e4m3");
    // The casts, the product, both scales and the cast to bf16: one matmul kernel.
    assert_eq!(p.kernels.len(), 1, "{}", print_program(&p));
    assert_eq!(in_dtype(&p), DType::F8E4M3);
    let k = &p.kernels[0];
    assert!(k.args.iter().filter(|a| a.dtype == DType::F8E4M3).count() == 2, "{}", print_program(&p));
    assert!(p.decisions.iter().any(|d| d.fused && d.reason.starts_with("prologue: matmul")), "{}", print_program(&p));
    // The library sees torch._scaled_mm: e4m3 operands, two f32 scalar scales, a bf16 output,
    // `b` read k-contiguous (torch's column-major second operand).
    let l = library_gemm(k).unwrap();
    assert_eq!(
        (l.dtype, l.out_dtype, l.scales.len(), l.bias, l.activation),
        (DType::F8E4M3, DType::BF16, 2, None, None)
    );
    assert_eq!((l.a.s_col, l.b.s_row), (1, 1));
    // Eager mode keeps one kernel per op, so the casts stay kernels of their own.
    let w = workloads::get("matmul_8192_fp8e4m3").unwrap();
    let ir = crate::passes::optimize(&w.build(Scale::Reduced).unwrap()).unwrap();
    let eager = schedule(&ir, &Capabilities::host(), &ScheduleOptions::eager()).unwrap();
    assert_eq!(in_dtype(&eager), DType::F32);
    assert!(eager.decisions.iter().any(|d| d.reason.starts_with("refused: prologue: eager mode")));
}

#[test]
fn prologue_refusals_are_named_and_fall_back_to_f32_copies() {
    let fp8 = |d: DType, shape: &[usize], seed| HostTensor::random(d, shape.to_vec(), seed, -3.0, 3.0);
    let (e4, e5) = (DType::F8E4M3, DType::F8E5M2);
    // (a dtype, b dtype, graph, refusal or None when taken)
    type Build = fn(&Tensor, &Tensor) -> Tensor;
    type Case = (DType, DType, [usize; 2], [usize; 2], Build, Option<&'static str>);
    let cases: [Case; 5] = [
        // Taken: e5m2 both sides, b transposed through a permute under the cast.
        (e5, e5, [7, 16], [9, 16], |a, b| a.cast(DType::F32).matmul(&b.cast(DType::F32).transpose(0, 1)), None),
        // Mixed fp8 dtypes: the kernel IR has one operand dtype.
        (e4, e5, [7, 16], [16, 9], |a, b| a.cast(DType::F32).matmul(&b.cast(DType::F32)), Some("widened from")),
        // Only one operand is fp8.
        (e4, DType::F32, [7, 16], [16, 9], |a, b| a.cast(DType::F32).matmul(b), Some("a non-fp8 value")),
        // Taken: the product rounded to bf16 afterwards (an epilogue).
        (e4, e4, [7, 16], [16, 9], |a, b| a.cast(DType::F32).matmul(&b.cast(DType::F32)).cast(DType::BF16), None),
        // A reshape of a transpose is no strided view: both operands copied as f32.
        (
            e4,
            e4,
            [4, 6],
            [8, 5],
            |a, b| a.transpose(0, 1).reshape([3, 8]).cast(DType::F32).matmul(&b.cast(DType::F32)),
            Some("no strided view"),
        ),
    ];
    for (i, (da, db, sa, sb, f, refusal)) in cases.into_iter().enumerate() {
        let g = Graph::new();
        let a = g.input("a", da, sa.to_vec());
        let b = g.input("b", db, sb.to_vec());
        g.output(&f(&a, &b));
        let ir = g.build().unwrap();
        let p = check(&ir, &[fp8(da, &sa, i as u64), fp8(db, &sb, 10 + i as u64)]);
        let log = print_program(&p);
        match refusal {
            None => {
                assert!(in_dtype(&p).is_fp8(), "case {i}\n{log}");
                assert!(p.decisions.iter().any(|d| d.reason.starts_with("prologue: matmul")), "case {i}\n{log}");
            }
            Some(why) => {
                assert_eq!(in_dtype(&p), DType::F32, "case {i}\n{log}");
                assert!(
                    p.decisions.iter().any(|d| d.reason.starts_with("refused: prologue") && d.reason.contains(why)),
                    "case {i}: no refusal naming {why:?}\n{log}"
                );
            }
        }
    }
    // A batched first operand over a shared second one is folded into rows: refused, still right.
    let g = Graph::new();
    let a = g.input("a", e4, vec![3, 5, 16]);
    let b = g.input("b", e4, vec![16, 8]);
    g.output(&a.cast(DType::F32).matmul(&b.cast(DType::F32)));
    let p = check(&g.build().unwrap(), &[fp8(e4, &[3, 5, 16], 1), fp8(e4, &[16, 8], 2)]);
    assert!(p.decisions.iter().any(|d| d.reason.contains("folded into rows")), "{}", print_program(&p));
}
