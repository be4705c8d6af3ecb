//! ONNX op lowering: one function per op (family), each turning one ONNX node into sinter IR
//! ops. Ops the IR lacks are expressed with its primitives (ConvTranspose as zero insertion plus a
//! flipped-weight convolution, 1-D and 3-D convolution and pooling through 2-D, CumSum as a scan
//! of shifted adds, TopK through ranks, scatters through one-hot masks...).

mod elementwise;
mod index;
mod nn;
mod reduce;
mod resize;
mod resize_sym;
mod rnn;
mod seq;
mod shape;
mod signal;
mod slice;

use crate::import::{Cx, R};
use sinter_core::NodeId;

/// Inputs of `op` whose *values* must be known at import time (they fix output shapes or
/// attributes the IR needs as constants).
pub(crate) fn value_inputs(op: &str, opset: i64) -> &'static [usize] {
    match op {
        "Reshape" | "Expand" | "Tile" | "OneHot" | "Trilu" | "CenterCropPad" | "AffineGrid" | "TopK" => &[1],
        "Upsample" if opset >= 9 => &[1],
        "Squeeze" | "Unsqueeze" | "Split" if opset >= 13 => &[1],
        "ReduceSum" if opset >= 13 => &[1],
        "ReduceMean" | "ReduceMax" | "ReduceMin" | "ReduceProd" | "ReduceL1" | "ReduceL2" | "ReduceLogSum"
        | "ReduceLogSumExp" | "ReduceSumSquare"
            if opset >= 18 =>
        {
            &[1]
        }
        "Slice" if opset >= 10 => &[1, 2, 3, 4],
        "Pad" if opset >= 11 => &[1, 2, 3],
        "ConstantOfShape" | "HannWindow" | "HammingWindow" | "BlackmanWindow" => &[0],
        "Range" | "MelWeightMatrix" => &[0, 1, 2, 3, 4],
        "Resize" => &[1, 2, 3],
        "MaxUnpool" => &[2],
        "CumSum" | "CumProd" | "Compress" => &[1],
        "Col2Im" | "RoiAlign" => &[1, 2],
        "DFT" => &[1, 2],
        "STFT" => &[1, 3],
        "Dropout" => &[1, 2],
        "Clip" if opset < 11 => &[],
        "Scan" | "Loop" => &[0, 1],
        "If" => &[0],
        "SplitToSequence" => &[1],
        "Attention" => &[],
        "RotaryEmbedding" => &[],
        _ => &[],
    }
}

/// Lowers one node; returns one entry per ONNX output (`None` where not produced).
pub(crate) fn lower(cx: &mut Cx) -> R<Vec<Option<NodeId>>> {
    let one = |r: R<NodeId>| r.map(|x| vec![Some(x)]);
    if !cx.domain.is_empty() {
        return match (cx.domain, cx.op) {
            ("ai.onnx.ml", "Binarizer") => one(elementwise::binarizer(cx)),
            ("ai.onnx.ml", "ArrayFeatureExtractor") => one(index::array_feature_extractor(cx)),
            ("ai.onnx.preview", "FlexAttention") => seq::flex_attention(cx),
            _ => Err(cx.unsup(format!("domain {:?} (opset {}) is not supported", cx.domain, cx.opset))),
        };
    }
    let op = cx.op;
    if let Some(r) = elementwise::lower(cx, op) {
        return r;
    }
    if let Some(r) = shape::lower(cx, op) {
        return r;
    }
    if let Some(r) = reduce::lower(cx, op) {
        return r;
    }
    if let Some(r) = index::lower(cx, op) {
        return r;
    }
    if let Some(r) = nn::lower(cx, op) {
        return r;
    }
    if let Some(r) = resize::lower(cx, op) {
        return r;
    }
    if let Some(r) = seq::lower(cx, op) {
        return r;
    }
    if let Some(r) = signal::lower(cx, op) {
        return r;
    }
    Err(cx.unsup(format!("op {op} (opset {}) is not supported", cx.opset)))
}
