//! Shapes: static extents plus named symbolic dimensions.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;

mod poly;
pub use poly::{Poly, eval_dim, eval_dim_map};

/// One dimension of a shape: a static extent or a named symbol (e.g. `batch`) that
/// [`crate::passes::specialize`] later replaces by a value. A symbol whose name is the canonical
/// text of a [`Poly`] (`batch*seq`, `2*h + 1`) stands for that expression of other symbols.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Dim {
    /// A known extent.
    Static(usize),
    /// A named symbolic extent.
    Sym(Arc<str>),
}

impl Dim {
    /// The static extent, if known.
    pub fn as_static(&self) -> Option<usize> {
        match self {
            Dim::Static(n) => Some(*n),
            Dim::Sym(_) => None,
        }
    }

    /// A symbolic dimension with the given name.
    pub fn sym(name: &str) -> Dim {
        Dim::Sym(Arc::from(name))
    }
}

impl From<usize> for Dim {
    fn from(n: usize) -> Dim {
        Dim::Static(n)
    }
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Static(n) => write!(f, "{n}"),
            Dim::Sym(s) => write!(f, "{s}"),
        }
    }
}

/// A tensor shape (row-major, contiguous unless a kernel says otherwise).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Shape(pub Vec<Dim>);

impl Shape {
    /// A shape of static extents.
    pub fn new(dims: &[usize]) -> Shape {
        Shape(dims.iter().map(|&d| Dim::Static(d)).collect())
    }

    /// The rank-0 shape.
    pub fn scalar() -> Shape {
        Shape(Vec::new())
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.0.len()
    }

    /// The dims.
    pub fn dims(&self) -> &[Dim] {
        &self.0
    }

    /// All extents, if every dimension is static.
    pub fn as_static(&self) -> Option<Vec<usize>> {
        self.0.iter().map(Dim::as_static).collect()
    }

    /// True when every dimension is static.
    pub fn is_static(&self) -> bool {
        self.0.iter().all(|d| d.as_static().is_some())
    }

    /// Number of elements, if static.
    pub fn numel(&self) -> Option<usize> {
        self.as_static().map(|v| v.iter().product())
    }

    /// Normalizes a possibly negative axis against this rank.
    pub fn axis(&self, axis: i64) -> Option<usize> {
        norm_axis(axis, self.rank())
    }
}

/// Normalizes a possibly negative axis (`-1` is the last) against `rank`.
pub fn norm_axis(axis: i64, rank: usize) -> Option<usize> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    (0..r).contains(&a).then_some(a as usize)
}

impl<const N: usize> From<[usize; N]> for Shape {
    fn from(d: [usize; N]) -> Shape {
        Shape::new(&d)
    }
}

impl From<&[usize]> for Shape {
    fn from(d: &[usize]) -> Shape {
        Shape::new(d)
    }
}

impl From<Vec<usize>> for Shape {
    fn from(d: Vec<usize>) -> Shape {
        Shape::new(&d)
    }
}

impl From<Vec<Dim>> for Shape {
    fn from(d: Vec<Dim>) -> Shape {
        Shape(d)
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}

/// Row-major contiguous strides for static extents.
pub fn contiguous_strides(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1usize; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1];
    }
    s
}

/// NumPy broadcasting of two shapes; `None` when they are incompatible.
pub fn broadcast(a: &Shape, b: &Shape) -> Option<Shape> {
    let r = a.rank().max(b.rank());
    let mut out = Vec::with_capacity(r);
    for i in 0..r {
        let da = if i + a.rank() >= r { Some(&a.0[i + a.rank() - r]) } else { None };
        let db = if i + b.rank() >= r { Some(&b.0[i + b.rank() - r]) } else { None };
        let d = match (da, db) {
            (Some(x), None) | (None, Some(x)) => x.clone(),
            (Some(x), Some(y)) if x == y => x.clone(),
            (Some(Dim::Static(1)), Some(y)) => y.clone(),
            (Some(x), Some(Dim::Static(1))) => x.clone(),
            _ => return None,
        };
        out.push(d);
    }
    Some(Shape(out))
}
