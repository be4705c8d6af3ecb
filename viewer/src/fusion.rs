//! The fusion diagram: the user's (captured) graph with its nodes grouped into boxes, one per
//! kernel they landed in, laid out top to bottom in layers, and coloured by kernel.

use crate::app::{kernel_color, verdict_color};
use crate::artifacts::Run;
use egui::{Align2, Color32, FontId, Pos2, Rect, Sense, Stroke, Vec2};
use sinter_core::profile::{GraphSummary, KernelProfile, fmt_ns};
use std::collections::HashMap;

/// Node box width, px.
pub const NODE_W: f32 = 150.0;
/// Node box height, px.
pub const NODE_H: f32 = 38.0;
const HGAP: f32 = 14.0;
const VGAP: f32 = 22.0;
const PAD: f32 = 10.0;
const TITLE_H: f32 = 34.0;
const GGAP: f32 = 28.0;
/// Kernel boxes are at least this wide so their title fits.
const GROUP_MIN_W: f32 = 190.0;
const ROW_GAP: f32 = 44.0;

/// A group of nodes drawn as one box: a kernel, or a node no kernel computes (an input, a constant).
#[derive(Clone, Debug, PartialEq)]
pub struct GroupBox {
    /// The kernel (index into the profile's kernels), `None` for a lone node.
    pub kernel: Option<usize>,
    /// The box.
    pub rect: Rect,
    /// Graph node indices inside.
    pub nodes: Vec<usize>,
}

/// Positions for everything in the diagram.
#[derive(Clone, Debug, PartialEq)]
pub struct FusionLayout {
    /// One rect per graph node (index into `GraphSummary::nodes`).
    pub nodes: Vec<Rect>,
    /// The group boxes.
    pub groups: Vec<GroupBox>,
    /// Data edges `(from node index, to node index)`.
    pub edges: Vec<(usize, usize)>,
    /// The kernel each node is drawn in (its first kernel in launch order).
    pub primary: Vec<Option<usize>>,
    /// Further kernels that also compute the node (recomputed or split across kernels).
    pub also: Vec<Vec<usize>>,
    /// False when the kernel grouping had a cycle and nodes were laid out one by one.
    pub grouped: bool,
    /// Size of the whole diagram.
    pub size: Vec2,
}

/// Longest-path layers of a DAG with `n` vertices; `None` when `edges` has a cycle.
pub fn dag_layers(n: usize, edges: &[(usize, usize)]) -> Option<Vec<usize>> {
    let mut indeg = vec![0usize; n];
    let mut out: Vec<Vec<usize>> = vec![Vec::new(); n];
    for &(a, b) in edges {
        out[a].push(b);
        indeg[b] += 1;
    }
    let mut layer = vec![0usize; n];
    let mut queue: std::collections::VecDeque<usize> = (0..n).filter(|&v| indeg[v] == 0).collect();
    let mut seen = 0;
    while let Some(v) = queue.pop_front() {
        seen += 1;
        for &w in &out[v] {
            layer[w] = layer[w].max(layer[v] + 1);
            indeg[w] -= 1;
            if indeg[w] == 0 {
                queue.push_back(w);
            }
        }
    }
    (seen == n).then_some(layer)
}

/// Lays out `graph` with nodes grouped by the kernels that compute them.
pub fn layout(graph: &GraphSummary, kernels: &[KernelProfile]) -> FusionLayout {
    let n = graph.nodes.len();
    let index: HashMap<u32, usize> = graph.nodes.iter().enumerate().map(|(i, node)| (node.id, i)).collect();
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (k, kernel) in kernels.iter().enumerate() {
        for id in &kernel.nodes {
            if let Some(&i) = index.get(id)
                && !members[i].contains(&k)
            {
                members[i].push(k);
            }
        }
    }
    let primary: Vec<Option<usize>> = members.iter().map(|m| m.first().copied()).collect();
    let also: Vec<Vec<usize>> = members.iter().map(|m| m.iter().skip(1).copied().collect()).collect();
    let mut edges = Vec::new();
    for (i, node) in graph.nodes.iter().enumerate() {
        for inp in &node.inputs {
            if let Some(&j) = index.get(inp) {
                edges.push((j, i));
            }
        }
    }
    // Groups: one per kernel in use, one per node outside kernels.
    let mut group_of = vec![0usize; n];
    let mut group_kernel: Vec<Option<usize>> = Vec::new();
    let mut kernel_group: HashMap<usize, usize> = HashMap::new();
    for i in 0..n {
        group_of[i] = match primary[i] {
            Some(k) => *kernel_group.entry(k).or_insert_with(|| {
                group_kernel.push(Some(k));
                group_kernel.len() - 1
            }),
            None => {
                group_kernel.push(None);
                group_kernel.len() - 1
            }
        };
    }
    let group_edges: Vec<(usize, usize)> =
        edges.iter().map(|&(a, b)| (group_of[a], group_of[b])).filter(|(a, b)| a != b).collect();
    let (grouped, group_of, group_kernel, group_layer) = match dag_layers(group_kernel.len(), &group_edges) {
        Some(l) => (true, group_of, group_kernel, l),
        None => {
            // A cycle between kernels (inconsistent data): one box per node.
            let gk: Vec<Option<usize>> = (0..n).map(|_| None).collect();
            let layers = dag_layers(n, &edges).unwrap_or_else(|| (0..n).collect());
            (false, (0..n).collect(), gk, layers)
        }
    };
    let ng = group_kernel.len();
    // Local layers inside each group (the arena is topological, so one forward pass works).
    let mut local = vec![0usize; n];
    for (i, node) in graph.nodes.iter().enumerate() {
        for inp in &node.inputs {
            if let Some(&j) = index.get(inp)
                && group_of[j] == group_of[i]
                && j < i
            {
                local[i] = local[i].max(local[j] + 1);
            }
        }
    }
    let mut group_nodes: Vec<Vec<usize>> = vec![Vec::new(); ng];
    for i in 0..n {
        group_nodes[group_of[i]].push(i);
    }
    let mut group_size = vec![Vec2::ZERO; ng];
    for g in 0..ng {
        let layers = group_nodes[g].iter().map(|&i| local[i] + 1).max().unwrap_or(1);
        let mut per = vec![0usize; layers];
        for &i in &group_nodes[g] {
            per[local[i]] += 1;
        }
        let slots = per.iter().copied().max().unwrap_or(1).max(1) as f32;
        let title = if group_kernel[g].is_some() { TITLE_H } else { 0.0 };
        let pad = if group_kernel[g].is_some() { PAD } else { 0.0 };
        let min_w = if group_kernel[g].is_some() { GROUP_MIN_W } else { 0.0 };
        group_size[g] = Vec2::new(
            (slots * NODE_W + (slots - 1.0) * HGAP + 2.0 * pad).max(min_w),
            layers as f32 * NODE_H + (layers as f32 - 1.0) * VGAP + 2.0 * pad + title,
        );
    }
    // Rows of groups, ordered by the barycentre of their predecessors.
    let rows = group_layer.iter().copied().max().map_or(0, |m| m + 1);
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); ng];
    for &(a, b) in &group_edges {
        preds[b].push(a);
    }
    let mut group_rect = vec![Rect::NOTHING; ng];
    let mut row_rects: Vec<(Vec<usize>, f32)> = Vec::new();
    let mut y = 0.0;
    let mut max_w: f32 = 0.0;
    let mut by_row: Vec<Vec<usize>> = vec![Vec::new(); rows];
    for g in 0..ng {
        by_row[group_layer[g]].push(g);
    }
    for mut row in by_row {
        let key = |g: usize| -> f32 {
            let xs: Vec<f32> = preds[g].iter().map(|&p| group_rect[p].center().x).filter(|x| x.is_finite()).collect();
            if xs.is_empty() { f32::MAX } else { xs.iter().sum::<f32>() / xs.len() as f32 }
        };
        let min_node = |g: usize| group_nodes[g].first().copied().unwrap_or(0);
        row.sort_by(|&a, &b| key(a).total_cmp(&key(b)).then(min_node(a).cmp(&min_node(b))));
        let h = row.iter().map(|&g| group_size[g].y).fold(0.0, f32::max);
        let mut x = 0.0;
        for &g in &row {
            group_rect[g] = Rect::from_min_size(Pos2::new(x, y), group_size[g]);
            x += group_size[g].x + GGAP;
        }
        max_w = max_w.max(x - GGAP);
        row_rects.push((row, x - GGAP));
        y += h + ROW_GAP;
    }
    // Centre each row.
    for (row, w) in &row_rects {
        let dx = (max_w - w) / 2.0;
        for &g in row {
            group_rect[g] = group_rect[g].translate(Vec2::new(dx, 0.0));
        }
    }
    // Nodes inside their group.
    let mut nodes = vec![Rect::NOTHING; n];
    for g in 0..ng {
        let r = group_rect[g];
        let (pad, title) = if group_kernel[g].is_some() { (PAD, TITLE_H) } else { (0.0, 0.0) };
        let layers = group_nodes[g].iter().map(|&i| local[i] + 1).max().unwrap_or(1);
        for l in 0..layers {
            let in_layer: Vec<usize> = group_nodes[g].iter().copied().filter(|&i| local[i] == l).collect();
            let w = in_layer.len() as f32 * NODE_W + (in_layer.len() as f32 - 1.0).max(0.0) * HGAP;
            let x0 = r.left() + (r.width() - w) / 2.0;
            for (s, &i) in in_layer.iter().enumerate() {
                let min =
                    Pos2::new(x0 + s as f32 * (NODE_W + HGAP), r.top() + pad + title + l as f32 * (NODE_H + VGAP));
                nodes[i] = Rect::from_min_size(min, Vec2::new(NODE_W, NODE_H));
            }
        }
    }
    let groups = (0..ng)
        .map(|g| GroupBox { kernel: group_kernel[g], rect: group_rect[g], nodes: group_nodes[g].clone() })
        .collect();
    FusionLayout { nodes, groups, edges, primary, also, grouped, size: Vec2::new(max_w, (y - ROW_GAP).max(0.0)) }
}

/// What the fusion panel remembers between frames.
#[derive(Clone, Debug)]
pub struct FusionState {
    /// The layout (computed once per folder).
    pub layout: Option<FusionLayout>,
    /// The scene's visible rectangle (pan and zoom).
    pub scene_rect: Rect,
}

impl FusionState {
    /// Lays out the main run's graph, when the folder has one.
    pub fn new(graph: Option<&GraphSummary>, run: &Run) -> FusionState {
        let layout = graph.map(|g| layout(g, &run.profile.kernels));
        let scene_rect = layout.as_ref().map_or(Rect::ZERO, |l| Rect::from_min_size(Pos2::ZERO, l.size).expand(20.0));
        FusionState { layout, scene_rect }
    }
}

/// Draws the diagram; a click on a node or a kernel box selects the kernel.
pub fn fusion_ui(
    ui: &mut egui::Ui,
    state: &mut FusionState,
    graph: Option<&GraphSummary>,
    run: &Run,
    selected: &mut Option<usize>,
) {
    let (Some(layout), Some(graph)) = (state.layout.as_ref(), graph) else {
        ui.label("This folder has no captured graph (profile.json `graph` or graph.json), so there is no diagram.");
        return;
    };
    ui.horizontal(|ui| {
        ui.label("Drag: pan · Ctrl+wheel: zoom · click a node or kernel box for its details");
        if ui.button("Fit").clicked() {
            state.scene_rect = Rect::from_min_size(Pos2::ZERO, layout.size).expand(20.0);
        }
        if !layout.grouped {
            ui.colored_label(Color32::from_rgb(200, 120, 40), "kernels form a cycle in this data: shown node by node");
        }
    });
    let kernels = &run.profile.kernels;
    let text_color = ui.visuals().text_color();
    let mut clicked: Option<usize> = None;
    let scene = egui::Scene::new().zoom_range(0.05..=2.0).max_inner_size(layout.size + Vec2::splat(40.0));
    let mut scene_rect = state.scene_rect;
    scene.show(ui, &mut scene_rect, |ui| {
        let painter = ui.painter().clone();
        // Group fills, then edges, then group outlines and titles, then nodes on top.
        for g in &layout.groups {
            if let Some(k) = g.kernel {
                painter.rect_filled(g.rect, 6.0, kernel_color(k).gamma_multiply(0.18));
            }
        }
        for &(a, b) in &layout.edges {
            let (ra, rb) = (layout.nodes[a], layout.nodes[b]);
            let cross = layout.primary[a] != layout.primary[b];
            let stroke = if cross {
                Stroke::new(1.6, text_color.gamma_multiply(0.7))
            } else {
                Stroke::new(1.0, text_color.gamma_multiply(0.4))
            };
            let from = Pos2::new(ra.center().x, ra.bottom());
            let to = Pos2::new(rb.center().x, rb.top());
            painter.line_segment([from, to], stroke);
            let dir = (to - from).normalized() * 7.0;
            painter.arrow(to - dir, dir, stroke);
        }
        for (gi, g) in layout.groups.iter().enumerate() {
            let Some(k) = g.kernel else { continue };
            let c = kernel_color(k);
            let sel = *selected == Some(k);
            painter.rect_stroke(
                g.rect,
                6.0,
                Stroke::new(if sel { 3.0 } else { 1.5 }, if sel { text_color } else { c }),
                egui::StrokeKind::Outside,
            );
            let a = &run.analysis.kernels[k];
            let title_rect = Rect::from_min_size(g.rect.min, Vec2::new(g.rect.width(), TITLE_H));
            let radius = egui::CornerRadius { nw: 6, ne: 6, sw: 0, se: 0 };
            painter.rect_filled(title_rect, radius, ui.visuals().extreme_bg_color);
            painter.rect_filled(title_rect, radius, c.gamma_multiply(0.3));
            let clip = painter.with_clip_rect(title_rect);
            clip.text(
                g.rect.min + Vec2::new(PAD, 3.0),
                Align2::LEFT_TOP,
                &kernels[k].name,
                FontId::proportional(12.5),
                text_color,
            );
            clip.text(
                g.rect.min + Vec2::new(PAD, 18.0),
                Align2::LEFT_TOP,
                format!("{} · {}", a.time_ns.map(fmt_ns).unwrap_or_else(|| "untimed".into()), a.verdict),
                FontId::proportional(11.5),
                verdict_color(a.verdict).lerp_to_gamma(text_color, 0.25),
            );
            let resp = ui.interact(title_rect, ui.scope_id().with(("group", gi)), Sense::click());
            let name = kernels[k].name.clone();
            resp.widget_info(|| egui::WidgetInfo::labeled(egui::accesskit::Role::Button, true, &name));
            let resp = resp.on_hover_text(format!("{}: click for details", kernels[k].name));
            if resp.clicked() {
                clicked = Some(k);
            }
        }
        for (i, node) in graph.nodes.iter().enumerate() {
            let r = layout.nodes[i];
            let fill = match layout.primary[i] {
                Some(k) => kernel_color(k),
                None => Color32::from_gray(150),
            };
            painter.rect_filled(r, 4.0, fill);
            let in_sel = selected.is_some_and(|s| layout.primary[i] == Some(s) || layout.also[i].contains(&s));
            if in_sel {
                painter.rect_stroke(r, 4.0, Stroke::new(2.0, Color32::BLACK), egui::StrokeKind::Inside);
            }
            let clip = painter.with_clip_rect(r.shrink(2.0));
            clip.text(
                r.min + Vec2::new(6.0, 4.0),
                Align2::LEFT_TOP,
                format!("%{} {}", node.id, node.op),
                FontId::proportional(13.0),
                Color32::BLACK,
            );
            clip.text(
                r.min + Vec2::new(6.0, 21.0),
                Align2::LEFT_TOP,
                &node.ty,
                FontId::monospace(10.0),
                Color32::from_gray(30),
            );
            for (j, &k) in layout.also[i].iter().enumerate() {
                let chip =
                    Rect::from_min_size(Pos2::new(r.right() - 12.0 - j as f32 * 10.0, r.top() + 3.0), Vec2::splat(8.0));
                painter.rect_filled(chip, 2.0, kernel_color(k));
                painter.rect_stroke(chip, 2.0, Stroke::new(1.0, Color32::BLACK), egui::StrokeKind::Inside);
            }
            let resp = ui.interact(r, ui.scope_id().with(("node", i)), Sense::click());
            let label = format!("%{} {}", node.id, node.op);
            resp.widget_info(|| egui::WidgetInfo::labeled(egui::accesskit::Role::Button, true, &label));
            let mut tip = format!("%{} {}  {}", node.id, node.op, node.ty);
            if !node.attrs.is_empty() {
                tip.push_str(&format!("\n{}", node.attrs));
            }
            match layout.primary[i] {
                Some(k) => tip.push_str(&format!("\nin kernel {}", kernels[k].name)),
                None => tip.push_str("\nnot computed by a kernel (input, constant or view)"),
            }
            for &k in &layout.also[i] {
                tip.push_str(&format!("\nalso computed in {}", kernels[k].name));
            }
            let resp = resp.on_hover_text(tip);
            if resp.clicked() {
                clicked = layout.primary[i].or(clicked);
            }
        }
    });
    state.scene_rect = scene_rect;
    if let Some(k) = clicked {
        *selected = Some(k);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sinter_core::profile::GraphNode;

    fn node(id: u32, op: &str, inputs: &[u32]) -> GraphNode {
        GraphNode { id, op: op.into(), inputs: inputs.to_vec(), ty: "f32[4]".into(), attrs: String::new() }
    }

    fn no_overlap(rects: &[Rect]) -> bool {
        rects
            .iter()
            .enumerate()
            .all(|(i, a)| rects[i + 1..].iter().all(|b| !a.intersects(*b) || a.intersect(*b).area() <= 0.0))
    }

    #[test]
    fn layers_and_cycles() {
        assert_eq!(dag_layers(4, &[(0, 1), (1, 2), (0, 2), (3, 2)]), Some(vec![0, 1, 2, 0]));
        assert_eq!(dag_layers(2, &[(0, 1), (1, 0)]), None);
    }

    #[test]
    fn groups_by_kernel_without_overlap() {
        // x -> layer_norm -> matmul(w) -> add(b) -> gelu
        let g = GraphSummary {
            nodes: vec![
                node(0, "input", &[]),
                node(1, "input", &[]),
                node(2, "input", &[]),
                node(3, "layer_norm", &[0]),
                node(4, "matmul", &[3, 1]),
                node(5, "add", &[4, 2]),
                node(6, "gelu", &[5]),
            ],
            outputs: vec![("y".into(), 6)],
        };
        let ks = vec![
            KernelProfile::new("k0").nodes([3]),
            KernelProfile::new("k1").nodes([4]),
            KernelProfile::new("k2").nodes([5, 6]),
            KernelProfile::new("k3").nodes([3]), // layer_norm also recomputed here
        ];
        let l = layout(&g, &ks);
        assert!(l.grouped);
        assert_eq!(l.primary, vec![None, None, None, Some(0), Some(1), Some(2), Some(2)]);
        assert_eq!(l.also[3], vec![3]);
        // Every node inside its group's box; groups and nodes never overlap.
        for gb in &l.groups {
            for &n in &gb.nodes {
                assert!(gb.rect.contains_rect(l.nodes[n]), "node {n} outside its group");
            }
        }
        assert!(no_overlap(&l.groups.iter().map(|g| g.rect).collect::<Vec<_>>()));
        assert!(no_overlap(&l.nodes));
        // Data flows downward.
        for &(a, b) in &l.edges {
            assert!(l.nodes[a].top() < l.nodes[b].top(), "edge {a}->{b} goes up");
        }
        // add and gelu share one box, one above the other.
        let k2 = l.groups.iter().find(|g| g.kernel == Some(2)).unwrap();
        assert_eq!(k2.nodes, vec![5, 6]);
        assert!(l.size.x > 0.0 && l.size.y > 0.0);
    }

    #[test]
    fn cyclic_grouping_falls_back() {
        // k0 holds nodes 1 and 3, k1 holds node 2: 1 -> 2 -> 3 makes k0 <-> k1 a cycle.
        let g = GraphSummary {
            nodes: vec![node(0, "input", &[]), node(1, "neg", &[0]), node(2, "exp", &[1]), node(3, "abs", &[2])],
            outputs: vec![],
        };
        let ks = vec![KernelProfile::new("k0").nodes([1, 3]), KernelProfile::new("k1").nodes([2])];
        let l = layout(&g, &ks);
        assert!(!l.grouped);
        assert!(no_overlap(&l.nodes));
        assert_eq!(l.primary[3], Some(0));
    }

    #[test]
    fn large_graph_layout_is_fast() {
        let mut nodes = vec![node(0, "input", &[])];
        for i in 1..3000u32 {
            nodes.push(node(i, "add", &[i - 1, i / 2]));
        }
        let g = GraphSummary { nodes, outputs: vec![] };
        let ks: Vec<KernelProfile> = (0..300)
            .map(|k| KernelProfile::new(format!("k{k}")).nodes((1 + k * 10..1 + k * 10 + 10).map(|x| x as u32)))
            .collect();
        let t = std::time::Instant::now();
        let l = layout(&g, &ks);
        assert!(t.elapsed().as_secs_f64() < 2.0);
        assert!(no_overlap(&l.groups.iter().map(|g| g.rect).collect::<Vec<_>>()));
    }
}
