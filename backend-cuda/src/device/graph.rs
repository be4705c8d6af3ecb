//! CUDA graphs: the launches of a run captured once from a stream, instantiated, and replayed with
//! one `cuGraphLaunch`.
//!
//! Kernel arguments are frozen at capture, but the kernel nodes of the instantiated graph can be
//! given new arguments between replays ([`Graph::update_kernel`], `cuGraphExecKernelNodeSetParams`:
//! launches already queued keep the arguments they had), so a replay can read its inputs and write
//! fresh outputs in place, without copies.

use super::{Launch, Stream, check, driver_error};
use cudarc::driver::sys;
use cudarc::driver::{CudaFunction, CudaGraph};
use sinter_core::backend::BackendError;

/// An instantiated graph.
pub struct Graph {
    graph: CudaGraph,
    nodes: usize,
    /// The kernel nodes and their captured parameters (empty when they could not be read).
    kernels: Vec<(sys::CUgraphNode, sys::CUDA_KERNEL_NODE_PARAMS)>,
}

// SAFETY: a graph is used only through `&mut` of its executable (never concurrently), which is
// what the driver requires; its handles are valid on any thread of the process.
unsafe impl Send for Graph {}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Graph({} launches)", self.nodes)
    }
}

impl Graph {
    /// Captures what `record` queues on `stream` (thread-local capture mode: other threads are
    /// unaffected), instantiates it and uploads it to the device. `record` returns how many
    /// operations it queued; `None` when it queued none (nothing to replay). A failure inside
    /// `record` still ends the capture, so the stream stays usable.
    pub fn capture(
        stream: &Stream,
        what: &str,
        record: impl FnOnce() -> Result<usize, BackendError>,
    ) -> Result<Option<Graph>, BackendError> {
        let raw = stream.raw();
        raw.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(|e| driver_error("cuStreamBeginCapture", what, e))?;
        let recorded = record();
        let ended = raw.end_capture(sys::CUgraphInstantiate_flags(0));
        let nodes = recorded?;
        let graph = ended.map_err(|e| driver_error("cuStreamEndCapture/cuGraphInstantiate", what, e))?;
        let Some(graph) = graph else { return Ok(None) };
        if nodes == 0 {
            return Ok(None);
        }
        graph.upload().map_err(|e| driver_error("cuGraphUpload", what, e))?;
        let kernels = match kernel_nodes(&graph) {
            Ok(k) => k,
            Err(e) => {
                tracing::debug!(target: "sinter::cuda", "{what}: kernel nodes unreadable ({e}); arguments stay frozen");
                Vec::new()
            }
        };
        Ok(Some(Graph { graph, nodes, kernels }))
    }

    /// The kernel node launching `f` (by index, for [`Graph::update_kernel`]), if exactly one does.
    pub fn kernel_node(&self, f: &CudaFunction) -> Option<usize> {
        let mut found = self.kernels.iter().enumerate().filter(|(_, (_, p))| p.func == f.cu_function()).map(|(i, _)| i);
        let first = found.next();
        if found.next().is_some() { None } else { first }
    }

    /// Gives kernel node `node` the current arguments of `launch` (same function and shape) for
    /// later replays; replays already queued are unaffected. The context must be bound.
    #[inline]
    pub fn update_kernel(&self, node: usize, launch: &Launch) -> Result<(), BackendError> {
        let Some((n, captured)) = self.kernels.get(node) else {
            return Err(BackendError::Device(format!("graph has no kernel node {node}")));
        };
        let mut p = *captured;
        p.kernelParams = launch.param_array();
        p.extra = std::ptr::null_mut();
        check(
            unsafe { sys::cuGraphExecKernelNodeSetParams_v2(self.graph.cu_graph_exec(), *n, &p) },
            "cuGraphExecKernelNodeSetParams",
            launch.name(),
        )
    }

    /// Operations captured.
    pub fn nodes(&self) -> usize {
        self.nodes
    }

    /// Replays the graph on `stream` (the context must be bound).
    #[inline]
    pub fn launch(&self, stream: &Stream, what: &str) -> Result<(), BackendError> {
        check(unsafe { sys::cuGraphLaunch(self.graph.cu_graph_exec(), stream.cu()) }, "cuGraphLaunch", what)
    }
}

/// Every kernel node of `graph` with its captured parameters.
fn kernel_nodes(graph: &CudaGraph) -> Result<Vec<(sys::CUgraphNode, sys::CUDA_KERNEL_NODE_PARAMS)>, BackendError> {
    let g = graph.cu_graph();
    let mut count = 0usize;
    check(unsafe { sys::cuGraphGetNodes(g, std::ptr::null_mut(), &mut count) }, "cuGraphGetNodes", "graph")?;
    let mut nodes: Vec<sys::CUgraphNode> = vec![std::ptr::null_mut(); count];
    check(unsafe { sys::cuGraphGetNodes(g, nodes.as_mut_ptr(), &mut count) }, "cuGraphGetNodes", "graph")?;
    nodes.truncate(count);
    let mut out = Vec::new();
    for n in nodes {
        let mut ty = sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_EMPTY;
        check(unsafe { sys::cuGraphNodeGetType(n, &mut ty) }, "cuGraphNodeGetType", "graph")?;
        if ty != sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_KERNEL {
            continue;
        }
        // SAFETY: a plain C struct of pointers and integers; all-zero is a valid value.
        let mut p: sys::CUDA_KERNEL_NODE_PARAMS = unsafe { std::mem::zeroed() };
        check(unsafe { sys::cuGraphKernelNodeGetParams_v2(n, &mut p) }, "cuGraphKernelNodeGetParams", "graph")?;
        out.push((n, p));
    }
    Ok(out)
}
