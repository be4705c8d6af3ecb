//! [`Poly`]: integer polynomials over named symbols, the expressions symbolic dimensions may hold
//! (`batch*seq`, `2*h + 1`).
//!
//! A [`Dim::Sym`] whose name is the canonical text of a polynomial ([`Poly`]'s `Display`) stands
//! for that expression: importers build such dims where an extent is an arithmetic function of the
//! input symbols (a reshape to `[batch*seq, 64]`, a padded `h + 2`), and
//! [`crate::passes::specialize`] evaluates them once the symbols are bound. The canonical text is
//! unique per polynomial, so equal expressions are equal dims. A plain name (one symbol,
//! coefficient 1) is the symbol itself.

use super::Dim;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

/// A polynomial with integer coefficients over named symbols: a map from monomials (sorted
/// symbol names, repeated for powers; empty for the constant term) to non-zero coefficients.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Poly(BTreeMap<Vec<Arc<str>>, i64>);

/// True for names that may appear as factors of an expression: identifier-like text.
fn is_ident(s: &str) -> bool {
    let mut c = s.chars();
    c.next().is_some_and(|f| f.is_alphabetic() || f == '_')
        && s.chars().all(|ch| ch.is_alphanumeric() || matches!(ch, '_' | '.' | ':'))
}

impl Poly {
    /// The constant `c`.
    pub fn constant(c: i64) -> Poly {
        let mut m = BTreeMap::new();
        if c != 0 {
            m.insert(Vec::new(), c);
        }
        Poly(m)
    }

    /// The symbol `name`.
    pub fn sym(name: &str) -> Poly {
        Poly(BTreeMap::from([(vec![Arc::from(name)], 1)]))
    }

    /// The constant value, if the polynomial has no symbols.
    pub fn as_const(&self) -> Option<i64> {
        match self.0.len() {
            0 => Some(0),
            1 => self.0.get(&Vec::new()).copied(),
            _ => None,
        }
    }

    /// The polynomial of a dim: a static extent, a symbol, or a symbol naming an expression.
    pub fn of_dim(d: &Dim) -> Poly {
        match d {
            Dim::Static(n) => Poly::constant(*n as i64),
            Dim::Sym(s) => Poly::parse(s).unwrap_or_else(|| Poly::sym(s)),
        }
    }

    /// The product of extents (`None` on overflow).
    pub fn product<'a>(dims: impl IntoIterator<Item = &'a Dim>) -> Option<Poly> {
        dims.into_iter().try_fold(Poly::constant(1), |p, d| p.mul(&Poly::of_dim(d)))
    }

    /// The dim this polynomial denotes: a static extent for a non-negative constant, else a
    /// symbol named by the canonical text. `None` for negative constants.
    pub fn to_dim(&self) -> Option<Dim> {
        match self.as_const() {
            Some(c) => usize::try_from(c).ok().map(Dim::Static),
            None => Some(Dim::Sym(Arc::from(self.to_string().as_str()))),
        }
    }

    /// Parses the canonical text (`2*h*w + h - 3`); `None` when `s` is not one, or is a plain
    /// symbol name (those are symbols, not expressions).
    pub fn parse(s: &str) -> Option<Poly> {
        if is_ident(s) {
            return None;
        }
        let mut p = Poly::default();
        let mut sign = 1i64;
        let mut rest = s;
        loop {
            let (term, next) = match (rest.find(" + "), rest.find(" - ")) {
                (Some(a), Some(b)) if a < b => (&rest[..a], Some((1, &rest[a + 3..]))),
                (_, Some(b)) => (&rest[..b], Some((-1, &rest[b + 3..]))),
                (Some(a), None) => (&rest[..a], Some((1, &rest[a + 3..]))),
                (None, None) => (rest, None),
            };
            let mut coef = sign;
            let mut mono: Vec<Arc<str>> = Vec::new();
            for (k, f) in term.split('*').enumerate() {
                if let Ok(n) = f.parse::<i64>() {
                    if k != 0 {
                        return None;
                    }
                    coef = coef.checked_mul(n)?;
                } else if is_ident(f) {
                    mono.push(Arc::from(f));
                } else {
                    return None;
                }
            }
            mono.sort();
            p = p.add(&Poly(BTreeMap::from([(mono, coef)])))?;
            match next {
                Some((sg, r)) => {
                    sign = sg;
                    rest = r;
                }
                None => break,
            }
        }
        // Only canonical text denotes an expression (so equal dims are equal expressions).
        (p.to_string() == s).then_some(p)
    }

    /// `self + o` (`None` on overflow).
    pub fn add(&self, o: &Poly) -> Option<Poly> {
        let mut m = self.0.clone();
        for (k, &c) in &o.0 {
            let e = m.entry(k.clone()).or_insert(0);
            *e = e.checked_add(c)?;
            if *e == 0 {
                m.remove(k);
            }
        }
        Some(Poly(m))
    }

    /// `-self`.
    pub fn neg(&self) -> Poly {
        Poly(self.0.iter().map(|(k, &c)| (k.clone(), c.wrapping_neg())).collect())
    }

    /// `self - o` (`None` on overflow).
    pub fn sub(&self, o: &Poly) -> Option<Poly> {
        self.add(&o.neg())
    }

    /// `self * o` (`None` on overflow).
    pub fn mul(&self, o: &Poly) -> Option<Poly> {
        let mut p = Poly::default();
        for (ka, &ca) in &self.0 {
            for (kb, &cb) in &o.0 {
                let mut k: Vec<Arc<str>> = ka.iter().chain(kb).cloned().collect();
                k.sort();
                p = p.add(&Poly(BTreeMap::from([(k, ca.checked_mul(cb)?)])))?;
            }
        }
        Some(p)
    }

    /// `self / o` when the division is exact term by term: `o` a single non-zero monomial
    /// (`c*a*b`) dividing every term. `None` otherwise.
    pub fn div_exact(&self, o: &Poly) -> Option<Poly> {
        if o.0.len() != 1 {
            return None;
        }
        let (dk, &dc) = o.0.iter().next()?;
        let mut out = BTreeMap::new();
        for (k, &c) in &self.0 {
            if c % dc != 0 {
                return None;
            }
            let mut rest = k.clone();
            for s in dk {
                let i = rest.iter().position(|x| x == s)?;
                rest.remove(i);
            }
            out.insert(rest, c / dc);
        }
        Some(Poly(out))
    }

    /// `floor(self / d)` for a positive constant `d`, when every non-constant coefficient is a
    /// multiple of `d` (then the floor only touches the constant term). `None` otherwise.
    pub fn floor_div(&self, d: i64) -> Option<Poly> {
        if d <= 0 {
            return None;
        }
        let mut out = BTreeMap::new();
        for (k, &c) in &self.0 {
            let q = if k.is_empty() {
                c.div_euclid(d)
            } else if c % d == 0 {
                c / d
            } else {
                return None;
            };
            if q != 0 {
                out.insert(k.clone(), q);
            }
        }
        Some(Poly(out))
    }

    /// The value under `bind` (every symbol bound; `None` otherwise or on overflow).
    pub fn eval(&self, bind: &dyn Fn(&str) -> Option<i64>) -> Option<i64> {
        let mut total = 0i64;
        for (k, &c) in &self.0 {
            let mut t = c;
            for s in k {
                t = t.checked_mul(bind(s)?)?;
            }
            total = total.checked_add(t)?;
        }
        Some(total)
    }

    /// True when the value is at least 1 for every binding of the symbols to positive extents
    /// (all coefficients non-negative and some term non-zero).
    pub fn is_positive(&self) -> bool {
        !self.0.is_empty() && self.0.values().all(|&c| c > 0)
    }
}

/// Evaluates a dim under bindings of its symbols: static extents as they are, a bound symbol to
/// its value, an expression to its value when all its symbols are bound and the value is not
/// negative. `None` when something is unbound.
pub fn eval_dim(d: &Dim, values: &dyn Fn(&str) -> Option<usize>) -> Option<usize> {
    match d {
        Dim::Static(n) => Some(*n),
        Dim::Sym(s) => values(s).or_else(|| {
            let p = Poly::parse(s)?;
            let v = p.eval(&|x| values(x).and_then(|n| i64::try_from(n).ok()))?;
            usize::try_from(v).ok()
        }),
    }
}

/// Evaluates a dim under a map of symbol values (see [`eval_dim`]).
pub fn eval_dim_map<S: std::borrow::Borrow<str> + Eq + std::hash::Hash + Ord>(
    d: &Dim,
    values: &HashMap<S, usize>,
) -> Option<usize> {
    eval_dim(d, &|s| values.get(s).copied())
}

impl fmt::Display for Poly {
    /// Canonical text: terms by descending degree, then by names; the constant last; `c*` left
    /// out for `c = 1`; negative terms after ` - `.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("0");
        }
        let mut terms: Vec<(&Vec<Arc<str>>, i64)> = self.0.iter().map(|(k, &c)| (k, c)).collect();
        terms.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(b.0)));
        for (i, (k, c)) in terms.into_iter().enumerate() {
            let neg = c < 0;
            let a = c.unsigned_abs();
            if i == 0 {
                if neg {
                    f.write_str("-")?;
                }
            } else {
                f.write_str(if neg { " - " } else { " + " })?;
            }
            let names: Vec<&str> = k.iter().map(|s| &**s).collect();
            match (a, names.is_empty()) {
                (_, true) => write!(f, "{a}")?,
                (1, false) => f.write_str(&names.join("*"))?,
                (_, false) => write!(f, "{a}*{}", names.join("*"))?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: &str) -> Poly {
        Poly::sym(x)
    }

    #[test]
    fn arithmetic_and_canonical_text_roundtrip() {
        let bs = s("seq").mul(&s("batch")).unwrap();
        assert_eq!(bs.to_string(), "batch*seq");
        let e = s("h").mul(&Poly::constant(2)).unwrap().add(&Poly::constant(1)).unwrap();
        assert_eq!(e.to_string(), "2*h + 1");
        let d = s("h").sub(&Poly::constant(3)).unwrap();
        assert_eq!(d.to_string(), "h - 3");
        for p in [&bs, &e, &d] {
            assert_eq!(Poly::parse(&p.to_string()).as_ref(), Some(p));
            assert_eq!(&Poly::of_dim(&p.to_dim().unwrap()), p);
        }
        assert_eq!(Poly::parse("batch"), None, "plain names are symbols");
        assert_eq!(Poly::parse("1 + h"), None, "non-canonical text is a name");
        assert_eq!(Poly::of_dim(&Dim::sym("a b")), s("a b"));
        assert_eq!(Poly::constant(4).to_dim(), Some(Dim::Static(4)));
        assert_eq!(Poly::constant(-1).to_dim(), None);
    }

    #[test]
    fn division_and_evaluation() {
        let bs = s("batch").mul(&s("seq")).unwrap().mul(&Poly::constant(64)).unwrap();
        let b16 = s("batch").mul(&Poly::constant(16)).unwrap();
        assert_eq!(bs.div_exact(&b16).unwrap().to_string(), "4*seq");
        assert_eq!(bs.div_exact(&s("h")), None);
        assert_eq!(bs.div_exact(&Poly::constant(5)), None);
        // floor((4h - 1) / 2) = 2h - 1.
        let p = s("h").mul(&Poly::constant(4)).unwrap().sub(&Poly::constant(1)).unwrap();
        assert_eq!(p.floor_div(2).unwrap().to_string(), "2*h - 1");
        assert_eq!(s("h").floor_div(2), None);
        let bind = |x: &str| match x {
            "h" => Some(5),
            "batch" => Some(2),
            "seq" => Some(3),
            _ => None,
        };
        assert_eq!(p.eval(&bind), Some(19));
        assert_eq!(bs.eval(&bind), Some(384));
        assert_eq!(s("w").eval(&bind), None);
        let d = Dim::sym("2*h + 1");
        assert_eq!(eval_dim(&d, &|x| (x == "h").then_some(3)), Some(7));
        assert_eq!(eval_dim(&Dim::sym("h"), &|_| None), None);
        assert!(p.add(&Poly::constant(1)).unwrap().is_positive());
        assert!(!p.is_positive());
    }
}
