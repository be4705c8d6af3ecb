//! Convolutions lowered to matmuls: the plan chosen before stage A ([`ConvPlan`]: legality here,
//! profitability by [`CostModel::conv_as_matmul`](super::CostModel::conv_as_matmul)) and the
//! kernels of a lowered convolution (a 1x1 convolution on strided views, or an im2col gather kernel
//! and a matmul batched over groups storing NCHW).

use super::ConvShape;
use super::build::{BufRef, KernelBuilder, MatOut, MatRef, MatSpec, Member, Phase, Space, Target, delinearize};
use super::emit::Refusal;
use super::plan::{Kind, Sched, acc_dtype};
use super::window_plan::Tap;
use crate::dtype::DType;
use crate::error::Error;
use crate::ir::{BinaryOp, NodeId, Op, Window2d};
use crate::kernel::{Expr, Im2col, Index, RedOp, Var};

/// How a convolution is computed (decided before stage A: legality here, profitability by the
/// [`CostModel`](super::CostModel)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ConvPlan {
    /// A window kernel: one thread per output element looping over `C/groups * kh * kw` taps.
    Window,
    /// A 1x1, stride-1, unpadded, ungrouped convolution is a plain batched matmul on strided views:
    /// `out[b] = W[OC, C] @ x[b][C, H*W]` (batch over images, the weight broadcast), no copy.
    Direct,
    /// An im2col gather kernel writes `cols[g][C/groups * kh * kw, N * OH * OW]` (taps outside the
    /// image read 0), then one matmul per group, batched over groups, `W[g] @ cols[g]`, stores NCHW.
    /// With [`ScheduleOptions::outer_batch`](super::ScheduleOptions::outer_batch) and one group,
    /// `cols[N][C * kh * kw, OH * OW]` and a product per image, `W @ cols[image]` (the batch stays
    /// outermost).
    Im2col,
    /// Implicit GEMM: the matmul of [`ConvPlan::Im2col`] with its B operand the im2col view of the
    /// input computed in the loader ([`crate::kernel::Im2col`]), no `cols` buffer and no gather
    /// kernel. The input is read through strides (a contiguous copy when no strides express it).
    Implicit,
}

impl Sched<'_> {
    /// Chooses how every live convolution is computed and records why.
    pub(super) fn plan_convs(&mut self) {
        for i in 0..self.g.nodes.len() {
            let id = NodeId(i as u32);
            let Op::Conv2d { window, groups } = self.g.node(id).op else { continue };
            if !self.live[i] || self.numel_of(id) == 0 {
                continue;
            }
            let (plan, reason, shape) = self.conv_choice(id, &window, groups);
            self.conv[i] = plan;
            self.decide(vec![id.0], false, format!("conv lowering: {reason}"), vec![]);
            if let (ConvPlan::Implicit, Some(shape)) = (plan, shape) {
                self.channels_last_input(id, &shape);
            }
        }
        self.plan_channels_last();
        for i in 0..self.g.nodes.len() {
            let id = NodeId(i as u32);
            if matches!(self.g.node(id).op, Op::Conv2d { .. }) && self.conv[i] == ConvPlan::Implicit && self.live[i] {
                self.channels_last_output(id);
            }
        }
        for i in 0..self.g.nodes.len() {
            let id = NodeId(i as u32);
            let window = match self.g.node(id).op {
                Op::Conv2d { .. } => self.conv[i] == ConvPlan::Window,
                Op::Pool2d { .. } => true,
                _ => false,
            };
            if window && self.live[i] && self.numel_of(id) > 0 {
                self.window_input_layout(id);
            }
        }
    }

    /// Stores the node a window kernel `id` (a convolution kept as a window, or a pooling) reads
    /// through a transpose in the transpose's order ([`Sched::layout`]) when the transpose would
    /// make the window's rows strided: the window kernel then reads its input as row-major NCHW,
    /// and the producer writes across its own rows once instead of every tap reading across them.
    /// Only where every user of the node is that transpose, and never for graph inputs, constants
    /// or outputs. Measured (H200): ConvNeXt-Tiny's first depthwise convolution reads its stem's
    /// LayerNorm (stored `[N, H, W, C]`) through `Transpose(0, 3, 1, 2)`: 480 us, against 68 us for
    /// the same convolution in the next block, which reads NCHW.
    fn window_input_layout(&mut self, id: NodeId) {
        let x = self.g.node(id).inputs[0];
        let Op::Permute(p) = &self.g.node(x).op else { return };
        let y = self.g.node(x).inputs[0];
        // A window of a channels-last region reads the permute's source in its own order.
        if self.layout[id.index()].is_some() {
            return;
        }
        let yi = y.index();
        if p.len() != 4 || p[3] == 3 || !self.may_relayout(y) {
            return;
        }
        if !self.users[yi].iter().all(|&u| matches!(&self.g.node(u).op, Op::Permute(q) if q == p)) {
            return;
        }
        self.layout[yi] = Some(p.clone());
        self.decide(
            vec![y.0],
            false,
            format!(
                "layout: {y} stored in the order {x} reads it (permutation {p:?}) for window {id}: its rows read \
                 contiguously instead of across the channels"
            ),
            vec![],
        );
    }

    /// Stores the input of implicit convolution `id` channels-last ([`Sched::layout`]) where
    /// the cost model wants it and the input is a rank-4 node the scheduler computes (not a graph
    /// input, constant or output) from another implicit convolution, recording why.
    fn channels_last_input(&mut self, id: NodeId, shape: &super::ConvShape) {
        let x = self.g.node(id).inputs[0];
        let xi = x.index();
        if !self.may_relayout(x) {
            return;
        }
        // Only where another implicit convolution produces it (through elementwise ops: its
        // epilogue), whose split epilogue then writes in that order. A 1x1 convolution on a
        // library product, a pool or any other kernel would store it across channels (measured
        // on an H200: ResNet-18's max pool writing NHWC took 104 us instead of 43, ResNet-50's
        // 1x1 products lost their library epilogue: 1.89 -> 2.09 ms at batch 8).
        if !self.produced_by_implicit_conv(x) {
            self.channels_last_pool(id, x, shape);
            return;
        }
        if let Ok(why) = self.opts.cost_model.conv_channels_last(shape, self.caps) {
            self.layout[xi] = Some(vec![0, 2, 3, 1]);
            self.decide(
                vec![x.0],
                false,
                format!("layout: {x} stored channels-last (NHWC) for conv {id}: {why}"),
                vec![],
            );
        }
    }

    /// Stores the output of implicit convolution `id` channels-last where its input is
    /// channels-last and every use of it, through pointwise ops, ends in a node already stored
    /// channels-last: a convolution whose batch norm is fused into a later kernel (ResNet's
    /// downsampling blocks: the block's second convolution is stored raw and read by the
    /// shortcut's epilogue). The reader then walks both in the same order. Measured on an H200
    /// (session 19, ncu): ResNet-18's three shortcut epilogues took 27.4, 14.6 and 9.6 us reading
    /// the raw convolution `NCHW` in `NHWC` order, about 2.5x what their bytes take.
    fn channels_last_output(&mut self, id: NodeId) {
        let x = self.g.node(id).inputs[0];
        let nhwc = Some(vec![0, 2, 3, 1]);
        if self.layout[x.index()] != nhwc || !self.may_relayout(id) {
            return;
        }
        let (mut stack, mut seen) = (self.users[id.index()].clone(), 0);
        while let Some(u) = stack.pop() {
            seen += 1;
            if seen > 32 {
                return;
            }
            if self.layout[u.index()] == nhwc {
                continue;
            }
            if self.kind[u.index()] != Kind::Pointwise || !self.outputs_of[u.index()].is_empty() {
                return;
            }
            stack.extend(self.users[u.index()].iter().copied());
        }
        self.layout[id.index()] = nhwc;
        self.decide(
            vec![id.0],
            false,
            format!(
                "layout: conv {id} channels-last (NHWC) wherever it is stored: its input is, and every use of it \
                 ends in a channels-last node"
            ),
            vec![],
        );
    }

    /// Stores pool `x` (the input of implicit convolution `id`) and the pool's own input
    /// channels-last where an implicit convolution produces that input (ResNet's stem, its max pool
    /// and the first block's convolution): the pool then walks its output in storage order
    /// (`storage_order::storage_order`) and reads and writes channel-contiguous, and the convolution
    /// reads channels-last. Measured on an H200 (session 18): ResNet-18's first block convolution
    /// took 113 us on cuDNN reading the pool's `NCHW` output, against 61-68 us for the same
    /// convolution reading `NHWC` later in the block.
    fn channels_last_pool(&mut self, id: NodeId, x: NodeId, shape: &super::ConvShape) {
        if !matches!(self.g.node(x).op, Op::Pool2d { .. }) {
            return;
        }
        let y = self.g.node(x).inputs[0];
        if !self.may_relayout(y) || !self.produced_by_implicit_conv(y) {
            return;
        }
        if let Ok(why) = self.opts.cost_model.conv_channels_last(shape, self.caps) {
            for n in [y, x] {
                self.layout[n.index()] = Some(vec![0, 2, 3, 1]);
            }
            self.decide(
                vec![y.0, x.0],
                false,
                format!("layout: pool {x} and its input {y} stored channels-last (NHWC) for conv {id}: {why}"),
                vec![],
            );
        }
    }

    /// Whether node `n` may be stored in another order than its logical one ([`Sched::layout`]):
    /// a rank-4 node the scheduler computes (not a graph input, constant, movement or output)
    /// that no earlier decision laid out.
    pub(super) fn may_relayout(&self, n: NodeId) -> bool {
        let i = n.index();
        let computed = !matches!(self.kind[i], Kind::Input(_) | Kind::Constant | Kind::Movement);
        computed && self.shapes[i].len() == 4 && self.outputs_of[i].is_empty() && self.layout[i].is_none()
    }

    /// Whether node `x` is an implicit convolution or computed from one through elementwise ops
    /// only (any input, up to 32 nodes back).
    fn produced_by_implicit_conv(&self, x: NodeId) -> bool {
        let mut stack = vec![x];
        let mut seen = 0;
        while let Some(n) = stack.pop() {
            seen += 1;
            if seen > 32 {
                return false;
            }
            if matches!(self.g.node(n).op, Op::Conv2d { .. }) {
                if self.conv[n.index()] == ConvPlan::Implicit {
                    return true;
                }
                continue;
            }
            if self.kind[n.index()] == Kind::Pointwise {
                stack.extend(self.g.node(n).inputs.iter().copied());
            }
        }
        false
    }

    /// The legal lowerings of convolution `id`, and the cost model's pick among them.
    pub(super) fn conv_choice(
        &self,
        id: NodeId,
        window: &Window2d,
        groups: usize,
    ) -> (ConvPlan, String, Option<ConvShape>) {
        let node = self.g.node(id);
        let (xs, ws, out) =
            (&self.shapes[node.inputs[0].index()], &self.shapes[node.inputs[1].index()], &self.shapes[id.index()]);
        let dt = node.ty.dtype;
        let acc = acc_dtype(RedOp::Sum, dt);
        if !dt.is_float() || !self.caps.dtypes.contains(&acc) || !self.caps.dtypes.contains(&dt) {
            return (ConvPlan::Window, format!("window: {dt} convolution (matmuls are lowered for float types)"), None);
        }
        let g = groups.max(1);
        let kg = ws[1] * ws[2] * ws[3];
        if kg == 0 {
            return (ConvPlan::Window, "window: empty reduction".into(), None);
        }
        let (n, p) = (out[0], out[2] * out[3]);
        let direct = g == 1 && ws[2] == 1 && ws[3] == 1 && window.stride == [1, 1] && window.padding == [0; 4];
        let cols = if direct { 0 } else { g * kg * n * p };
        // Renderers index with 32-bit integers and reject matmul extents above u32::MAX / 2.
        let limit = (u32::MAX / 2) as usize;
        if [cols, n * p, kg, ws[0], xs.iter().product::<usize>()].iter().any(|&e| e > limit) {
            return (
                ConvPlan::Window,
                format!("window: im2col of {cols} elements exceeds the 32-bit matmul extents"),
                None,
            );
        }
        let shape = ConvShape {
            batch: n,
            in_channels: xs[1],
            out_channels: ws[0],
            groups: g,
            kernel: [ws[2], ws[3]],
            out_hw: [out[2], out[3]],
            im2col_bytes: cols * dt.size_bytes(),
            dtype: dt,
            tf32: self.opts.tf32.conv && dt == DType::F32 && acc == DType::F32,
        };
        let cm = &self.opts.cost_model;
        let (plan, why) = match cm.conv_as_matmul(&shape, self.caps) {
            Ok(r) if direct => (ConvPlan::Direct, r),
            // Implicit GEMM is legal wherever the im2col lowering is (same extents, no buffer).
            Ok(r) => match cm.conv_implicit(&shape, self.caps) {
                Ok(why) => (ConvPlan::Implicit, why),
                Err(not) => (ConvPlan::Im2col, format!("{r}; {not}")),
            },
            Err(r) => (ConvPlan::Window, r),
        };
        (plan, why, Some(shape))
    }

    /// A convolution as a matmul kernel (see [`ConvPlan`]): the weight and the input (directly, or
    /// through an im2col buffer written by a gather kernel just before) are strided operands; the
    /// bias and any fused epilogue are computed on the accumulator and stored NCHW. Returns the
    /// binding count and limit when a kernel would bind too many buffers (the caller then drops
    /// what was pushed and schedules a window kernel instead).
    pub(super) fn sched_conv_matmul(&mut self, w: NodeId) -> Result<Option<(usize, usize)>, Error> {
        let node = self.g.node(w).clone();
        let Op::Conv2d { window, groups } = node.op else {
            return Err(Error::Unsupported(format!("schedule: {w} is not a convolution")));
        };
        let (x, wt) = (node.inputs[0], node.inputs[1]);
        let xs = self.shapes[x.index()].clone();
        let ws = self.shapes[wt.index()].clone();
        let out = self.shapes[w.index()].clone();
        let dt = node.ty.dtype;
        let g = groups.max(1);
        let (nb, oc, cg, kh, kw) = (out[0], ws[0], ws[1], ws[2], ws[3]);
        let (cog, kg, p) = (oc / g, cg * kh * kw, out[2] * out[3]);
        let plan = self.conv[w.index()];
        // One product per image: a 1x1 convolution, or im2col with the batch kept outermost.
        let per_image = plan == ConvPlan::Direct || (self.opts.outer_batch && g == 1 && plan != ConvPlan::Implicit);
        let (space, ar, br) = if plan == ConvPlan::Direct {
            // out[b] = W[OC, C] @ x[b][C, H*W]
            let space = Space::Matmul { batch: nb, m: oc, n: p, k: kg, out: MatOut::plain(oc, p) };
            let wc = [Index::var(Var::M), Index::var(Var::Red), Index::Const(0), Index::Const(0)];
            let ar = self.mat_operand(w, wt, &wc, &space, [Var::Batch, Var::M, Var::Red], [nb, oc, kg], true)?;
            let n = Index::var(Var::N);
            let xc = [Index::var(Var::Batch), Index::var(Var::Red), n.clone().div(xs[3] as i64), n.rem(xs[3] as i64)];
            let br = self.mat_operand(w, x, &xc, &space, [Var::Batch, Var::Red, Var::N], [nb, kg, p], false)?;
            (space, ar, br)
        } else if per_image {
            // out[b] = W[OC, C * kh * kw] @ cols[b][C * kh * kw, OH * OW]
            let space = Space::Matmul { batch: nb, m: oc, n: p, k: kg, out: MatOut::plain(oc, p) };
            let mut wc = vec![Index::var(Var::M)];
            wc.extend(delinearize(&Index::var(Var::Red), &[cg, kh, kw]));
            let ar = self.mat_operand(w, wt, &wc, &space, [Var::Batch, Var::M, Var::Red], [nb, oc, kg], true)?;
            let br = match self.im2col(w, &window, g, true)? {
                Ok(br) => br,
                Err(over) => return Ok(Some(over)),
            };
            (space, ar, br)
        } else {
            // out[:, g*cog + m, pixel] = sum_r W[g*cog + m, r] * cols[g][r, image * P + pixel]
            let out_map = MatOut { s_batch: cog * p, s_outer: oc * p, s_m: p, inner: p };
            let space = Space::Matmul { batch: g, m: cog, n: nb * p, k: kg, out: out_map };
            let red = delinearize(&Index::var(Var::Red), &[cg, kh, kw]);
            let mut wc = vec![Index::var(Var::Batch).mul(cog as i64).add(Index::var(Var::M))];
            wc.extend(red);
            let ar = self.mat_operand(w, wt, &wc, &space, [Var::Batch, Var::M, Var::Red], [g, cog, kg], false)?;
            let br = if plan == ConvPlan::Implicit {
                self.implicit_operand(w, &window)?
            } else {
                match self.im2col(w, &window, g, false)? {
                    Ok(br) => br,
                    Err(over) => return Ok(Some(over)),
                }
            };
            (space, ar, br)
        };
        let pos = self.kernels.len();
        let mut kb = KernelBuilder::new(space.clone());
        for r in [&ar, &br] {
            let (dt, n) = self.buf_info(&r.buf);
            kb.read_arg(r.buf.clone(), dt, n);
        }
        let acc = acc_dtype(RedOp::Sum, dt);
        let tf32 = self.tf32_for(w, self.opts.tf32.conv, dt, acc, "conv");
        kb.matmul = Some(MatSpec { a: ar, b: br, in_dtype: dt, acc_dtype: acc, tf32 });
        let mut v = kb.push(Expr::Acc(0), dt);
        if let Some(&bias) = node.inputs.get(2) {
            let ch = if per_image {
                Index::var(Var::M)
            } else {
                Index::var(Var::Batch).mul(cog as i64).add(Index::var(Var::M))
            };
            let bv = self.emit(&mut kb, pos, bias, &[ch], Phase::Epilogue).map_err(|r| Self::internal(r, self))?;
            v = kb.push(Expr::Binary(BinaryOp::Add, v, bv), dt);
        }
        let Space::Matmul { out: out_map, .. } = &space else { unreachable!() };
        let index = kb.simp(&out_map.flat());
        kb.computed.insert(w);
        kb.members.push(Member::root(w, v, index, Phase::Epilogue));
        match self.check(&kb) {
            Ok(()) => {}
            Err(Refusal::Bindings { would, limit }) => return Ok(Some((would, limit))),
            Err(r) => return Err(Self::internal(r, self)),
        }
        self.kernels.push(kb);
        self.place[w.index()] = Some(pos);
        Ok(None)
    }

    /// The im2col buffer of convolution `w` with `g` groups, `[g][C/g * kh * kw][N * OH * OW]`
    /// row-major (`per_image`, one group: `[N][C * kh * kw][OH * OW]`), written by a pointwise
    /// gather kernel (taps in the padding read 0); returns it as the matmul's B operand (batch over
    /// groups, or over images); `Err((would, limit))` when the gather kernel would bind too many
    /// buffers.
    #[allow(clippy::type_complexity)]
    fn im2col(
        &mut self,
        w: NodeId,
        window: &Window2d,
        g: usize,
        per_image: bool,
    ) -> Result<Result<MatRef, (usize, usize)>, Error> {
        let node = self.g.node(w);
        let x = node.inputs[0];
        let ws = &self.shapes[node.inputs[1].index()];
        let out = &self.shapes[w.index()];
        let (cg, kh, kw) = (ws[1], ws[2], ws[3]);
        let (nb, oh, ow) = (out[0], out[2], out[3]);
        let (kg, cols) = (cg * kh * kw, nb * oh * ow);
        let dt = self.g.ty(x).dtype;
        let numel = g * kg * cols;
        let id = self.copies.len();
        self.copies.push((dt, numel));
        let pos = self.kernels.len();
        let mut kb = KernelBuilder::new(Space::Pointwise { numel });
        kb.label = Some("im2col");
        let l = Index::var(Var::Lane);
        let c = if per_image {
            // [n][c][ky][kx][oy][ox], reordered to the [g][c][ky][kx][n][oy][ox] roles below.
            let d = delinearize(&l, &[nb, cg, kh, kw, oh, ow]);
            vec![Index::Const(0), d[1].clone(), d[2].clone(), d[3].clone(), d[0].clone(), d[4].clone(), d[5].clone()]
        } else {
            delinearize(&l, &[g, cg, kh, kw, nb, oh, ow])
        };
        let tap = Tap {
            n: c[4].clone(),
            chan: c[0].clone().mul(cg as i64).add(c[1].clone()),
            oy: c[5].clone(),
            ox: c[6].clone(),
            ky: c[2].clone(),
            kx: c[3].clone(),
        };
        let value = self.conv_tap(&mut kb, pos, x, window, &tap, Phase::Lane).map_err(|r| Self::internal(r, self))?;
        kb.computed.insert(w);
        kb.members.push(Member {
            target: Target::Operand(id),
            value,
            index: l,
            phase: Phase::Lane,
            root: false,
            ready: usize::MAX,
        });
        match self.check(&kb) {
            Ok(()) => {}
            Err(Refusal::Bindings { would, limit }) => return Ok(Err((would, limit))),
            Err(r) => return Err(Self::internal(r, self)),
        }
        self.kernels.push(kb);
        self.decide(
            vec![w.0],
            false,
            format!("materialized: im2col of conv {w} ({g} x {kg} x {cols} {dt}, {} bytes)", numel * dt.size_bytes()),
            vec![pos],
        );
        Ok(Ok(if per_image {
            MatRef {
                buf: BufRef::Operand(id),
                offset: 0,
                s_batch: kg * oh * ow,
                s_row: oh * ow,
                s_col: 1,
                im2col: None,
            }
        } else {
            MatRef { buf: BufRef::Operand(id), offset: 0, s_batch: kg * cols, s_row: cols, s_col: 1, im2col: None }
        }))
    }

    /// The implicit im2col operand of convolution `w` (batch over its groups): the
    /// input read through its NCHW strides when they express it, else through a contiguous
    /// `[N, C, H * W]` copy made first (recorded as any operand copy).
    fn implicit_operand(&mut self, w: NodeId, window: &Window2d) -> Result<MatRef, Error> {
        let node = self.g.node(w);
        let x = node.inputs[0];
        let xs = self.shapes[x.index()].clone();
        let ws = &self.shapes[node.inputs[1].index()];
        let out = &self.shapes[w.index()];
        let (cg, kh, kw) = (ws[1], ws[2], ws[3]);
        let out_hw = [out[2], out[3]];
        let geo = |s_img: usize, s_chan: usize, s_y: usize, s_x: usize| Im2col {
            channels: cg,
            in_hw: [xs[2], xs[3]],
            kernel: [kh, kw],
            stride: window.stride,
            pad: [window.padding[0], window.padding[1]],
            dilation: window.dilation,
            out_hw,
            s_img,
            s_chan,
            s_y,
            s_x,
        };
        // Probe x's view with (Batch, M, N, Red) standing for (image, channel, row, column).
        let probe = Space::Matmul { batch: xs[0], m: xs[1], n: xs[2], k: xs[3], out: MatOut::plain(xs[1], xs[2]) };
        let xc = [Index::var(Var::Batch), Index::var(Var::M), Index::var(Var::N), Index::var(Var::Red)];
        let view = {
            let kb = KernelBuilder::new(probe);
            self.view_index(&kb, self.kernels.len(), x, &xc).and_then(|(buf, ix)| {
                let (off, coefs) = super::matmul_plan::affine(&ix)?;
                let coef = |v: Var| coefs.iter().find(|(u, _)| *u == v).map_or(0, |(_, k)| *k);
                let s = [coef(Var::Batch), coef(Var::M), coef(Var::N), coef(Var::Red)];
                let known = coefs.iter().all(|(v, _)| matches!(v, Var::Batch | Var::M | Var::N | Var::Red));
                (off >= 0 && known && s.iter().all(|&k| k >= 0)).then(|| (buf, off as usize, s.map(|k| k as usize)))
            })
        };
        let (buf, offset, [s_img, s_chan, s_y, s_x]) = match view {
            Some(v) => v,
            None => {
                let (h, wd) = (xs[2], xs[3]);
                let red = Index::var(Var::Red);
                let c = [Index::var(Var::Batch), Index::var(Var::M), red.clone().div(wd as i64), red.rem(wd as i64)];
                let r =
                    self.operand_copy(w, x, &c, [Var::Batch, Var::M, Var::Red], [xs[0], xs[1], h * wd], false, None)?;
                (r.buf, 0, [xs[1] * h * wd, h * wd, wd, 1])
            }
        };
        let im2col = geo(s_img, s_chan, s_y, s_x);
        Ok(MatRef { buf, offset, s_batch: cg * s_chan, s_row: 0, s_col: 0, im2col: Some(Box::new(im2col)) })
    }
}
