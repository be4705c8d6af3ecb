//! The stable text form of a graph: one node per line, like FX's readable graph. Used by
//! `sinter explain`, the debug artifacts and snapshot tests.

use crate::ir::{Graph, Op};
use std::fmt::Write;

/// Prints `g`:
/// ```text
/// graph(%0: f32[8, 4] "x") {
///   %1: f32[8, 4] = relu(%0)
///   return %1 as "y"
/// }
/// ```
pub fn print(g: &Graph) -> String {
    let mut s = String::from("graph(");
    for (k, &i) in g.inputs.iter().enumerate() {
        if k > 0 {
            s.push_str(", ");
        }
        let name = match &g.node(i).op {
            Op::Input { name } => name.as_str(),
            _ => "?",
        };
        let _ = write!(s, "{i}: {} {name:?}", g.ty(i));
    }
    s.push_str(") {\n");
    for (id, n) in g.iter() {
        if matches!(n.op, Op::Input { .. }) {
            continue;
        }
        let mut args: Vec<String> = n.inputs.iter().map(|i| i.to_string()).collect();
        args.extend(n.op.attrs().into_iter().map(|(k, v)| format!("{k}={v}")));
        let _ = write!(s, "  {id}: {} = {}({})", n.ty, n.op.name(), args.join(", "));
        if n.origin.node != id.0 || *n.origin.op != *n.op.name() {
            let _ = write!(s, "  # from %{} {}", n.origin.node, n.origin.op);
        }
        s.push('\n');
    }
    let outs: Vec<String> = g.outputs.iter().map(|o| format!("{} as {:?}", o.node, o.name)).collect();
    let _ = writeln!(s, "  return {}", outs.join(", "));
    s.push_str("}\n");
    s
}
