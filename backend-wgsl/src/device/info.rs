//! [`AdapterInfo`]: what the selected adapter is and can do, serialisable for artifacts.

use serde::{Deserialize, Serialize};

/// The limits the scheduler and the runtime care about.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitsSummary {
    /// Largest range of one buffer bindable as storage, in bytes.
    pub max_storage_buffer_binding_size: u64,
    /// Largest uniform binding, in bytes.
    pub max_uniform_buffer_binding_size: u64,
    /// Largest buffer, in bytes.
    pub max_buffer_size: u64,
    /// Largest workgroup size in x.
    pub max_compute_workgroup_size_x: u32,
    /// Largest workgroup size in y.
    pub max_compute_workgroup_size_y: u32,
    /// Largest workgroup size in z.
    pub max_compute_workgroup_size_z: u32,
    /// Most invocations in one workgroup.
    pub max_compute_invocations_per_workgroup: u32,
    /// Most workgroups per dispatch dimension.
    pub max_compute_workgroups_per_dimension: u32,
    /// Most storage buffers one shader stage binds.
    pub max_storage_buffers_per_shader_stage: u32,
    /// Most uniform buffers one shader stage binds.
    pub max_uniform_buffers_per_shader_stage: u32,
    /// Workgroup (shared) memory per workgroup, in bytes.
    pub max_compute_workgroup_storage_size: u32,
    /// Required alignment of a storage binding's offset, in bytes.
    pub min_storage_buffer_offset_alignment: u32,
    /// Required alignment of a uniform binding's offset, in bytes.
    pub min_uniform_buffer_offset_alignment: u32,
    /// Bytes of immediates (push constants) available, 0 without the feature.
    pub max_immediate_size: u32,
    /// Smallest subgroup size the adapter may use.
    pub min_subgroup_size: u32,
    /// Largest subgroup size the adapter may use.
    pub max_subgroup_size: u32,
}

/// One cooperative-matrix configuration: `C (m x n) += A (m x k) * B (k x n)`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoopMatrixShape {
    /// Rows of A and C.
    pub m: u32,
    /// Columns of B and C.
    pub n: u32,
    /// Columns of A, rows of B.
    pub k: u32,
    /// Element type of A and B (`f16`, `f32`, `i32`, `u32`).
    pub ab_type: String,
    /// Element type of C and the result.
    pub cr_type: String,
    /// Whether saturating accumulation is supported.
    pub saturating_accumulation: bool,
}

/// What the selected adapter is and can do. Serialisable; stored in compile artifacts and calibration files.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AdapterInfo {
    /// Adapter name, e.g. `NVIDIA H100 80GB HBM3` or `llvmpipe (LLVM 15.0.6, 256 bits)`.
    pub name: String,
    /// Backend: `vulkan`, `metal`, `dx12`, `gl`.
    pub backend: String,
    /// Device type: `DiscreteGpu`, `IntegratedGpu`, `VirtualGpu`, `Cpu`, `Other`.
    pub device_type: String,
    /// Driver name.
    pub driver: String,
    /// Driver version information.
    pub driver_info: String,
    /// Backend-specific vendor id (PCI vendor id on Vulkan).
    pub vendor: u32,
    /// Backend-specific device id (PCI device id on Vulkan).
    pub device: u32,
    /// The limits that matter to sinter.
    pub limits: LimitsSummary,
    /// `f16` in shaders (`enable f16;`).
    pub has_f16: bool,
    /// Subgroup operations.
    pub has_subgroups: bool,
    /// GPU timestamps on compute passes.
    pub has_timestamps: bool,
    /// Timestamps written inside compute passes.
    pub has_timestamps_inside_passes: bool,
    /// Cooperative matrices (`coop_mat*` in WGSL; tensor cores on NVIDIA).
    pub has_coop_matrix: bool,
    /// The cooperative-matrix configurations the adapter supports (empty without the feature).
    pub coop_matrix_shapes: Vec<CoopMatrixShape>,
    /// Immediates (push constants).
    pub has_immediates: bool,
    /// A driver pipeline cache that can be persisted (Vulkan).
    pub has_pipeline_cache: bool,
    /// Nanoseconds per timestamp tick.
    pub timestamp_period_ns: f32,
}

/// Lower-case name of a wgpu backend.
fn backend_name(b: wgpu::Backend) -> String {
    match b {
        wgpu::Backend::Vulkan => "vulkan".into(),
        wgpu::Backend::Metal => "metal".into(),
        wgpu::Backend::Dx12 => "dx12".into(),
        wgpu::Backend::Gl => "gl".into(),
        wgpu::Backend::BrowserWebGpu => "webgpu".into(),
        wgpu::Backend::Noop => "noop".into(),
    }
}

/// Name of a cooperative-matrix scalar type.
fn scalar_name(t: wgpu::CooperativeScalarType) -> String {
    match t {
        wgpu::CooperativeScalarType::F32 => "f32".into(),
        wgpu::CooperativeScalarType::F16 => "f16".into(),
        wgpu::CooperativeScalarType::I32 => "i32".into(),
        wgpu::CooperativeScalarType::U32 => "u32".into(),
    }
}

impl AdapterInfo {
    /// Collects the info of `adapter` given the features enabled on its device.
    pub(crate) fn new(
        adapter: &wgpu::Adapter,
        features: wgpu::Features,
        limits: &wgpu::Limits,
        timestamp_period_ns: f32,
    ) -> AdapterInfo {
        use wgpu::Features as F;
        let i = adapter.get_info();
        let has_coop_matrix = features.contains(F::EXPERIMENTAL_COOPERATIVE_MATRIX);
        let coop_matrix_shapes = if has_coop_matrix {
            adapter
                .cooperative_matrix_properties()
                .into_iter()
                .map(|p| CoopMatrixShape {
                    m: p.m_size,
                    n: p.n_size,
                    k: p.k_size,
                    ab_type: scalar_name(p.ab_type),
                    cr_type: scalar_name(p.cr_type),
                    saturating_accumulation: p.saturating_accumulation,
                })
                .collect()
        } else {
            Vec::new()
        };
        AdapterInfo {
            name: i.name,
            backend: backend_name(i.backend),
            device_type: format!("{:?}", i.device_type),
            driver: i.driver,
            driver_info: i.driver_info,
            vendor: i.vendor,
            device: i.device,
            limits: LimitsSummary {
                max_storage_buffer_binding_size: limits.max_storage_buffer_binding_size,
                max_uniform_buffer_binding_size: limits.max_uniform_buffer_binding_size,
                max_buffer_size: limits.max_buffer_size,
                max_compute_workgroup_size_x: limits.max_compute_workgroup_size_x,
                max_compute_workgroup_size_y: limits.max_compute_workgroup_size_y,
                max_compute_workgroup_size_z: limits.max_compute_workgroup_size_z,
                max_compute_invocations_per_workgroup: limits.max_compute_invocations_per_workgroup,
                max_compute_workgroups_per_dimension: limits.max_compute_workgroups_per_dimension,
                max_storage_buffers_per_shader_stage: limits.max_storage_buffers_per_shader_stage,
                max_uniform_buffers_per_shader_stage: limits.max_uniform_buffers_per_shader_stage,
                max_compute_workgroup_storage_size: limits.max_compute_workgroup_storage_size,
                min_storage_buffer_offset_alignment: limits.min_storage_buffer_offset_alignment,
                min_uniform_buffer_offset_alignment: limits.min_uniform_buffer_offset_alignment,
                max_immediate_size: limits.max_immediate_size,
                min_subgroup_size: i.subgroup_min_size,
                max_subgroup_size: i.subgroup_max_size,
            },
            has_f16: features.contains(F::SHADER_F16),
            has_subgroups: features.contains(F::SUBGROUP),
            has_timestamps: features.contains(F::TIMESTAMP_QUERY),
            has_timestamps_inside_passes: features.contains(F::TIMESTAMP_QUERY_INSIDE_PASSES),
            has_coop_matrix,
            coop_matrix_shapes,
            has_immediates: features.contains(F::IMMEDIATES),
            has_pipeline_cache: features.contains(F::PIPELINE_CACHE),
            timestamp_period_ns,
        }
    }

    /// A stable, file-name-safe key for this adapter and driver, for on-disk caches (pipeline caches,
    /// autotuning results, calibration). Changes when the driver version changes.
    ///
    /// Form: `<name-slug>-<backend>-<16 hex digits>`, the digits a BLAKE3 hash of name, vendor and device
    /// ids, device type, backend, driver and driver version.
    pub fn cache_key(&self) -> String {
        let mut h = blake3::Hasher::new();
        for part in [&self.name, &self.backend, &self.device_type, &self.driver, &self.driver_info] {
            h.update(part.as_bytes());
            h.update(&[0]);
        }
        h.update(&self.vendor.to_le_bytes());
        h.update(&self.device.to_le_bytes());
        let hash = h.finalize();
        let mut slug: String = self
            .name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' })
            .collect::<String>()
            .split('-')
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("-");
        slug.truncate(40);
        let slug = slug.trim_end_matches('-');
        let slug = if slug.is_empty() { "adapter" } else { slug };
        format!("{slug}-{}-{}", self.backend, &hash.to_hex()[..16])
    }
}
