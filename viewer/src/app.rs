//! The viewer window: a header that answers "what dominates and why", tabs for the overview
//! table, timeline, fusion diagram, roofline and pass list, and a side panel with the selected
//! kernel's details (ops, numbers, fusion decisions, source, IR before and after fusion).

use crate::artifacts::{Artifacts, Run, post_fusion_excerpt, pre_fusion_excerpt};
use crate::fusion::{FusionState, fusion_ui};
use crate::passes::{PassState, passes_ui};
use crate::roofline::roofline_ui;
use crate::timeline::{TimelineState, category_color, timeline_ui};
use egui::{Color32, RichText};
use sinter_core::profile::{SpanCategory, Verdict, fmt_ns};
use std::collections::HashMap;
use std::path::PathBuf;

/// The panels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tab {
    /// Summary numbers and the kernel table.
    Overview,
    /// Host and device tracks over time.
    Timeline,
    /// The captured graph grouped by kernel.
    Fusion,
    /// Kernels against the device's ceilings.
    Roofline,
    /// The graph after each pass.
    Passes,
}

impl Tab {
    /// Every tab, in display order.
    pub const ALL: [Tab; 5] = [Tab::Overview, Tab::Timeline, Tab::Fusion, Tab::Roofline, Tab::Passes];

    /// Its title.
    pub fn title(self) -> &'static str {
        match self {
            Tab::Overview => "Overview",
            Tab::Timeline => "Timeline",
            Tab::Fusion => "Fusion",
            Tab::Roofline => "Roofline",
            Tab::Passes => "Passes",
        }
    }
}

/// A distinct pastel colour per kernel index (readable under black text).
pub fn kernel_color(i: usize) -> Color32 {
    let h = (i as f32 * 0.618_034).fract();
    egui::ecolor::Hsva::new(h, 0.45, 0.95, 1.0).into()
}

/// `x` with 3 significant digits (`2514`, `12.6`, `0.00253`), `0` for zero.
pub fn fmt_sig(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let digits = (2 - x.abs().log10().floor() as i32).max(0) as usize;
    format!("{x:.digits$}")
}

/// A count with an SI prefix and 3 significant digits (`132 kB`, `34.4 GFLOP`).
pub fn fmt_si(x: f64, unit: &str) -> String {
    let prefixes = [("", 1.0), ("k", 1e3), ("M", 1e6), ("G", 1e9), ("T", 1e12), ("P", 1e15)];
    let (p, scale) = prefixes.iter().rev().find(|(_, sc)| x.abs() >= *sc).copied().unwrap_or(("", 1.0));
    format!("{} {p}{unit}", fmt_sig(x / scale))
}

/// The colour of a verdict.
pub fn verdict_color(v: Verdict) -> Color32 {
    match v {
        Verdict::ComputeBound => Color32::from_rgb(70, 130, 230),
        Verdict::BandwidthBound => Color32::from_rgb(230, 140, 40),
        Verdict::OverheadBound => Color32::from_rgb(215, 70, 70),
        Verdict::Unknown => Color32::from_gray(140),
    }
}

/// The application state.
pub struct ViewerApp {
    /// The loaded folder.
    pub artifacts: Artifacts,
    /// The visible tab.
    pub tab: Tab,
    /// The selected kernel of the main run.
    pub selected: Option<usize>,
    /// Timeline state.
    pub timeline: TimelineState,
    /// Fusion diagram state.
    pub fusion: FusionState,
    /// Pass list state.
    pub passes: PassState,
    sources: HashMap<usize, Result<(PathBuf, String), String>>,
}

impl ViewerApp {
    /// An app showing `artifacts`, with the dominant kernel selected.
    pub fn new(artifacts: Artifacts) -> ViewerApp {
        let runs = artifacts.runs();
        let timeline = TimelineState::new(&runs);
        let fusion = FusionState::new(artifacts.graph.as_ref(), &artifacts.main);
        let selected = artifacts.main.analysis.dominant.or((!artifacts.main.profile.kernels.is_empty()).then_some(0));
        ViewerApp {
            tab: Tab::Overview,
            selected,
            timeline,
            fusion,
            passes: PassState::default(),
            sources: HashMap::new(),
            artifacts,
        }
    }

    /// Draws the whole window into `ui`.
    pub fn ui(&mut self, ui: &mut egui::Ui) {
        egui::Panel::top("header").show(ui, |ui| self.header_ui(ui));
        if self.tab != Tab::Passes && self.selected.is_some() {
            egui::Panel::right("kernel_details").default_size(430.0).show(ui, |ui| {
                egui::ScrollArea::vertical().show(ui, |ui| self.details_ui(ui));
            });
        }
        egui::CentralPanel::default_margins().show(ui, |ui| {
            let Self { artifacts, tab, selected, timeline, fusion, passes, .. } = self;
            match tab {
                Tab::Overview => overview_ui(ui, artifacts, selected),
                Tab::Timeline => {
                    egui::ScrollArea::vertical()
                        .show(ui, |ui| timeline_ui(ui, timeline, &artifacts.runs(), selected))
                        .inner
                }
                Tab::Fusion => fusion_ui(ui, fusion, artifacts.graph.as_ref(), &artifacts.main, selected),
                Tab::Roofline => roofline_ui(ui, &artifacts.main, selected),
                Tab::Passes => passes_ui(ui, passes, &artifacts.passes),
            }
        });
    }

    fn header_ui(&mut self, ui: &mut egui::Ui) {
        let a = &self.artifacts;
        let p = &a.main.profile;
        ui.horizontal_wrapped(|ui| {
            ui.heading(&p.workload);
            ui.label(format!(
                "{} · {} · {} run{} · {} iteration(s) · {}",
                p.backend,
                p.device.name,
                p.mode,
                if a.baseline.is_some() { " + eager baseline" } else { "" },
                p.iterations,
                a.dir.file_name().map_or_else(|| a.dir.display().to_string(), |n| n.to_string_lossy().to_string())
            ));
        });
        ui.label(RichText::new(a.main.analysis.summary(p)).size(15.0));
        if let (Some(base), Some(main_t)) = (&a.baseline, a.main.per_iteration_ns())
            && let Some(base_t) = base.per_iteration_ns()
        {
            ui.label(
                RichText::new(format!(
                    "Compiled: {} per iteration in {} kernels; eager: {} in {} kernels ({:.2}x).",
                    fmt_ns(main_t),
                    p.kernels.len(),
                    fmt_ns(base_t),
                    base.profile.kernels.len(),
                    base_t / main_t
                ))
                .strong(),
            );
        }
        for w in &a.warnings {
            ui.colored_label(Color32::from_rgb(210, 130, 30), w);
        }
        if !a.graph_breaks.is_empty() {
            let title = format!("Graph breaks ({}): ran on the CPU reference", a.graph_breaks.len());
            egui::CollapsingHeader::new(RichText::new(title).color(Color32::from_rgb(210, 130, 30))).show(ui, |ui| {
                egui::ScrollArea::vertical().id_salt("graph_breaks").max_height(160.0).show(ui, |ui| {
                    for b in &a.graph_breaks {
                        ui.label(format!(
                            "{b} (captured node {} {}, cpu_fallback_{})",
                            b.origin, b.origin_op, b.segment
                        ));
                    }
                });
            });
        }
        ui.horizontal(|ui| {
            for t in Tab::ALL {
                ui.selectable_value(&mut self.tab, t, t.title());
            }
        });
    }

    fn details_ui(&mut self, ui: &mut egui::Ui) {
        let Some(ki) = self.selected else { return };
        let a = &self.artifacts;
        let run = &a.main;
        let Some(k) = run.profile.kernels.get(ki) else {
            ui.label("no such kernel");
            return;
        };
        let an = &run.analysis.kernels[ki];
        ui.heading(&k.name);
        ui.label(RichText::new(an.verdict.label()).color(verdict_color(an.verdict)).strong().size(16.0));
        ui.label(&an.reason);
        ui.separator();
        egui::Grid::new("kernel_numbers").num_columns(2).striped(true).show(ui, |ui| {
            let mut row = |name: &str, value: String| {
                ui.label(name);
                ui.label(value);
                ui.end_row();
            };
            if let Some(s) = &k.stats {
                row(
                    "device time",
                    format!(
                        "median {}, min {}, max {} ({} launches)",
                        fmt_ns(s.median_ns),
                        fmt_ns(s.min_ns),
                        fmt_ns(s.max_ns),
                        s.count
                    ),
                );
            }
            row("share of GPU time", format!("{:.1}%", an.share * 100.0));
            if k.grid != [0; 3] || k.block != [0; 3] {
                row("grid × block", format!("{:?} × {:?}", k.grid, k.block));
            }
            row("bytes moved", fmt_si(k.bytes, "B"));
            row("FLOPs", format!("{} ({})", fmt_si(k.flops, "FLOP"), k.dtype));
            if let Some(i) = an.intensity {
                row("intensity", format!("{i:.2} FLOP/byte"));
            }
            if let Some(g) = an.achieved_gbps {
                row(
                    "bandwidth",
                    format!(
                        "{} GB/s{}",
                        fmt_sig(g),
                        an.bandwidth_fraction.map_or(String::new(), |f| format!(" ({:.0}% of copy)", f * 100.0))
                    ),
                );
            }
            if let Some(t) = an.achieved_tflops {
                row(
                    "compute",
                    format!(
                        "{} TFLOP/s{}",
                        fmt_sig(t),
                        an.compute_fraction.map_or(String::new(), |f| format!(" ({:.0}% of peak)", f * 100.0))
                    ),
                );
            }
            if let Some(r) = k.registers {
                row("registers / thread", r.to_string());
            }
            if let Some(s) = k.shared_mem_bytes {
                row("shared memory", format!("{s} B"));
            }
            if let Some(s) = k.spill_bytes {
                row("spilled / thread", if s == 0 { "none".to_string() } else { format!("{s} B (local memory)") });
            }
            if let Some(c) = &k.contraction {
                row("contraction", format!("{} in {}", c.kind.name(), c.compute));
                row("peak share", contraction_share(c));
                if let Some(m) = &c.peak_method {
                    row("peak method", m.clone());
                }
            }
            if let Some(s) = &k.strategy {
                row("strategy", s.clone());
            }
        });
        ui.separator();
        if k.nodes.is_empty() {
            ui.strong(format!("Fuses {} user op(s)", k.ops.len()));
        } else {
            ui.strong(format!("Computes {} node(s) of the user's graph", k.nodes.len()));
        }
        ui.label(k.ops.join(", "));
        if !k.nodes.is_empty() {
            let nodes: Vec<String> = k.nodes.iter().map(|n| format!("%{n}")).collect();
            ui.label(RichText::new(format!("captured nodes {}", nodes.join(" "))).weak());
        }
        let decisions = a.decisions_for(k);
        if !decisions.is_empty() {
            ui.separator();
            ui.strong("Fusion decisions");
            for d in decisions {
                let others: Vec<&str> = d.kernels.iter().map(String::as_str).filter(|n| *n != k.name).collect();
                let nodes: Vec<String> = d.nodes.iter().map(|n| format!("%{n}")).collect();
                let (mark, color) = if d.fused {
                    ("fused", Color32::from_rgb(60, 160, 80))
                } else {
                    ("not fused", Color32::from_rgb(210, 80, 60))
                };
                ui.horizontal_wrapped(|ui| {
                    ui.label(RichText::new(mark).color(color).strong());
                    if !others.is_empty() {
                        ui.label(format!("with {}", others.join(", ")));
                    }
                    ui.label(RichText::new(format!("({})", nodes.join(" "))).weak());
                });
                ui.label(format!("    {}", d.reason));
            }
        }
        ui.separator();
        let source = self.sources.entry(ki).or_insert_with(|| a.kernel_source(k));
        let title = match source {
            Ok((path, _)) => format!("Source: {}", path.strip_prefix(&a.dir).unwrap_or(path).display()),
            Err(_) => "Source".to_string(),
        };
        egui::CollapsingHeader::new(title).id_salt(("source", ki)).default_open(true).show(ui, |ui| match source {
            Ok((_, text)) => code_box(ui, ("src", ki), text),
            Err(e) => {
                ui.label(e.as_str());
            }
        });
        egui::CollapsingHeader::new("IR before fusion").id_salt(("pre", ki)).show(ui, |ui| match &a.ir_pre_fusion {
            Some(t) => code_box(ui, ("pre", ki), &pre_fusion_excerpt(t, k)),
            None => {
                ui.label("no ir_pre_fusion.txt in this folder");
            }
        });
        egui::CollapsingHeader::new("IR after fusion").id_salt(("post", ki)).show(ui, |ui| match &a.ir_post_fusion {
            Some(t) => code_box(ui, ("post", ki), &post_fusion_excerpt(t, k)),
            None => {
                ui.label("no ir_post_fusion.txt in this folder");
            }
        });
    }
}

fn code_box(ui: &mut egui::Ui, id: impl std::hash::Hash + std::fmt::Debug, text: &str) {
    if text.is_empty() {
        ui.label("(nothing recorded for this kernel)");
        return;
    }
    egui::ScrollArea::both().id_salt(id).max_height(320.0).auto_shrink([false, true]).show(ui, |ui| {
        ui.label(RichText::new(text).monospace().size(11.5));
    });
}

fn overview_ui(ui: &mut egui::Ui, a: &Artifacts, selected: &mut Option<usize>) {
    egui::ScrollArea::vertical().show(ui, |ui| {
        for run in a.runs() {
            run_summary_ui(ui, run);
            kernel_table_ui(ui, run, if std::ptr::eq(run, &a.main) { Some(&mut *selected) } else { None });
            ui.add_space(12.0);
        }
    });
}

fn run_summary_ui(ui: &mut egui::Ui, run: &Run) {
    let p = &run.profile;
    let an = &run.analysis;
    ui.heading(format!("{} run", p.mode));
    ui.horizontal_wrapped(|ui| {
        let mut parts = vec![format!("{} kernels", p.kernels.len()), format!("{} launches", p.launches.len())];
        if let Some(t) = run.per_iteration_ns() {
            parts.push(format!("{} per iteration", fmt_ns(t)));
        }
        if let Some(b) = an.gpu_busy_share {
            parts.push(format!("GPU busy {:.0}%", b * 100.0));
        }
        parts.push(format!("launch gaps {} ({} gaps)", fmt_ns(an.launch_gap_total_ns), an.launch_gap_count));
        if let Some(m) = p.peak_memory_bytes {
            parts.push(format!("peak memory {}", fmt_si(m as f64, "B")));
        }
        let compile: f64 = top_level_compile_ns(run);
        if compile > 0.0 {
            parts.push(format!("compile {}", fmt_ns(compile)));
        }
        ui.label(parts.join(" · "));
    });
    // Compile time by category.
    if !p.compile_spans.is_empty() {
        ui.horizontal_wrapped(|ui| {
            let mut by: Vec<(SpanCategory, f64)> = Vec::new();
            for s in &p.compile_spans {
                if s.category == SpanCategory::Other {
                    continue;
                }
                match by.iter_mut().find(|(c, _)| *c == s.category) {
                    Some((_, t)) => *t += s.dur_ns,
                    None => by.push((s.category, s.dur_ns)),
                }
            }
            for (c, t) in by {
                ui.label(
                    RichText::new(format!("{} {}", c.name(), fmt_ns(t)))
                        .background_color(category_color(c.name()))
                        .color(Color32::BLACK),
                );
            }
        });
    }
}

fn top_level_compile_ns(run: &Run) -> f64 {
    // Union of compile spans (nested ones are inside their parents).
    let mut v: Vec<(f64, f64)> =
        run.profile.compile_spans.iter().map(|s| (s.start_ns, s.start_ns + s.dur_ns)).collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut total = 0.0;
    let mut cur: Option<(f64, f64)> = None;
    for (s, e) in v {
        match &mut cur {
            Some((_, ce)) if s <= *ce => *ce = ce.max(e),
            _ => {
                if let Some((cs, ce)) = cur {
                    total += ce - cs;
                }
                cur = Some((s, e));
            }
        }
    }
    if let Some((cs, ce)) = cur {
        total += ce - cs;
    }
    total
}

fn kernel_table_ui(ui: &mut egui::Ui, run: &Run, mut selected: Option<&mut Option<usize>>) {
    let p = &run.profile;
    let order = run.kernels_by_time();
    let shown = order.len().min(200);
    egui::Grid::new(("kernel_table", p.mode.name())).striped(true).num_columns(8).spacing([14.0, 4.0]).show(ui, |ui| {
        for h in ["kernel", "share of GPU time", "median", "GB/s", "TFLOP/s", "verdict", "ops fused"] {
            ui.strong(h);
        }
        ui.end_row();
        for &ki in &order[..shown] {
            let k = &p.kernels[ki];
            let an = &run.analysis.kernels[ki];
            let is_sel = selected.as_ref().is_some_and(|s| **s == Some(ki));
            let name = RichText::new(&k.name).background_color(crate::app::kernel_color(ki)).color(Color32::BLACK);
            if ui.selectable_label(is_sel, name).clicked()
                && let Some(s) = selected.as_mut()
            {
                **s = Some(ki);
            }
            ui.add(
                egui::ProgressBar::new(an.share as f32).desired_width(140.0).text(format!("{:.1}%", an.share * 100.0)),
            );
            ui.label(an.time_ns.map(fmt_ns).unwrap_or_else(|| "-".into()));
            ui.label(match (an.achieved_gbps, an.bandwidth_fraction) {
                (Some(g), Some(f)) => format!("{} ({:.0}%)", fmt_sig(g), f * 100.0),
                (Some(g), None) => fmt_sig(g),
                _ => "-".into(),
            });
            ui.label(match (an.achieved_tflops, an.compute_fraction) {
                (Some(t), Some(f)) => format!("{} ({:.0}%)", fmt_sig(t), f * 100.0),
                (Some(t), None) => fmt_sig(t),
                _ => "-".into(),
            });
            ui.label(RichText::new(an.verdict.label()).color(verdict_color(an.verdict)).strong())
                .on_hover_text(&an.reason);
            ui.label(k.ops.join(", "));
            ui.end_row();
        }
    });
    if shown < order.len() {
        ui.label(format!("... and {} smaller kernels", order.len() - shown));
    }
}

impl eframe::App for ViewerApp {
    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        ViewerApp::ui(self, ui);
    }
}

/// A contraction's achieved rate and its share of the measured peak of its compute type
/// (`62.5% of the bf16 peak (500 of 800 TFLOP/s)`), or why there is none.
pub fn contraction_share(c: &sinter_core::profile::Contraction) -> String {
    match (c.achieved_tflops, c.peak_tflops, c.peak_share, c.peak_compute.as_deref()) {
        (Some(a), Some(p), Some(s), Some(pc)) => {
            format!("{:.1}% of the {pc} peak ({} of {} TFLOP/s)", s * 100.0, fmt_sig(a), fmt_sig(p))
        }
        (Some(a), ..) => format!("{} TFLOP/s; no measured peak (run `sinter calibrate`)", fmt_sig(a)),
        _ => "no device time".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn number_formats() {
        assert_eq!(fmt_sig(2514.3), "2514");
        assert_eq!(fmt_sig(12.57), "12.6");
        assert_eq!(fmt_sig(0.002531), "0.00253");
        assert_eq!(fmt_sig(0.0), "0");
        assert_eq!(fmt_si(132_000.0, "B"), "132 kB");
        assert_eq!(fmt_si(34.36e9, "FLOP"), "34.4 GFLOP");
        assert_eq!(fmt_si(12.0, "B"), "12.0 B");
    }

    #[test]
    fn demo_matmuls_show_their_share_of_the_measured_peak() {
        let p = crate::demo::demo_profile(sinter_core::profile::Mode::Compiled, 3);
        let k = p.kernels.iter().find(|k| k.name == "k1_matmul").unwrap();
        let c = k.contraction.as_ref().unwrap();
        let share = contraction_share(c);
        assert!(share.contains("% of the f16 peak") && share.contains("of 500 TFLOP/s"), "{share}");
        // 2 * 4096 * 1024 * 4096 FLOP in about 92 µs: about 370 TFLOP/s, 75% of the 500 peak.
        assert!((c.peak_share.unwrap() - c.achieved_tflops.unwrap() / 500.0).abs() < 1e-12);
        assert!(c.peak_share.unwrap() > 0.5 && c.peak_share.unwrap() < 1.0, "{c:?}");
        let mut none = c.clone();
        none.peak_share = None;
        assert!(contraction_share(&none).contains("run `sinter calibrate`"));
        assert!(p.kernels.iter().find(|k| k.name == "k0_layer_norm").unwrap().contraction.is_none());
    }
}
