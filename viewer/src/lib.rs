//! egui desktop viewer for sinter profiles and fusion diagrams.
