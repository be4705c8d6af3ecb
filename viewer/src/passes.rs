//! The pass list: the graph after each named pass (`passes/NN_<name>.txt`), stepped through with
//! the list or the Up/Down keys, lines new since the previous pass highlighted.

use crate::artifacts::PassFile;
use egui::{Key, RichText};
use std::collections::HashMap;

/// A line with node numbers (`%12`) blanked, so renumbering alone is not a change.
pub fn normalize_line(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.trim_end().chars().peekable();
    while let Some(c) = chars.next() {
        out.push(c);
        if c == '%' {
            while chars.peek().is_some_and(|d| d.is_ascii_digit()) {
                chars.next();
            }
        }
    }
    out
}

/// Per line of `after`, whether it is new relative to `before` (multiset match of lines with
/// node numbers blanked, so reordering and renumbering are not flagged), plus the number of
/// `before` lines that disappeared.
pub fn line_changes(before: &str, after: &str) -> (Vec<bool>, usize) {
    let mut pool: HashMap<String, usize> = HashMap::new();
    for l in before.lines() {
        *pool.entry(normalize_line(l)).or_default() += 1;
    }
    let new: Vec<bool> = after
        .lines()
        .map(|l| match pool.get_mut(&normalize_line(l)) {
            Some(n) if *n > 0 => {
                *n -= 1;
                false
            }
            _ => true,
        })
        .collect();
    (new, pool.values().sum())
}

/// What the pass panel remembers.
#[derive(Clone, Debug, Default)]
pub struct PassState {
    /// The selected pass (index into the list).
    pub selected: usize,
    cache: Option<(usize, Vec<bool>, usize)>,
}

impl PassState {
    /// Moves the selection by `delta`, clamped to `0..n`.
    pub fn step(&mut self, delta: i64, n: usize) {
        if n == 0 {
            self.selected = 0;
            return;
        }
        self.selected = (self.selected as i64 + delta).clamp(0, n as i64 - 1) as usize;
    }
}

/// Draws the list and the selected pass's text.
pub fn passes_ui(ui: &mut egui::Ui, state: &mut PassState, passes: &[PassFile]) {
    if passes.is_empty() {
        ui.label("This folder has no pass snapshots (passes/NN_<name>.txt); run with debug artifacts enabled to record them.");
        return;
    }
    if !ui.ctx().egui_wants_keyboard_input() {
        let (up, down) = ui.input(|i| (i.key_pressed(Key::ArrowUp), i.key_pressed(Key::ArrowDown)));
        if up {
            state.step(-1, passes.len());
        }
        if down {
            state.step(1, passes.len());
        }
    }
    state.selected = state.selected.min(passes.len() - 1);
    egui::Panel::left("pass_list").default_size(220.0).show(ui, |ui| {
        ui.strong("Passes (Up/Down keys)");
        egui::ScrollArea::vertical().show(ui, |ui| {
            for (i, p) in passes.iter().enumerate() {
                if ui.selectable_label(state.selected == i, format!("{:02} {}", p.index, p.name)).clicked() {
                    state.selected = i;
                }
            }
        });
    });
    let sel = state.selected;
    if state.cache.as_ref().is_none_or(|c| c.0 != sel) {
        let before = if sel == 0 { "" } else { passes[sel - 1].text.as_str() };
        let (new, removed) = line_changes(before, &passes[sel].text);
        state.cache = Some((sel, new, removed));
    }
    let Some((_, new, removed)) = state.cache.as_ref() else { return };
    egui::CentralPanel::default_margins().show(ui, |ui| {
        let p = &passes[sel];
        ui.horizontal(|ui| {
            ui.heading(format!("after {:02} {}", p.index, p.name));
            if sel > 0 {
                let added = new.iter().filter(|n| **n).count();
                ui.label(format!("+{added} / -{removed} lines vs {}", passes[sel - 1].name));
            }
        });
        let highlight = ui.visuals().selection.bg_fill.gamma_multiply(0.5);
        egui::ScrollArea::both().auto_shrink([false, false]).show(ui, |ui| {
            for (line, is_new) in p.text.lines().zip(new.iter()) {
                let mut t = RichText::new(line).monospace();
                if *is_new && sel > 0 {
                    t = t.background_color(highlight);
                }
                ui.label(t);
            }
        });
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_lines() {
        let (new, removed) = line_changes("a\nb\nb\nc", "b\na\nd\nb");
        assert_eq!(new, vec![false, false, true, false]);
        assert_eq!(removed, 1);
        let (new, removed) = line_changes("", "x\ny");
        assert_eq!((new, removed), (vec![true, true], 0));
        // Renumbered nodes are not changes.
        let (new, removed) = line_changes("  %7: f32[4] = neg(%6)\n", "  %5: f32[4] = neg(%4)\n");
        assert_eq!((new, removed), (vec![false], 0));
        assert_eq!(normalize_line("%12: f32 = add(%3, %45)  # 10%"), "%: f32 = add(%, %)  # 10%");
    }

    #[test]
    fn stepping_clamps() {
        let mut s = PassState::default();
        s.step(-1, 3);
        assert_eq!(s.selected, 0);
        s.step(5, 3);
        assert_eq!(s.selected, 2);
        s.step(1, 0);
        assert_eq!(s.selected, 0);
    }
}
