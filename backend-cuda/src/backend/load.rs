//! [`CudaBackend::load_cuda`]: a program to an executable. Validates the program
//! ([`interp::validate`]), gives the executable its own stream, allocates from the device pool
//! following [`alloc::plan`] (memory-plan slots shared; constants through the
//! [`LoadOptions::constants`] pool, so one compiled graph uploads each constant once across
//! specializations), zero-fills its own memory, renders and compiles every kernel (one parallel
//! NVRTC batch; library steps planned beside it) and loads its module, and in max-autotune searches
//! each kernel's tuning first. Each kernel becomes a [`crate::device::Launch`] whose parameter
//! array (one device pointer per [`Kernel::args`] entry) is built here, once.

use super::*;

/// Most distinct PTX kernel bodies one load JIT-compiles; a program with more renders them as
/// CUDA C++ for NVRTC's parallel batch. The driver assembles PTX modules one at a time in a
/// process, ~15-20 ms a light kernel on an H200 host (ResNet-18's 19: 0.33-0.40 s, session 37
/// call 5), where NVRTC's batch of eight light kernels a unit on worker processes took 0.4 s for
/// 38; up to four, the JIT is shorter than one NVRTC unit (~0.05-0.1 s).
const MAX_PTX_BODIES: usize = 4;

impl CudaBackend {
    /// As [`Backend::load_with`], returning the concrete executable.
    pub fn load_cuda(&self, program: &Program, opts: &LoadOptions) -> Result<CudaExecutable, BackendError> {
        let start = std::time::Instant::now();
        interp::validate(program).map_err(|e| BackendError::Render { kernel: "program".into(), msg: e.to_string() })?;
        self.dev.bind()?;
        let stream: Arc<Stream> = self.dev.new_stream()?;
        let mut times = LoadTimes {
            setup_s: start.elapsed().as_secs_f64(),
            nvrtc_cache: !opts.bypass_compiler_caches,
            ..LoadTimes::default()
        };
        // A program with products loads the libraries while its memory is allocated and its
        // constants uploaded (libcublasLt took about 50 ms on an H200 host): the probes are
        // `OnceLock`s, so the plans below wait for these threads rather than load again.
        let (mut gemm, mut dnn) = (false, false);
        for k in program.kernels.iter().filter(|k| library::library_wanted(k, opts.mode, self.cuda_caps.sm).is_ok()) {
            *(if conv::is_conv(k) { &mut dnn } else { &mut gemm }) = true;
        }
        if gemm || dnn {
            let spawned = std::thread::Builder::new().name("sinter-library-probe".into()).spawn(move || {
                if gemm {
                    let _ = crate::probe::cublaslt();
                }
                if dnn {
                    let _ = crate::probe::cudnn();
                }
            });
            // A thread that cannot start leaves the plans to load the libraries, as before.
            drop(spawned);
        }
        let alloc_plan = alloc::plan(program);
        let alloc_of = |b: sinter_core::kernel::BufferId| alloc_plan.of_buffer[b.0 as usize];
        let cache_dir = self.cache_dir(opts);
        let cubins = CubinCache::open(cache_dir.as_deref()).with_nvrtc_cache(!opts.bypass_compiler_caches);
        let mut kernels = Vec::with_capacity(program.kernels.len());
        let mut tuning_log = Vec::new();
        // The memory first (allocated, zeroed, constants uploaded), before any other device work
        // of the load. Not beside NVRTC, on purpose: so (session 26, calls 4-9) a machine's first
        // `device_dynamic` run hit an illegal address twice in 13 runs, cause not found; the
        // memory is 0.04-0.11 s of GPT-2's and ViT-B/16's cold compiles (session 28).
        let mem = self.alloc_memory(&alloc_plan, opts, &stream, &mut times)?;
        let args_of = |k: &Kernel| k.args.iter().map(|a| mem[alloc_of(a.buffer)].ptr()).collect::<Vec<u64>>();
        if opts.mode == Mode::MaxAutotune {
            let caps = &self.cuda_caps;
            let mut cache = TuneCache::open(cache_dir.as_deref(), "cuda", &self.dev.info().key(), |t: &Tuning| {
                plausible_tuning(t, caps)
            });
            // Candidates are timed on random float inputs, not on the zero-filled memory: a
            // product runs measurably faster on zeros (14% for the 8192^3 bf16 product on an
            // H100), which would bias the choice. Integer inputs (indices) stay zero, always in
            // range. Only when something is timed: a load whose every kernel is cached skips it.
            // A program compiled for a dynamic batch searches only tiles whose grid shrinks with
            // the batch, under keys of their own (a static program's winner may be persistent).
            let dynamic = program.dynamic.is_some();
            let keys: Vec<String> = program
                .kernels
                .iter()
                .map(|k| {
                    let key = sinter_core::tune::kernel_key(k);
                    if dynamic { format!("{key} dynamic") } else { key }
                })
                .collect();
            if keys.iter().any(|key| cache.get(key).is_none()) {
                for (i, io) in program.inputs.iter().enumerate() {
                    if io.dtype.is_float() {
                        let t = HostTensor::random(io.dtype, io.shape.clone(), 0x5eed + i as u64, -1.0, 1.0);
                        let a = alloc_of(io.buffer);
                        stream.upload(mem[a].ptr(), &t.le_bytes(), "autotune input")?;
                        stream.synchronize("autotune input")?;
                    }
                }
            }
            // One kernel per uncached tuning key is searched (a transformer's identical layers
            // once), every candidate of those compiled in one parallel batch up front.
            let mut seen = std::collections::HashSet::new();
            let searched: Vec<usize> =
                (0..keys.len()).filter(|&i| cache.get(&keys[i]).is_none() && seen.insert(&keys[i])).collect();
            let rest: Vec<usize> = (0..keys.len()).filter(|i| searched.binary_search(i).is_err()).collect();
            let searched_kernels: Vec<&Kernel> = searched.iter().map(|&i| &program.kernels[i]).collect();
            let precompiled = tune::precompile(self, &searched_kernels, dynamic, &cubins);
            tracing::debug!(
                target: "sinter::autotune",
                "{} of {} kernels searched; {} candidate sources compiled up front",
                searched.len(),
                program.kernels.len(),
                precompiled.len()
            );
            let tune_one = |i: usize, cache: &mut TuneCache<Tuning>| -> Result<LoadedKernel, BackendError> {
                let k = &program.kernels[i];
                let mut target = tune::KernelTuner::new(self, k, args_of(k), &stream, &cubins, &precompiled)?;
                let mut candidates = tune::candidates(k, &self.cuda_caps, dynamic);
                // Library candidates cost a heuristic query and a workspace each: asked for only
                // when the kernel is searched (a cached winner, library or not, loads directly).
                if cache.get(&keys[i]).is_none() {
                    candidates.extend(library::candidates(k, &stream, self.cuda_caps.sm));
                }
                Ok(autotune(k, &mut target, candidates, cache)?.loaded)
            };
            let mut tuned: Vec<Option<LoadedKernel>> = program.kernels.iter().map(|_| None).collect();
            for &i in &searched {
                tuned[i] = Some(tune_one(i, &mut cache)?);
            }
            // Every other kernel loads its cached winner: rendered (a library winner, its
            // epilogue) and compiled in one parallel batch first, so that loading finds the cubins
            // instead of compiling them one by one. Failures surface where the kernel loads.
            let winners: Vec<Rendered> = rest
                .iter()
                .filter_map(|&i| {
                    let (k, t) = (&program.kernels[i], cache.get(&keys[i])?);
                    if t.library.is_some() { self.epilogue_source(k) } else { render::render(k, caps, &t).ok() }
                })
                .collect();
            let refs: Vec<(&str, &str)> = winners.iter().map(|r| (r.name.as_str(), r.source.as_str())).collect();
            drop(self.compile_all(&refs, &cubins));
            for &i in &rest {
                tuned[i] = Some(tune_one(i, &mut cache)?);
            }
            debug_assert!(tuned.iter().all(Option::is_some), "every kernel searched or cached");
            kernels.extend(tuned.into_iter().flatten());
            cache.save();
            tuning_log = cache.log.clone();
        } else {
            // Per kernel: the tuning, and why a matmul is not a library product. Decided by the
            // kernel's form and size only (`library_wanted`): the libraries load on the probe
            // thread above while the own kernels render and compile, and a step whose library
            // turns out missing runs the own template (`Unsupported` below). Waiting for the
            // load here held the NVRTC batch back by 0.05-0.07 s (H200, session 31, call 1).
            let plan: Vec<(Tuning, Option<String>)> = program
                .kernels
                .iter()
                .map(|k| match library::library_wanted(k, opts.mode, self.cuda_caps.sm) {
                    Ok(()) => (Tuning { library: Some(0), ..Tuning::default() }, None),
                    Err(why) => {
                        if matches!(k.body, sinter_core::kernel::KernelBody::Matmul(_)) {
                            tracing::debug!(target: "sinter::cuda", "{}: own template, not cuBLASLt: {why}", k.name);
                        }
                        // A dynamic batch needs grids that shrink with it (no persistent tile).
                        let fixed =
                            program.dynamic.as_ref().and_then(|_| render::fixed_grid_default(k, &self.cuda_caps));
                        (fixed.unwrap_or_else(|| self.own_default.clone()), Some(why))
                    }
                })
                .collect();
            // Every own kernel rendered first, then compiled in parallel (NVRTC spends most of a
            // cold compile; its programs are independent), then loaded in order. The epilogue
            // kernels of library steps join the parallel batch: built one by one below, each
            // then finds its cubin in `cubins`' memory (one NVRTC program per convolution of a
            // CNN, compiled serially, was most of its cold compile).
            let t0 = std::time::Instant::now();
            let mut rendered = Vec::with_capacity(program.kernels.len());
            let mut epilogues = Vec::new();
            for (k, (t, _)) in program.kernels.iter().zip(&plan) {
                if t.library.is_some() {
                    rendered.push(None);
                    epilogues.extend(self.epilogue_source(k));
                    epilogues.extend(conv::krsc_sources(k, &self.cpp_caps()));
                } else {
                    rendered.push(Some(render::render(k, &self.cuda_caps, t)?));
                }
            }
            // More than a few distinct PTX bodies: all CUDA C++, for NVRTC's parallel batch (the
            // driver's JIT assembles one module at a time: `MAX_PTX_BODIES`).
            let mut ptx_bodies: Vec<String> =
                rendered.iter().flatten().filter(|r| render::ptx::is_ptx(&r.source)).map(render::body_key).collect();
            ptx_bodies.sort();
            ptx_bodies.dedup();
            if ptx_bodies.len() > MAX_PTX_BODIES {
                let cpp = self.cpp_caps();
                for (r, (k, (t, _))) in rendered.iter_mut().zip(program.kernels.iter().zip(&plan)) {
                    if let Some(r) = r
                        && render::ptx::is_ptx(&r.source)
                    {
                        *r = render::render(k, &cpp, t)?;
                    }
                }
            }
            times.render_s = t0.elapsed().as_secs_f64();
            // Identical bodies under different names (a transformer's layers) compile once and
            // share one loaded function; equal dynamic shared memory too, as a launch sets the
            // function's dynamic shared memory limit to its own size.
            let mut body_of: HashMap<(String, u32), usize> = HashMap::new();
            let mut bodies: Vec<(&str, &str)> = Vec::new();
            let rep: Vec<Option<usize>> = rendered
                .iter()
                .map(|r| {
                    r.as_ref().map(|r| {
                        *body_of.entry((render::body_key(r), r.dynamic_shared_bytes)).or_insert_with(|| {
                            bodies.push((r.name.as_str(), r.source.as_str()));
                            bodies.len() - 1
                        })
                    })
                })
                .collect();
            tracing::debug!(
                target: "sinter::cuda",
                "{} rendered kernels, {} distinct bodies compiled",
                rep.iter().flatten().count(),
                bodies.len()
            );
            let entries: Vec<String> = bodies.iter().map(|b| b.0.to_string()).collect();
            let own_bodies = bodies.len();
            bodies.extend(epilogues.iter().map(|r| (r.name.as_str(), r.source.as_str())));
            let t0 = (std::time::Instant::now(), nvrtc::worker_compiles(), crate::aot::hits());
            let plans_before = library::plan_seconds();
            // NVRTC on its own threads while this one builds the library steps' plans (held
            // until the steps below take them): both need only the program, and serially they
            // were most of a transformer's cold compile (`library::prepare_plans`).
            // The PTX modules (the driver's JIT, one module at a time in a process: measured on
            // ResNet-18's 19, session 37 call 4) load on their own threads beside NVRTC's batch;
            // the handles are held until the kernels have taken their functions.
            let ptx: Vec<Vec<u8>> = {
                let mut v: Vec<Vec<u8>> = Vec::new();
                for c in nvrtc::ptx_images(&bodies).into_iter().flatten() {
                    if !v.contains(&c.image) {
                        v.push(c.image);
                    }
                }
                v
            };
            let (mut compiled, _held_plans, preloaded) = std::thread::scope(|s| {
                let preload = s.spawn(|| {
                    let t = std::time::Instant::now();
                    let images: Vec<&[u8]> = ptx.iter().map(Vec::as_slice).collect();
                    (self.dev.preload_modules(&images, nvrtc::MAX_COMPILE_THREADS), t.elapsed().as_secs_f64())
                });
                let nvrtc = s.spawn(|| self.compile_all(&bodies, &cubins));
                let library_kernels = program.kernels.iter().zip(&plan).filter(|(_, (t, _))| t.library.is_some());
                let held = library::prepare_plans(library_kernels.map(|(k, _)| k), &stream, self.cuda_caps.sm);
                let compiled = nvrtc.join().unwrap_or_else(|_| {
                    bodies.iter().map(|_| Err(BackendError::Device("the NVRTC thread panicked".into()))).collect()
                });
                // A failed preload loses nothing: each kernel's own load reports its error.
                let preloaded = preload.join().ok();
                (compiled, held, preloaded)
            });
            times.ptx = ptx.len();
            times.ptx_jit_s = preloaded.as_ref().map_or(0.0, |p| p.1);
            times.nvrtc(t0, &bodies, &compiled);
            // The epilogues' results live in `cubins`' memory; a failed one fails its step below.
            compiled.truncate(own_bodies);
            let mut funcs: Vec<Option<cudarc::driver::CudaFunction>> = vec![None; compiled.len()];
            for (((k, (t, why)), r), rep) in program.kernels.iter().zip(plan).zip(rendered).zip(rep) {
                let mut not_library = why;
                let t0 = std::time::Instant::now();
                let library = r.is_none();
                let mut loaded = match (r, rep) {
                    (Some(mut r), Some(b)) => {
                        let cubin = compiled[b].as_ref().map_err(Clone::clone)?;
                        if entries[b] != r.name {
                            r.source.push_str(&format!("// compiled once with {} (identical body)\n", entries[b]));
                        }
                        self.load_shared(k, &t, r, cubin, &entries[b], &mut funcs[b], &args_of(k), &stream)?
                    }
                    _ => match self.build_kernel(k, &t, &args_of(k), &cubins, &stream) {
                        // A plan the library refuses at load (no algorithm: e.g. an fp8 product its
                        // heuristic has nothing for) runs on the own template instead.
                        Err(BackendError::Unsupported { what, .. }) => {
                            tracing::info!(target: "sinter::cuda", "{}: own template, the library (cuBLASLt or cuDNN) refused: {what}", k.name);
                            not_library = Some(what);
                            self.build_kernel(k, &self.own_default, &args_of(k), &cubins, &stream)?
                        }
                        r => r?,
                    },
                };
                // An fp8 product off the library says why in its source (artifacts, `explain`).
                if let (sinter_core::kernel::KernelBody::Matmul(m), Some(why)) = (&k.body, not_library)
                    && m.in_dtype.is_fp8()
                {
                    loaded.rendered.source.push_str(&format!("// not a cuBLASLt fp8 product: {why}\n"));
                }
                let s = t0.elapsed().as_secs_f64();
                if library {
                    times.library_s += s;
                    times.library_steps += 1;
                } else {
                    times.module_s += s;
                }
                kernels.push(loaded);
            }
            times.plan_s = library::plan_seconds() - plans_before;
        }
        // Channels-last cuDNN convolutions read KRSC filters (`conv::krsc_filters`): a constant
        // weight is permuted once here instead of before each run (`ConvStep::use_krsc_weight`).
        for (k, loaded) in program.kernels.iter().zip(kernels.iter_mut()) {
            if let library::Step::Conv(c) = &mut loaded.launch
                && let AllocRole::Constant(w) = &alloc_plan.allocations[alloc_of(k.args[c.weight_arg()].buffer)].role
                && c.use_krsc_weight(w, &opts.constants, &self.dev, &stream)?
            {
                loaded.rendered.source.push_str(
                    "// the constant weight is permuted to KRSC once at load instead (no per-run permutation)\n",
                );
            }
        }
        let uses = |a: usize| -> Vec<(usize, usize)> {
            let mut v = Vec::new();
            for (ki, k) in program.kernels.iter().enumerate() {
                for (j, arg) in k.args.iter().enumerate() {
                    if alloc_of(arg.buffer) == a {
                        v.push((ki, j));
                    }
                }
            }
            v
        };
        let slot = |io: &sinter_core::kernel::IoDecl| {
            let a = alloc_of(io.buffer);
            IoSlot {
                name: io.name.clone(),
                alloc: a,
                dtype: io.dtype,
                shape: io.shape.clone(),
                bytes: (io.shape.iter().product::<usize>() * io.dtype.size_bytes()) as u64,
                capacity: alloc_plan.allocations[a].bytes,
                patches: uses(a),
            }
        };
        let inputs = program.inputs.iter().map(slot).collect();
        let outputs = program.outputs.iter().map(slot).collect();
        let t0 = std::time::Instant::now();
        let exe = exec::CudaExecutable::new(exec::Parts {
            dev: self.dev.clone(),
            stream,
            mode: opts.mode,
            kernels,
            mem,
            inputs,
            outputs,
            poison: self.poison,
            graph_updates: self.graph_updates,
            tuning_log,
        });
        if opts.mode != Mode::MaxAutotune {
            times.executable_s = t0.elapsed().as_secs_f64();
            times.total_s = start.elapsed().as_secs_f64();
            times.log(program.kernels.len());
        }
        exe
    }
}
