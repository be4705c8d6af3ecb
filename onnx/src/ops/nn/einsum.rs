//! Einsum: operands aligned letter by letter (diagonals taken, repeated letters reduced), then one batched matmul per contraction.

use super::*;

/// Einsum: each operand's letters are aligned (diagonals taken for repeated letters), all
/// operands are multiplied with broadcasting, and letters absent from the output are summed.
pub(super) fn einsum(cx: &mut Cx) -> R<NodeId> {
    let eq = cx.as_str("equation", "").replace(' ', "");
    let ops: Vec<NodeId> = (0..cx.ins.len()).map(|i| cx.inp(i)).collect::<R<_>>()?;
    if ops.is_empty() {
        return Err(cx.err("needs at least one input"));
    }
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l.to_string(), Some(r.to_string())),
        None => (eq.clone(), None),
    };
    let terms: Vec<&str> = lhs.split(',').collect();
    if terms.len() != ops.len() {
        return Err(cx.err(format!("equation {eq:?} has {} operands, the node {}", terms.len(), ops.len())));
    }
    // Expand "..." into upper-case placeholder letters (equations use lower-case letters).
    let mut ell_rank = 0usize;
    for (t, &x) in terms.iter().zip(&ops) {
        if t.contains("...") {
            let named = t.replace("...", "").chars().count();
            ell_rank = ell_rank.max(cx.rank(x).saturating_sub(named));
        }
    }
    let ell: String = (0..ell_rank).map(|i| (b'A' + i as u8) as char).collect();
    let expand_term = |t: &str, rank: usize| -> String {
        if t.contains("...") {
            let named = t.replace("...", "").chars().count();
            let k = rank.saturating_sub(named);
            t.replace("...", &ell[ell_rank - k..])
        } else {
            t.to_string()
        }
    };
    let terms: Vec<String> = terms.iter().zip(&ops).map(|(t, &x)| expand_term(t, cx.rank(x))).collect();
    let out: String = match rhs {
        Some(r) => r.replace("...", &ell),
        None => {
            // Implicit output: ellipsis letters, then letters appearing once, sorted.
            let mut counts: std::collections::BTreeMap<char, usize> = Default::default();
            for t in &terms {
                for c in t.chars().filter(|c| c.is_ascii_lowercase()) {
                    *counts.entry(c).or_default() += 1;
                }
            }
            let mut s = ell.clone();
            s.extend(counts.iter().filter(|(_, n)| **n == 1).map(|(c, _)| *c));
            s
        }
    };
    // The output may only keep (and permute) letters of the inputs, each once.
    for (k, c) in out.chars().enumerate() {
        if !terms.iter().any(|t| t.contains(c)) {
            return Err(cx.err(format!("equation {eq:?}: output letter {c:?} appears in no input term")));
        }
        if out.chars().skip(k + 1).any(|d| d == c) {
            return Err(cx.err(format!("equation {eq:?}: output letter {c:?} appears twice")));
        }
    }
    // All letters in a canonical order: output letters first, then summed ones.
    let mut letters: Vec<char> = out.chars().collect();
    for t in &terms {
        for c in t.chars() {
            if !letters.contains(&c) {
                letters.push(c);
            }
        }
    }
    // Extents may be symbolic (a batch, a sequence): they are only compared, broadcast and
    // carried into reshapes.
    let mut extent: std::collections::HashMap<char, Dim> = Default::default();
    let mut aligned = Vec::new();
    for (t, &x) in terms.iter().zip(&ops) {
        let chars: Vec<char> = t.chars().collect();
        let s = cx.dims(x);
        if chars.len() != s.len() {
            return Err(cx.err(format!("term {t:?} does not match operand rank {}", s.len())));
        }
        let mut v = x;
        let mut cur: Vec<char> = chars.clone();
        // Take diagonals for repeated letters.
        loop {
            let dup = (0..cur.len()).find_map(|i| (i + 1..cur.len()).find(|&j| cur[j] == cur[i]).map(|j| (i, j)));
            let Some((i, j)) = dup else { break };
            let vs = cx.dims(v);
            if vs[i] != vs[j] {
                return Err(cx.err(format!("letter {} has extents {} and {}", cur[i], vs[i], vs[j])));
            }
            v = diagonal(cx, v, i, j)?;
            cur.remove(j);
        }
        let vs = cx.dims(v);
        let one = Dim::Static(1);
        for (c, n) in cur.iter().zip(&vs) {
            match extent.get(c) {
                Some(m) if m != n && *m != one && *n != one => {
                    return Err(cx.err(format!("letter {c} has extents {m} and {n}")));
                }
                Some(m) if m == n || *n == one => {}
                _ => {
                    extent.insert(*c, n.clone());
                }
            }
        }
        // Permute into canonical order and insert unit axes for missing letters.
        let present: Vec<char> = letters.iter().copied().filter(|c| cur.contains(c)).collect();
        let perm: Vec<usize> = present.iter().map(|c| cur.iter().position(|x| x == c).expect("present")).collect();
        v = cx.permute(v, &perm)?;
        let dims: Vec<Dim> = letters
            .iter()
            .map(|c| match cur.iter().position(|x| x == c) {
                Some(p) => vs[p].clone(),
                None => Dim::Static(1),
            })
            .collect();
        v = cx.reshape_dims(v, dims)?;
        aligned.push(v);
    }
    let mut acc = aligned[0];
    for &v in &aligned[1..] {
        acc = cx.bin(B::Mul, acc, v)?;
    }
    let full: Vec<Dim> = letters.iter().map(|c| extent.get(c).cloned().unwrap_or(Dim::Static(1))).collect();
    acc = cx.expand_dims(acc, full)?;
    let nout = out.chars().count();
    if letters.len() > nout {
        let axes: Vec<usize> = (nout..letters.len()).collect();
        acc = cx.reduce(ReduceOp::Sum, acc, &axes, false)?;
    } else if aligned.len() == 1 && acc == ops[0] {
        acc = cx.bin_s(B::Mul, acc, 1.0)?;
    }
    Ok(acc)
}

/// The diagonal of axes `i < j` (equal extents), kept at axis `i`; axis `j` is removed.
pub(super) fn diagonal(cx: &mut Cx, v: NodeId, i: usize, j: usize) -> R<NodeId> {
    let s = cx.shape(v)?;
    let n = s[i];
    // Move i, j to the end, flatten them, take every (n+1)-th element, move back.
    let r = s.len();
    let mut perm: Vec<usize> = (0..r).filter(|&k| k != i && k != j).collect();
    perm.extend([i, j]);
    let p = cx.permute(v, &perm)?;
    let mut flat: Vec<usize> = perm[..r - 2].iter().map(|&k| s[k]).collect();
    flat.push(n * n);
    let f = cx.reshape(p, &flat)?;
    let d = cx.slice(f, r - 2, 0, (n * n) as i64, (n + 1) as i64)?;
    // d has the diagonal as its last axis; move it to position i.
    let mut back: Vec<usize> = (0..r - 2).collect();
    back.insert(i, r - 2);
    cx.permute(d, &back)
}
