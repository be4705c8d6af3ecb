//! Sixteen-byte output stores of a tensor-core accumulator row (the quad exchange).
//!
//! In the m16n8 accumulator layout a thread holds, for each of its rows, the two adjacent columns
//! `2 t4, 2 t4 + 1` of every eight-column group (`t4` = lane % 4, the four lanes of a *quad* sharing
//! the row). Stored as they lie, every group is one 4-byte store per thread: a warp's store
//! instruction writes sixteen bytes of eight rows, and a row of `dv` columns takes `dv / 8` such
//! instructions. Here each thread first packs its pairs (16-bit outputs: one 32-bit word each),
//! then the quad exchanges them in two butterfly stages (`shfl.xor` 1 and 2: at stage `k` a lane
//! sends, of each pair of words `k` apart, the one whose bit `k` differs from its own lane's, and
//! keeps what it receives in that place), which transposes every 4 x 4 block of words: lane `t4`
//! ends with the four words of groups `4 s + t4`, eight consecutive outputs, stored as one 16-byte
//! access. Four times fewer store instructions and memory-pipe wavefronts.
//!
//! Used by the tensor-core attention epilogue (`attention_tc`). Measured (H200, session 36): attention_b8h16s1024d64_bf16's
//! persistent tile 0.0837-0.0845 ms against 0.0865-0.0874 with the 4-byte stores, the outputs bit
//! for bit the same (call 7; in `bench` 0.0840-0.0842 against 0.0872, the causal d128 tile
//! 0.249 against 0.265, call 8): the eight stores of a row half had left in one burst, and that
//! burst queued in the memory pipe that the other block's softmax shuffles and barrier waits on
//! the SM go through.
//!
//! The tensor-core matmul templates' epilogue keeps its 4-byte pairs: stored this way, whole
//! tiles of mlp_8192x4096x16384_bf16 and matmul_softmax_4096_bf16 ran as before (2.948-2.950 /
//! 0.1937-0.1938 ms against 2.946-3.010 / 0.1935-0.1942; session 36, call 9): a product's
//! epilogue runs once after 64-128 k-steps, an attention tile's after every work tile.
//!
//! Contract ([`eligible`]): one store, 16-bit, contiguous in aligned runs of eight columns
//! (`lane_form` at width 8), `dv` a multiple of 32 (whole 4 x 4 blocks), and every lane of the
//! warp runs the exchange (no row guard around it: the caller's tile divides `m`).

use sinter_core::kernel::{Store, Var};

use super::RenderError;
use super::emit::Emitter;
use super::index::LaneForm;
use super::prelude::H;

/// The one store of an accumulator epilogue that [`emit`] can write 16 bytes at a time, if any:
/// `stores` has exactly one, of a 16-bit dtype, contiguous and aligned in runs of eight values of
/// N, and `dv8` (eight-column groups per row) is a multiple of 4. Called outside any lane group:
/// it sets the emitter's lanes to eight of N to ask, then back to none.
pub(super) fn eligible<'s>(em: &mut Emitter<'_>, stores: &'s [Store], dv8: u32) -> Option<&'s Store> {
    let [s] = stores else { return None };
    if dv8 == 0 || !dv8.is_multiple_of(4) || em.k.args[s.arg].dtype.size_bytes() != 2 {
        return None;
    }
    em.acc_varies = true;
    em.set_lanes(Some((Var::N, 8)));
    let contig = em.form(&s.index) == LaneForm::Contig;
    em.set_lanes(None);
    em.acc_varies = false;
    contig.then_some(s)
}

/// After a loop that packed each group `jf` of the row into `words[jf]` (`dv8` words), the quad
/// exchange and the 16-byte stores of `s` (N named `nq`, the first column of a thread's group;
/// the row starts at column 0). `t4` is the lane's place in its quad; every lane of the warp must
/// run this.
pub(super) fn emit(em: &mut Emitter<'_>, s: &Store, words: &str, dv8: u32) -> Result<(), RenderError> {
    exchange(em, words, dv8);
    em.h.need(H::Vec);
    em.line("#pragma unroll");
    em.open(format!("for (unsigned qs = 0; qs < {}u; ++qs)", dv8 / 4));
    let ity = em.ity();
    em.decl("nq", format!("const {ity} nq = (qs * 4u + t4) * 8u;"));
    let outer = em.names.insert(Var::N, "nq".into());
    let at = em.address(&s.index);
    match outer {
        Some(n) => em.names.insert(Var::N, n),
        None => em.names.remove(&Var::N),
    };
    em.line("sinter_vec<unsigned, 4> w4;");
    em.line("#pragma unroll");
    em.line(format!("for (unsigned qc = 0; qc < 4u; ++qc) w4.v[qc] = {words}[qs * 4u + qc];"));
    em.line(format!("*reinterpret_cast<sinter_vec<unsigned, 4>*>(a{} + {}) = w4;", s.arg, at?));
    em.close();
    Ok(())
}

/// The quad's exchange of [`emit`] (every lane of the warp runs it): lane `t4` ends with the four
/// words of column groups `4 qs + t4` of `words` (`dv8` words).
pub(super) fn exchange(em: &mut Emitter<'_>, words: &str, dv8: u32) {
    let blocks = dv8 / 4;
    em.line("// the quad's exchange: lane t4 ends with the four words of column groups 4 qs + t4");
    em.line("#pragma unroll");
    em.open("for (unsigned qk = 1u; qk <= 2u; qk <<= 1)");
    em.line("const bool qup = (t4 & qk) != 0u;");
    em.line("#pragma unroll");
    em.open(format!("for (unsigned qs = 0; qs < {blocks}u; ++qs)"));
    em.line("#pragma unroll");
    em.open("for (unsigned qc = 0; qc < 4u; ++qc)");
    em.line("if ((qc & qk) != 0u) continue;");
    em.line("const unsigned lo = qs * 4u + qc, hi = lo + qk;");
    em.line(format!("const unsigned got = __shfl_xor_sync(0xffffffffu, qup ? {words}[lo] : {words}[hi], qk);"));
    em.line(format!("if (qup) {words}[lo] = got; else {words}[hi] = got;"));
    em.close();
    em.close();
    em.close();
}
