//! The attention decode template in PTX: the common case of
//! [`super::super::attention_rows::render_decode`] (few queries, keys split over warps and lane
//! groups, 16-byte loads), computing what its CUDA C++ computes.
//!
//! Covered: kernels and tunings for which the C++ renderer takes the decode template
//! ([`template`]) with one block per flat batch (`splits == 1`) and one query head per block
//! (`pack == 1`): any `m` up to `DECODE_M`, f32/f16/bf16 operands, 32-bit indices, causal or
//! not, score and epilogue expressions [`check`] admits, lowered by [`Lower`] (the score with
//! `Acc(1)` the dot product at `Var::Key`, `Var::M`, `Var::Batch`; the epilogue with `Acc(0) =
//! ot / lt` at `Var::N`, `Var::M`). Launch, plan and [`Rendered`] metadata are the C++'s: both
//! call `attention::template` and `attention_rows::decode_plan`.
//!
//! The same computation, statement for statement: lane `sub` of group `grp` holds vectors `ch =
//! sub + r L` of the queries and of `U` keys and values a trip (`ld.global.nc.v4.u32`, zero past
//! the row or the keys; keys past `kend` in every trip are not read at all, their scores `-inf`
//! and values zero as the C++ has them). Per query slot and key: the dot product as one `fma.rn`
//! chain from +0, `shfl.sync.bfly` sums over the `L` lanes, the score (`-inf` past `kend` or the
//! causal bound; masks read only under that guard), the running maximum by `max.f32` (`fmaxf`),
//! `mu = mn == -inf ? 0 : mn`, `o *= alpha`, `l = fma(l, alpha, p0)` then `l += p` (NVVM's
//! contraction of `l *= alpha; l += p`), `p` rounded to the probabilities' dtype before `o =
//! fma(pr, v, o)`. Lane groups merge by shuffles (`fma(a, f0, b * f1)`, NVVM's contraction of
//! `a * f0 + b * f1`), warps through the module's shared `red_m`, `red_l`, `red_o` (named after
//! the entry), then `lt` and `ot` as `fma.rn` chains over the warps from 0 and `ot / lt` by
//! `div.rn`, so a row of only `-inf` scores gives NaN. The template's own operations carry `.rn`
//! (NVVM's contractions written out, nothing more); the expressions are [`Lower`]'s, whose
//! products ptxas may contract as NVVM does. `expf` is [`math::exp`](super::math::exp) (2 ulp, as
//! libdevice's). On an H200 the outputs of 94 cases (dtypes, m 1-4, d 64-128 and 80, dv other
//! than d, causal, masks, BSHD, block sizes, a dead row) and of the decode workload matched the
//! C++ bit for bit but for 52 of one f32 case's 768 (at most 2 ulp apart: `exp` is not
//! libdevice's); the workload ran in 0.467-0.478 ms against the C++'s 0.469-0.478 (two calls; BENCHMARKS.md
//! session 39, where `bench` alternating both measured 0.4868-0.4871 against 0.4868-0.4874).
//!
//! Refused (CUDA C++ renders them, as before): the tensor-core, tiled CUDA-core and row
//! templates; the split decode (`splits > 1`: its scratch combine) and packed GQA heads (`pack >
//! 1`); 64-bit indices; empty launches; probabilities rounded to other than f32/f64/f16/bf16;
//! expressions [`check`] refuses (bool masks among them).

use std::collections::HashMap;

use sinter_core::DType;
use sinter_core::kernel::analysis::{acc_uses, closure, depends_on, store_roots};
use sinter_core::kernel::{AttentionBody, AttnOperand, Expr, ExprId, Kernel, Var};

use super::super::attention::{Template, template};
use super::super::attention_rows::{DecodePlan, decode_plan};
use super::super::emit::Emitter;
use super::super::index::needs_wide;
use super::super::{CudaCaps, RenderError, Rendered, Tuning, entry_name};
use super::expr::{Lower, check, div_rem, divide, element_address, round16, widen16};
use super::{Asm, Class, Refusal, math, module, refuse};

/// `-inf` and `+0` as PTX `f32` literals.
const NINF: &str = "0fFF800000";
const ZERO: &str = "0f00000000";

/// Renders an attention body (see [`super::render`]).
pub(crate) fn render(k: &Kernel, a: &AttentionBody, caps: &CudaCaps, t: &Tuning) -> Result<Rendered, Refusal> {
    let em = Emitter::new(k, false);
    // A tuning the C++ renderer would refuse is refused here too; it then says why.
    let tuning = |e: RenderError| Refusal(format!("tuning: {e}"));
    let (w, block, splits, pack) = match template(&em, a, caps, t).map_err(tuning)? {
        Template::TensorCores(_) => return refuse("attention: the tensor-core tile is CUDA C++"),
        Template::Fma(_) => return refuse("attention: the tiled CUDA-core template is CUDA C++"),
        Template::Rows(_) => return refuse("attention: the row template is CUDA C++"),
        Template::Decode { w, block, splits, pack } => (w, block, splits, pack),
    };
    let p = decode_plan(&em, a, w, block, splits, pack).map_err(tuning)?;
    if splits > 1 {
        return refuse(format!("decode split {splits}: the split combine is CUDA C++"));
    }
    if pack > 1 {
        return refuse(format!("decode pack {pack}: query heads sharing their K and V (GQA) are CUDA C++"));
    }
    if needs_wide(k) || [&a.q, &a.k, &a.v].iter().any(|o| k.args[o.arg].numel > i32::MAX as usize) {
        return refuse("64-bit index arithmetic");
    }
    if p.body.grid[0] == 0 {
        return refuse("an empty launch");
    }
    if !matches!(a.p_dtype, DType::F32 | DType::F64 | DType::F16 | DType::BF16) {
        return refuse(format!("probabilities rounded to {}", a.p_dtype));
    }
    let store_roots: Vec<ExprId> = a.stores.iter().flat_map(store_roots).collect();
    let roots: Vec<ExprId> = std::iter::once(a.score).chain(store_roots.iter().copied()).collect();
    check(k, &roots, &a.stores, &[Var::Batch, Var::M, Var::Key, Var::N])?;

    let name = entry_name(&k.name);
    let mut asm = Asm::new();
    // `.maxnreg` at what `__launch_bounds__(block)` allows the C++: without it ptxas's occupancy
    // heuristic spilled this PTX where NVRTC's build does not (f32 rows, 64-256 threads: 80
    // registers and 4 bytes), 4% slower at f32 d128. With it, b32 h32 on an H200 (min of 9x20
    // launches): bf16 d128 kv4096 467 us against the C++'s 469, f32 m3 266 against 324 (NVRTC's
    // spilled), but f32 m2 d64 264 against 247 (75 registers against 64: 6 blocks an SM, not 8;
    // BENCHMARKS.md session 39).
    asm.maxnreg = Some(if 65536 / block >= 255 { 255 } else { (65536 / block) & !7 });
    let base = asm.params(k);
    asm.comment(p.body.summary.clone());
    let c = Ctx { a, p: &p, w, d: a.in_dtype };
    let th = c.threads(&mut asm);
    let rows = c.rows(&mut asm, &th);
    let qv = c.queries(&mut asm, &th, (&rows[0], &base[a.q.arg]));
    let mut state: Vec<Slot> = (0..p.mq)
        .map(|_| {
            let mut f = |v: &str| {
                let r = asm.reg(Class::F32);
                asm.op(format!("mov.f32 {r}, {v}"));
                r
            };
            let (mx, l) = (f(NINF), f(ZERO));
            let o = (0..p.rv).map(|_| (0..w).map(|_| f(ZERO)).collect()).collect();
            Slot { mx, l, o }
        })
        .collect();
    let (dm, dk, dn, accs) = (depends_on(k, Var::M), depends_on(k, Var::Key), depends_on(k, Var::N), acc_uses(k));
    let m_reg = asm.reg(Class::B32);
    {
        let fixed = HashMap::from([(Var::Batch, th.bh.clone()), (Var::M, m_reg.clone())]);
        let mut low = Lower::new(&em, &mut asm, base.clone(), (Var::Key, 1), fixed);
        let hoisted = |e: u32| !dm[e as usize] && !dk[e as usize] && accs[e as usize].is_none();
        low.asm.comment("score terms of neither the query nor the key");
        low.outer_exprs(&[a.score], &hoisted)?;
        // Loads left in the score (masks) are read only under the guard, as the C++ does.
        let branch = closure(k, &[a.score], &|_| false)
            .into_iter()
            .any(|e| !hoisted(e) && matches!(k.exprs[e as usize].expr, Expr::Load { .. }));
        c.key_loop(&mut low, (&th, &rows, &base), (&qv, &mut state), (&m_reg, branch))?;
    }
    c.merge_lanes(&mut asm, &mut state);
    let th = c.threads(&mut asm);
    let shared = c.to_shared(&mut asm, &th, &name, &state);
    {
        let fixed = HashMap::from([(Var::Batch, th.bh.clone()), (Var::M, m_reg.clone())]);
        let mut low = Lower::new(&em, &mut asm, base.clone(), (Var::N, 1), fixed);
        let hoisted = |e: u32| !dm[e as usize] && !dn[e as usize] && accs[e as usize].is_none();
        low.asm.comment("epilogue terms of neither the query nor the column");
        low.outer_exprs(&store_roots, &hoisted)?;
        c.outputs(&mut low, &th, &shared, (&m_reg, &store_roots))?;
    }
    asm.op("ret");

    let body = p.body;
    let comments = [
        body.summary.clone(),
        format!("the decode template: {block} threads a flat batch, {} keys in flight a lane group", p.unroll),
    ];
    let source = module(k, caps, &comments, block, &asm);
    Ok(body.into_rendered(k, caps, t, source, " ptx"))
}

/// What the body's pieces share.
struct Ctx<'p> {
    a: &'p AttentionBody,
    p: &'p DecodePlan,
    /// Elements per 16-byte vector.
    w: usize,
    /// The operands' dtype.
    d: DType,
}

/// The thread's coordinates (`.b32` registers).
struct Threads {
    /// The block's flat batch.
    bh: String,
    tid: String,
    warp: String,
    /// The lane's place in its group.
    sub: String,
    /// The lane's group.
    grp: String,
    /// `sub * w`: the lane's first element of a row.
    subw: String,
}

/// One query slot's running softmax state (`.f32` registers): maximum, sum, output `[r][e]`.
struct Slot {
    mx: String,
    l: String,
    o: Vec<Vec<String>>,
}

impl Ctx<'_> {
    /// Writes the thread's coordinates (again after the loop over the keys, which then need not
    /// keep them in registers, as NVVM rematerializes them).
    fn threads(&self, asm: &mut Asm) -> Threads {
        let p = self.p;
        let r = |asm: &mut Asm| asm.reg(Class::B32);
        let (bh, tid, lane, warp, sub, grp, subw) = (r(asm), r(asm), r(asm), r(asm), r(asm), r(asm), r(asm));
        asm.op(format!("mov.u32 {bh}, %ctaid.x"));
        asm.op(format!("mov.u32 {tid}, %tid.x"));
        asm.op(format!("and.b32 {lane}, {tid}, 31"));
        asm.op(format!("shr.u32 {warp}, {tid}, 5"));
        asm.op(format!("and.b32 {sub}, {lane}, {}", p.lanes - 1));
        asm.op(format!("shr.u32 {grp}, {lane}, {}", p.lanes.trailing_zeros()));
        asm.op(format!("mul.lo.u32 {subw}, {sub}, {}", self.w));
        Threads { bh, tid, warp, sub, grp, subw }
    }

    /// Element index of each operand's row 0 at the block's flat batch (q, k, v: `emit_base`'s
    /// values), plus the lane's first element `sub * w`.
    fn rows(&self, asm: &mut Asm, th: &Threads) -> [String; 3] {
        let a = self.a;
        let (b, h) = div_rem(asm, &th.bh, a.heads as u32, u64::from(self.p.body.grid[0]) - 1);
        [&a.q, &a.k, &a.v].map(|o| {
            let (base, first) = (operand_base(asm, o, a.heads, (&b, &h)), asm.reg(Class::B32));
            asm.op(format!("add.u32 {first}, {base}, {}", th.subw));
            first
        })
    }

    /// `sub + r * lanes < n` (the lane's vector `r` inside a row of `n` vectors), `None` where it
    /// holds for every lane.
    fn inside(&self, asm: &mut Asm, th: &Threads, n: usize, r: usize) -> Option<String> {
        let lanes = self.p.lanes;
        if (r + 1) * lanes <= n {
            return None;
        }
        let pr = asm.reg(Class::Pred);
        asm.op(format!("setp.lt.u32 {pr}, {}, {}", th.sub, n - r * lanes));
        Some(pr)
    }

    /// The queries in registers, `qv[qi][r][e]` (f32; zero past the row).
    fn queries(&self, asm: &mut Asm, th: &Threads, (first, global): (&str, &str)) -> Vec<Vec<Vec<String>>> {
        let (a, p, w) = (self.a, self.p, self.w);
        asm.comment("the queries, f32");
        let inside: Vec<Option<String>> = (0..p.rq).map(|r| self.inside(asm, th, p.nd, r)).collect();
        (0..p.mq)
            .map(|qi| {
                (0..p.rq)
                    .map(|r| {
                        let idx = asm.reg(Class::B32);
                        let off =
                            (qi as u64).wrapping_mul(a.q.s_row as u64).wrapping_add((r * p.lanes * w) as u64) as u32;
                        asm.op(format!("add.u32 {idx}, {first}, {off}"));
                        let addr = element_address(asm, global, &idx, self.d.size_bytes() as u64);
                        let words = load16(asm, &format!("[{addr}]"), inside[r].as_deref());
                        elems(asm, &words, self.d)
                    })
                    .collect()
            })
            .collect()
    }

    /// The loop over the keys: `U` K and V vectors a lane, then per query slot the scores, the
    /// running maximum, sum and output.
    fn key_loop(
        &self,
        low: &mut Lower<'_, '_>,
        (th, rows, base): (&Threads, &[String; 3], &[String]),
        (qv, state): (&[Vec<Vec<String>>], &mut [Slot]),
        (m_reg, branch): (&str, bool),
    ) -> Result<(), Refusal> {
        let (a, p, w, size) = (self.a, self.p, self.w, self.d.size_bytes() as u64);
        let (unroll, step, kend) = (p.unroll, p.step, p.kend);
        let asm = &mut *low.asm;
        asm.comment(format!("the keys below {kend}: {step} a block at a time, {unroll} in flight a lane group"));
        // `kb = kw + grp`, `kw` a multiple of `groups` from `warp * groups`: `kw < kend` where `kb`
        // is below `kend` rounded up to `groups` (the loop's one counter).
        let kb = asm.reg(Class::B32);
        asm.op(format!("mad.lo.u32 {kb}, {}, {}, {}", th.warp, p.groups, th.grp));
        let bound = kend.next_multiple_of(p.groups);
        // The lane's first element of key `kb` in K and V (its address advances a trip at a time).
        let ptrs: Vec<String> = [(&a.k, &rows[1]), (&a.v, &rows[2])]
            .into_iter()
            .map(|(o, first)| {
                let idx = asm.reg(Class::B32);
                asm.op(format!("mad.lo.u32 {idx}, {kb}, {}, {first}", o.s_row as u32));
                element_address(asm, &base[o.arg], &idx, size)
            })
            .collect();
        let ins_k: Vec<Option<String>> = (0..p.rq).map(|r| self.inside(asm, th, p.nd, r)).collect();
        let ins_v: Vec<Option<String>> = (0..p.rv).map(|r| self.inside(asm, th, p.nv, r)).collect();
        let (top, end, skip) = (asm.label(), asm.label(), asm.reg(Class::Pred));
        asm.op(format!("setp.ge.u32 {skip}, {kb}, {bound}"));
        asm.op(format!("@{skip} bra {end}"));
        asm.place(&top);
        // Keys `u * step` and later are past `kend` in every trip: not read, their scores `-inf`
        // and their values zero (what the C++ computes for them, without the loads).
        let live = (0..unroll).filter(|u| u * step < kend).count();
        let (mut kx, mut vx) = (Vec::new(), Vec::new());
        for u in 0..live {
            let (j, inside) = (asm.reg(Class::B32), asm.reg(Class::Pred));
            asm.op(format!("add.u32 {j}, {kb}, {}", u * step));
            asm.op(format!("setp.lt.u32 {inside}, {j}, {kend}"));
            for (o, ins, out, ptr) in [(&a.k, &ins_k, &mut kx, &ptrs[0]), (&a.v, &ins_v, &mut vx, &ptrs[1])] {
                let mut row = Vec::new();
                for (r, ins) in ins.iter().enumerate() {
                    let pred = match ins {
                        Some(q) => {
                            let both = asm.reg(Class::Pred);
                            asm.op(format!("and.pred {both}, {inside}, {q}"));
                            both
                        }
                        None => inside.clone(),
                    };
                    let off = ((u * step) as u64).wrapping_mul(o.s_row as u64).wrapping_add((r * p.lanes * w) as u64);
                    let at = offset(asm, ptr, off.wrapping_mul(size));
                    row.push(load16(asm, &at, Some(&pred)));
                }
                out.push(row);
            }
        }
        for (qi, (q, s)) in qv.iter().zip(state.iter_mut()).enumerate() {
            low.asm.comment(format!("query slot {qi}"));
            low.asm.op(format!("mov.u32 {m_reg}, {qi}"));
            let mut sc = Vec::with_capacity(unroll);
            for (u, kx) in kx.iter().enumerate() {
                let dot = self.dot(low.asm, q, kx);
                // The key and its guard again (as the C++'s `key`): no predicate lives across the
                // loads.
                let (j, guard) = (low.asm.reg(Class::B32), low.asm.reg(Class::Pred));
                low.asm.op(format!("add.u32 {j}, {kb}, {}", u * step));
                low.asm.op(format!("setp.lt.u32 {guard}, {j}, {kend}"));
                if let Some(o) = a.causal.filter(|o| qi.saturating_add(*o).saturating_add(1) < kend) {
                    let c = low.asm.reg(Class::Pred);
                    low.asm.op(format!("setp.le.u32 {c}, {j}, {}", qi + o));
                    low.asm.op(format!("and.pred {guard}, {guard}, {c}"));
                }
                sc.push(score(low, a, (&dot, &j, &guard), branch)?);
            }
            sc.resize(unroll, NINF.to_string());
            self.update(low.asm, s, &sc, &vx);
        }
        let asm = &mut *low.asm;
        let trip = unroll * step;
        if trip >= kend {
            // One trip covers every key.
            asm.place(&end);
            return Ok(());
        }
        asm.op(format!("add.u32 {kb}, {kb}, {trip}"));
        for (o, ptr) in [(&a.k, &ptrs[0]), (&a.v, &ptrs[1])] {
            let bytes = (trip as u64).wrapping_mul(o.s_row as u64).wrapping_mul(size);
            asm.op(format!("add.s64 {ptr}, {ptr}, {bytes}"));
        }
        let more = asm.reg(Class::Pred);
        asm.op(format!("setp.lt.u32 {more}, {kb}, {bound}"));
        asm.op(format!("@{more} bra {top}"));
        asm.place(&end);
        Ok(())
    }

    /// One key's dot product with query `q` (`fmaf` over `r`, then the elements, from +0), summed
    /// over the lane group by shuffles.
    fn dot(&self, asm: &mut Asm, q: &[Vec<String>], kx: &[Vec<String>]) -> String {
        let dot = asm.reg(Class::F32);
        asm.op(format!("mov.f32 {dot}, {ZERO}"));
        for (qr, words) in q.iter().zip(kx) {
            for (qe, ke) in qr.iter().zip(elems(asm, words, self.d)) {
                asm.op(format!("fma.rn.f32 {dot}, {qe}, {ke}, {dot}"));
            }
        }
        let mut x = 1;
        while x < self.p.lanes {
            let other = asm.reg(Class::F32);
            asm.op(format!("shfl.sync.bfly.b32 {other}, {dot}, {x}, 31, -1"));
            asm.op(format!("add.rn.f32 {dot}, {dot}, {other}"));
            x *= 2;
        }
        dot
    }

    /// The online softmax step of one query slot over the trip's scores `sc` and values `vx` (zero
    /// past its end: keys never read).
    fn update(&self, asm: &mut Asm, s: &mut Slot, sc: &[String], vx: &[Vec<Vec<String>>]) {
        let mut mn = s.mx.clone();
        for v in sc {
            let next = asm.reg(Class::F32);
            asm.op(format!("max.f32 {next}, {mn}, {v}"));
            mn = next;
        }
        let mu = finite_max(asm, &mn);
        let alpha = exp_diff(asm, &s.mx, &mu);
        asm.op(format!("mov.f32 {}, {mn}", s.mx));
        for o in s.o.iter().flatten() {
            asm.op(format!("mul.rn.f32 {o}, {o}, {alpha}"));
        }
        for (u, v) in sc.iter().enumerate() {
            let e = exp_diff(asm, v, &mu);
            // `l *= alpha; l += p` for the first key: NVVM's one fma.
            if u == 0 {
                asm.op(format!("fma.rn.f32 {}, {}, {alpha}, {e}", s.l, s.l));
            } else {
                asm.op(format!("add.rn.f32 {}, {}, {e}", s.l, s.l));
            }
            let pr = self.round_p(asm, &e);
            for (r, or) in s.o.iter().enumerate() {
                let ve = match vx.get(u) {
                    Some(words) => elems(asm, &words[r], self.d),
                    None => vec![ZERO.to_string(); self.w],
                };
                for (o, ve) in or.iter().zip(ve) {
                    asm.op(format!("fma.rn.f32 {o}, {pr}, {ve}, {o}"));
                }
            }
        }
    }

    /// `p` rounded to the probabilities' dtype and carried in f32 again (`round_p`).
    fn round_p(&self, asm: &mut Asm, x: &str) -> String {
        match self.a.p_dtype {
            d @ (DType::F16 | DType::BF16) => round16(asm, x, d),
            _ => x.to_string(),
        }
    }

    /// Merges the lane groups of each warp (butterflies over `lanes..32`).
    fn merge_lanes(&self, asm: &mut Asm, state: &mut [Slot]) {
        asm.comment("merge the lane groups of each warp");
        for s in state.iter_mut() {
            let mut x = self.p.lanes;
            while x < 32 {
                let shfl = |asm: &mut Asm, v: &str| {
                    let r = asm.reg(Class::F32);
                    asm.op(format!("shfl.sync.bfly.b32 {r}, {v}, {x}, 31, -1"));
                    r
                };
                let (mo, lo) = (shfl(asm, &s.mx), shfl(asm, &s.l));
                let mn = asm.reg(Class::F32);
                asm.op(format!("max.f32 {mn}, {}, {mo}", s.mx));
                let mu = finite_max(asm, &mn);
                let (f0, f1) = (exp_diff(asm, &s.mx, &mu), exp_diff(asm, &mo, &mu));
                asm.op(format!("mov.f32 {}, {mn}", s.mx));
                // `a * f0 + b * f1`: NVVM's fma(a, f0, b * f1).
                let mix = |asm: &mut Asm, a: &str, b: &str| {
                    let t = asm.reg(Class::F32);
                    asm.op(format!("mul.rn.f32 {t}, {b}, {f1}"));
                    asm.op(format!("fma.rn.f32 {a}, {a}, {f0}, {t}"));
                };
                mix(asm, &s.l, &lo);
                for o in s.o.iter().flatten() {
                    let other = shfl(asm, o);
                    mix(asm, o, &other);
                }
                x *= 2;
            }
        }
    }

    /// Group 0 of each warp stores its states in the shared arrays (`red_m[warp][qi]`,
    /// `red_l[warp][qi]`, `red_o[warp][qi][n]`), then the block's barrier; returns the arrays'
    /// `.shared` addresses (`.b32`: m, l, o).
    fn to_shared(&self, asm: &mut Asm, th: &Threads, name: &str, state: &[Slot]) -> [String; 3] {
        let (a, p, w) = (self.a, self.p, self.w);
        let (warps, mq, dv) = (p.warps as usize, p.mq, a.dv);
        asm.decls.push(format!(".shared .align 4 .f32 {name}_red_m[{}];", warps * mq));
        asm.decls.push(format!(".shared .align 4 .f32 {name}_red_l[{}];", warps * mq));
        asm.decls.push(format!(".shared .align 16 .f32 {name}_red_o[{}];", warps * mq * dv));
        let shared = ["red_m", "red_l", "red_o"].map(|array| {
            let r = asm.reg(Class::B32);
            asm.op(format!("mov.u32 {r}, {name}_{array}"));
            r
        });
        asm.comment("group 0 of each warp: its states to shared memory");
        let r = |asm: &mut Asm| asm.reg(Class::B32);
        let (ml, oo, ow, ob) = (r(asm), r(asm), r(asm), r(asm));
        asm.op(format!("mul.lo.u32 {ml}, {}, {}", th.warp, mq * 4));
        asm.op(format!("mad.lo.u32 {oo}, {}, {}, {}", th.warp, mq * dv, th.subw));
        asm.op(format!("shl.b32 {ow}, {oo}, 2"));
        asm.op(format!("add.u32 {ob}, {}, {ow}", shared[2]));
        let (mb, lb) = (r(asm), r(asm));
        asm.op(format!("add.u32 {mb}, {}, {ml}", shared[0]));
        asm.op(format!("add.u32 {lb}, {}, {ml}", shared[1]));
        let (g0, s0, first) = (asm.reg(Class::Pred), asm.reg(Class::Pred), asm.reg(Class::Pred));
        asm.op(format!("setp.eq.u32 {g0}, {}, 0", th.grp));
        asm.op(format!("setp.eq.u32 {s0}, {}, 0", th.sub));
        asm.op(format!("and.pred {first}, {g0}, {s0}"));
        let preds: Vec<String> = (0..p.rv)
            .map(|r| match self.inside(asm, th, p.nv, r) {
                Some(q) => {
                    let both = asm.reg(Class::Pred);
                    asm.op(format!("and.pred {both}, {g0}, {q}"));
                    both
                }
                None => g0.clone(),
            })
            .collect();
        for (qi, s) in state.iter().enumerate() {
            asm.op(format!("@{first} st.shared.f32 [{mb}+{}], {}", qi * 4, s.mx));
            asm.op(format!("@{first} st.shared.f32 [{lb}+{}], {}", qi * 4, s.l));
            for (r, o) in s.o.iter().enumerate() {
                for (h, quad) in o.chunks(4).enumerate() {
                    let off = (qi * dv + r * p.lanes * w + 4 * h) * 4;
                    asm.op(format!("@{} st.shared.v4.f32 [{ob}+{off}], {{{}}}", preds[r], quad.join(", ")));
                }
            }
        }
        asm.op("bar.sync 0");
        shared
    }

    /// The block's outputs `idx = tid, tid + block, ...` below `mq * dv`: the warps' states
    /// merged in warp order, `ot / lt`, the epilogue.
    fn outputs(
        &self,
        low: &mut Lower<'_, '_>,
        th: &Threads,
        sh: &[String; 3],
        (m_reg, roots): (&str, &[ExprId]),
    ) -> Result<(), Refusal> {
        let (a, p) = (self.a, self.p);
        let (warps, mq, dv, block) = (p.warps as usize, p.mq, a.dv, p.body.block[0] as usize);
        let total = mq * dv;
        let asm = &mut *low.asm;
        asm.comment(format!("the {total} outputs, {block} at a time: the warps' states merged, then the epilogue"));
        let (idx, top, done, out) = (asm.reg(Class::B32), asm.label(), asm.label(), asm.reg(Class::Pred));
        asm.op(format!("mov.u32 {idx}, {}", th.tid));
        asm.op(format!("setp.ge.u32 {out}, {idx}, {total}"));
        asm.op(format!("@{out} bra {done}"));
        asm.place(&top);
        let (qi, n) = div_rem(asm, &idx, dv as u32, total as u64 - 1);
        asm.op(format!("mov.u32 {m_reg}, {qi}"));
        let r = |asm: &mut Asm| asm.reg(Class::B32);
        let (q4, i4, ma, la, oa) = (r(asm), r(asm), r(asm), r(asm), r(asm));
        asm.op(format!("shl.b32 {q4}, {qi}, 2"));
        asm.op(format!("shl.b32 {i4}, {idx}, 2"));
        asm.op(format!("add.u32 {ma}, {}, {q4}", sh[0]));
        asm.op(format!("add.u32 {la}, {}, {q4}", sh[1]));
        asm.op(format!("add.u32 {oa}, {}, {i4}", sh[2]));
        let mn = asm.reg(Class::F32);
        asm.op(format!("mov.f32 {mn}, {NINF}"));
        let ms: Vec<String> = (0..warps)
            .map(|x| {
                let v = asm.reg(Class::F32);
                asm.op(format!("ld.shared.f32 {v}, [{ma}+{}]", x * mq * 4));
                asm.op(format!("max.f32 {mn}, {mn}, {v}"));
                v
            })
            .collect();
        let mu = finite_max(asm, &mn);
        let (lt, ot) = (asm.reg(Class::F32), asm.reg(Class::F32));
        asm.op(format!("mov.f32 {lt}, {ZERO}"));
        asm.op(format!("mov.f32 {ot}, {ZERO}"));
        for (x, m) in ms.iter().enumerate() {
            let f = exp_diff(asm, m, &mu);
            let (lv, ov) = (asm.reg(Class::F32), asm.reg(Class::F32));
            asm.op(format!("ld.shared.f32 {lv}, [{la}+{}]", x * mq * 4));
            asm.op(format!("fma.rn.f32 {lt}, {lv}, {f}, {lt}"));
            asm.op(format!("ld.shared.f32 {ov}, [{oa}+{}]", x * mq * dv * 4));
            asm.op(format!("fma.rn.f32 {ot}, {ov}, {f}, {ot}"));
        }
        let value = asm.reg(Class::F32);
        asm.op(format!("div.rn.f32 {value}, {ot}, {lt}"));
        low.start_group(&n);
        low.acc.insert(0, value);
        low.exprs(roots)?;
        a.stores.iter().try_for_each(|s| low.store(s))?;
        let asm = &mut *low.asm;
        if total > block {
            let more = asm.reg(Class::Pred);
            asm.op(format!("add.u32 {idx}, {idx}, {block}"));
            asm.op(format!("setp.lt.u32 {more}, {idx}, {total}"));
            asm.op(format!("@{more} bra {top}"));
        }
        asm.place(&done);
        Ok(())
    }
}

/// The score of one key (`Acc(1) = dot`, `Var::Key = key`) where `guard` holds, else `-inf`:
/// computed and selected, or (`branch`: loads left in it) computed only under the guard.
fn score(
    low: &mut Lower<'_, '_>,
    a: &AttentionBody,
    (dot, key, guard): (&str, &str, &str),
    branch: bool,
) -> Result<String, Refusal> {
    let sv = low.asm.reg(Class::F32);
    let skip = low.asm.label();
    if branch {
        low.asm.op(format!("mov.f32 {sv}, {NINF}"));
        low.asm.op(format!("@!{guard} bra {skip}"));
    }
    low.start_group(key);
    low.acc.insert(1, dot.to_string());
    low.exprs(&[a.score])?;
    let v = low.val(a.score, 0)?;
    if branch {
        low.asm.op(format!("mov.f32 {sv}, {v}"));
        low.asm.place(&skip);
    } else {
        low.asm.op(format!("selp.f32 {sv}, {v}, {NINF}, {guard}"));
    }
    Ok(sv)
}

/// `mn == -inf ? 0 : mn` (the template's `mu`).
fn finite_max(asm: &mut Asm, mn: &str) -> String {
    let (p, mu) = (asm.reg(Class::Pred), asm.reg(Class::F32));
    asm.op(format!("setp.eq.f32 {p}, {mn}, {NINF}"));
    asm.op(format!("selp.f32 {mu}, {ZERO}, {mn}, {p}"));
    mu
}

/// `exp(x - mu)`.
fn exp_diff(asm: &mut Asm, x: &str, mu: &str) -> String {
    let t = asm.reg(Class::F32);
    asm.op(format!("sub.rn.f32 {t}, {x}, {mu}"));
    math::exp(asm, &t)
}

/// Element index of operand `o`'s row 0 at flat batch `bh = b * heads + h`: `offset + b *
/// s_batch + h / group * s_head`, as `emit_base`.
fn operand_base(asm: &mut Asm, o: &AttnOperand, heads: usize, (b, h): (&str, &str)) -> String {
    let r = asm.reg(Class::B32);
    asm.op(format!("mov.u32 {r}, {}", o.offset as u32));
    if o.s_batch != 0 {
        asm.op(format!("mad.lo.u32 {r}, {b}, {}, {r}", o.s_batch as u32));
    }
    let group = o.group.max(1);
    if o.s_head != 0 && heads / group > 1 {
        let g = divide(asm, h, group as u32, heads as u64 - 1);
        asm.op(format!("mad.lo.u32 {r}, {g}, {}, {r}", o.s_head as u32));
    }
    r
}

/// The operand `[ptr+bytes]` (`bytes` wrapping, as the address arithmetic).
fn offset(asm: &mut Asm, ptr: &str, bytes: u64) -> String {
    if bytes == 0 {
        format!("[{ptr}]")
    } else if bytes <= i32::MAX as u64 {
        format!("[{ptr}+{bytes}]")
    } else {
        let a = asm.reg(Class::B64);
        asm.op(format!("add.s64 {a}, {ptr}, {}", bytes as i64));
        format!("[{a}]")
    }
}

/// A 16-byte vector at `at` as four `.b32` words, zero where `pred` is false.
fn load16(asm: &mut Asm, at: &str, pred: Option<&str>) -> Vec<String> {
    let words: Vec<String> = (0..4).map(|_| asm.reg(Class::B32)).collect();
    for x in words.iter().filter(|_| pred.is_some()) {
        asm.op(format!("mov.b32 {x}, 0"));
    }
    let guard = pred.map_or(String::new(), |p| format!("@{p} "));
    asm.op(format!("{guard}ld.global.nc.v4.u32 {{{}}}, {at}", words.join(", ")));
    words
}

/// The elements of a 16-byte vector of dtype `d` as f32 (exact): four f32, or eight 16-bit
/// values two to a word, the low half first.
fn elems(asm: &mut Asm, words: &[String], d: DType) -> Vec<String> {
    let mut out = Vec::with_capacity(8);
    for word in words {
        match d {
            DType::F32 => {
                let f = asm.reg(Class::F32);
                asm.op(format!("mov.b32 {f}, {word}"));
                out.push(f);
            }
            DType::F16 => {
                let (lo, hi) = (asm.reg(Class::B16), asm.reg(Class::B16));
                asm.op(format!("mov.b32 {{{lo}, {hi}}}, {word}"));
                out.extend([lo, hi].map(|h| widen16(asm, &h, d)));
            }
            _ => {
                // bf16 is the top half of an f32.
                let (lo, hi) = (asm.reg(Class::B32), asm.reg(Class::B32));
                asm.op(format!("shl.b32 {lo}, {word}, 16"));
                asm.op(format!("and.b32 {hi}, {word}, -65536"));
                for b in [lo, hi] {
                    let f = asm.reg(Class::F32);
                    asm.op(format!("mov.b32 {f}, {b}"));
                    out.push(f);
                }
            }
        }
    }
    out
}
