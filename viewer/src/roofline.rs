//! The roofline plot: each kernel at (arithmetic intensity, achieved FLOP/s) on log-log axes,
//! under the measured bandwidth slope and the compute roof of each compute type (a dtype, or `tf32`).

use crate::app::verdict_color;
use crate::artifacts::Run;
use egui::Color32;
use egui_plot::{GridInput, GridMark, ItemId, Legend, Line, LineStyle, MarkerShape, Plot, PlotPoint, Points, Text};
use sinter_core::profile::Verdict;

/// A kernel on the plot (log10 coordinates).
#[derive(Clone, Debug, PartialEq)]
pub struct RoofPoint {
    /// Kernel index.
    pub kernel: usize,
    /// log10 of FLOP per byte.
    pub x: f64,
    /// log10 of achieved TFLOP/s.
    pub y: f64,
    /// Its verdict.
    pub verdict: Verdict,
}

/// A compute roof.
#[derive(Clone, Debug, PartialEq)]
pub struct Roof {
    /// The compute type it applies to (`f16`, `tf32`, ...).
    pub dtype: String,
    /// Peak, TFLOP/s.
    pub peak_tflops: f64,
    /// Ridge point, FLOP per byte.
    pub ridge: f64,
}

/// The plot's geometry.
#[derive(Clone, Debug, PartialEq)]
pub struct Roofline {
    /// Plotted kernels.
    pub points: Vec<RoofPoint>,
    /// Kernels that cannot be plotted, with why (no time, no FLOPs, no bytes).
    pub unplotted: Vec<(usize, String)>,
    /// One roof per compute type used by the kernels (with a known peak).
    pub roofs: Vec<Roof>,
    /// Copy bandwidth, GB/s.
    pub bandwidth_gbps: Option<f64>,
    /// x range (log10).
    pub x_range: (f64, f64),
    /// y range (log10).
    pub y_range: (f64, f64),
}

/// Computes the plot for a run.
pub fn roofline(run: &Run) -> Roofline {
    let p = &run.profile;
    let c = &p.device.ceilings;
    let mut points = Vec::new();
    let mut unplotted = Vec::new();
    for (i, k) in p.kernels.iter().enumerate() {
        let a = &run.analysis.kernels[i];
        match (a.time_ns, a.intensity, a.achieved_tflops) {
            (None, _, _) => unplotted.push((i, "no device time".to_string())),
            (Some(_), None, _) => unplotted.push((i, "moves no bytes".to_string())),
            (Some(_), Some(_), None) => unplotted.push((
                i,
                match (a.achieved_gbps, a.bandwidth_fraction) {
                    (Some(g), Some(f)) => format!("no FLOPs; moves {g:.0} GB/s = {:.0}% of copy bandwidth", f * 100.0),
                    (Some(g), None) => format!("no FLOPs; moves {g:.0} GB/s"),
                    _ => "no FLOPs".to_string(),
                },
            )),
            (Some(_), Some(int), Some(tf)) if int > 0.0 && tf > 0.0 => {
                points.push(RoofPoint { kernel: i, x: int.log10(), y: tf.log10(), verdict: a.verdict })
            }
            _ => unplotted.push((i, format!("{}: nothing to plot", k.name))),
        }
    }
    let bandwidth_gbps = c.bandwidth_gbps();
    // One roof per compute type: a contraction's (`tf32` where its f32 products ran in TF32),
    // else the kernel's dtype.
    let mut dtypes: Vec<String> = p.kernels.iter().map(|k| k.compute().to_string()).collect();
    dtypes.sort();
    dtypes.dedup();
    let mut roofs: Vec<Roof> = Vec::new();
    for d in dtypes {
        if let (Some(peak), Some(ridge)) = (c.peak_tflops(&d), c.ridge_point(&d))
            && !roofs.iter().any(|r| r.peak_tflops == peak)
        {
            roofs.push(Roof { dtype: d, peak_tflops: peak, ridge });
        }
    }
    let mut xs: Vec<f64> = points.iter().map(|p| p.x).chain(roofs.iter().map(|r| r.ridge.log10())).collect();
    let mut ys: Vec<f64> = points.iter().map(|p| p.y).chain(roofs.iter().map(|r| r.peak_tflops.log10())).collect();
    if xs.is_empty() {
        xs = vec![-1.0, 2.0];
    }
    if ys.is_empty() {
        ys = vec![0.0, 3.0];
    }
    let lo = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min).floor() - 1.0;
    let hi = |v: &[f64]| v.iter().copied().fold(f64::NEG_INFINITY, f64::max).ceil() + 1.0;
    Roofline { points, unplotted, roofs, bandwidth_gbps, x_range: (lo(&xs), hi(&xs)), y_range: (lo(&ys), hi(&ys)) }
}

/// Points of the roof `min(peak, bandwidth * intensity)` across `x_range`, log10 coordinates
/// (x FLOP/byte, y TFLOP/s).
pub fn roof_points(bandwidth_gbps: f64, peak_tflops: f64, x_range: (f64, f64)) -> Vec<[f64; 2]> {
    let bw_tb = bandwidth_gbps / 1e3; // TB/s: TFLOP/s per FLOP/byte
    let ridge = (peak_tflops / bw_tb).log10();
    let y_at = |x: f64| (bw_tb * 10f64.powf(x)).min(peak_tflops).log10();
    let mut v = vec![[x_range.0, y_at(x_range.0)]];
    if ridge > x_range.0 && ridge < x_range.1 {
        v.push([ridge, peak_tflops.log10()]);
    }
    v.push([x_range.1, y_at(x_range.1)]);
    v
}

/// Formats a log10 axis value as a plain number (`0.01`, `100`, `1e6`).
pub fn fmt_pow10(x: f64) -> String {
    let v = 10f64.powf(x);
    if !(1e-3..1e6).contains(&v) {
        format!("1e{}", x.round() as i64)
    } else if v >= 1.0 {
        format!("{}", v.round())
    } else {
        format!("{}", (v * 1e3).round() / 1e3)
    }
}

fn decade_marks(input: GridInput) -> Vec<GridMark> {
    let (a, b) = input.bounds;
    let (lo, hi) = (a.ceil() as i64, b.floor() as i64);
    if hi - lo > 60 {
        return Vec::new();
    }
    (lo..=hi).map(|d| GridMark { value: d as f64, step_size: 1.0 }).collect()
}

/// Draws the plot; a click on a kernel's point selects it.
pub fn roofline_ui(ui: &mut egui::Ui, run: &Run, selected: &mut Option<usize>) {
    let r = roofline(run);
    let p = &run.profile;
    let c = &p.device.ceilings;
    ui.horizontal_wrapped(|ui| {
        ui.label(format!(
            "x: arithmetic intensity (FLOP/byte), y: achieved TFLOP/s, both log scale.   Ceilings{}: copy {}, {}, launch {}",
            if c.measured { " (measured)" } else { " (not measured: run `sinter calibrate`)" },
            r.bandwidth_gbps.map_or("unknown".into(), |b| format!("{b:.0} GB/s")),
            if r.roofs.is_empty() {
                "compute peak unknown".to_string()
            } else {
                r.roofs
                    .iter()
                    .map(|x| format!("{} {:.1} TFLOP/s", x.dtype, x.peak_tflops))
                    .collect::<Vec<_>>()
                    .join(", ")
            },
            if c.launch_overhead_us > 0.0 { format!("{:.1} µs", c.launch_overhead_us) } else { "unknown".into() },
        ));
    });
    let (x_range, y_range) = (r.x_range, r.y_range);
    let plot = Plot::new("roofline")
        .legend(Legend::default().position(egui_plot::Corner::RightBottom))
        .y_axis_min_width(40.0)
        .x_axis_formatter(|m, _| fmt_pow10(m.value))
        .y_axis_formatter(|m, _| fmt_pow10(m.value))
        .x_grid_spacer(decade_marks)
        .y_grid_spacer(decade_marks)
        .include_x(x_range.0)
        .include_x(x_range.1)
        .include_y(y_range.0)
        .include_y(y_range.1)
        .height((ui.available_height() - 60.0).max(200.0))
        .label_formatter(|pos| match pos {
            egui_plot::HoverPosition::NearDataPoint { plot_name, position, .. } if !plot_name.is_empty() => {
                Some(format!("{plot_name}\n{} FLOP/B, {} TFLOP/s", fmt_pow10(position.x), fmt_pow10(position.y)))
            }
            egui_plot::HoverPosition::NearDataPoint { position, .. }
            | egui_plot::HoverPosition::Elsewhere { position } => {
                Some(format!("{} FLOP/B, {} TFLOP/s", fmt_pow10(position.x), fmt_pow10(position.y)))
            }
        });
    let text_color = ui.visuals().text_color();
    let top: Vec<usize> = run.kernels_by_time().into_iter().take(6).collect();
    // Alternate label anchors so labels of nearby points overlap less.
    let anchors = [egui::Align2::LEFT_BOTTOM, egui::Align2::LEFT_TOP, egui::Align2::LEFT_CENTER];
    let response = plot.show(ui, |pu| {
        if let Some(bw) = r.bandwidth_gbps {
            for roof in &r.roofs {
                pu.line(
                    Line::new(
                        format!("roof {} ({:.0} GB/s, {:.0} TFLOP/s)", roof.dtype, bw, roof.peak_tflops),
                        roof_points(bw, roof.peak_tflops, x_range),
                    )
                    .color(text_color.gamma_multiply(0.8))
                    .width(2.0),
                );
            }
            if r.roofs.is_empty() {
                let tb = bw / 1e3;
                let pts = vec![
                    [x_range.0, (tb * 10f64.powf(x_range.0)).log10()],
                    [x_range.1, (tb * 10f64.powf(x_range.1)).log10()],
                ];
                pu.line(
                    Line::new(format!("bandwidth {bw:.0} GB/s"), pts)
                        .color(text_color.gamma_multiply(0.8))
                        .style(LineStyle::dashed_loose()),
                );
            }
        }
        for pt in &r.points {
            let k = &p.kernels[pt.kernel];
            let sel = *selected == Some(pt.kernel);
            pu.points(
                Points::new(k.name.clone(), vec![[pt.x, pt.y]])
                    .id(("kernel", pt.kernel))
                    .color(verdict_color(pt.verdict))
                    .shape(if sel { MarkerShape::Diamond } else { MarkerShape::Circle })
                    .radius(if sel { 9.0 } else { 6.0 })
                    .filled(true),
            );
            if let Some(rank) = top.iter().position(|&k| k == pt.kernel).or(sel.then_some(0)) {
                pu.text(
                    // An empty name keeps the label out of the legend.
                    Text::new("", PlotPoint::new(pt.x, pt.y), format!("  {}", k.name))
                        .id(("label", pt.kernel))
                        .anchor(anchors[rank % anchors.len()])
                        .color(text_color),
                );
            }
        }
    });
    if response.response.clicked()
        && let Some(id) = response.hovered_plot_item
        && let Some(pt) = r.points.iter().find(|pt| ItemId::new(("kernel", pt.kernel)) == id)
    {
        *selected = Some(pt.kernel);
    }
    if !r.unplotted.is_empty() {
        ui.label(
            egui::RichText::new(format!(
                "Not plotted: {}",
                r.unplotted
                    .iter()
                    .map(|(k, why)| format!("{} ({why})", p.kernels[*k].name))
                    .collect::<Vec<_>>()
                    .join("; ")
            ))
            .color(Color32::from_rgb(170, 130, 60)),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roof_geometry() {
        // 3000 GB/s, 50 TFLOP/s: ridge at 16.67 FLOP/B.
        let pts = roof_points(3000.0, 50.0, (-2.0, 4.0));
        assert_eq!(pts.len(), 3);
        assert!((pts[0][1] - (3.0f64 * 0.01).log10()).abs() < 1e-12);
        assert!((pts[1][0] - (50.0f64 / 3.0).log10()).abs() < 1e-12);
        assert!((pts[2][1] - 50.0f64.log10()).abs() < 1e-12);
        // Ridge outside the range: just two points.
        assert_eq!(roof_points(3000.0, 50.0, (2.0, 4.0)).len(), 2);
    }

    #[test]
    fn axis_labels() {
        assert_eq!(fmt_pow10(0.0), "1");
        assert_eq!(fmt_pow10(2.0), "100");
        assert_eq!(fmt_pow10(-2.0), "0.01");
        assert_eq!(fmt_pow10(7.0), "1e7");
    }

    #[test]
    fn demo_points_sit_under_the_roof() {
        let run = Run::new(crate::demo::demo_profile(sinter_core::profile::Mode::Compiled, 5));
        let r = roofline(&run);
        assert!(!r.points.is_empty());
        assert!(!r.roofs.is_empty());
        let bw = r.bandwidth_gbps.unwrap();
        for pt in &r.points {
            let k = &run.profile.kernels[pt.kernel];
            let peak = r.roofs.iter().find(|x| x.dtype == k.compute()).map_or(f64::INFINITY, |x| x.peak_tflops);
            let roof = (bw / 1e3 * 10f64.powf(pt.x)).min(peak).log10();
            assert!(pt.y <= roof + 1e-9, "{} above its roof", k.name);
            assert!(pt.x >= r.x_range.0 && pt.x <= r.x_range.1 && pt.y >= r.y_range.0 && pt.y <= r.y_range.1);
        }
        assert_eq!(r.points.len() + r.unplotted.len(), run.profile.kernels.len());
    }
}
