//! Channels-last regions ([`Sched::plan_channels_last`], run by `plan_convs` once every
//! convolution's lowering is chosen): a model that permutes its `[N, C, H, W]` activations to
//! `[N, H, W, C]` for a LayerNorm and per-pixel linear layers, and back for a depthwise
//! convolution and the residual sum (ConvNeXt's block, torchvision's `LayerNorm2d`), keeps the
//! activations between those permutes channels-last in memory ([`Sched::layout`]
//! `[0, 2, 3, 1]`). Every permute then reads contiguously: the LayerNorm's rows are whole
//! vectors, and the residual kernel reads the linear layer's `[N*H*W, C]` output in the order it
//! walks its own stores (`storage_order`). In the logical layout each of those kernels read or
//! wrote across the channels (measured on an H200, session 20: ConvNeXt-Tiny's layer scale and
//! residual kernels 182 us against torch.compile's ~40, its 19 LayerNorms 201 us against ~76).
//!
//! The region is the largest set of rank-4 nodes the scheduler computes (pointwise nodes,
//! depthwise window convolutions and library-eligible implicit convolutions) such that
//! * every user of a member is a permute to channels-last, a reduction, or a pointwise node or
//!   depthwise convolution of the region (which then walks channels-last too);
//! * every full-size input of a pointwise member or depthwise convolution is a member, or a
//!   permute from channels-last of a node kept row-major (whose buffer already is that order).
//!
//! Found by removing offenders from the candidates until none is left (a greatest fixed point,
//! by worklist: a removal re-checks only its neighbours).
//! Contract: only storage orders change (the program computes the same values; the scheduler's
//! tests check it in the interpreter), and the decision names every node it lays out.

use super::conv::ConvPlan;
use super::plan::{Kind, Sched};
use crate::ir::{NodeId, Op};

/// The storage order of a channels-last node (`Sched::layout`).
const NHWC: [usize; 4] = [0, 2, 3, 1];
/// The permute that reads an `[N, C, H, W]` node as `[N, H, W, C]`.
const TO_CHANNELS_LAST: [usize; 4] = [0, 2, 3, 1];
/// The storage order of a depthwise window's constant `[C, 1, kh, kw]` weights: `[1, kh, kw, C]`.
const TAP_MAJOR: [usize; 4] = [1, 2, 3, 0];
/// The permute that reads an `[N, H, W, C]` node as `[N, C, H, W]`.
const FROM_CHANNELS_LAST: [usize; 4] = [0, 3, 1, 2];

impl Sched<'_> {
    /// Lays out the channels-last region (see the module's contract) and records why.
    pub(super) fn plan_channels_last(&mut self) {
        let n = self.g.nodes.len();
        // No permute to channels-last, no region (and no cost-model query for any convolution).
        if !(0..n).any(|i| self.live[i] && self.is_permute(NodeId(i as u32), &TO_CHANNELS_LAST)) {
            return;
        }
        let mut member: Vec<bool> = (0..n).map(|i| self.channels_last_candidate(NodeId(i as u32))).collect();
        if !member.iter().any(|&m| m) {
            return;
        }
        // A worklist: removing a node can only break its users' conditions (on their inputs) and
        // its inputs' (on their users), so only those are checked again.
        let mut work: Vec<usize> = (0..n).filter(|&i| member[i]).collect();
        while let Some(i) = work.pop() {
            if !member[i] || self.channels_last_holds(NodeId(i as u32), &member) {
                continue;
            }
            member[i] = false;
            let near = self.users[i].iter().chain(&self.g.nodes[i].inputs);
            work.extend(near.map(|m| m.index()).filter(|&m| member[m]));
        }
        // Each connected part of the region needs a permute to channels-last reading it: else
        // nothing of it reads across the channels, and its logical order serves as well.
        let mut nodes: Vec<u32> = Vec::new();
        let mut seen = vec![false; n];
        for start in 0..n {
            if !member[start] || seen[start] {
                continue;
            }
            let (mut part, mut stack) = (Vec::new(), vec![start]);
            seen[start] = true;
            while let Some(i) = stack.pop() {
                part.push(i as u32);
                let near = self.users[i].iter().chain(&self.g.nodes[i].inputs);
                for &m in near {
                    if member[m.index()] && !seen[m.index()] {
                        seen[m.index()] = true;
                        stack.push(m.index());
                    }
                }
            }
            let permuted =
                part.iter().any(|&i| self.users[i as usize].iter().any(|&u| self.is_permute(u, &TO_CHANNELS_LAST)));
            if permuted {
                nodes.extend(part);
            }
        }
        if nodes.is_empty() {
            return;
        }
        nodes.sort_unstable();
        for &i in &nodes {
            self.layout[i as usize] = Some(NHWC.to_vec());
        }
        let weights = self.tap_major_weights(&member);
        let count = nodes.len();
        self.decide(
            nodes,
            false,
            format!(
                "layout: {count} nodes stored channels-last (NHWC) between permutes to and from channels-last: \
                 the permutes read contiguously, and the kernels between them walk channels-last"
            ),
            vec![],
        );
        if !weights.is_empty() {
            self.decide(
                weights,
                false,
                "layout: depthwise weights stored tap-major ([kh, kw, C]): a warp of a channels-last window reads \
                 consecutive channels of one tap",
                vec![],
            );
        }
    }

    /// Stores the constant weights of the region's depthwise windows tap-major
    /// (`Sched::layout` `[1, 2, 3, 0]`, the buffer permuted when the program is built), where
    /// every user of the weight is such a window: consecutive threads of a window walking
    /// channels-last then read consecutive weights of a tap instead of weights `kh * kw` apart.
    /// Measured on an H200 (session 22, call 1): ConvNeXt-Tiny's 18 depthwise windows walking
    /// channels-last with `[C, 1, 7, 7]` weights took 1.29 ms against 0.43 in NCHW.
    fn tap_major_weights(&mut self, member: &[bool]) -> Vec<u32> {
        let mut out = Vec::new();
        for i in 0..self.g.nodes.len() {
            let id = NodeId(i as u32);
            if !member[i] || self.kind[i] != Kind::Conv {
                continue;
            }
            let w = self.g.node(id).inputs[1];
            let wi = w.index();
            let windows_only = self.users[wi].iter().all(|&u| {
                member[u.index()]
                    && self.kind[u.index()] == Kind::Conv
                    && self.conv[u.index()] == ConvPlan::Window
                    && self.g.node(u).inputs[1] == w
                    && self.g.node(u).inputs[0] != w
            });
            if self.kind[wi] == Kind::Constant && self.numel_of(w) > 1 && self.layout[wi].is_none() && windows_only {
                self.layout[wi] = Some(TAP_MAJOR.to_vec());
                out.push(w.0);
            }
        }
        out
    }

    /// Whether node `id` may join a channels-last region: a live rank-4 node the scheduler may
    /// lay out that is pointwise, a depthwise window convolution, or an implicit convolution the
    /// cost model would run channels-last.
    fn channels_last_candidate(&self, id: NodeId) -> bool {
        let i = id.index();
        if !self.live[i] || !self.may_relayout(id) || self.numel_of(id) == 0 {
            return false;
        }
        match self.kind[i] {
            Kind::Pointwise => true,
            Kind::Conv => match self.conv[i] {
                ConvPlan::Window => self.depthwise(id),
                ConvPlan::Implicit => {
                    let Op::Conv2d { window, groups } = &self.g.node(id).op else { return false };
                    let (_, _, shape) = self.conv_choice(id, window, *groups);
                    shape.is_some_and(|s| self.opts.cost_model.conv_channels_last(&s, self.caps).is_ok())
                }
                _ => false,
            },
            _ => false,
        }
    }

    /// Whether member `id` keeps the region's conditions given the current `member` set.
    fn channels_last_holds(&self, id: NodeId, member: &[bool]) -> bool {
        let i = id.index();
        let users_ok = self.users[i].iter().all(|&u| {
            let ui = u.index();
            self.is_permute(u, &TO_CHANNELS_LAST)
                || self.kind[ui] == Kind::Reduce
                || (member[ui]
                    && (self.kind[ui] == Kind::Pointwise
                        || (self.kind[ui] == Kind::Conv
                            && self.conv[ui] == ConvPlan::Window
                            && self.g.node(u).inputs[0] == id)))
        });
        if !users_ok {
            return false;
        }
        let full = self.numel_of(id);
        let node = self.g.node(id);
        let inputs: &[NodeId] = match self.kind[i] {
            Kind::Pointwise => &node.inputs,
            Kind::Conv if self.conv[i] == ConvPlan::Window => &node.inputs[..1],
            _ => &[],
        };
        inputs.iter().all(|&a| {
            self.numel_of(a) < full
                || member[a.index()]
                || (self.is_permute(a, &FROM_CHANNELS_LAST) && self.layout[self.g.node(a).inputs[0].index()].is_none())
        })
    }

    /// Whether node `id` is the permute `p`.
    fn is_permute(&self, id: NodeId, p: &[usize]) -> bool {
        matches!(&self.g.node(id).op, Op::Permute(q) if q == p)
    }

    /// Whether convolution `id` is depthwise: one input and one output channel per group.
    fn depthwise(&self, id: NodeId) -> bool {
        let node = self.g.node(id);
        let Op::Conv2d { groups, .. } = node.op else { return false };
        let (x, y) = (&self.shapes[node.inputs[0].index()], &self.shapes[id.index()]);
        groups > 1 && x.len() == 4 && x[1] == groups && y[1] == groups
    }
}
