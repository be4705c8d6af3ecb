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
use sinter_core::ir::BinaryOp;
use sinter_core::kernel::{Access, AttentionBody, AttnOperand, Expr, Index, Program, Var};
use sinter_core::testsuite::builder::{KernelBuilder, ProgramBuilder, st};
use sinter_cuda::nvrtc::{self, Target};
use sinter_cuda::render;
use std::process::ExitCode;

/// One attention kernel over `batch x heads` heads of `seq` tokens, head dimension 64.
pub fn program(batch: usize, heads: usize, seq: usize, packed: bool) -> Program {
    let hd = 64;
    let e = heads * hd;
    let mut p = ProgramBuilder::new();
    let mut kb = KernelBuilder::new("k0_attention", &["attention"]);
    let (q, k, v) = if packed {
        let x = p.input("qkv", DType::BF16, &[seq, batch, 3 * e]);
        let ax = kb.arg(&p, x, Access::Read);
        let op = |off| AttnOperand { arg: ax, offset: off, s_batch: 3 * e, s_head: hd, s_row: batch * 3 * e, group: 1 };
        (op(0), op(e), op(2 * e))
    } else {
        let mut op = |name: &str| {
            let b = p.input(name, DType::BF16, &[batch, heads, seq, hd]);
            let arg = kb.arg(&p, b, Access::Read);
            AttnOperand { arg, offset: 0, s_batch: heads * seq * hd, s_head: seq * hd, s_row: hd, group: 1 }
        };
        (op("q"), op("k"), op("v"))
    };
    let y = p.output("y", DType::BF16, &[batch, heads, seq, hd]);
    let ay = kb.arg(&p, y, Access::Write);
    let raw = kb.e(Expr::Acc(1), DType::F32);
    let scale = kb.konst(0.125, DType::F32);
    let score = kb.e(Expr::Binary(BinaryOp::Mul, raw, scale), DType::F32);
    let out = kb.e(Expr::Acc(0), DType::F32);
    let outd = kb.e(Expr::Cast(out), DType::BF16);
    let at =
        Index::var(Var::Batch).mul((seq * hd) as i64).add(Index::var(Var::M).mul(hd as i64)).add(Index::var(Var::N));
    p.kernel(kb.attention(AttentionBody {
        batch,
        heads,
        m: seq,
        kv: seq,
        d: hd,
        dv: hd,
        q,
        k,
        v,
        in_dtype: DType::BF16,
        p_dtype: DType::BF16,
        score,
        causal: None,
        stores: vec![st(ay, at, outd)],
    }));
    p.build_checked()
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
