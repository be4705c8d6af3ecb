//! The timeline: host, device and compiler tracks of each run on one time axis, with zoom and pan.
//!
//! Performance: every track keeps its events sorted and non-overlapping, so the visible ones are
//! found by binary search ([`Track::visible`]) and events narrower than a pixel are merged into
//! clusters ([`Track::draw_items`]). A frame therefore draws at most a few items per pixel column
//! however many events the run holds (tested with 100k).

use crate::app::kernel_color;
use crate::artifacts::Run;
use egui::{Align2, Color32, FontId, Key, Pos2, Rect, Sense, Stroke, Vec2};
use sinter_core::profile::{Profile, fmt_ns};
use std::ops::Range;

/// Events narrower than this (px) are merged into clusters.
pub const MIN_EVENT_PX: f32 = 1.0;
/// A small event joins the open cluster when it starts within this many px of its end.
pub const MERGE_PX: f32 = 1.0;
/// Idle gaps on device tracks are shaded when at least this wide (px).
pub const GAP_MIN_PX: f32 = 3.0;

/// One event on a track, ns relative to the run's first launch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ev {
    /// Start, ns.
    pub start: f64,
    /// End, ns.
    pub end: f64,
    /// Launch index (host and device tracks) or compile-span index (compiler tracks).
    pub id: u32,
}

/// What a track shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrackKind {
    /// Host-side launch spans.
    Host,
    /// Kernel executions on one queue / stream.
    Device {
        /// The stream.
        stream: u32,
    },
    /// Compile spans at one nesting depth.
    Compiler {
        /// Nesting depth (0 = outermost).
        depth: u32,
    },
}

/// A row of the timeline: events sorted by start, never overlapping.
#[derive(Clone, Debug)]
pub struct Track {
    /// Row label.
    pub name: String,
    /// What it shows.
    pub kind: TrackKind,
    events: Vec<Ev>,
}

/// Something to draw on a track row, x in px from the row's left edge.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum DrawItem {
    /// One event at least [`MIN_EVENT_PX`] wide.
    Event {
        /// Left, px.
        x0: f32,
        /// Right, px.
        x1: f32,
        /// Index into the track's events.
        index: usize,
    },
    /// Several sub-pixel events merged.
    Cluster {
        /// Left, px.
        x0: f32,
        /// Right, px.
        x1: f32,
        /// How many events.
        count: usize,
        /// Index of the first.
        first: usize,
    },
    /// An idle gap between two events (device tracks).
    Gap {
        /// Left, px.
        x0: f32,
        /// Right, px.
        x1: f32,
        /// Its length, ns.
        ns: f64,
    },
}

impl Track {
    /// A track from events in any order; overlaps (clock jitter) are clipped so each event ends
    /// no later than the next one starts.
    pub fn new(name: impl Into<String>, kind: TrackKind, mut events: Vec<Ev>) -> Track {
        events.retain(|e| e.start.is_finite() && e.end.is_finite());
        events.sort_by(|a, b| a.start.total_cmp(&b.start));
        for i in 1..events.len() {
            let s = events[i].start;
            let prev = &mut events[i - 1];
            if prev.end > s {
                prev.end = s;
            }
            if prev.end < prev.start {
                prev.end = prev.start;
            }
        }
        if let Some(last) = events.last_mut() {
            last.end = last.end.max(last.start);
        }
        Track { name: name.into(), kind, events }
    }

    /// The events, sorted.
    pub fn events(&self) -> &[Ev] {
        &self.events
    }

    /// `(first start, last end)` when not empty.
    pub fn extent(&self) -> Option<(f64, f64)> {
        Some((self.events.first()?.start, self.events.last()?.end))
    }

    /// Indices of events intersecting `[t0, t1]`, by binary search (ends are sorted too).
    pub fn visible(&self, t0: f64, t1: f64) -> Range<usize> {
        let lo = self.events.partition_point(|e| e.end < t0);
        let hi = self.events.partition_point(|e| e.start <= t1);
        lo..hi.max(lo)
    }

    /// The event under time `t`, or the nearest within `tol` ns.
    pub fn event_at(&self, t: f64, tol: f64) -> Option<usize> {
        let r = self.visible(t - tol, t + tol);
        r.min_by(|&a, &b| {
            let d = |i: usize| {
                let e = &self.events[i];
                if t < e.start {
                    e.start - t
                } else if t > e.end {
                    t - e.end
                } else {
                    0.0
                }
            };
            d(a).total_cmp(&d(b))
        })
    }

    /// What to draw for the view over `width` px: visible events, sub-pixel ones merged, and
    /// (when `gaps`) idle gaps of at least [`GAP_MIN_PX`]. At most about `3 * width + 4` items.
    pub fn draw_items(&self, view: &View, width: f32, gaps: bool) -> Vec<DrawItem> {
        let t0 = view.start_ns;
        let t1 = view.t_of(width);
        let range = self.visible(t0, t1);
        let mut items = Vec::new();
        let mut cluster: Option<(f32, f32, usize, usize)> = None;
        let clamp = |x: f32| x.clamp(-2.0, width + 2.0);
        let mut prev_end: Option<f64> = if range.start > 0 { Some(self.events[range.start - 1].end) } else { None };
        for i in range {
            let e = &self.events[i];
            let x0 = clamp(view.x_of(e.start));
            let x1 = clamp(view.x_of(e.end));
            if gaps
                && let Some(pe) = prev_end
                && e.start > pe
            {
                let g0 = clamp(view.x_of(pe));
                if x0 - g0 >= GAP_MIN_PX {
                    if let Some((a, b, n, f)) = cluster.take() {
                        items.push(DrawItem::Cluster { x0: a, x1: b, count: n, first: f });
                    }
                    items.push(DrawItem::Gap { x0: g0, x1: x0, ns: e.start - pe });
                }
            }
            prev_end = Some(e.end);
            if x1 - x0 >= MIN_EVENT_PX {
                if let Some((a, b, n, f)) = cluster.take() {
                    items.push(DrawItem::Cluster { x0: a, x1: b, count: n, first: f });
                }
                items.push(DrawItem::Event { x0, x1, index: i });
                continue;
            }
            match &mut cluster {
                Some((_, b, n, _)) if x0 - *b <= MERGE_PX => {
                    *b = b.max(x1);
                    *n += 1;
                }
                _ => {
                    if let Some((a, b, n, f)) = cluster.take() {
                        items.push(DrawItem::Cluster { x0: a, x1: b, count: n, first: f });
                    }
                    cluster = Some((x0, x1, 1, i));
                }
            }
        }
        if let Some((a, b, n, f)) = cluster {
            items.push(DrawItem::Cluster { x0: a, x1: b, count: n, first: f });
        }
        items
    }
}

/// The visible time window: the left edge and the scale.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct View {
    /// Time at the left edge, ns.
    pub start_ns: f64,
    /// ns per pixel.
    pub ns_per_px: f64,
}

/// Finest zoom: ns per px.
pub const MIN_NS_PER_PX: f64 = 0.01;
/// Coarsest zoom: ns per px (about 17 minutes across 1000 px).
pub const MAX_NS_PER_PX: f64 = 1e9;

impl View {
    /// A view showing `[t0, t1]` in `width` px with a small margin.
    pub fn fit(t0: f64, t1: f64, width: f32) -> View {
        let span = (t1 - t0).max(1.0);
        let w = width.max(1.0) as f64;
        let ns_per_px = (span * 1.04 / w).clamp(MIN_NS_PER_PX, MAX_NS_PER_PX);
        View { start_ns: t0 - span * 0.02, ns_per_px }
    }

    /// x (px) of time `t`.
    pub fn x_of(&self, t: f64) -> f32 {
        ((t - self.start_ns) / self.ns_per_px) as f32
    }

    /// Time at x (px).
    pub fn t_of(&self, x: f32) -> f64 {
        self.start_ns + x as f64 * self.ns_per_px
    }

    /// Zooms by `factor` (> 1 zooms in) keeping the time under `x` fixed.
    pub fn zoom_at(&mut self, factor: f64, x: f32) {
        if !factor.is_finite() || factor <= 0.0 {
            return;
        }
        let t = self.t_of(x);
        self.ns_per_px = (self.ns_per_px / factor).clamp(MIN_NS_PER_PX, MAX_NS_PER_PX);
        self.start_ns = t - x as f64 * self.ns_per_px;
    }

    /// Moves the content right by `dx` px (the view moves left).
    pub fn pan_px(&mut self, dx: f32) {
        self.start_ns -= dx as f64 * self.ns_per_px;
    }
}

/// Tick marks for a time axis: `(x px, label)`, spaced at least `min_px` apart on a 1-2-5 scale.
pub fn ticks(view: &View, width: f32, min_px: f32) -> Vec<(f32, String)> {
    let min_step = view.ns_per_px * min_px as f64;
    let mut step = 10f64.powf(min_step.max(1e-3).log10().floor());
    for m in [1.0, 2.0, 5.0, 10.0] {
        if step * m >= min_step {
            step *= m;
            break;
        }
    }
    let first = (view.start_ns / step).ceil() as i64;
    let last = (view.t_of(width) / step).floor() as i64;
    (first..=last.min(first + 1000)).map(|k| (view.x_of(k as f64 * step), fmt_ns(k as f64 * step))).collect()
}

/// The tracks of one run, times shifted so its first launch is at 0.
#[derive(Clone, Debug)]
pub struct RunTimeline {
    /// `compiled` or `eager`.
    pub label: String,
    /// Subtracted from the profile's times.
    pub offset_ns: f64,
    /// Host, device (one per stream) and compiler (one per nesting depth) tracks.
    pub tracks: Vec<Track>,
}

impl RunTimeline {
    /// Builds the tracks of a profile.
    pub fn from_profile(p: &Profile) -> RunTimeline {
        let offset_ns = p.launches.iter().map(|l| l.host_start_ns).fold(f64::INFINITY, f64::min);
        let offset_ns = if offset_ns.is_finite() { offset_ns } else { 0.0 };
        let mut host = Vec::with_capacity(p.launches.len());
        let mut device: std::collections::BTreeMap<u32, Vec<Ev>> = Default::default();
        for (i, l) in p.launches.iter().enumerate() {
            host.push(Ev { start: l.host_start_ns - offset_ns, end: l.host_end_ns - offset_ns, id: i as u32 });
            if let (Some((s, e)), Some(k)) = (l.device_span(), p.kernels.get(l.kernel)) {
                device.entry(k.stream).or_default().push(Ev { start: s - offset_ns, end: e - offset_ns, id: i as u32 });
            }
        }
        let mut tracks = vec![Track::new("host launches", TrackKind::Host, host)];
        for (stream, evs) in device {
            tracks.push(Track::new(format!("device queue {stream}"), TrackKind::Device { stream }, evs));
        }
        // Compile spans: nesting depth by a stack over spans sorted by start (longest first).
        let mut order: Vec<usize> = (0..p.compile_spans.len()).collect();
        order.sort_by(|&a, &b| {
            let (x, y) = (&p.compile_spans[a], &p.compile_spans[b]);
            x.start_ns.total_cmp(&y.start_ns).then(y.dur_ns.total_cmp(&x.dur_ns))
        });
        let mut stack: Vec<f64> = Vec::new();
        let mut by_depth: Vec<Vec<Ev>> = Vec::new();
        for i in order {
            let s = &p.compile_spans[i];
            let (start, end) = (s.start_ns - offset_ns, s.start_ns + s.dur_ns - offset_ns);
            while stack.last().is_some_and(|&e| e <= start) {
                stack.pop();
            }
            let depth = stack.len();
            stack.push(end);
            if by_depth.len() <= depth {
                by_depth.push(Vec::new());
            }
            by_depth[depth].push(Ev { start, end, id: i as u32 });
        }
        for (depth, evs) in by_depth.into_iter().enumerate() {
            let name = if depth == 0 { "compiler".to_string() } else { format!("compiler {}", depth + 1) };
            tracks.push(Track::new(name, TrackKind::Compiler { depth: depth as u32 }, evs));
        }
        RunTimeline { label: p.mode.name().to_string(), offset_ns, tracks }
    }

    /// `(start, end)` of the launches (host and device), ns.
    pub fn launch_extent(&self) -> Option<(f64, f64)> {
        span_of(self.tracks.iter().filter(|t| !matches!(t.kind, TrackKind::Compiler { .. })))
    }

    /// `(start, end)` of everything, ns.
    pub fn full_extent(&self) -> Option<(f64, f64)> {
        span_of(self.tracks.iter())
    }
}

fn span_of<'a>(tracks: impl Iterator<Item = &'a Track>) -> Option<(f64, f64)> {
    tracks.filter_map(Track::extent).reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)))
}

/// What the timeline panel remembers between frames.
#[derive(Clone, Debug)]
pub struct TimelineState {
    /// One entry per run (main first).
    pub runs: Vec<RunTimeline>,
    /// The current view; `None` until the first frame fits it.
    pub view: Option<View>,
    /// Width of the event area last frame, px.
    pub last_width: f32,
}

/// Height of one track row, px.
pub const ROW_H: f32 = 22.0;
/// Width of the label gutter, px.
pub const GUTTER: f32 = 130.0;

impl TimelineState {
    /// Tracks for the runs.
    pub fn new(runs: &[&Run]) -> TimelineState {
        TimelineState {
            runs: runs.iter().map(|r| RunTimeline::from_profile(&r.profile)).collect(),
            view: None,
            last_width: 800.0,
        }
    }

    /// Fits the view to the launches of all runs (Home).
    pub fn fit_launches(&mut self, width: f32) {
        let ext = self
            .runs
            .iter()
            .filter_map(|r| r.launch_extent().or(r.full_extent()))
            .reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)));
        if let Some((a, b)) = ext {
            self.view = Some(View::fit(a, b, width));
        } else {
            self.view = Some(View::fit(0.0, 1e6, width));
        }
    }

    /// Fits the view to everything, compile spans included.
    pub fn fit_all(&mut self, width: f32) {
        let ext = self.runs.iter().filter_map(RunTimeline::full_extent).reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)));
        self.view = Some(View::fit(ext.map_or(0.0, |e| e.0), ext.map_or(1e6, |e| e.1), width));
    }

    /// Applies keyboard navigation: `+`/`=` zoom in, `-` zoom out, arrows pan, Home fits the
    /// launches, End fits everything. Returns true when something changed.
    pub fn handle_keys(&mut self, keys: &[Key], width: f32) -> bool {
        let mut changed = false;
        for k in keys {
            changed = true;
            match k {
                Key::Home => self.fit_launches(width),
                Key::End => self.fit_all(width),
                _ => {
                    let Some(v) = self.view.as_mut() else { continue };
                    match k {
                        Key::Plus | Key::Equals => v.zoom_at(1.5, width / 2.0),
                        Key::Minus => v.zoom_at(1.0 / 1.5, width / 2.0),
                        Key::ArrowLeft => v.pan_px(width * 0.2),
                        Key::ArrowRight => v.pan_px(-width * 0.2),
                        _ => changed = false,
                    }
                }
            }
        }
        changed
    }
}

/// Draws the timeline of `runs` (in the order of `state.runs`); a click on a kernel selects it
/// in the main run (`selected`).
pub fn timeline_ui(ui: &mut egui::Ui, state: &mut TimelineState, runs: &[&Run], selected: &mut Option<usize>) {
    ui.horizontal(|ui| {
        ui.label("Wheel or +/-: zoom · drag or Left/Right: pan · Home: fit launches · End: fit all (with compile)");
    });
    let rows: usize = state.runs.iter().map(|r| r.tracks.len() + 1).sum();
    let height = (rows as f32 * ROW_H + 28.0).max(ui.available_height());
    let (response, painter) = ui.allocate_painter(Vec2::new(ui.available_width(), height), Sense::click_and_drag());
    response.widget_info(|| egui::WidgetInfo::labeled(egui::accesskit::Role::Canvas, true, "timeline"));
    let rect = response.rect;
    let area = Rect::from_min_max(Pos2::new(rect.left() + GUTTER, rect.top()), rect.max);
    let width = area.width().max(1.0);
    state.last_width = width;
    if state.view.is_none() {
        state.fit_launches(width);
    }
    // Input.
    if !ui.ctx().egui_wants_keyboard_input() {
        let keys: Vec<Key> = ui.input(|i| {
            [Key::Plus, Key::Equals, Key::Minus, Key::ArrowLeft, Key::ArrowRight, Key::Home, Key::End]
                .into_iter()
                .filter(|k| i.key_pressed(*k))
                .collect()
        });
        state.handle_keys(&keys, width);
    }
    let Some(mut view) = state.view else { return };
    if response.hovered() {
        let (scroll, zoom) = ui.input(|i| (i.smooth_scroll_delta, i.zoom_delta()));
        let x = response.hover_pos().map_or(width / 2.0, |p| p.x - area.left());
        if scroll.y != 0.0 {
            view.zoom_at((scroll.y as f64 * 0.004).exp(), x);
        }
        if zoom != 1.0 {
            view.zoom_at(zoom as f64, x);
        }
        if scroll.x != 0.0 {
            view.pan_px(scroll.x);
        }
    }
    if response.dragged() {
        view.pan_px(response.drag_delta().x);
    }
    state.view = Some(view);

    let visuals = ui.visuals().clone();
    let text_color = visuals.text_color();
    let weak = visuals.weak_text_color();
    let font = FontId::proportional(12.0);
    painter.rect_filled(rect, 0.0, visuals.extreme_bg_color);
    // Axis.
    for (x, label) in ticks(&view, width, 110.0) {
        let x = area.left() + x;
        painter.line_segment(
            [Pos2::new(x, rect.top() + 18.0), Pos2::new(x, rect.bottom())],
            Stroke::new(1.0, visuals.faint_bg_color),
        );
        painter.text(Pos2::new(x + 3.0, rect.top() + 2.0), Align2::LEFT_TOP, label, FontId::monospace(11.0), weak);
    }
    let hover = response.hover_pos();
    let mut tooltip: Option<String> = None;
    let mut clicked_kernel: Option<usize> = None;
    let mut y = rect.top() + 22.0;
    // Rows drawn (run, kind, row rect) and the launch under the pointer, for the flow arrow.
    let mut rows_drawn: Vec<(usize, TrackKind, Rect)> = Vec::new();
    let mut hovered_launch: Option<(usize, u32)> = None;
    for (ri, rt) in state.runs.iter().enumerate() {
        let Some(run) = runs.get(ri) else { continue };
        let p = &run.profile;
        let per_it = run.per_iteration_ns().map(fmt_ns).unwrap_or_else(|| "untimed".into());
        painter.text(
            Pos2::new(rect.left() + 4.0, y + 3.0),
            Align2::LEFT_TOP,
            format!("{} run: {} kernel(s), {per_it} per iteration", rt.label, p.kernels.len()),
            FontId::proportional(13.0),
            text_color,
        );
        y += ROW_H;
        for track in &rt.tracks {
            let row = Rect::from_min_max(Pos2::new(area.left(), y), Pos2::new(area.right(), y + ROW_H - 3.0));
            painter.text(Pos2::new(rect.left() + 10.0, y + 4.0), Align2::LEFT_TOP, &track.name, font.clone(), weak);
            painter.rect_filled(row, 0.0, visuals.faint_bg_color);
            let items = track.draw_items(&view, width, matches!(track.kind, TrackKind::Device { .. }));
            for item in &items {
                let (x0, x1) = match *item {
                    DrawItem::Event { x0, x1, .. }
                    | DrawItem::Cluster { x0, x1, .. }
                    | DrawItem::Gap { x0, x1, .. } => (x0, x1),
                };
                let r = Rect::from_min_max(
                    Pos2::new(area.left() + x0, row.top()),
                    Pos2::new(area.left() + x1.max(x0 + 1.0), row.bottom()),
                );
                match *item {
                    DrawItem::Gap { ns, .. } => {
                        painter.rect_filled(
                            r.shrink2(Vec2::new(0.0, 5.0)),
                            0.0,
                            Color32::from_rgba_unmultiplied(220, 60, 60, 60),
                        );
                        if r.width() > 60.0 {
                            painter.text(
                                r.center(),
                                Align2::CENTER_CENTER,
                                format!("gap {}", fmt_ns(ns)),
                                FontId::proportional(10.0),
                                Color32::from_rgb(200, 70, 70),
                            );
                        }
                        if hover.is_some_and(|h| r.contains(h)) {
                            tooltip = Some(format!("idle gap: {}", fmt_ns(ns)));
                        }
                    }
                    DrawItem::Event { index, .. } => {
                        let ev = &track.events()[index];
                        let (color, label) = event_style(p, track.kind, ev);
                        let color =
                            if matches!(track.kind, TrackKind::Host) { color.gamma_multiply(0.55) } else { color };
                        painter.rect_filled(r, 2.0, color);
                        let k = kernel_of(p, track.kind, ev);
                        if k.is_some() && k == *selected && ri == 0 {
                            painter.rect_stroke(r, 2.0, Stroke::new(2.0, text_color), egui::StrokeKind::Inside);
                        }
                        if r.width() > 40.0 {
                            let clipped = painter.with_clip_rect(r);
                            clipped.text(
                                Pos2::new(r.left() + 3.0, r.center().y),
                                Align2::LEFT_CENTER,
                                label,
                                FontId::proportional(11.0),
                                Color32::BLACK,
                            );
                        }
                    }
                    DrawItem::Cluster { count, .. } => {
                        painter.rect_filled(r, 0.0, weak.gamma_multiply(0.8));
                        if hover.is_some_and(|h| r.expand2(Vec2::new(1.0, 0.0)).contains(h)) {
                            tooltip =
                                Some(format!("{count} events merged at this zoom: zoom in (wheel or +) to see them"));
                        }
                    }
                }
            }
            // Hover / click on events (exact lookup on the model, not the merged items).
            if let Some(h) = hover.filter(|h| row.contains(*h)) {
                let t = view.t_of(h.x - area.left());
                if let Some(i) = track.event_at(t, view.ns_per_px * 2.0) {
                    let ev = &track.events()[i];
                    if tooltip.is_none() || view.x_of(ev.end) - view.x_of(ev.start) >= MIN_EVENT_PX {
                        tooltip = Some(event_details(run, track.kind, ev));
                    }
                    if !matches!(track.kind, TrackKind::Compiler { .. }) {
                        hovered_launch = Some((ri, ev.id));
                    }
                    if response.clicked() && ri == 0 {
                        clicked_kernel = kernel_of(p, track.kind, ev);
                    }
                }
            }
            rows_drawn.push((ri, track.kind, row));
            y += ROW_H;
        }
    }
    // Flow: an arrow from the hovered launch's host span to its kernel on the device.
    if let Some((ri, launch)) = hovered_launch
        && let Some(l) = runs.get(ri).and_then(|r| r.profile.launches.get(launch as usize))
        && let Some((ds, _)) = l.device_span()
        && let Some(k) = runs[ri].profile.kernels.get(l.kernel)
    {
        let off = state.runs[ri].offset_ns;
        let host_row = rows_drawn.iter().find(|(r, kind, _)| *r == ri && *kind == TrackKind::Host);
        let dev_row =
            rows_drawn.iter().find(|(r, kind, _)| *r == ri && *kind == TrackKind::Device { stream: k.stream });
        if let (Some((_, _, hr)), Some((_, _, dr))) = (host_row, dev_row) {
            let from = Pos2::new(area.left() + view.x_of(l.host_start_ns - off), hr.bottom());
            let to = Pos2::new(area.left() + view.x_of(ds - off), dr.top());
            let stroke = Stroke::new(1.5, text_color);
            let clip = painter.with_clip_rect(area);
            clip.line_segment([from, to], stroke);
            clip.circle_filled(to, 3.0, text_color);
        }
    }
    if let Some(k) = clicked_kernel {
        *selected = Some(k);
    }
    if let Some(t) = tooltip {
        response.on_hover_ui_at_pointer(|ui| {
            ui.label(egui::RichText::new(t).monospace());
        });
    }
}

fn kernel_of(p: &Profile, kind: TrackKind, ev: &Ev) -> Option<usize> {
    match kind {
        TrackKind::Host | TrackKind::Device { .. } => p.launches.get(ev.id as usize).map(|l| l.kernel),
        TrackKind::Compiler { .. } => None,
    }
}

fn event_style(p: &Profile, kind: TrackKind, ev: &Ev) -> (Color32, String) {
    match kind {
        TrackKind::Host | TrackKind::Device { .. } => match p.launches.get(ev.id as usize) {
            Some(l) => (kernel_color(l.kernel), p.kernels.get(l.kernel).map(|k| k.name.clone()).unwrap_or_default()),
            None => (Color32::GRAY, String::new()),
        },
        TrackKind::Compiler { .. } => match p.compile_spans.get(ev.id as usize) {
            Some(s) => (category_color(s.category.name()), s.name.clone()),
            None => (Color32::GRAY, String::new()),
        },
    }
}

/// The colour of a compile-span category.
pub fn category_color(cat: &str) -> Color32 {
    match cat {
        "capture" => Color32::from_rgb(150, 190, 230),
        "pass" => Color32::from_rgb(170, 210, 160),
        "fuse" => Color32::from_rgb(240, 190, 120),
        "codegen" => Color32::from_rgb(210, 170, 230),
        "backend_compile" => Color32::from_rgb(230, 150, 150),
        "autotune" => Color32::from_rgb(240, 220, 120),
        "cache" => Color32::from_rgb(160, 220, 220),
        _ => Color32::from_rgb(200, 200, 200),
    }
}

fn event_details(run: &Run, kind: TrackKind, ev: &Ev) -> String {
    let p = &run.profile;
    let dur = fmt_ns(ev.end - ev.start);
    match kind {
        TrackKind::Compiler { .. } => match p.compile_spans.get(ev.id as usize) {
            Some(s) => format!(
                "{} [{}]\n{dur}{}",
                s.name,
                s.category.name(),
                if s.detail.is_empty() { String::new() } else { format!("\n{}", s.detail) }
            ),
            None => dur,
        },
        TrackKind::Host | TrackKind::Device { .. } => {
            let Some(l) = p.launches.get(ev.id as usize) else { return dur };
            let Some(k) = p.kernels.get(l.kernel) else { return dur };
            let a = &run.analysis.kernels[l.kernel];
            let what = if matches!(kind, TrackKind::Host) { "host launch of" } else { "kernel" };
            let mut s = format!("{what} {}  (iteration {})\n{dur}", k.name, l.iteration);
            if let TrackKind::Device { .. } = kind {
                s.push_str(&format!(
                    "\ngrid {:?}  block {:?}\n{} moved, {}",
                    k.grid,
                    k.block,
                    crate::app::fmt_si(k.bytes, "B"),
                    crate::app::fmt_si(k.flops, "FLOP")
                ));
                if let Some(g) = a.achieved_gbps {
                    s.push_str(&format!("\nachieved {} GB/s", crate::app::fmt_sig(g)));
                }
                if let Some(t) = a.achieved_tflops {
                    s.push_str(&format!(", {} TFLOP/s", crate::app::fmt_sig(t)));
                }
                s.push_str(&format!("\n{}", a.verdict));
                if !k.ops.is_empty() {
                    s.push_str(&format!("\nops: {}", k.ops.join(", ")));
                }
            }
            s
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn track(n: usize, period: f64, dur: f64) -> Track {
        let events =
            (0..n).map(|i| Ev { start: i as f64 * period, end: i as f64 * period + dur, id: i as u32 }).collect();
        Track::new("t", TrackKind::Device { stream: 0 }, events)
    }

    #[test]
    fn overlaps_are_clipped_and_sorted() {
        let t = Track::new(
            "t",
            TrackKind::Host,
            vec![
                Ev { start: 10.0, end: 30.0, id: 1 },
                Ev { start: 0.0, end: 15.0, id: 0 },
                Ev { start: 31.0, end: 30.0, id: 2 },
            ],
        );
        let e = t.events();
        assert_eq!((e[0].id, e[0].end), (0, 10.0));
        assert_eq!((e[1].id, e[1].end), (1, 30.0));
        assert_eq!((e[2].start, e[2].end), (31.0, 31.0));
    }

    #[test]
    fn visible_range_by_binary_search() {
        let t = track(1000, 10.0, 5.0);
        assert_eq!(t.visible(0.0, 9.0), 0..1);
        assert_eq!(t.visible(6.0, 9.0), 1..1);
        assert_eq!(t.visible(4.0, 21.0), 0..3);
        assert_eq!(t.visible(-100.0, -1.0), 0..0);
        assert_eq!(t.visible(1e9, 2e9), 1000..1000);
        assert_eq!(t.event_at(12.0, 0.0), Some(1));
        assert_eq!(t.event_at(17.0, 0.0), None);
        assert_eq!(t.event_at(17.0, 2.5), Some(1));
    }

    #[test]
    fn hundred_thousand_events_stay_bounded() {
        // 100k kernels of 3 µs with 1 µs gaps: 400 ms of events.
        let t = track(100_000, 4_000.0, 3_000.0);
        let width = 1200.0;
        let full = View::fit(0.0, 4e8, width);
        let start = std::time::Instant::now();
        let items = t.draw_items(&full, width, true);
        let elapsed = start.elapsed();
        assert!(items.len() <= 3 * width as usize + 4, "{} items", items.len());
        assert!(!items.is_empty());
        // Fully zoomed out, everything merges.
        assert!(items.iter().all(|i| matches!(i, DrawItem::Cluster { .. })));
        let merged: usize =
            items.iter().map(|i| if let DrawItem::Cluster { count, .. } = i { *count } else { 0 }).sum();
        assert_eq!(merged, 100_000);
        assert!(elapsed.as_millis() < 500, "LOD took {elapsed:?}");
        // Zoomed in on 40 µs: ~10 events drawn individually, with gaps, none merged.
        let mut v = View::fit(2e8, 2e8 + 40_000.0, width);
        let items = t.draw_items(&v, width, true);
        assert!(items.iter().filter(|i| matches!(i, DrawItem::Event { .. })).count() >= 10);
        assert!(items.iter().filter(|i| matches!(i, DrawItem::Gap { .. })).count() >= 9);
        assert!(!items.iter().any(|i| matches!(i, DrawItem::Cluster { .. })));
        // Every zoom level in between stays bounded.
        for _ in 0..40 {
            v.zoom_at(0.7, width / 2.0);
            let n = t.draw_items(&v, width, true).len();
            assert!(n <= 3 * width as usize + 4, "{n} items at {} ns/px", v.ns_per_px);
        }
    }

    #[test]
    fn view_zoom_keeps_anchor() {
        let mut v = View::fit(0.0, 1000.0, 100.0);
        let t = v.t_of(30.0);
        v.zoom_at(4.0, 30.0);
        assert!((v.t_of(30.0) - t).abs() < 1e-6);
        let before = v.start_ns;
        v.pan_px(10.0);
        assert!((before - v.start_ns - 10.0 * v.ns_per_px).abs() < 1e-9);
        v.zoom_at(f64::NAN, 0.0);
        assert!(v.ns_per_px.is_finite());
        for _ in 0..200 {
            v.zoom_at(10.0, 0.0);
        }
        assert_eq!(v.ns_per_px, MIN_NS_PER_PX);
    }

    #[test]
    fn ticks_are_nice_and_spaced() {
        let v = View::fit(0.0, 1e6, 1000.0);
        let t = ticks(&v, 1000.0, 100.0);
        assert!(t.len() >= 4 && t.len() <= 12, "{t:?}");
        assert!(t.windows(2).all(|w| w[1].0 - w[0].0 >= 99.0));
        assert!(t.iter().any(|(_, l)| l == "200 µs"), "{t:?}");
    }

    #[test]
    fn keys_navigate() {
        let mut s = TimelineState { runs: vec![], view: None, last_width: 100.0 };
        s.handle_keys(&[Key::Home], 100.0);
        let v0 = s.view.unwrap();
        s.handle_keys(&[Key::Plus], 100.0);
        assert!(s.view.unwrap().ns_per_px < v0.ns_per_px);
        s.handle_keys(&[Key::Minus, Key::Minus], 100.0);
        assert!(s.view.unwrap().ns_per_px > v0.ns_per_px);
        let before = s.view.unwrap().start_ns;
        s.handle_keys(&[Key::ArrowRight], 100.0);
        assert!(s.view.unwrap().start_ns > before);
        s.handle_keys(&[Key::Home], 100.0);
        assert_eq!(s.view.unwrap(), v0);
    }

    #[test]
    fn run_timeline_tracks() {
        let p = crate::demo::demo_profile(sinter_core::profile::Mode::Compiled, 3);
        let rt = RunTimeline::from_profile(&p);
        assert_eq!(rt.tracks[0].kind, TrackKind::Host);
        assert_eq!(rt.tracks[0].events().len(), p.launches.len());
        assert_eq!(rt.tracks[0].events()[0].start, 0.0);
        assert!(rt.tracks.iter().any(|t| matches!(t.kind, TrackKind::Compiler { depth: 1 })));
        // Compile spans come before the first launch.
        let (lo, _) = rt.full_extent().unwrap();
        assert!(lo < 0.0);
    }
}
