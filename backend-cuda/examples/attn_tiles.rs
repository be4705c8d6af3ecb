//! Times every attention candidate tuning (max-autotune's search) on the attention of a
//! transformer layer, beside what each compiles to: the question "which tile should the default
//! be at this shape?" asked without a model around it.
//!
//! ```text
//! cargo run --release -p sinter-cuda --example attn_tiles -- 8x12x197 8x12x197:packed 8x16x1024
//! ```
//! A shape is `BATCHxHEADSxSEQ` (head dimension 64, bf16, no mask, scale folded, self-attention);
//! `:packed` reads Q, K and V as views of one `[seq, batch, 3, heads, 64]` buffer, the
//! in-projection of a legacy-exported `nn.MultiheadAttention` (torchvision's ViT), otherwise each
//! is its own `[batch, heads, seq, 64]` tensor. Each candidate's registers, spills and whether
//! ptxas serialized its `wgmma`s (C7512) come from a compile of its own; its time is the median
//! of the backend's autotuning timer.

use sinter_core::DType;
use sinter_core::backend::{LoadOptions, Mode};
use sinter_core::kernel::Program;
use sinter_core::testsuite::programs::{AttnCase, attention, attention_packed_qkv};
use sinter_cuda::nvrtc::{self, Target};
use sinter_cuda::render;
use std::process::ExitCode;

/// One attention kernel over `batch x heads` heads of `seq` tokens, head dimension 64, bf16.
fn program(batch: usize, heads: usize, seq: usize, packed: bool) -> Program {
    if packed {
        attention_packed_qkv(batch, heads, seq, 64, DType::BF16)
    } else {
        attention(&AttnCase::new(batch, heads, seq, seq, 64, DType::BF16))
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("attn_tiles: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let usage = "usage: attn_tiles BATCHxHEADSxSEQ[:packed]...";
    let shapes: Vec<(usize, usize, usize, bool)> = std::env::args()
        .skip(1)
        .map(|a| {
            let (dims, packed) = a.split_once(':').map_or((a.as_str(), false), |(d, f)| (d, f == "packed"));
            match dims.split('x').map(|d| d.parse().ok()).collect::<Option<Vec<usize>>>().as_deref() {
                Some(&[b, h, s]) if b > 0 && h > 0 && s > 0 => Ok((b, h, s, packed)),
                _ => Err(format!("bad shape {a:?}; {usage}")),
            }
        })
        .collect::<Result<_, _>>()?;
    if shapes.is_empty() {
        return Err(usage.into());
    }
    let backend = sinter_cuda::CudaBackend::new().map_err(|e| e.to_string())?;
    let caps = backend.cuda_caps().clone();
    for (b, h, s, packed) in shapes {
        let p = program(b, h, s, packed);
        let k = &p.kernels[0];
        println!("== {b}x{h}x{s}{} (default: {})", if packed { " packed" } else { "" }, {
            render::render(k, &caps, &render::Tuning::default()).map_err(|e| e.to_string())?.strategy
        });
        for t in render::candidates(k, &caps) {
            let r = render::render(k, &caps, &t).map_err(|e| e.to_string())?;
            let c = nvrtc::compile(&r.name, &r.source, &Target::sm(backend.device().info().cc))
                .map_err(|e| e.to_string())?;
            let res = nvrtc::resources(&c.log, &r.name);
            println!(
                "  {:48} {:?} C7512 {} nvrtc {:.3} s",
                r.strategy,
                res.map(|r| (r.registers, r.spill_bytes)),
                c.log.contains("C7512"),
                c.seconds
            );
        }
        let dir = std::env::temp_dir().join(format!("attn_tiles_{}", std::process::id()));
        let opts = LoadOptions { cache_dir: Some(dir.clone()), ..LoadOptions::mode(Mode::MaxAutotune) };
        let exe = backend.load_cuda(&p, &opts).map_err(|e| e.to_string())?;
        for l in exe.tuning_log() {
            println!("  {l}");
        }
        let _ = std::fs::remove_dir_all(dir);
    }
    Ok(())
}
