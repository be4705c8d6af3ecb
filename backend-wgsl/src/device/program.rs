//! Programs: WGSL validated with naga, compiled to wgpu compute pipelines, cached by source hash.

use std::borrow::Cow;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{Device, DeviceError};

/// How a program's bind group layout is made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LayoutMode {
    /// An explicit layout with every `@group(0)` binding the module declares, used by the entry point or
    /// not: the arguments of a dispatch are always the declared bindings in order.
    #[default]
    Reflected,
    /// wgpu's automatic layout (`layout: None`): only the bindings the entry point uses; the arguments of a
    /// dispatch are those, in binding order.
    Auto,
}

/// Options for [`Device::compile_with`].
#[derive(Clone, Debug, PartialEq)]
pub struct ProgramOptions {
    /// Keep wgpu's runtime checks (bounds clamping, loop bounding). `None`: the device's default
    /// ([`super::DeviceOptions::checked_shaders`]).
    pub checked: Option<bool>,
    /// Bind group layout.
    pub layout: LayoutMode,
    /// Values of pipeline-overridable constants (`override` declarations), by name.
    pub constants: Vec<(String, f64)>,
    /// Zero workgroup memory at the start of each workgroup. Off by default: the renderer initialises the
    /// workgroup memory it reads, and the zeroing costs time in every workgroup.
    pub zero_initialize_workgroup_memory: bool,
}

impl Default for ProgramOptions {
    fn default() -> Self {
        Self {
            checked: None,
            layout: LayoutMode::Reflected,
            constants: Vec::new(),
            zero_initialize_workgroup_memory: false,
        }
    }
}

/// What a binding of group 0 is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BindingKind {
    /// `var<storage, read>`.
    StorageRead,
    /// `var<storage, read_write>`.
    StorageReadWrite,
    /// `var<uniform>`: passed as [`super::Arg::Uniform`] bytes.
    Uniform,
}

/// One binding of a program's group 0.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BindingInfo {
    /// The `@binding(n)` number.
    pub binding: u32,
    /// The variable's name in the WGSL.
    pub name: Option<String>,
    /// Storage (read or read_write) or uniform.
    pub kind: BindingKind,
}

/// A compiled compute pipeline and what it binds. Cheap to clone.
#[derive(Clone)]
pub struct Program {
    pub(crate) inner: Arc<ProgramInner>,
    /// The label this handle was compiled under (programs with equal source share `inner`).
    pub(crate) label: Arc<str>,
}

/// Shared state of a [`Program`]: one per distinct source, entry point and options.
pub(crate) struct ProgramInner {
    pub(crate) entry: String,
    pub(crate) pipeline: wgpu::ComputePipeline,
    /// The layout of group 0; `None` when the program binds nothing.
    pub(crate) layout: Option<wgpu::BindGroupLayout>,
    pub(crate) bindings: Vec<BindingInfo>,
    pub(crate) workgroup_size: [u32; 3],
    pub(crate) hash: blake3::Hash,
    pub(crate) checked: bool,
}

impl std::fmt::Debug for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Program")
            .field("label", &self.label)
            .field("entry", &self.inner.entry)
            .field("bindings", &self.inner.bindings)
            .field("workgroup_size", &self.inner.workgroup_size)
            .field("checked", &self.inner.checked)
            .finish()
    }
}

impl Program {
    /// The label given at compile time (used for dispatch labels and timings).
    pub fn label(&self) -> &str {
        &self.label
    }

    /// Whether two programs share one compiled pipeline (same source, entry point and options).
    pub fn shares_pipeline(&self, other: &Program) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The entry point.
    pub fn entry(&self) -> &str {
        &self.inner.entry
    }

    /// The bindings a dispatch must supply, in order.
    pub fn bindings(&self) -> &[BindingInfo] {
        &self.inner.bindings
    }

    /// `@workgroup_size` of the entry point.
    pub fn workgroup_size(&self) -> [u32; 3] {
        self.inner.workgroup_size
    }

    /// Hex BLAKE3 hash of the source's code key and the options: the in-memory cache key.
    pub fn source_hash(&self) -> String {
        self.inner.hash.to_hex().to_string()
    }

    /// Whether wgpu's runtime checks were kept.
    pub fn is_checked(&self) -> bool {
        self.inner.checked
    }

    /// The wgpu pipeline.
    pub fn wgpu_pipeline(&self) -> &wgpu::ComputePipeline {
        &self.inner.pipeline
    }
}

/// Turns a naga diagnostic into [`DeviceError::InvalidShader`].
fn invalid(label: &str, wgsl: &str, line: Option<u32>, message: String) -> DeviceError {
    DeviceError::InvalidShader { label: label.to_string(), line, message, wgsl: wgsl.to_string() }
}

/// Parses and validates `wgsl` with naga, with the capabilities wgpu derives from `features` and
/// `downlevel` (use `wgpu::DownlevelFlags::all()` without a device). Returns the module and its analysis.
///
/// Errors are [`DeviceError::InvalidShader`] whose message is naga's diagnostic: file `label`, line and
/// column, the offending line quoted. Needs no GPU, so renderer snapshot tests can use it.
pub fn validate_wgsl(
    wgsl: &str,
    label: &str,
    features: wgpu::Features,
    downlevel: wgpu::DownlevelFlags,
) -> Result<(naga::Module, naga::valid::ModuleInfo), DeviceError> {
    let module = naga::front::wgsl::parse_str(wgsl).map_err(|e| {
        invalid(label, wgsl, e.location(wgsl).map(|l| l.line_number), e.emit_to_string_with_path(wgsl, label))
    })?;
    let info = wgpu_naga_bridge::create_validator(features, downlevel, naga::valid::ValidationFlags::all())
        .validate(&module)
        .map_err(|e| {
            invalid(label, wgsl, e.location(wgsl).map(|l| l.line_number), e.emit_to_string_with_path(wgsl, label))
        })?;
    Ok((module, info))
}

/// Group-0 bindings of the entry point at `ep_index` (all declared, or only those used when `used_only`).
fn reflect(
    module: &naga::Module,
    info: &naga::valid::ModuleInfo,
    ep_index: usize,
    used_only: bool,
    label: &str,
) -> Result<Vec<BindingInfo>, DeviceError> {
    let ep_info = info.get_entry_point(ep_index);
    let mut out = Vec::new();
    for (handle, var) in module.global_variables.iter() {
        let Some(rb) = &var.binding else { continue };
        let used = !ep_info[handle].is_empty();
        if used_only && !used {
            continue;
        }
        if rb.group != 0 {
            return Err(DeviceError::UnsupportedShader {
                label: label.to_string(),
                message: format!(
                    "`{}` is in @group({}); the runtime binds @group(0) only",
                    var.name.as_deref().unwrap_or("?"),
                    rb.group
                ),
            });
        }
        let kind = match var.space {
            naga::AddressSpace::Storage { access } => {
                if access.contains(naga::StorageAccess::STORE) {
                    BindingKind::StorageReadWrite
                } else {
                    BindingKind::StorageRead
                }
            }
            naga::AddressSpace::Uniform => BindingKind::Uniform,
            other => {
                return Err(DeviceError::UnsupportedShader {
                    label: label.to_string(),
                    message: format!(
                        "binding `{}` is in address space {other:?}; only storage and uniform buffers are bound",
                        var.name.as_deref().unwrap_or("?")
                    ),
                });
            }
        };
        out.push(BindingInfo { binding: rb.binding, name: var.name.clone(), kind });
    }
    out.sort_by_key(|b| b.binding);
    Ok(out)
}

impl Device {
    /// Compiles the compute entry point `entry` of `wgsl` with default [`ProgramOptions`].
    pub fn compile(&self, wgsl: &str, entry: &str, label: &str) -> Result<Program, DeviceError> {
        self.compile_with(wgsl, entry, label, &ProgramOptions::default())
    }

    /// Validates `wgsl` with naga (against this device's features), then creates a trusted shader module
    /// (no runtime checks unless asked) and a compute pipeline. Programs are cached by a hash of the
    /// source without its comments and entry point name ([`sinter_core::digest::code_key`]) and the
    /// options: compiling the same code again, under any entry name, returns the cached pipeline under
    /// the new label.
    pub fn compile_with(
        &self,
        wgsl: &str,
        entry: &str,
        label: &str,
        opts: &ProgramOptions,
    ) -> Result<Program, DeviceError> {
        self.check_lost()?;
        let checked = opts.checked.unwrap_or(self.inner.checked_shaders);
        let hash = {
            let mut h = blake3::Hasher::new();
            // Comments and the entry's name do not change the pipeline: identical layers of a model,
            // rendered under their own kernel names, create one.
            h.update(sinter_core::digest::code_key(wgsl, entry).as_bytes());
            h.update(&[0, u8::from(checked), u8::from(opts.zero_initialize_workgroup_memory)]);
            h.update(&[match opts.layout {
                LayoutMode::Reflected => 0,
                LayoutMode::Auto => 1,
            }]);
            for (name, value) in &opts.constants {
                h.update(name.as_bytes());
                h.update(&[0]);
                h.update(&value.to_le_bytes());
            }
            h.finalize()
        };
        if let Some(p) = self.inner.programs.lock().ok().and_then(|m| m.get(hash.as_bytes()).cloned()) {
            return Ok(Program { inner: p.inner, label: Arc::from(label) });
        }

        let (module, info) = validate_wgsl(wgsl, label, self.inner.features, self.inner.downlevel)?;
        let Some(ep_index) =
            module.entry_points.iter().position(|ep| ep.name == entry && ep.stage == naga::ShaderStage::Compute)
        else {
            return Err(DeviceError::EntryPointNotFound {
                label: label.to_string(),
                entry: entry.to_string(),
                available: module
                    .entry_points
                    .iter()
                    .filter(|ep| ep.stage == naga::ShaderStage::Compute)
                    .map(|ep| ep.name.clone())
                    .collect(),
            });
        };
        let workgroup_size = module.entry_points[ep_index].workgroup_size;
        let bindings = reflect(&module, &info, ep_index, opts.layout == LayoutMode::Auto, label)?;
        let l = &self.inner.limits;
        let storage = bindings.iter().filter(|b| b.kind != BindingKind::Uniform).count() as u32;
        let uniform = bindings.len() as u32 - storage;
        if storage > l.max_storage_buffers_per_shader_stage || uniform > l.max_uniform_buffers_per_shader_stage {
            return Err(DeviceError::UnsupportedShader {
                label: label.to_string(),
                message: format!(
                    "binds {storage} storage and {uniform} uniform buffers; this device allows {} and {} per stage",
                    l.max_storage_buffers_per_shader_stage, l.max_uniform_buffers_per_shader_stage
                ),
            });
        }
        let invocations = workgroup_size.iter().product::<u32>();
        if invocations > l.max_compute_invocations_per_workgroup {
            return Err(DeviceError::UnsupportedShader {
                label: label.to_string(),
                message: format!(
                    "@workgroup_size {workgroup_size:?} has {invocations} invocations; this device allows {}",
                    l.max_compute_invocations_per_workgroup
                ),
            });
        }

        let device = &self.inner.device;
        let context = format!("compiling `{label}`");
        // With the disk pipeline cache first; if that fails, the cache's driver data may be what is
        // broken (a file whose framing is intact but whose inner bytes are not): the cache is
        // discarded (file deleted, warning naming it) and the pipeline created once more without it.
        let disk_cache = self.inner.disk_cache.cache();
        let mut result = self.create_pipeline(
            &context,
            device,
            module.clone(),
            label,
            entry,
            checked,
            opts,
            &bindings,
            disk_cache.as_ref(),
        );
        if let (Err(e), Some(_)) = (&result, &disk_cache) {
            let reason = format!("creating the pipeline of `{label}` with it failed: {e}");
            self.inner.disk_cache.discard(&reason);
            result = self.create_pipeline(&context, device, module, label, entry, checked, opts, &bindings, None);
        }
        let (pipeline, layout) = result?;
        self.inner.cache_dirty.store(true, std::sync::atomic::Ordering::Relaxed);
        let program = Program {
            label: Arc::from(label),
            inner: Arc::new(ProgramInner {
                entry: entry.to_string(),
                pipeline,
                layout,
                bindings,
                workgroup_size,
                hash,
                checked,
            }),
        };
        if let Ok(mut m) = self.inner.programs.lock() {
            m.insert(*hash.as_bytes(), program.clone());
        }
        Ok(program)
    }

    /// Creates the shader module and compute pipeline of a validated module, with `cache` (the
    /// disk pipeline cache, or none); errors caught by the device's error scopes are returned.
    #[allow(clippy::too_many_arguments)]
    fn create_pipeline(
        &self,
        context: &str,
        device: &wgpu::Device,
        module: naga::Module,
        label: &str,
        entry: &str,
        checked: bool,
        opts: &ProgramOptions,
        bindings: &[BindingInfo],
        cache: Option<&wgpu::PipelineCache>,
    ) -> Result<(wgpu::ComputePipeline, Option<wgpu::BindGroupLayout>), DeviceError> {
        self.checked(context, || {
            let desc = wgpu::ShaderModuleDescriptor {
                label: Some(label),
                source: wgpu::ShaderSource::Naga(Cow::Owned(module)),
            };
            let shader = if checked {
                device.create_shader_module(desc)
            } else {
                // SAFETY: sinter's renderer emits only accesses whose indices it has proven in range and loops
                // that terminate; wgpu has validated the module itself. Shaders from elsewhere should be
                // compiled with `checked`.
                unsafe { device.create_shader_module_trusted(desc, wgpu::ShaderRuntimeChecks::unchecked()) }
            };
            let explicit = match opts.layout {
                LayoutMode::Auto => None,
                LayoutMode::Reflected => {
                    let entries: Vec<wgpu::BindGroupLayoutEntry> = bindings
                        .iter()
                        .map(|b| wgpu::BindGroupLayoutEntry {
                            binding: b.binding,
                            visibility: wgpu::ShaderStages::COMPUTE,
                            ty: wgpu::BindingType::Buffer {
                                ty: match b.kind {
                                    BindingKind::StorageRead => wgpu::BufferBindingType::Storage { read_only: true },
                                    BindingKind::StorageReadWrite => {
                                        wgpu::BufferBindingType::Storage { read_only: false }
                                    }
                                    BindingKind::Uniform => wgpu::BufferBindingType::Uniform,
                                },
                                has_dynamic_offset: false,
                                min_binding_size: None,
                            },
                            count: None,
                        })
                        .collect();
                    let bgl = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                        label: Some(label),
                        entries: &entries,
                    });
                    let pl = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                        label: Some(label),
                        bind_group_layouts: &[Some(&bgl)],
                        immediate_size: 0,
                    });
                    Some((bgl, pl))
                }
            };
            let constants: Vec<(&str, f64)> = opts.constants.iter().map(|(k, v)| (k.as_str(), *v)).collect();
            let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(label),
                layout: explicit.as_ref().map(|(_, pl)| pl),
                module: &shader,
                entry_point: Some(entry),
                compilation_options: wgpu::PipelineCompilationOptions {
                    constants: &constants,
                    zero_initialize_workgroup_memory: opts.zero_initialize_workgroup_memory,
                },
                cache,
            });
            let layout = match explicit {
                Some((bgl, _)) => Some(bgl),
                None if bindings.is_empty() => None,
                None => Some(pipeline.get_bind_group_layout(0)),
            };
            (pipeline, layout)
        })
    }

    /// Forgets the in-memory program cache (compiled programs stay valid).
    pub fn clear_program_cache(&self) {
        if let Ok(mut m) = self.inner.programs.lock() {
            m.clear();
        }
    }
}
