//! Placing matmuls (stage B): each operand read through strides (batch, row, column) when its
//! inline tree is an affine view of one buffer, else through a contiguous copy made by a pointwise
//! kernel; then a matmul kernel whose stores later nodes join as epilogues.

use super::build::{BufRef, KernelBuilder, MatOut, MatRef, MatSpec, Member, Phase, Space, Target, delinearize};
use super::plan::{Sched, acc_dtype, numel};
use crate::dtype::DType;
use crate::error::Error;
use crate::ir::NodeId;
use crate::kernel::{Expr, Index, RedOp, Var};

impl Sched<'_> {
    /// The strided form of a matmul operand read at coordinates `c`, or a contiguous copy.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn mat_operand(
        &mut self,
        mm: NodeId,
        opnd: NodeId,
        c: &[Index],
        space: &Space,
        vars: [Var; 3],
        copy_shape: [usize; 3],
        broadcast_batch: bool,
    ) -> Result<MatRef, Error> {
        match self.mat_view(opnd, c, space, vars, None) {
            Some(r) => Ok(r),
            None => self.operand_copy(mm, opnd, c, vars, copy_shape, broadcast_batch, None),
        }
    }

    /// The strided form of a matmul operand read at coordinates `c` (in `vars`: batch, row,
    /// column), when its inline tree is an affine view of one buffer; with `widen`, a view of the
    /// fp8 buffer under the operand's widening cast (`prologue.rs`).
    fn mat_view(
        &self,
        opnd: NodeId,
        c: &[Index],
        space: &Space,
        vars: [Var; 3],
        widen: Option<DType>,
    ) -> Option<MatRef> {
        let pos = self.kernels.len();
        let probe = KernelBuilder::new(space.clone());
        let (buf, ix) = match widen {
            Some(d) => self.view_index_widened(&probe, pos, opnd, c, d)?,
            None => self.view_index(&probe, pos, opnd, c)?,
        };
        let (off, coefs) = affine(&ix)?;
        let coef = |v: Var| coefs.iter().find(|(w, _)| *w == v).map_or(0, |(_, k)| *k);
        let (sb, sr, sc) = (coef(vars[0]), coef(vars[1]), coef(vars[2]));
        let only_known = coefs.iter().all(|(v, _)| vars.contains(v));
        (off >= 0 && only_known && sb >= 0 && sr >= 0 && sc >= 0).then_some(MatRef {
            buf,
            offset: off as usize,
            s_batch: sb as usize,
            s_row: sr as usize,
            s_col: sc as usize,
            im2col: None,
        })
    }

    /// A contiguous `[batch, rows, cols]` copy of a contraction operand read at coordinates `c`
    /// (in `vars`), made by a pointwise kernel (batch 1 when `broadcast_batch`); with `cast_to`,
    /// converted to that dtype (an f32 operand a 16-bit kernel reads: `attention::scaled_operand`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn operand_copy(
        &mut self,
        mm: NodeId,
        opnd: NodeId,
        c: &[Index],
        vars: [Var; 3],
        copy_shape: [usize; 3],
        broadcast_batch: bool,
        cast_to: Option<DType>,
    ) -> Result<MatRef, Error> {
        // Materialize a contiguous [batch, rows, cols] copy with a pointwise kernel.
        let [b, r, cc] = copy_shape;
        let b = if broadcast_batch { 1 } else { b };
        let dt = cast_to.unwrap_or(self.g.ty(opnd).dtype);
        let id = self.copies.len();
        self.copies.push((dt, b * r * cc));
        let pos = self.kernels.len();
        let mut kb = KernelBuilder::new(Space::Pointwise { numel: b * r * cc });
        let l = Index::var(Var::Lane);
        let sub = delinearize(&l, &[b, r, cc]);
        let map = |i: &Index| i.substitute(vars[0], &sub[0]).substitute(vars[1], &sub[1]).substitute(vars[2], &sub[2]);
        let lc: Vec<Index> = c.iter().map(map).collect();
        let mut value = self.emit(&mut kb, pos, opnd, &lc, Phase::Lane).map_err(|e| Self::internal(e, self))?;
        if dt != self.g.ty(opnd).dtype {
            value = kb.push(Expr::Cast(value), dt);
        }
        kb.members.push(Member {
            target: Target::Operand(id),
            value,
            index: l,
            phase: Phase::Lane,
            root: false,
            ready: usize::MAX,
        });
        if let Err(e) = self.check(&kb) {
            return Err(Self::internal(e, self));
        }
        self.kernels.push(kb);
        self.decide(
            vec![opnd.0, mm.0],
            false,
            format!("materialized: {} operand {opnd} copied (not expressible by strides)", self.g.node(mm).op.name()),
            vec![pos],
        );
        let (sb, sr, sc) = if b == 1 { (0, cc, 1) } else { (r * cc, cc, 1) };
        Ok(MatRef { buf: BufRef::Operand(id), offset: 0, s_batch: sb, s_row: sr, s_col: sc, im2col: None })
    }

    pub(super) fn sched_matmul(&mut self, mm: NodeId) -> Result<(), Error> {
        let node = self.g.node(mm);
        let (a, b) = (node.inputs[0], node.inputs[1]);
        let (sa, sb) = (self.shapes[a.index()].clone(), self.shapes[b.index()].clone());
        let a2 = if sa.len() == 1 { vec![1, sa[0]] } else { sa.clone() };
        let b2 = if sb.len() == 1 { vec![sb[0], 1] } else { sb.clone() };
        let (ra, rb) = (a2.len(), b2.len());
        let (m, k, n) = (a2[ra - 2], a2[ra - 1], b2[rb - 1]);
        let rbatch = (ra - 2).max(rb - 2);
        let pad = |s: &[usize]| -> Vec<usize> {
            let mut v = vec![1; rbatch - s.len()];
            v.extend_from_slice(s);
            v
        };
        let (ba, bb) = (pad(&a2[..ra - 2]), pad(&b2[..rb - 2]));
        let bdims: Vec<usize> = ba.iter().zip(&bb).map(|(&x, &y)| x.max(y)).collect();
        let batch = numel(&bdims);
        if k == 0 {
            return Err(Error::Unsupported(format!("schedule: matmul {mm} has an empty inner dimension")));
        }
        // A second operand shared by the whole batch (no batch dims): the product is one matrix
        // product over all batch rows when the first operand's rows can be read that way.
        let shared_b = sb.len() <= 2 && batch > 1 && sa.len() >= 3;
        let folded = if shared_b { self.fold_rows(a, &sa, &bdims, m) } else { None };
        let (batch, m) = match &folded {
            Some(_) => (1, batch * m),
            None => (batch, m),
        };
        let space = Space::Matmul { batch, m, n, k, out: MatOut::plain(m, n) };
        let bc = delinearize(&Index::var(Var::Batch), &bdims);
        let coords = |bshape: &[usize], orig_rank: usize, r: Index, c: Index, one_d_row: bool| -> Vec<Index> {
            if orig_rank == 1 {
                return vec![if one_d_row { c } else { r }];
            }
            let mut v: Vec<Index> = bcast_batch(&bc, bshape)[rbatch - (orig_rank - 2)..].to_vec();
            v.push(r);
            v.push(c);
            v
        };
        let ca = coords(&ba, sa.len(), Index::var(Var::M), Index::var(Var::Red), true);
        let cb = coords(&bb, sb.len(), Index::var(Var::Red), Index::var(Var::N), false);
        let a_bcast = ba.iter().all(|&d| d == 1);
        let b_bcast = bb.iter().all(|&d| d == 1);
        // The fp8 prologue: both operands read as fp8 through strides, or neither.
        let mut widened = None;
        if let Some(d) = self.prologue[mm.index()] {
            let views = if folded.is_some() {
                Err("the first operand's batch is folded into rows".to_string())
            } else {
                let va = self.mat_view(a, &ca, &space, [Var::Batch, Var::M, Var::Red], Some(d));
                let vb = self.mat_view(b, &cb, &space, [Var::Batch, Var::Red, Var::N], Some(d));
                va.zip(vb).ok_or_else(|| format!("an operand is no strided view of its {d} buffer"))
            };
            match views {
                Ok(v) => widened = Some((d, v)),
                Err(why) => {
                    self.prologue[mm.index()] = None;
                    self.decide(
                        vec![mm.0],
                        false,
                        format!("refused: prologue: matmul {mm}: {why} (operands copied as f32, the cast inlined)"),
                        vec![],
                    );
                }
            }
        }
        let took = widened.as_ref().map(|(d, _)| *d);
        let (in_dtype, (ar, br, fold_note)) = match widened {
            Some((d, (va, vb))) => (d, (va, vb, None)),
            None => {
                (self.g.ty(a).dtype, self.plain_operands(mm, (a, b), (ca, cb), &space, (a_bcast, b_bcast), folded)?)
            }
        };
        let pos = self.kernels.len();
        let mut kb = KernelBuilder::new(space.clone());
        for r in [&ar, &br] {
            let (dt, n) = self.buf_info(&r.buf);
            kb.read_arg(r.buf.clone(), dt, n);
        }
        let acc = acc_dtype(RedOp::Sum, in_dtype);
        let tf32 = self.tf32_for(mm, self.opts.tf32.matmul, in_dtype, acc, "matmul");
        kb.matmul = Some(MatSpec { a: ar, b: br, in_dtype, acc_dtype: acc, tf32 });
        let v = kb.push(Expr::Acc(0), node.ty.dtype);
        let index = kb.simp(&MatOut::plain(m, n).flat());
        kb.computed.insert(mm);
        kb.members.push(Member::root(mm, v, index, Phase::Epilogue));
        self.check(&kb).map_err(|e| Self::internal(e, self))?;
        self.kernels.push(kb);
        self.place[mm.index()] = Some(pos);
        if let Some(note) = fold_note {
            self.decide(vec![a.0, mm.0], false, note, vec![pos]);
        }
        if let Some(d) = took {
            self.record_prologue(mm, d, pos);
        }
        Ok(())
    }

    /// The operands of matmul `mm` read as their own values (strided views or copies), the first
    /// one folded over the batch rows when `folded` says so (then with the decision's note).
    fn plain_operands(
        &mut self,
        mm: NodeId,
        (a, b): (NodeId, NodeId),
        (ca, cb): (Vec<Index>, Vec<Index>),
        space: &Space,
        (a_bcast, b_bcast): (bool, bool),
        folded: Option<(Vec<Index>, Option<MatRef>)>,
    ) -> Result<(MatRef, MatRef, Option<String>), Error> {
        let Space::Matmul { batch, m, n, k, .. } = *space else {
            return Err(Error::Unsupported(format!("schedule: matmul {mm} outside a matmul space")));
        };
        let sa = self.shapes[a.index()].clone();
        let mut fold_note = None;
        let ar = match folded {
            Some((ca, view)) => {
                let how = if view.is_some() { "read through strides" } else { "copied first" };
                let r = match view {
                    Some(r) => r,
                    None => self.operand_copy(mm, a, &ca, [Var::Batch, Var::M, Var::Red], [1, m, k], true, None)?,
                };
                fold_note = Some(format!(
                    "layout: matmul {mm} batch {} x {} rows as one product of {m} rows (the second operand has no \
                     batch dims; the first {how})",
                    m / sa[sa.len() - 2],
                    sa[sa.len() - 2]
                ));
                r
            }
            None => self.mat_operand(mm, a, &ca, space, [Var::Batch, Var::M, Var::Red], [batch, m, k], a_bcast)?,
        };
        let br = self.mat_operand(mm, b, &cb, space, [Var::Batch, Var::Red, Var::N], [batch, k, n], b_bcast)?;
        Ok((ar, br, fold_note))
    }
}

impl Sched<'_> {
    /// Whether a matmul whose second operand has no batch dims runs as one product over all
    /// `batch x m` rows of the first (`a`, shape `sa`, batch dims `bdims`): `Some` with the first
    /// operand's coordinates in the folded row (`Var::M`) and its strided view when it has one.
    ///
    /// Folded when the rows are a strided view (the same bytes as the batched product, one launch
    /// of a large tile instead of `batch` small ones), or when `m` is under [`FOLD_ROWS_BELOW`]
    /// (then the first operand is copied first): a batch of products of a few rows each keeps
    /// tensor-core and library tiles mostly idle. Measured on an H100: torchvision's ViT-B/16
    /// (nn.MultiheadAttention, sequence-first) at batch 2 ran its input projections as 197
    /// products of 2 x 768 x 2304, 643 us each.
    #[allow(clippy::type_complexity)]
    fn fold_rows(&self, a: NodeId, sa: &[usize], bdims: &[usize], m: usize) -> Option<(Vec<Index>, Option<MatRef>)> {
        let rows: Vec<usize> = bdims.iter().copied().chain(std::iter::once(m)).collect();
        let total = numel(&rows);
        let k = sa[sa.len() - 1];
        let rc = delinearize(&Index::var(Var::M), &rows);
        // `a`'s own batch dims are the trailing ones of the full batch (it has all of them here:
        // the second operand has none).
        let mut ca: Vec<Index> = rc[rc.len() - (sa.len() - 1)..].to_vec();
        ca.push(Index::var(Var::Red));
        let space = Space::Matmul { batch: 1, m: total, n: 1, k, out: MatOut::plain(total, 1) };
        let view = self.mat_view(a, &ca, &space, [Var::Batch, Var::M, Var::Red], None);
        (view.is_some() || m < FOLD_ROWS_BELOW).then_some((ca, view))
    }
}

impl Sched<'_> {
    /// Whether contraction `node` (f32 operands `in_dtype` into `acc`) may run in TF32 under the
    /// setting `allowed` for its kind (`what`: matmul or conv); records the decision when it may.
    pub(super) fn tf32_for(&mut self, node: NodeId, allowed: bool, in_dtype: DType, acc: DType, what: &str) -> bool {
        let tf32 = allowed && in_dtype == DType::F32 && acc == DType::F32;
        if tf32 {
            let n = self.kernels.len();
            self.decide(
                vec![node.0],
                false,
                format!("precision: {what} {node} products may run in TF32 (allow_tf32 {what}; f32 accumulation)"),
                vec![n],
            );
        }
        tf32
    }
}

/// Rows per product under which a batched matmul with a shared second operand is folded into one
/// product even when its first operand must be copied for it.
pub(super) const FOLD_ROWS_BELOW: usize = 64;

/// Batch coordinates of an operand with batch dims `bshape` (padded to the full batch rank) from
/// the full batch coordinates `bc`.
fn bcast_batch(bc: &[Index], bshape: &[usize]) -> Vec<Index> {
    bc.iter().zip(bshape).map(|(c, &d)| if d == 1 { Index::Const(0) } else { c.clone() }).collect()
}

/// `offset + sum coef * var` when `i` is affine in loop variables.
pub(super) fn affine(i: &Index) -> Option<(i64, Vec<(Var, i64)>)> {
    let mut off = 0i64;
    let mut coefs: Vec<(Var, i64)> = Vec::new();
    let mut add = |v: Var, k: i64| match coefs.iter_mut().find(|(w, _)| *w == v) {
        Some((_, kk)) => *kk += k,
        None => coefs.push((v, k)),
    };
    let terms: Vec<&Index> = match i {
        Index::Sum(ts) => ts.iter().collect(),
        other => vec![other],
    };
    for t in terms {
        match t {
            Index::Const(c) => off += c,
            Index::Var(v) => add(*v, 1),
            Index::Mul(x, k) => match &**x {
                Index::Var(v) => add(*v, *k),
                _ => return None,
            },
            _ => return None,
        }
    }
    Some((off, coefs))
}
