//! What an attention body means, executed and checked on the host: the kernel-IR interpreter's
//! part for [`KernelBody::Attention`](super::KernelBody::Attention) (see [`AttentionBody`] for the
//! definition every renderer must match).
//!
//! The reference follows the definition literally, one query row at a time: every score, the row
//! maximum, `exp` in f32, the sum of the unrounded exponentials, the probabilities rounded to
//! `p_dtype` for the second product, and one division at the end (as flash-attention kernels
//! normalise once per row instead of per probability).

use super::interp::{Memory, Run, compute, needed, read, var_slot};
use super::{AttentionBody, AttnOperand, Expr, Kernel, Var};
use crate::dtype::DType;
use crate::scalar::{Scalar as Val, cast};
use std::collections::BTreeSet;

/// Checks the attention-specific invariants of kernel `k` (the structural ones are in
/// [`super::analysis::check_kernel`]); `uses` holds the loop variables each expression uses.
pub(super) fn validate(k: &Kernel, a: &AttentionBody, uses: &[BTreeSet<Var>]) -> Result<(), String> {
    for (name, o, rows, cols) in [("q", &a.q, a.m, a.d), ("k", &a.k, a.kv, a.d), ("v", &a.v, a.kv, a.dv)] {
        let arg = k.args.get(o.arg).ok_or_else(|| format!("attention operand {name} binds a missing argument"))?;
        if !in_range(o, a, rows, cols, arg.numel) {
            return Err(format!("attention operand {name} reads past its {} elements", arg.numel));
        }
    }
    let score = k.exprs.get(a.score.0 as usize).ok_or("the attention score does not exist")?;
    if score.dtype != DType::F32 {
        return Err(format!("the attention score is {}, not f32", score.dtype));
    }
    let accs = |roots: &[super::ExprId]| -> BTreeSet<usize> {
        super::analysis::closure(k, roots, &|_| false)
            .into_iter()
            .filter_map(|e| match k.exprs.get(e as usize).map(|t| &t.expr) {
                Some(Expr::Acc(s)) => Some(*s),
                _ => None,
            })
            .collect()
    };
    let vars = |roots: &[super::ExprId]| -> BTreeSet<Var> {
        super::analysis::closure(k, roots, &|_| false)
            .into_iter()
            .filter_map(|e| uses.get(e as usize))
            .flat_map(|u| u.iter().copied())
            .collect()
    };
    if accs(&[a.score]).contains(&0) || vars(&[a.score]).contains(&Var::N) {
        return Err("the attention score reads the output (accumulator 0 or n)".into());
    }
    for s in &a.stores {
        let roots = super::analysis::store_roots(s);
        if accs(&roots).contains(&1) || vars(&roots).contains(&Var::Key) || s.index.uses(Var::Key) {
            return Err("an attention store reads a score (accumulator 1 or key)".into());
        }
    }
    Ok(())
}

/// Whether every element an operand of `rows x cols` per flat batch reads lies inside `numel`.
fn in_range(o: &AttnOperand, a: &AttentionBody, rows: usize, cols: usize, numel: usize) -> bool {
    if a.batch == 0 || a.heads == 0 || rows == 0 || cols == 0 || o.group == 0 {
        return true;
    }
    let terms = [(a.batch - 1, o.s_batch), ((a.heads - 1) / o.group, o.s_head), (rows - 1, o.s_row), (cols - 1, 1)];
    let hi = terms.iter().try_fold(o.offset, |acc, &(n, s)| n.checked_mul(s).and_then(|p| acc.checked_add(p)));
    hi.is_some_and(|hi| hi < numel)
}

/// Runs an attention body on the interpreter's memory.
pub(super) fn run(run: &mut Run, a: &AttentionBody, mem: &mut Memory) -> Result<(), String> {
    let k = run.k;
    let store_need = needed(k, &a.stores.iter().map(|s| s.value).collect::<Vec<_>>(), &a.stores);
    let score_need = needed(k, &[a.score], &[]);
    let arg = |o: &AttnOperand| {
        let x = &k.args[o.arg];
        (x.dtype, mem.of[x.buffer.0 as usize])
    };
    let (q, kk, v) = (arg(&a.q), arg(&a.k), arg(&a.v));
    let at = |o: &AttnOperand, b: usize, r: usize, c: usize| o.at(a.heads, b, r, c);
    run.acc_dt = vec![DType::F32, DType::F32];
    let mut s = vec![0f64; a.kv];
    let mut out = vec![0f64; a.dv];
    for b in 0..a.batch * a.heads {
        for i in 0..a.m {
            run.vars[var_slot(Var::Batch)] = b as i64;
            run.vars[var_slot(Var::M)] = i as i64;
            for (j, sj) in s.iter_mut().enumerate() {
                if a.causal.is_some_and(|o| j > i + o) {
                    *sj = f64::NEG_INFINITY;
                    continue;
                }
                let mut dot = 0f64;
                for c in 0..a.d {
                    let x = read(q.0, &mem.storage[q.1], at(&a.q, b, i, c)).f();
                    let y = read(kk.0, &mem.storage[kk.1], at(&a.k, b, j, c)).f();
                    dot = compute(DType::F32, dot + x * y);
                }
                run.acc = vec![Val::F(0.0), Val::F(dot)];
                run.vars[var_slot(Var::Key)] = j as i64;
                run.eval(&score_need, mem)?;
                *sj = compute(DType::F32, run.vals[a.score.0 as usize].f());
            }
            // NaN propagates through the maximum, as the unfused reduction's does.
            let mx =
                s.iter().fold(f64::NEG_INFINITY, |m, &x| if x.is_nan() || m.is_nan() { f64::NAN } else { m.max(x) });
            let mut l = 0f64;
            out.iter_mut().for_each(|o| *o = 0.0);
            for (j, &sj) in s.iter().enumerate() {
                let e = compute(DType::F32, (sj - mx).exp());
                l = compute(DType::F32, l + e);
                let p = match cast(Val::F(e), DType::F64, a.p_dtype) {
                    Val::F(x) => x,
                    Val::I(x) => x as f64,
                };
                for (n, o) in out.iter_mut().enumerate() {
                    let y = read(v.0, &mem.storage[v.1], at(&a.v, b, j, n)).f();
                    *o = compute(DType::F32, *o + p * y);
                }
            }
            run.vars[var_slot(Var::Key)] = 0;
            for (n, &o) in out.iter().enumerate() {
                run.acc = vec![Val::F(compute(DType::F32, o / l)), Val::F(0.0)];
                run.vars[var_slot(Var::N)] = n as i64;
                run.eval(&store_need, mem)?;
                run.store(&a.stores, mem)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::dtype::DType;
    use crate::testsuite::programs::{AttnCase, AttnMask, attention, attention_graph};
    use crate::testsuite::{Tol, compare};

    fn random(shape: &[usize], dt: DType, seed: u64) -> crate::HostTensor {
        let n: usize = shape.iter().product();
        let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let vals: Vec<f64> = (0..n)
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((x >> 33) as f64 / (1u64 << 31) as f64) * 2.0 - 1.0
            })
            .collect();
        if dt == DType::Bool {
            // Keep key 0 visible so no row is fully masked.
            let cols = *shape.last().unwrap();
            let b: Vec<i64> = vals.iter().enumerate().map(|(i, v)| (i % cols == 0 || *v > -0.3) as i64).collect();
            return crate::HostTensor::from_i64(DType::Bool, shape.to_vec(), &b);
        }
        crate::HostTensor::from_f64(dt, shape.to_vec(), &vals)
    }

    /// The interpreter's attention body agrees with the CPU reference of the unfused graph.
    #[test]
    fn interpreter_matches_the_unfused_reference() {
        let mut cases = [
            AttnCase::new(2, 3, 7, 5, 4, DType::F32),
            AttnCase::new(1, 2, 1, 33, 8, DType::BF16),
            AttnCase { causal: Some(0), ..AttnCase::new(1, 2, 9, 9, 8, DType::F16) },
            AttnCase { causal: Some(3), ..AttnCase::new(2, 1, 4, 7, 8, DType::F32) },
            AttnCase { mask: AttnMask::Additive, ..AttnCase::new(1, 2, 5, 6, 4, DType::F32) },
            AttnCase { mask: AttnMask::Bool, bshd: true, ..AttnCase::new(2, 2, 5, 6, 4, DType::BF16) },
            AttnCase { kv_heads: 2, dv: 6, bshd: true, ..AttnCase::new(2, 4, 3, 5, 4, DType::F32) },
        ];
        cases[0].dv = 3;
        for (ci, c) in cases.iter().enumerate() {
            let p = attention(c);
            let g = attention_graph(c);
            let inputs: Vec<_> = c
                .input_shapes()
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    let dt = if i < 3 {
                        c.dtype
                    } else if c.mask == AttnMask::Bool {
                        DType::Bool
                    } else {
                        DType::F32
                    };
                    random(s, dt, (ci * 10 + i) as u64)
                })
                .collect();
            let got = crate::kernel::interp::run_program(&p, &inputs).unwrap();
            let want = crate::cpu::run(&g, &inputs).unwrap();
            compare(&got, &want, Tol::sum(c.kv + c.d, 1.0).times(4.0))
                .unwrap_or_else(|e| panic!("case {ci} {c:?}: {e}"));
        }
    }
}
