//! The scalar op kinds the graph's elementwise, reduction and arg-reduction nodes name
//! ([`UnaryOp`], [`BinaryOp`], [`ReduceOp`], [`ArgOp`]) with their names and algebraic
//! properties; the kernel IR's expressions use the same kinds.

use serde::{Deserialize, Serialize};

/// Elementwise ops of one operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[allow(missing_docs)]
pub enum UnaryOp {
    Neg,
    Abs,
    Exp,
    Log,
    Sqrt,
    Rsqrt,
    Sin,
    Cos,
    Tan,
    Asin,
    Acos,
    Atan,
    Sinh,
    Cosh,
    Asinh,
    Acosh,
    Atanh,
    Tanh,
    Sigmoid,
    Erf,
    Relu,
    Floor,
    Ceil,
    /// Round half to even (as ONNX and torch do).
    Round,
    Sign,
    Reciprocal,
    /// Logical not (bool only).
    Not,
    /// True where NaN (output bool).
    IsNan,
    /// True where +-infinity (output bool).
    IsInf,
}

impl UnaryOp {
    /// The op's arithmetic weight, the one cost table of the scheduler's inlining and of renderers
    /// that judge how heavy a kernel's lanes are: 1 for ops of an instruction or two, 2 for square
    /// roots and reciprocals, 4 for transcendentals.
    pub fn weight(self) -> usize {
        match self {
            UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Relu | UnaryOp::Not | UnaryOp::Sign => 1,
            UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round | UnaryOp::IsNan | UnaryOp::IsInf => 1,
            UnaryOp::Sqrt | UnaryOp::Rsqrt | UnaryOp::Reciprocal => 2,
            _ => 4,
        }
    }

    /// Every unary op.
    pub const ALL: [UnaryOp; 29] = [
        UnaryOp::Neg,
        UnaryOp::Abs,
        UnaryOp::Exp,
        UnaryOp::Log,
        UnaryOp::Sqrt,
        UnaryOp::Rsqrt,
        UnaryOp::Sin,
        UnaryOp::Cos,
        UnaryOp::Tan,
        UnaryOp::Asin,
        UnaryOp::Acos,
        UnaryOp::Atan,
        UnaryOp::Sinh,
        UnaryOp::Cosh,
        UnaryOp::Asinh,
        UnaryOp::Acosh,
        UnaryOp::Atanh,
        UnaryOp::Tanh,
        UnaryOp::Sigmoid,
        UnaryOp::Erf,
        UnaryOp::Relu,
        UnaryOp::Floor,
        UnaryOp::Ceil,
        UnaryOp::Round,
        UnaryOp::Sign,
        UnaryOp::Reciprocal,
        UnaryOp::Not,
        UnaryOp::IsNan,
        UnaryOp::IsInf,
    ];

    /// Lowercase name used in the text form.
    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "neg",
            UnaryOp::Abs => "abs",
            UnaryOp::Exp => "exp",
            UnaryOp::Log => "log",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Rsqrt => "rsqrt",
            UnaryOp::Sin => "sin",
            UnaryOp::Cos => "cos",
            UnaryOp::Tan => "tan",
            UnaryOp::Asin => "asin",
            UnaryOp::Acos => "acos",
            UnaryOp::Atan => "atan",
            UnaryOp::Sinh => "sinh",
            UnaryOp::Cosh => "cosh",
            UnaryOp::Asinh => "asinh",
            UnaryOp::Acosh => "acosh",
            UnaryOp::Atanh => "atanh",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Sigmoid => "sigmoid",
            UnaryOp::Erf => "erf",
            UnaryOp::Relu => "relu",
            UnaryOp::Floor => "floor",
            UnaryOp::Ceil => "ceil",
            UnaryOp::Round => "round",
            UnaryOp::Sign => "sign",
            UnaryOp::Reciprocal => "reciprocal",
            UnaryOp::Not => "not",
            UnaryOp::IsNan => "isnan",
            UnaryOp::IsInf => "isinf",
        }
    }

    /// True when the op is defined only on floating-point inputs.
    pub fn float_only(self) -> bool {
        !matches!(self, UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Relu | UnaryOp::Sign | UnaryOp::Not)
            && !matches!(self, UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round)
    }
}

/// Elementwise ops of two operands (NumPy broadcasting; both operands of one dtype).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[allow(missing_docs)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    /// Float division; integer division truncates toward zero.
    Div,
    Pow,
    Max,
    Min,
    /// Floored modulo (result has the divisor's sign, as Python's `%`).
    Mod,
    /// Truncated modulo (result has the dividend's sign, as C's `fmod`).
    FMod,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    /// Logical and (bool only).
    And,
    /// Logical or (bool only).
    Or,
    /// Logical xor (bool only).
    Xor,
}

impl BinaryOp {
    /// The op's arithmetic weight ([`UnaryOp::weight`]): 4 for `pow`, 2 for divisions and
    /// remainders, 1 otherwise.
    pub fn weight(self) -> usize {
        match self {
            BinaryOp::Pow => 4,
            BinaryOp::Div | BinaryOp::Mod | BinaryOp::FMod => 2,
            _ => 1,
        }
    }

    /// Every binary op.
    pub const ALL: [BinaryOp; 18] = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Pow,
        BinaryOp::Max,
        BinaryOp::Min,
        BinaryOp::Mod,
        BinaryOp::FMod,
        BinaryOp::Eq,
        BinaryOp::Ne,
        BinaryOp::Lt,
        BinaryOp::Le,
        BinaryOp::Gt,
        BinaryOp::Ge,
        BinaryOp::And,
        BinaryOp::Or,
        BinaryOp::Xor,
    ];

    /// Lowercase name used in the text form.
    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::Pow => "pow",
            BinaryOp::Max => "max",
            BinaryOp::Min => "min",
            BinaryOp::Mod => "mod",
            BinaryOp::FMod => "fmod",
            BinaryOp::Eq => "eq",
            BinaryOp::Ne => "ne",
            BinaryOp::Lt => "lt",
            BinaryOp::Le => "le",
            BinaryOp::Gt => "gt",
            BinaryOp::Ge => "ge",
            BinaryOp::And => "and",
            BinaryOp::Or => "or",
            BinaryOp::Xor => "xor",
        }
    }

    /// True for comparisons (output bool).
    pub fn is_comparison(self) -> bool {
        matches!(self, BinaryOp::Eq | BinaryOp::Ne | BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge)
    }

    /// True for logical ops (bool in, bool out).
    pub fn is_logical(self) -> bool {
        matches!(self, BinaryOp::And | BinaryOp::Or | BinaryOp::Xor)
    }
}

/// Reductions over a set of axes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[allow(missing_docs)]
pub enum ReduceOp {
    Sum,
    /// Composite: decomposed into `sum * (1/n)`.
    Mean,
    Max,
    Min,
    Prod,
}

impl ReduceOp {
    /// Lowercase name used in the text form.
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Mean => "mean",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
            ReduceOp::Prod => "prod",
        }
    }
}

/// Index-of-extremum reductions along one axis (output i64).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[allow(missing_docs)]
pub enum ArgOp {
    ArgMax,
    ArgMin,
}
