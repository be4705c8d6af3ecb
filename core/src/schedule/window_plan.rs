//! Window kernels (stage B): convolutions kept as windows and poolings, one thread per output
//! element looping over the window (a reduce kernel whose stores later nodes join as epilogues), and
//! the tap arithmetic (padded coordinates, masks) shared with the im2col gather.

use super::build::{KernelBuilder, Member, Phase, Space, Target, delinearize};
use super::conv::ConvPlan;
use super::emit::Refusal;
use super::plan::{Sched, acc_dtype, numel};
use crate::dtype::DType;
use crate::error::Error;
use crate::ir::{BinaryOp, NodeId, Op, PoolKind, Window2d};
use crate::kernel::{Expr, ExprId, Index, IndexCmp, RedOp, Reduction, Var};

/// The most negative (or positive) value of a dtype, as a max (min) pooling fill.
fn lowest(dt: DType) -> f64 {
    match dt {
        d if d.is_float() => f64::NEG_INFINITY,
        DType::I8 => i8::MIN as f64,
        DType::I16 => i16::MIN as f64,
        DType::I32 => i32::MIN as f64,
        DType::I64 => i64::MIN as f64,
        _ => 0.0,
    }
}

impl Sched<'_> {
    pub(super) fn sched_window(&mut self, w: NodeId) -> Result<(), Error> {
        if self.conv[w.index()] != ConvPlan::Window {
            let mark = (self.kernels.len(), self.copies.len(), self.decisions.len());
            match self.sched_conv_matmul(w)? {
                None => return Ok(()),
                Some((would, limit)) => {
                    // Large operands bound as many windows: fall back to the window kernel.
                    self.kernels.truncate(mark.0);
                    self.copies.truncate(mark.1);
                    self.decisions.truncate(mark.2);
                    self.conv[w.index()] = ConvPlan::Window;
                    let reason = format!("conv lowering: window (as a matmul it would bind {would} buffers > {limit})");
                    match self.decisions.iter_mut().find(|d| d.nodes == [w.0] && d.reason.starts_with("conv lowering"))
                    {
                        Some(d) => d.reason = reason,
                        None => self.decide(vec![w.0], false, reason, vec![]),
                    }
                }
            }
        }
        let node = self.g.node(w).clone();
        let x = node.inputs[0];
        let xs = self.shapes[x.index()].clone();
        let out = self.shapes[w.index()].clone();
        let dt = node.ty.dtype;
        let rows = numel(&out);
        let (window, len) = match &node.op {
            Op::Conv2d { window, .. } => {
                let ws = &self.shapes[node.inputs[1].index()];
                (*window, ws[1] * ws[2] * ws[3])
            }
            Op::Pool2d { window, .. } => (*window, window.kernel[0] * window.kernel[1]),
            _ => return Err(Error::Unsupported(format!("schedule: {w} is not a window op"))),
        };
        let pos = self.kernels.len();
        let mut kb = KernelBuilder::new(Space::Window { rows, len });
        let e = |s: &Sched, r: Refusal| Self::internal(r, s);
        let rc = delinearize(&Index::var(Var::Row), &out);
        let [pt, pl, pb, pr] = window.padding.map(|p| p as i64);
        let (h, wd) = (xs[2] as i64, xs[3] as i64);
        let (kh, kw) = (window.kernel[0], window.kernel[1]);
        match &node.op {
            Op::Conv2d { groups, .. } => {
                let ws = self.shapes[node.inputs[1].index()].clone();
                let (cg, co) = (ws[1], ws[0]);
                let cog = co / groups;
                let red = delinearize(&Index::var(Var::Red), &[cg, kh, kw]);
                let chan = rc[1].clone().div(cog as i64).mul(cg as i64).add(red[0].clone());
                let ph = Phase::Value(0);
                let tap = Tap {
                    n: rc[0].clone(),
                    chan,
                    oy: rc[2].clone(),
                    ox: rc[3].clone(),
                    ky: red[1].clone(),
                    kx: red[2].clone(),
                };
                let xm = self.conv_tap(&mut kb, pos, x, &window, &tap, ph).map_err(|r| e(self, r))?;
                let wv = self
                    .emit(
                        &mut kb,
                        pos,
                        node.inputs[1],
                        &[rc[1].clone(), red[0].clone(), red[1].clone(), red[2].clone()],
                        ph,
                    )
                    .map_err(|r| e(self, r))?;
                let value = kb.push(Expr::Binary(BinaryOp::Mul, xm, wv), dt);
                kb.reductions.push(Reduction { op: RedOp::Sum, value, slot: 0, dtype: acc_dtype(RedOp::Sum, dt) });
                let mut v = kb.push(Expr::Acc(0), dt);
                if let Some(&bias) = node.inputs.get(2) {
                    let bv = self.emit(&mut kb, pos, bias, &[rc[1].clone()], Phase::Row).map_err(|r| e(self, r))?;
                    v = kb.push(Expr::Binary(BinaryOp::Add, v, bv), dt);
                }
                kb.members.push(Member {
                    target: Target::Node(w),
                    value: v,
                    index: Index::var(Var::Row),
                    phase: Phase::Row,
                    root: true,
                    ready: usize::MAX,
                });
            }
            Op::Pool2d { kind, count_include_pad, .. } => {
                let red = delinearize(&Index::var(Var::Red), &[kh, kw]);
                let (iy, ix) = taps(&window, rc[2].clone(), rc[3].clone(), red[0].clone(), red[1].clone());
                let xc = vec![
                    rc[0].clone(),
                    rc[1].clone(),
                    iy.clone().clamp(pt, pt + h - 1).add(Index::Const(-pt)),
                    ix.clone().clamp(pl, pl + wd - 1).add(Index::Const(-pl)),
                ];
                let ph = Phase::Value(0);
                let xv = self.emit(&mut kb, pos, x, &xc, ph).map_err(|r| e(self, r))?;
                let inside = tap_mask(&mut kb, &iy, &ix, Some((pt, pl)), (pt + h, pl + wd));
                let fill = if *kind == PoolKind::Max { lowest(dt) } else { 0.0 };
                let value = match inside {
                    Ok(None) => xv,
                    Ok(Some(m)) => {
                        let f = kb.konst(fill, dt);
                        kb.push(Expr::Where(m, xv, f), dt)
                    }
                    Err(()) => kb.konst(fill, dt),
                };
                let op = if *kind == PoolKind::Max { RedOp::Max } else { RedOp::Sum };
                kb.reductions.push(Reduction { op, value, slot: 0, dtype: acc_dtype(op, dt) });
                let mut v = kb.push(Expr::Acc(0), dt);
                if *kind == PoolKind::Avg {
                    let counted = if *count_include_pad {
                        tap_mask(&mut kb, &iy, &ix, None, (h + pt + pb, wd + pl + pr))
                    } else {
                        tap_mask(&mut kb, &iy, &ix, Some((pt, pl)), (pt + h, pl + wd))
                    };
                    let one = kb.konst(1.0, dt);
                    let cv = match counted {
                        Ok(None) => one,
                        Ok(Some(m)) => {
                            let z = kb.konst(0.0, dt);
                            kb.push(Expr::Where(m, one, z), dt)
                        }
                        Err(()) => kb.konst(0.0, dt),
                    };
                    kb.reductions.push(Reduction {
                        op: RedOp::Sum,
                        value: cv,
                        slot: 1,
                        dtype: acc_dtype(RedOp::Sum, dt),
                    });
                    let cnt = kb.push(Expr::Acc(1), dt);
                    v = kb.push(Expr::Binary(BinaryOp::Div, v, cnt), dt);
                }
                kb.members.push(Member {
                    target: Target::Node(w),
                    value: v,
                    index: Index::var(Var::Row),
                    phase: Phase::Row,
                    root: true,
                    ready: usize::MAX,
                });
            }
            _ => {}
        }
        kb.computed.insert(w);
        self.check(&kb).map_err(|r| e(self, r))?;
        self.kernels.push(kb);
        self.place[w.index()] = Some(pos);
        Ok(())
    }

    /// The input of a convolution at one tap: `x` read at the padded coordinates of `tap`
    /// (clamped into the image) and zero where the tap falls into the padding.
    pub(super) fn conv_tap(
        &self,
        kb: &mut KernelBuilder,
        pos: usize,
        x: NodeId,
        window: &Window2d,
        tap: &Tap,
        ph: Phase,
    ) -> Result<ExprId, Refusal> {
        let xs = &self.shapes[x.index()];
        let dt = self.g.ty(x).dtype;
        let [pt, pl, _, _] = window.padding.map(|p| p as i64);
        let (h, wd) = (xs[2] as i64, xs[3] as i64);
        let (iy, ix) = taps(window, tap.oy.clone(), tap.ox.clone(), tap.ky.clone(), tap.kx.clone());
        let xc = vec![
            tap.n.clone(),
            tap.chan.clone(),
            iy.clone().clamp(pt, pt + h - 1).add(Index::Const(-pt)),
            ix.clone().clamp(pl, pl + wd - 1).add(Index::Const(-pl)),
        ];
        let xv = self.emit(kb, pos, x, &xc, ph)?;
        Ok(match tap_mask(kb, &iy, &ix, Some((pt, pl)), (pt + h, pl + wd)) {
            Ok(None) => xv,
            Ok(Some(m)) => {
                let z = kb.konst(0.0, dt);
                kb.push(Expr::Where(m, xv, z), dt)
            }
            Err(()) => kb.konst(0.0, dt),
        })
    }
}

/// One tap of a convolution window: image, input channel, output pixel and window offset.
pub(super) struct Tap {
    pub(super) n: Index,
    pub(super) chan: Index,
    pub(super) oy: Index,
    pub(super) ox: Index,
    pub(super) ky: Index,
    pub(super) kx: Index,
}

/// Padded input coordinates `(oy * sh + ky * dh, ox * sw + kx * dw)` of a window tap.
fn taps(window: &Window2d, oy: Index, ox: Index, ky: Index, kx: Index) -> (Index, Index) {
    let [sh, sw] = window.stride;
    let [dh, dw] = window.dilation;
    (oy.mul(sh as i64).add(ky.mul(dh as i64)), ox.mul(sw as i64).add(kx.mul(dw as i64)))
}

/// The mask of taps `(iy, ix)` with `lo <= (iy, ix)` (when given) and `(iy, ix) < hi`: `None` when
/// always true, `Err` when never.
fn tap_mask(
    kb: &mut KernelBuilder,
    iy: &Index,
    ix: &Index,
    lo: Option<(i64, i64)>,
    hi: (i64, i64),
) -> Result<Option<ExprId>, ()> {
    let mut m: Option<ExprId> = None;
    let mut conds = Vec::new();
    if let Some((ly, lx)) = lo {
        conds.push((IndexCmp::Ge, iy, ly));
        conds.push((IndexCmp::Ge, ix, lx));
    }
    conds.push((IndexCmp::Lt, iy, hi.0));
    conds.push((IndexCmp::Lt, ix, hi.1));
    for (op, a, b) in conds {
        let t = kb.cmp(op, a, &Index::Const(b));
        m = kb.and(m, t)?;
    }
    Ok(m)
}
